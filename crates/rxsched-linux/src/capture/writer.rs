//! The monitor's writer: a thread that drains the packet-filter queue into
//! a pcap file.

use super::{CaptureConfig, BYTES, WRITTEN};
use crate::stage::StageQueue;
use crate::sys::{self, SysError, SysResult};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Frames the writer takes off the queue at a time.
const WRITE_BATCH: u32 = 64;

/// The writer thread: pcap header, then every queued frame; when the
/// polling thread says stop, it writes what is queued and flushes.
pub(super) fn spawn_writer(
    queue: Arc<StageQueue>,
    out: impl Write + Send + 'static,
    cfg: &CaptureConfig,
) -> SysResult<std::thread::JoinHandle<std::io::Result<()>>> {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader {
        snaplen: cfg.snaplen,
        ..PcapHeader::default()
    };
    let cpu = cfg.run.cpu;
    let io = |e: pcap_file::PcapError| std::io::Error::other(e.to_string());
    std::thread::Builder::new()
        .name("rxsched-pcap".into())
        .spawn(move || {
            if let Some(c) = cpu {
                sys::pin_to_cpu(c).map_err(|e| e.source)?;
            }
            let mut w =
                PcapWriter::with_header(std::io::BufWriter::new(out), header).map_err(io)?;
            loop {
                let n = queue.len().min(WRITE_BATCH);
                if n == 0 {
                    if queue.stopping() {
                        break;
                    }
                    queue.wait_for_work(100).map_err(|e| e.source)?;
                    continue;
                }
                for k in 0..n {
                    let Some(f) = queue.peek_at(k) else { break };
                    let ts = Duration::from_nanos(f.ts_ns);
                    w.write_packet(&PcapPacket::new(ts, f.orig_len, f.data))
                        .map_err(io)?;
                    queue.count(WRITTEN, 1);
                    queue.count(BYTES, f.data.len() as u64);
                }
                queue.pop(n);
            }
            w.into_writer().flush()
        })
        .map_err(|e| SysError {
            what: "pcap writer".into(),
            syscall: "clone",
            source: e,
        })
}

/// Opens the output file, naming it in the error.
pub(super) fn create(path: &Path) -> SysResult<std::fs::File> {
    std::fs::File::create(path).map_err(|e| SysError {
        what: path.display().to_string(),
        syscall: "open",
        source: e,
    })
}
