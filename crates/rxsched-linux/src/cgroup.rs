//! CPU reservations for a stage with a real kernel mechanism: CFS group
//! scheduling. A process joins a control group of its own whose CPU weight
//! is its share against the other groups on the CPU, whatever the number
//! of processes in them: a router in a group of weight 1024 beside a group
//! of weight 1024 holding N compute processes keeps half the CPU whenever
//! it wants it, as Eclipse/BSD's reservation kept half for SRP's forwarding
//! stage. (SCHED_DEADLINE would reserve a budget too, but throttles the
//! thread at its budget even when the CPU is otherwise idle, unless
//! reclaiming is on, and admits only tasks that fit; a weight is the
//! proportional share the paper's scheduler gave, work-conserving.)
//!
//! Uses the cgroup v1 `cpu` controller (`cpu.shares`) where it is mounted,
//! as on these machines, else cgroup v2 (`cpu.weight`).

use crate::sys::{SysError, SysResult};
use std::path::{Path, PathBuf};

fn err(what: &Path, syscall: &'static str, e: std::io::Error) -> SysError {
    SysError {
        what: what.display().to_string(),
        syscall,
        source: e,
    }
}

/// Where group `name` lives, and whether it is cgroup v1.
fn group(name: &str) -> SysResult<(PathBuf, bool)> {
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    if v1.join("cpu.shares").exists() {
        return Ok((v1.join(name), true));
    }
    let v2 = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "cpu") {
        return Ok((v2.join(name), false));
    }
    Err(err(
        v1,
        "open",
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no cgroup cpu controller (neither v1 cpu.shares nor v2 cpu.weight)",
        ),
    ))
}

/// Moves process `pid` (all its threads) into group `name` with CPU
/// weight `shares` (1024 is a normal process's), making the group if need
/// be. (From outside the lab's namespaces: `ip netns exec` gives a process
/// a sysfs of its own, without the cgroup mounts.)
pub fn attach(name: &str, shares: u64, pid: u32) -> SysResult<()> {
    let dir = make(name, shares)?;
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, pid.to_string()).map_err(|e| err(&procs, "write", e))
}

/// Moves one thread `tid` (a device's receive thread, say) into group
/// `name` with weight `shares` (cgroup v1's `tasks`; v2 keeps threads with
/// their process).
pub fn attach_thread(name: &str, shares: u64, tid: i32) -> SysResult<()> {
    let dir = make(name, shares)?;
    let tasks = dir.join("tasks");
    std::fs::write(&tasks, tid.to_string()).map_err(|e| err(&tasks, "write", e))
}

/// Group `name` with weight `shares`, made if need be; its directory.
fn make(name: &str, shares: u64) -> SysResult<PathBuf> {
    let (dir, v1) = group(name)?;
    if let Err(e) = std::fs::create_dir(&dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(err(&dir, "mkdir", e));
        }
    }
    let (file, value) = if v1 {
        ("cpu.shares", shares.max(2).to_string())
    } else {
        // v2 weights run 1..10000 with 100 as the default.
        (
            "cpu.weight",
            (shares * 100 / 1024).clamp(1, 10_000).to_string(),
        )
    };
    let w = dir.join(file);
    std::fs::write(&w, value).map_err(|e| err(&w, "write", e))?;
    Ok(dir)
}

/// Moves whatever is left in group `name` back to the root group and
/// removes it (harmless if it does not exist).
pub fn remove(name: &str) {
    let Ok((dir, v1)) = group(name) else { return };
    let (list, root) = if v1 {
        ("tasks", dir.parent().map(|p| p.join("tasks")))
    } else {
        ("cgroup.procs", dir.parent().map(|p| p.join("cgroup.procs")))
    };
    if let (Ok(ids), Some(root)) = (std::fs::read_to_string(dir.join(list)), root) {
        for id in ids.split_whitespace() {
            let _ = std::fs::write(&root, id);
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The prefix of the groups rxsched makes (`rxsched-forward`, ...).
pub const PREFIX: &str = "rxsched-";

/// Removes every group rxsched made (see [`PREFIX`]), moving anything left
/// in them back to the root group.
pub fn remove_ours() {
    let Ok((probe, _)) = group("x") else { return };
    let Some(root) = probe.parent() else { return };
    let Ok(dir) = std::fs::read_dir(root) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(PREFIX) && e.path().is_dir() {
            remove(&name);
        }
    }
}
