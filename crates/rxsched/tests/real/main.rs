//! The real dataplane in the XDP lab, in network namespaces this test
//! makes and always removes. Needs root (CI runs as root); without it each
//! test says on one line that it was skipped and why, and passes (fails
//! under `RXSCHED_REQUIRE_TOOLS=1`; see `rxsched_linux::needs`).

use rxsched_core::DropPoint;
use rxsched_linux::backend::packet::PacketTx;
use rxsched_linux::backend::TxBackend;
use rxsched_linux::bpf::RouteOutcome;
use rxsched_linux::capture::CaptureReport;
use rxsched_linux::lab::{self, Lab, Role, D0, D1, S0};
use rxsched_linux::loadgen::{GenReport, SinkReport};
use rxsched_linux::router::{RouterReport, ScreenAt};
use rxsched_linux::srp::ServeReport;
use rxsched_linux::wire::{Mac, UdpProbe, ETH_LEN};
use serde::de::DeserializeOwned;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// Namespace tests share two CPUs: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A lab of this test's own, removed on drop even if the test panics.
struct TestLab(Lab);

impl TestLab {
    fn new(tag: &str) -> Option<TestLab> {
        TestLab::with_queues(tag, 1)
    }

    /// A lab whose veth ends have `queues` receive queues each.
    fn with_queues(tag: &str, queues: u32) -> Option<TestLab> {
        if !rxsched_linux::needs::root(&format!("the lab test {tag:?}"))
            || !rxsched_linux::needs::tool("ip", "iproute2")
        {
            return None;
        }
        let l = Lab::new(&format!("rxt{}{tag}", std::process::id() % 100_000)).with_queues(queues);
        // Dropped (and so taken down) if `up` fails half-way.
        let t = TestLab(l);
        t.0.up().expect("lab up");
        Some(t)
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_rxsched")
}

fn spawn(l: &Lab, role: Role, args: &[&str]) -> Child {
    Command::new("ip")
        .args(["netns", "exec", &l.ns(role), exe()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// [`spawn`], then waits until the command says it is listening
/// ([`listening`]).
fn start(l: &Lab, role: Role, args: &[&str]) -> Child {
    let mut c = spawn(l, role, args);
    listening(&mut c);
    c
}

/// Waits (20 s at most) until `c` says on stderr that it is listening
/// (`rxsched_linux::runtime::LISTENING`): it takes about half a second to
/// set up, and a fixed wait of about that long lost the first frames in
/// about half the runs. A thread passes its stderr on to the test's, line
/// by line, to the end (a full pipe would stop the command). A command
/// that ends first returns here at once; its report says why.
fn listening(c: &mut Child) {
    listening_kept(c);
}

/// A command's stderr as [`listening_kept`] keeps it.
struct Kept {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

impl Kept {
    /// Everything the command said on stderr, once it has ended.
    fn all(self) -> String {
        let _ = self.reader.join();
        let t = self.text.lock().unwrap_or_else(|e| e.into_inner());
        t.clone()
    }
}

/// [`listening`], keeping the stderr lines too ([`Kept::all`]).
fn listening_kept(c: &mut Child) -> Kept {
    use std::io::BufRead;
    let err = c.stderr.take().expect("stderr piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let kept = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let k = kept.clone();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains(rxsched_linux::runtime::LISTENING) {
                let _ = tx.send(());
            }
            eprintln!("{line}");
            let mut k = k.lock().unwrap_or_else(|e| e.into_inner());
            k.push_str(&line);
            k.push('\n');
        }
    });
    if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
        rx.recv_timeout(Duration::from_secs(20))
    {
        panic!("pid {} did not say it was listening within 20 s", c.id());
    }
    Kept { text: kept, reader }
}

/// The report a command printed last, as its type (a renamed field is a
/// failure here, never a silent 0).
fn report<T: DeserializeOwned>(c: Child) -> T {
    let o = c.wait_with_output().expect("wait");
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}\n{}",
            out,
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn stop(c: &Child) {
    // SAFETY: signalling a process this test started, by its pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
}

/// Sends `count` probes at 20,000 pkts/s from the generator (with `extra`
/// flags) and checks that it sent them all.
fn send(l: &Lab, count: u64, extra: &[&str]) -> GenReport {
    let n = count.to_string();
    let mut args = vec!["gen", "--rate", "20000", "--count", &n, "--duration", "5"];
    args.extend_from_slice(extra);
    let g: GenReport = report(spawn(l, Role::Gen, &args));
    assert_eq!(g.sent, count, "{g:?}");
    g
}

/// A compute process on the DUT's CPU 1 for 3 s while the generator floods
/// at its top rate from CPU 0: the share of the CPU the process kept.
fn spin_beside_flood(l: &Lab) -> rxsched_linux::spin::SpinReport {
    let spin = spawn(l, Role::Dut, &["spin", "--cpu", "1", "--duration", "3"]);
    let flood = spawn(
        l,
        Role::Gen,
        &["gen", "--rate", "1e9", "--duration", "3", "--cpu", "0"],
    );
    let _: GenReport = report(flood);
    report(spin)
}

/// Judges a statistical outcome over repeated trials: runs `trial` until
/// one passes, at most `n` times, and fails only when every trial failed,
/// saying what each saw. (These machines are shared VMs: a trial can lose
/// its CPU to the host for milliseconds.) What must hold in every trial,
/// such as conservation, the trial asserts itself.
fn trials(n: usize, what: &str, mut trial: impl FnMut() -> Result<String, String>) {
    let mut seen = Vec::new();
    for i in 1..=n {
        match trial() {
            Ok(saw) => {
                eprintln!("{what}: passed in trial {i} of at most {n}: {saw}");
                return;
            }
            Err(saw) => {
                eprintln!("{what}: trial {i} of {n} failed: {saw}");
                seen.push(format!("trial {i}: {saw}"));
            }
        }
    }
    panic!(
        "{what}: every one of {n} trials failed:\n{}",
        seen.join("\n")
    );
}

mod capture;
mod capture_tcpdump;
mod clients;
mod guard;
mod metrics;
mod protect;
mod router;
mod serve;
mod slo;
mod the_lab;
mod time_shared;
