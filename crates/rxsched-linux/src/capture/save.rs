//! The monitor's files: pcap or pcapng, rotated as tcpdump rotates them
//! (`-C`, `-G`, `-W`, and its file names), and in pcapng the interface's
//! statistics (frames received, dropped by drop point) written into the
//! file itself: in interface statistics blocks every second, at each
//! rotation and at the end (what Wireshark's capture file properties
//! show), and, when the file is closed, in the section's comment, which
//! is at its start and so is written there in place (what `capinfos`
//! prints: its 4.0 series counts statistics blocks without showing them).

use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A capture file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Classic pcap (microsecond timestamps), tcpdump's `-w`.
    #[default]
    Pcap,
    /// pcapng: nanosecond timestamps, the interface's name and snap
    /// length, and interface statistics blocks with the drops.
    Pcapng,
}

impl Format {
    /// pcapng for a name ending `.pcapng`, pcap otherwise.
    pub fn of_path(p: &Path) -> Format {
        match p.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("pcapng") => Format::Pcapng,
            _ => Format::Pcap,
        }
    }
}

/// tcpdump's file rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rotation {
    /// `-C`: a new file once this one is larger than this many bytes
    /// (tcpdump's millions of bytes, times 1,000,000).
    pub size_bytes: Option<u64>,
    /// `-G`: a new file every this many seconds, named by `strftime` of
    /// the `-w` name.
    pub every_s: Option<u64>,
    /// `-W`: with `-C`, at most this many files, reused in a ring (their
    /// numbers zero-padded); with `-G`, stop after this many.
    pub files: Option<u32>,
}

/// The counts an interface statistics block carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// When the capture started, ns since the epoch.
    pub start_ns: u64,
    /// Now, ns since the epoch.
    pub now_ns: u64,
    /// Frames that reached the interface (`isb_ifrecv`).
    pub received: u64,
    /// Dropped by the device's receive ring (`isb_ifdrop`).
    pub if_drop: u64,
    /// Dropped after it: socket rings, the copy ring, the packet-filter
    /// queue (`isb_osdrop`).
    pub os_drop: u64,
    /// Accepted by the filter (`isb_filteraccept`).
    pub filter_accept: u64,
    /// Written to the files (`isb_usrdeliv`).
    pub delivered: u64,
    /// Every drop point and its count, each as a comment.
    pub by_point: Vec<(String, u64)>,
}

/// A file the saver writes (and seeks back into, for pcapng's comment).
pub trait CaptureFile: Write + Seek + Send {}
impl<T: Write + Seek + Send> CaptureFile for T {}

/// Opens a capture file for writing.
pub type Opener = std::sync::Arc<dyn Fn(&Path) -> io::Result<Box<dyn CaptureFile>> + Send + Sync>;

/// Creates files on disk.
pub fn files() -> Opener {
    std::sync::Arc::new(|p: &Path| Ok(Box::new(std::fs::File::create(p)?) as Box<dyn CaptureFile>))
}

type Sink = BufWriter<Box<dyn CaptureFile>>;

/// The section comment's room, in bytes (a multiple of 4: no padding).
const COMMENT_LEN: usize = 512;
/// Where the comment's text starts: the section header's 24 bytes and the
/// option's code and length.
const COMMENT_AT: u64 = 28;

/// `text` cut or padded with spaces to exactly [`COMMENT_LEN`] bytes.
fn comment(text: &str) -> String {
    let mut t: String = text.chars().take(COMMENT_LEN).collect();
    while t.len() > COMMENT_LEN {
        t.pop();
    }
    let pad = COMMENT_LEN - t.len();
    t + &" ".repeat(pad)
}

impl Stats {
    /// The counts in words, for the section's comment.
    fn words(&self, iface: &str) -> String {
        let points: Vec<String> = self
            .by_point
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        format!(
            "rxsched capture on {iface}: {} packets written of {} received; accepted by the filter {}; dropped by the interface {}, after it {} ({})",
            self.delivered,
            self.received,
            self.filter_accept,
            self.if_drop,
            self.os_drop,
            points.join(", ")
        )
    }
}

enum Out {
    Pcap(pcap_file::pcap::PcapWriter<Sink>),
    Ng(pcap_file::pcapng::PcapNgWriter<Sink>),
}

fn io_err(e: pcap_file::PcapError) -> io::Error {
    match e {
        pcap_file::PcapError::IoError(e) => e,
        e => io::Error::other(e.to_string()),
    }
}

/// A file or a rotating set of files.
pub struct Saver {
    base: PathBuf,
    format: Format,
    snaplen: u32,
    iface: String,
    /// The receive queue whose frames it holds (`--per-queue`).
    queue: Option<u32>,
    rot: Rotation,
    open: Opener,
    out: Option<Out>,
    /// tcpdump's `Cflag_count`: the number after the name.
    count: u32,
    /// Files opened under `-G`.
    g_files: u32,
    opened_s: u64,
    bytes: u64,
    /// Every file opened, in order (a ring's reused names once).
    names: Vec<PathBuf>,
}

/// Digits `-W files` numbers its names with (tcpdump's `WflagChars`).
fn digits(files: u32) -> usize {
    let (mut x, mut c) = (files.saturating_sub(1), 0);
    while x > 0 {
        c += 1;
        x /= 10;
    }
    c
}

/// `fmt` through `strftime(3)` at `secs` since the epoch, local time.
fn strftime(fmt: &str, secs: u64) -> String {
    if !fmt.contains('%') {
        return fmt.to_string();
    }
    let Ok(c) = std::ffi::CString::new(fmt) else {
        return fmt.to_string();
    };
    let t = secs as libc::time_t;
    // SAFETY: `tm` is written by localtime_r before strftime reads it;
    // the buffer's length is passed.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return fmt.to_string();
        }
        let mut buf = vec![0u8; fmt.len() * 4 + 256];
        let n = libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c.as_ptr(), &tm);
        buf.truncate(n);
        String::from_utf8(buf).unwrap_or_else(|_| fmt.to_string())
    }
}

impl Saver {
    /// Opens the first file (so that a bad name fails at once); for one
    /// receive queue's frames (`queue`), named `x-qN.pcap` for `x.pcap`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        base: &Path,
        format: Format,
        snaplen: u32,
        iface: &str,
        queue: Option<u32>,
        rot: Rotation,
        open: Opener,
        now_s: u64,
    ) -> io::Result<Saver> {
        let base = match queue {
            Some(q) => queue_name(base, q),
            None => base.to_path_buf(),
        };
        let mut s = Saver {
            base,
            format,
            snaplen,
            iface: iface.to_string(),
            queue,
            rot,
            open,
            out: None,
            count: 0,
            g_files: 0,
            opened_s: now_s,
            bytes: 0,
            names: vec![],
        };
        s.start(now_s)?;
        Ok(s)
    }

    /// The name of the file `count` opened at `now_s`, as tcpdump names it.
    fn name(&self, now_s: u64) -> PathBuf {
        let base = self.base.to_string_lossy();
        let mut name = match self.rot.every_s {
            Some(_) => strftime(&base, now_s),
            None => base.into_owned(),
        };
        if self.rot.size_bytes.is_some() {
            let w = self.rot.files.map_or(0, digits);
            if self.count > 0 || w > 0 {
                name.push_str(&format!("{:0w$}", self.count));
            }
        }
        PathBuf::from(name)
    }

    fn start(&mut self, now_s: u64) -> io::Result<()> {
        let name = self.name(now_s);
        let file = (self.open)(&name)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", name.display())))?;
        let sink = BufWriter::new(file);
        self.out = Some(match self.format {
            Format::Pcap => {
                let h = pcap_file::pcap::PcapHeader {
                    snaplen: self.snaplen,
                    ..Default::default()
                };
                self.bytes = 24;
                Out::Pcap(pcap_file::pcap::PcapWriter::with_header(sink, h).map_err(io_err)?)
            }
            Format::Pcapng => {
                use pcap_file::pcapng::blocks::interface_description::*;
                use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
                // Big-endian: the crate writes 64-bit times and counters
                // as one number, which is the format's high word, then
                // low, only in this order.
                use pcap_file::pcapng::blocks::section_header::SectionHeaderOption;
                let shb = SectionHeaderBlock {
                    endianness: pcap_file::Endianness::Big,
                    options: vec![
                        SectionHeaderOption::Comment(
                            comment(&format!("rxsched capture on {}: still running", self.iface))
                                .into(),
                        ),
                        SectionHeaderOption::UserApplication("rxsched capture".into()),
                    ],
                    ..Default::default()
                };
                let mut w = pcap_file::pcapng::PcapNgWriter::with_section_header(sink, shb)
                    .map_err(io_err)?;
                let mut options = vec![
                    InterfaceDescriptionOption::IfName(self.iface.clone().into()),
                    InterfaceDescriptionOption::IfTsResol(9),
                ];
                if let Some(q) = self.queue {
                    options.push(InterfaceDescriptionOption::IfDescription(
                        format!("receive queue {q}").into(),
                    ));
                }
                let idb = InterfaceDescriptionBlock {
                    linktype: pcap_file::DataLink::ETHERNET,
                    snaplen: self.snaplen,
                    options,
                };
                self.bytes = 28 + w.write_pcapng_block(idb).map_err(io_err)? as u64;
                Out::Ng(w)
            }
        });
        self.opened_s = now_s;
        self.names.push(name);
        Ok(())
    }

    /// Closes the current file (its statistics block first, in pcapng).
    fn close(&mut self, stats: Option<&Stats>) -> io::Result<()> {
        if let Some(s) = stats {
            self.stats(s)?;
        }
        match self.out.take() {
            Some(Out::Pcap(w)) => w.into_writer().flush(),
            Some(Out::Ng(w)) => {
                let mut f = w.into_inner().into_inner().map_err(|e| e.into_error())?;
                // The counts into the section's comment, in place. A file
                // that cannot seek (a pipe) keeps its statistics blocks.
                if let Some(s) = stats {
                    if f.seek(SeekFrom::Start(COMMENT_AT)).is_ok() {
                        let on = match self.queue {
                            Some(q) => format!("{} queue {q}", self.iface),
                            None => self.iface.clone(),
                        };
                        f.write_all(comment(&s.words(&on)).as_bytes())?;
                        f.seek(SeekFrom::End(0))?;
                    }
                }
                f.flush()
            }
            None => Ok(()),
        }
    }

    /// Writes one frame (stamped `ts_ns` since the epoch) at `now_s`,
    /// rotating first if a rule says so. Returns false, writing nothing,
    /// once `-G` with `-W` has made its last file.
    pub fn write(
        &mut self,
        ts_ns: u64,
        orig_len: u32,
        data: &[u8],
        now_s: u64,
        stats: Option<&Stats>,
    ) -> io::Result<bool> {
        if let Some(g) = self.rot.every_s {
            if now_s >= self.opened_s + g {
                self.g_files += 1;
                if self.rot.files.is_some_and(|w| self.g_files >= w) {
                    return Ok(false);
                }
                self.close(stats)?;
                self.count = 0;
                self.start(now_s)?;
            }
        }
        if let Some(c) = self.rot.size_bytes {
            if self.bytes > c {
                self.close(stats)?;
                self.count += 1;
                if self.rot.files.is_some_and(|w| self.count >= w) {
                    self.count = 0;
                }
                self.start(now_s)?;
            }
        }
        let ts = Duration::from_nanos(ts_ns);
        self.bytes += match self.out.as_mut() {
            Some(Out::Pcap(w)) => {
                let p = pcap_file::pcap::PcapPacket::new(ts, orig_len, data);
                w.write_packet(&p).map_err(io_err)? as u64
            }
            Some(Out::Ng(w)) => {
                use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
                let b = EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: ts,
                    original_len: orig_len,
                    data: data.into(),
                    options: vec![],
                };
                w.write_pcapng_block(b).map_err(io_err)? as u64
            }
            None => 0,
        };
        Ok(true)
    }

    /// Writes an interface statistics block (pcapng only).
    pub fn stats(&mut self, s: &Stats) -> io::Result<()> {
        use pcap_file::pcapng::blocks::interface_statistics::*;
        let Some(Out::Ng(w)) = self.out.as_mut() else {
            return Ok(());
        };
        let mut options = vec![
            InterfaceStatisticsOption::IsbStartTime(s.start_ns),
            InterfaceStatisticsOption::IsbEndTime(s.now_ns),
            InterfaceStatisticsOption::IsbIfRecv(s.received),
            InterfaceStatisticsOption::IsbIfDrop(s.if_drop),
            InterfaceStatisticsOption::IsbFilterAccept(s.filter_accept),
            InterfaceStatisticsOption::IsbOsDrop(s.os_drop),
            InterfaceStatisticsOption::IsbUsrDeliv(s.delivered),
        ];
        for (point, n) in &s.by_point {
            options.push(InterfaceStatisticsOption::Comment(
                format!("dropped at {point}: {n}").into(),
            ));
        }
        let b = InterfaceStatisticsBlock {
            interface_id: 0,
            timestamp: s.now_ns,
            options,
        };
        self.bytes += w.write_pcapng_block(b).map_err(io_err)? as u64;
        Ok(())
    }

    /// Writes the last statistics block, flushes, and returns every file
    /// written, in the order they were opened.
    pub fn finish(mut self, stats: Option<&Stats>) -> io::Result<Vec<PathBuf>> {
        self.close(stats)?;
        Ok(self.names)
    }
}

/// `x.pcap` as queue `q`'s file: `x-qQ.pcap`.
fn queue_name(base: &Path, q: u32) -> PathBuf {
    let name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let named = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}-q{q}.{ext}"),
        _ => format!("{name}-q{q}"),
    };
    base.with_file_name(named)
}

/// What the monitor writes into: one saver for every frame, or one per
/// receive queue (`--per-queue`), each opened when its queue's first frame
/// comes.
pub struct Savers {
    per_queue: bool,
    savers: std::collections::BTreeMap<u32, Saver>,
    format: Format,
    snaplen: u32,
    iface: String,
    rot: Rotation,
    open: Opener,
    base: PathBuf,
}

impl Savers {
    /// Opens the first file: the capture's, or queue 0's.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        base: &Path,
        format: Format,
        snaplen: u32,
        iface: &str,
        per_queue: bool,
        rot: Rotation,
        open: Opener,
        now_s: u64,
    ) -> io::Result<Savers> {
        let mut s = Savers {
            per_queue,
            savers: Default::default(),
            format,
            snaplen,
            iface: iface.to_string(),
            rot,
            open,
            base: base.to_path_buf(),
        };
        s.get(0, now_s)?;
        Ok(s)
    }

    /// The saver for frames of `queue`.
    pub fn get(&mut self, queue: u32, now_s: u64) -> io::Result<&mut Saver> {
        let k = if self.per_queue { queue } else { 0 };
        if !self.savers.contains_key(&k) {
            let s = Saver::new(
                &self.base,
                self.format,
                self.snaplen,
                &self.iface,
                self.per_queue.then_some(k),
                self.rot,
                self.open.clone(),
                now_s,
            )?;
            self.savers.insert(k, s);
        }
        Ok(self.savers.get_mut(&k).expect("inserted above"))
    }

    /// A statistics block into every file.
    pub fn stats(&mut self, s: &Stats) -> io::Result<()> {
        self.savers.values_mut().try_for_each(|v| v.stats(s))
    }

    /// Finishes every file; all their names, by queue.
    pub fn finish(self, stats: Option<&Stats>) -> io::Result<Vec<PathBuf>> {
        let mut names = vec![];
        for s in self.savers.into_values() {
            names.extend(s.finish(stats)?);
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_tcpdump() {
        let rot = |size, files| Rotation {
            size_bytes: size,
            every_s: None,
            files,
        };
        let opener = || -> Opener {
            std::sync::Arc::new(|_: &Path| {
                Ok(Box::new(io::Cursor::new(vec![])) as Box<dyn CaptureFile>)
            })
        };
        let names = |r: Rotation, frames: usize| {
            let mut s = Saver::new(
                Path::new("x.pcap"),
                Format::Pcap,
                100,
                "eth0",
                None,
                r,
                opener(),
                0,
            )
            .unwrap();
            for _ in 0..frames {
                s.write(0, 100, &[0; 100], 0, None).unwrap();
            }
            s.finish(None)
                .unwrap()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        };
        // -C alone: x.pcap, x.pcap1, x.pcap2, ... (each file one frame past
        // 150 bytes: the header and two frames).
        assert_eq!(
            names(rot(Some(150), None), 5),
            ["x.pcap", "x.pcap1", "x.pcap2"]
        );
        // -C with -W 3: a ring of x.pcap0 .. x.pcap2.
        assert_eq!(
            names(rot(Some(100), Some(3)), 5),
            ["x.pcap0", "x.pcap1", "x.pcap2", "x.pcap0", "x.pcap1"]
        );
        assert_eq!(digits(10), 1);
        assert_eq!(digits(11), 2);
        assert_eq!(digits(1), 0);
        // -G names by strftime, and -W stops it.
        let mut s = Saver::new(
            Path::new("cap-%s.pcap"),
            Format::Pcap,
            100,
            "eth0",
            None,
            Rotation {
                every_s: Some(10),
                files: Some(2),
                size_bytes: None,
            },
            opener(),
            1_000,
        )
        .unwrap();
        assert!(s.write(0, 60, &[0; 60], 1_005, None).unwrap());
        assert!(s.write(0, 60, &[0; 60], 1_010, None).unwrap());
        assert!(!s.write(0, 60, &[0; 60], 1_020, None).unwrap());
        let n = s.finish(None).unwrap();
        assert_eq!(
            n,
            [
                PathBuf::from("cap-1000.pcap"),
                PathBuf::from("cap-1010.pcap")
            ]
        );
        assert_eq!(
            queue_name(Path::new("/t/x.pcap"), 3),
            Path::new("/t/x-q3.pcap")
        );
        assert_eq!(queue_name(Path::new("cap"), 1), Path::new("cap-q1"));
    }
}
