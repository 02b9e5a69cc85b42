//! Files that are not regular files, for the tests of what the command writes through them (included with
//! `#[path]`): device nodes made in the test's own directory (with /dev/full's numbers), FIFOs and their
//! readers, and a stdout that is full.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Stdio;

/// A fresh directory under the target directory: /tmp may be mounted `nodev`, where a device node made by
/// the test could not be opened.
pub(crate) fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("nk-files-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

pub(crate) fn c_path(path: &Path) -> std::ffi::CString {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

/// A character device at `path` with /dev/full's numbers (every write fails with ENOSPC); `false` when this
/// process may not make device nodes (not root).
pub(crate) fn mknod_full(path: &Path) -> bool {
    // SAFETY: mknod with a valid C string.
    unsafe { libc::mknod(c_path(path).as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) == 0 }
}

pub(crate) fn is_full_device(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 7))
}

pub(crate) fn mkfifo(path: &Path) {
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c_path(path).as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
}

pub(crate) fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// Reads the FIFO at `path` to its end in a thread (which waits for a writer).
/// A reader of the FIFO `path` that has it open when this returns (so a writer that refuses a FIFO no
/// process is reading finds it: opening in the thread raced the writer, which then refused about one run in
/// fifteen), and reads everything the writer writes.
pub(crate) fn read_fifo(path: &Path) -> std::thread::JoinHandle<String> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: with no writer yet, a blocking open would wait for one.
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).unwrap();
    std::thread::spawn(move || {
        let fd = f.as_raw_fd();
        // Linux reports POLLHUP to this reader only once a writer has come (the pipe's writer counter), so
        // poll waits for the writer's first bytes or its close; then read blocking, to the end.
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; fcntl on an open descriptor.
        unsafe {
            assert_eq!(libc::poll(&mut p, 1, -1), 1);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK), 0);
        }
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    })
}

pub(crate) fn names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// A stdout whose every write fails (ENOSPC).
pub(crate) fn dev_full() -> Stdio {
    Stdio::from(std::fs::File::options().write(true).open("/dev/full").unwrap())
}
