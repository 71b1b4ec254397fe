//! What goes wrong running a bench, converted once: the lab's, the
//! system's and the check files' errors by `?`, and anything else (a file,
//! a process) with [`Context::context`] naming what was being done.

use rxsched_linux::lab::LabError;
use rxsched_linux::rules::RuleError;
use rxsched_linux::sys::SysError;
use rxsched_sim::InputError;
use std::fmt::Display;

/// Something went wrong running a process, a file or the lab for a bench.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

/// Errors that say all there is to say, taken by `?` as they read.
macro_rules! as_they_read {
    ($($t:ty),*) => {
        $(impl From<$t> for BenchError {
            fn from(e: $t) -> Self {
                BenchError(e.to_string())
            }
        })*
    };
}

// The lab's and the system's (they name the command or syscall and the
// interface), a check file's (file, line and key: only a build with a
// malformed one, whose own test fails first) and the screening bench's
// rules.
as_they_read!(LabError, SysError, InputError, RuleError);

/// An error with what was being done: `what: error`.
pub trait Context<T> {
    /// The error, prefixed by `what`.
    fn context(self, what: impl Display) -> Result<T, BenchError>;
}

impl<T, E: Display> Context<T> for Result<T, E> {
    fn context(self, what: impl Display) -> Result<T, BenchError> {
        self.map_err(|e| BenchError(format!("{what}: {e}")))
    }
}
