//! Writing stdout, the command's answer: an error says it was stdout that failed
//! (`nginx-ketama: writing stdout: No space left on device`), and a reader that goes away (`| head -1`,
//! a broken pipe) ends the command quietly.
//!
//! Commands that return a `Result` write through [`Stdout`], whose errors name stdout. `print!` and
//! `println!` in this crate are this module's (the macros below, which `main.rs` brings in before every other
//! module, in the place of std's): they cannot return an error, so a failed write unwinds to `main`, running
//! every destructor on the way (the harness stops the nginx processes it started as it unwinds), and `main`
//! ends the process as [`Failed::exit`] says. How each command ends:
//!
//! | stdout | `verify`, `replay-vectors` (whose exit code is a verdict) | every other command |
//! |---|---|---|
//! | the reader went away | killed by SIGPIPE, as `cat` would be (141 in a shell): never read as a verdict | exit 0: it was read as far as wanted |
//! | any other error | `writing stdout: …` on stderr, exit 3 | `writing stdout: …` on stderr, exit 2 |
//!
//! A stdout closed when the process starts (`>&-`) is an error too ([`is_open`]).

// `print!` and `println!` for the whole crate: `main.rs` declares this module first with `#[macro_use]`, so
// they take the place of std's in every module after it. A failed write to stdout unwinds to `main`, which
// ends the command as this module says, instead of panicking with "failed printing to stdout". (Only the
// `live` commands print this way.)
#[cfg_attr(not(feature = "live"), allow(unused_macros))]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!($($arg)*))
    };
}

#[cfg_attr(not(feature = "live"), allow(unused_macros))]
macro_rules! println {
    () => {
        $crate::stdout::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

// `eprintln!` for the whole crate, in the place of std's (which panic when stderr cannot be
// written: `2>/dev/full`). stderr carries diagnostics, not the answer: when it fails there is nowhere left to
// say so, and the command ends with the exit code it would have had.
macro_rules! eprintln {
    () => {
        $crate::stdout::diagnose(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::diagnose(format_args!("{}\n", format_args!($($arg)*)))
    };
}

use std::fmt;
use std::io::{self, ErrorKind, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why stdout could not be written: its `Display` is `writing stdout: <the system's reason>`.
#[derive(Debug)]
pub(crate) struct StdoutError(io::Error);

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "writing stdout: {}", reason(&self.0))
    }
}

impl std::error::Error for StdoutError {}

/// The system's reason without Rust's ` (os error N)` suffix.
fn reason(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => text.trim_end_matches(&format!(" (os error {code})")).to_string(),
        None => text,
    }
}

/// An error writing stdout, as an `io::Error` of the same kind that names stdout.
fn named(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), StdoutError(e))
}

/// stdout, locked, for commands that return a `Result`: errors name stdout (wrap it in a `BufWriter`).
#[derive(Debug)]
pub(crate) struct Stdout(io::StdoutLock<'static>);

/// stdout for a command's answer.
pub(crate) fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(named)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(named)
    }
}

/// Whether `e` is (or was caused by) a failed write to stdout, and how it failed.
pub(crate) fn failure(e: &anyhow::Error) -> Option<ErrorKind> {
    e.chain().find_map(|c| {
        let io = c.downcast_ref::<io::Error>()?;
        io.get_ref().and_then(|inner| inner.downcast_ref::<StdoutError>()).map(|s| s.0.kind())
    })
}

/// What `print!` and `println!` unwind with when stdout fails.
#[derive(Debug)]
pub(crate) struct Failed(io::Error);

/// `print!` and `println!` of this crate: writes `args` to stdout, or unwinds to `main` with [`Failed`].
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) fn print(args: fmt::Arguments<'_>) {
    if let Err(e) = io::stdout().lock().write_fmt(args) {
        std::panic::resume_unwind(Box::new(Failed(e)));
    }
}

/// `eprintln!` of this crate: writes `args` to stderr; a failed write is ignored (see the
/// macros).
pub(crate) fn diagnose(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Flushes stdout at the end of a command (what `print!` left in the buffer).
#[cfg(feature = "live")]
pub(crate) fn flush() -> Result<(), Failed> {
    io::stdout().lock().flush().map_err(Failed)
}

impl Failed {
    /// Ends the process after a failed write to stdout (see the module's table); `verdict` says whether the
    /// command's exit code is a verdict.
    pub(crate) fn exit(self, verdict: bool) -> ExitCode {
        if self.0.kind() == ErrorKind::BrokenPipe {
            if verdict {
                die_of_sigpipe();
            }
            return ExitCode::SUCCESS;
        }
        eprintln!("nginx-ketama: {}", StdoutError(self.0));
        ExitCode::from(if verdict { 3 } else { 2 })
    }
}

/// Ends the process the way a write to a pipe nobody reads ends a C program: by SIGPIPE.
fn die_of_sigpipe() -> ! {
    // SAFETY: restoring the default action of SIGPIPE (Rust ignores it) and raising it in this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE)
}

/// Whether descriptor 1 was closed when the process started (`>&-`).
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Runs before Rust's runtime starts, which silently reopens a closed stdout on `/dev/null`.
#[used]
#[unsafe(link_section = ".init_array")]
static CHECK_STDOUT: extern "C" fn() = {
    extern "C" fn check() {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        if unsafe { libc::fcntl(1, libc::F_GETFD) } == -1 {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
        }
    }
    check
};

/// The output is the command's answer, so a stdout closed at start is an error (Rust would drop the writes).
pub(crate) fn is_open() -> io::Result<()> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stdout_error_names_stdout_without_the_os_error_number() {
        let e: anyhow::Error = named(io::Error::from_raw_os_error(libc::ENOSPC)).into();
        assert_eq!(format!("{e:#}"), "writing stdout: No space left on device");
        assert_eq!(failure(&e), Some(ErrorKind::StorageFull));
        let e = anyhow::Error::from(named(io::Error::from_raw_os_error(libc::EPIPE))).context("route");
        assert_eq!(failure(&e), Some(ErrorKind::BrokenPipe));
        let other: anyhow::Error = io::Error::from_raw_os_error(libc::EPIPE).into();
        assert_eq!(failure(&other), None, "only a write to stdout is a stdout failure");
    }
}
