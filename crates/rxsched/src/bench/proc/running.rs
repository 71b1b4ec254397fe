//! A process of a trial, running: started in its namespace of the lab,
//! signalled, and its last line read back as its command's report.

use super::super::error::{BenchError, Context};
use super::Proc;
use rxsched_linux::lab::{Lab, DUT_CPU};
use serde::de::DeserializeOwned;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};

/// A process of a trial, started.
#[derive(Debug)]
pub struct Running {
    child: Child,
    name: &'static str,
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
            "{} (install it: apt-get install tcpdump tshark)",
            p.name()
        ))?
    } else {
        child.context(format_args!("ip netns exec {ns}"))?
    };
    Ok(Running {
        child,
        name: p.name(),
    })
}

/// Starts `p` and reads its report when it ends.
pub fn run<R: DeserializeOwned>(lab: &Lab, p: impl Into<Proc>) -> Result<R, BenchError> {
    start(lab, p)?.finish()
}

impl Running {
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
        self.child.wait_with_output().context(self.name)
    }
}
