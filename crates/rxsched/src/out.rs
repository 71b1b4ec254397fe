//! Standard output that behaves like a Unix tool's: a reader that went
//! away (`| head`) ends the program quietly, with the status a process
//! killed by SIGPIPE has; any other failure to write (a full disk) is an
//! error that names stdout, never a panic.

use crate::error::{Error, Result};
use std::io::Write;

/// The exit status of a process a broken pipe ended (128 + SIGPIPE).
pub const BROKEN_PIPE: i32 = 141;

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    let r = o.write_all(text.as_bytes()).and_then(|_| o.flush());
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(BROKEN_PIPE),
        Err(e) => Err(Error::Run(format!("cannot write to standard output: {e}"))),
    }
}

/// Writes `text` and a newline to standard output.
pub fn line(text: &str) -> Result<()> {
    print(&format!("{text}\n"))
}
