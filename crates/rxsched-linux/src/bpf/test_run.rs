//! Running an XDP program on a frame from user space (`BPF_PROG_TEST_RUN`):
//! once, for tests and the calibration's microbenchmarks, or in
//! live-frames mode, which is how the generator sends.

use std::io;
use std::os::fd::RawFd;

/// `struct xdp_md` as a test run's context.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN.
#[repr(C)]
#[derive(Debug, Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// BPF_PROG_TEST_RUN with `a`, whose buffers the caller keeps alive.
fn test_run(a: &mut TestRunAttr) -> io::Result<()> {
    // SAFETY: `a` points to buffers that live across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            a as *mut TestRunAttr,
            std::mem::size_of::<TestRunAttr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs XDP program `prog_fd` once on a copy of `frame`; returns its
/// verdict (`XDP_DROP` 1, `XDP_PASS` 2, ...).
pub fn run_once(prog_fd: RawFd, frame: &[u8]) -> io::Result<u32> {
    let mut out = vec![0u8; frame.len() + 256];
    let mut a = TestRunAttr {
        prog_fd: prog_fd as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        data_size_out: out.len() as u32,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        ..TestRunAttr::default()
    };
    test_run(&mut a)?;
    Ok(a.retval)
}

/// Runs XDP program `prog_fd` in live-frames mode on `frame`, as if it had
/// arrived on `ifindex`: every XDP_TX leaves through that device. The call
/// returns after `repeat` invocations, or with `EINTR` when a signal is
/// delivered to the calling thread.
pub fn run_live(
    prog_fd: RawFd,
    frame: &[u8],
    ifindex: u32,
    repeat: u32,
    batch: u32,
) -> io::Result<()> {
    let ctx = XdpMd {
        data_end: frame.len() as u32,
        ingress_ifindex: ifindex,
        ..XdpMd::default()
    };
    let mut a = TestRunAttr {
        prog_fd: prog_fd as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
        ctx_in: &ctx as *const XdpMd as u64,
        flags: BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size: batch,
        ..TestRunAttr::default()
    };
    test_run(&mut a)
}
