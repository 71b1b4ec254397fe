//! A process of a trial, running: started in its namespace of the lab
//! (ours that take frames waited for until they say they are listening),
//! signalled, and its last line read back as its command's report.

use super::super::error::{BenchError, Context};
use super::Proc;
use rxsched_linux::lab::{Lab, DUT_CPU};
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a command of ours may take to say it is listening.
const LISTEN_WITHIN: Duration = Duration::from_secs(30);

/// A process of a trial, started.
#[derive(Debug)]
pub struct Running {
    child: Child,
    name: &'static str,
    /// Where its stderr is read to the end, once it has said it is
    /// listening; what it said.
    stderr: Option<JoinHandle<Vec<u8>>>,
}

/// Starts `p` in its namespace: ours as `ip netns exec NS rxsched ARGS`,
/// a peer pinned to the DUT CPU with `taskset`.
pub fn start(lab: &Lab, p: impl Into<Proc>) -> Result<Running, BenchError> {
    let p = p.into();
    let ns = lab.ns(p.role());
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]);
    let peer = matches!(p, Proc::Peer(_));
    if peer {
        cmd.args(["taskset", "-c", &DUT_CPU.to_string()]);
    } else {
        cmd.arg(std::env::current_exe().context("cannot find own executable")?);
    }
    // Each process in a session of its own, as separate jobs on a host
    // are: with the kernel's autogroups, processes of one session share
    // one group's weight across the CPUs, and the generator working flat
    // out on its CPU halved the compute process's weight on the DUT CPU
    // against the (group-less) NAPI threads.
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd
        .args(p.argv())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = if peer {
        child.context(format_args!(
            "{} (install it: apt-get install tcpdump tshark xdp-tools netsniff-ng)",
            p.name()
        ))?
    } else {
        child.context(format_args!("ip netns exec {ns}"))?
    };
    let mut r = Running {
        child,
        name: p.name(),
        stderr: None,
    };
    if p.announces() {
        r.listening()?;
    }
    Ok(r)
}

/// Starts `p` and reads its report when it ends.
pub fn run<R: DeserializeOwned>(lab: &Lab, p: impl Into<Proc>) -> Result<R, BenchError> {
    start(lab, p)?.finish()
}

impl Running {
    /// Waits until it says it is listening (setting up takes about half a
    /// second; frames sent before would meet a socket nobody reads yet),
    /// reading its stderr from then on in a thread of its own. One that
    /// ends first returns at once: its report says why.
    fn listening(&mut self) -> Result<(), BenchError> {
        let Some(err) = self.child.stderr.take() else {
            return Ok(());
        };
        let (tx, rx) = mpsc::channel();
        self.stderr = Some(std::thread::spawn(move || {
            let mut said = Vec::new();
            let mut lines = BufReader::new(err);
            let mut line = Vec::new();
            while matches!(lines.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                if String::from_utf8_lossy(&line).contains(rxsched_linux::runtime::LISTENING) {
                    let _ = tx.send(());
                }
                said.append(&mut line);
            }
            said
        }));
        match rx.recv_timeout(LISTEN_WITHIN) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.stop();
                Err(BenchError(format!(
                    "{} did not say it was listening within {} s",
                    self.name,
                    LISTEN_WITHIN.as_secs()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Its process id: `ip netns exec` execs the command, so the pid is
    /// the command's own.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks it to stop (SIGTERM): route and the helpers report and exit.
    pub fn stop(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Asks it to finish (SIGINT), as a capturer or server on a terminal is.
    pub fn interrupt(&self) {
        self.signal(libc::SIGINT);
    }

    /// Stops it where it stands (SIGSTOP), to measure what goes on without it.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Lets a paused process go on (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signalling a child process this bench started, by its pid.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for it and reads the JSON report it printed last, as the
    /// struct its command prints (rxsched-linux's `...Report`): a key
    /// renamed on one side fails here, by name, rather than reading as 0.
    pub fn finish<R: DeserializeOwned>(self) -> Result<R, BenchError> {
        let name = self.name;
        let out = self.output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or(""))
            .map_err(|_| {
                BenchError(format!(
                    "{name} gave no report (exit {:?}): {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            })?;
        serde_json::from_value(v).context(format_args!("{name}'s report"))
    }

    /// Waits for it and takes what it printed.
    pub fn output(self) -> Result<Output, BenchError> {
        let mut out = self.child.wait_with_output().context(self.name)?;
        if let Some(h) = self.stderr {
            out.stderr = h.join().unwrap_or_default();
        }
        Ok(out)
    }
}
