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

impl From<LabError> for BenchError {
    fn from(e: LabError) -> Self {
        BenchError(e.to_string())
    }
}

impl From<SysError> for BenchError {
    fn from(e: SysError) -> Self {
        BenchError(e.to_string())
    }
}

/// A check file that does not load (only a build with a malformed one, whose
/// own test fails first).
impl From<InputError> for BenchError {
    fn from(e: InputError) -> Self {
        BenchError(e.to_string())
    }
}

/// The screening bench's own rules, refused.
impl From<RuleError> for BenchError {
    fn from(e: RuleError) -> Self {
        BenchError(e.to_string())
    }
}

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
