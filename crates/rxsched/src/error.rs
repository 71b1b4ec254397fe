//! The one error type of the command-line tool, and the exit status each
//! kind earns: 2 for input the user must fix, 1 for a run that failed.

use rxsched_sim::{InputError, SimError};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: a file, key, flag or value the user must fix (exit 2).
    #[error("{0}")]
    Input(String),
    /// A run failed, or a check did not hold (exit 1).
    #[error("{0}")]
    Run(String),
}

impl Error {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Run(_) => 1,
        }
    }

    /// An input error about a command-line flag.
    pub fn flag(name: &str, msg: impl std::fmt::Display) -> Error {
        Error::Input(format!("--{name}: {msg}"))
    }
}

impl From<InputError> for Error {
    fn from(e: InputError) -> Self {
        Error::Input(e.to_string())
    }
}

impl From<SimError> for Error {
    fn from(e: SimError) -> Self {
        match e {
            SimError::Input(e) => Error::Input(e.to_string()),
            e => Error::Run(e.to_string()),
        }
    }
}

impl From<rxsched_linux::sys::SysError> for Error {
    fn from(e: rxsched_linux::sys::SysError) -> Self {
        // A missing interface, missing privilege, an interface that cannot
        // do what was asked (no XDP, no threaded NAPI) or that another
        // program holds: the user's to fix.
        let unsupported = e.source.kind() == std::io::ErrorKind::Unsupported;
        match e.source.raw_os_error() {
            Some(libc::ENODEV | libc::ENXIO | libc::EPERM | libc::EACCES)
            | Some(libc::EOPNOTSUPP | libc::EBUSY | libc::EEXIST) => Error::Input(e.to_string()),
            _ if unsupported => Error::Input(e.to_string()),
            _ => Error::Run(e.to_string()),
        }
    }
}

impl From<rxsched_linux::lab::LabError> for Error {
    fn from(e: rxsched_linux::lab::LabError) -> Self {
        match e {
            rxsched_linux::lab::LabError::NotRoot => Error::Input(e.to_string()),
            e => Error::Run(e.to_string()),
        }
    }
}

impl From<crate::bench::BenchError> for Error {
    fn from(e: crate::bench::BenchError) -> Self {
        Error::Run(e.to_string())
    }
}

/// Result of a command.
pub type Result<T> = std::result::Result<T, Error>;
