//! How nginx-ketama writes a file a user named (`verify --mismatches`, `share --svg`, `diff --svg`, the
//! recorder's records, vectors and snapshots): whole or not at all, and never by replacing something that
//! is not a regular file.
//!
//! What [`write()`] does depends on what the path names when the write starts:
//!
//! | the path names | what happens |
//! |---|---|
//! | nothing | a new file, written under a unique temporary name in the same directory (created exclusively), synced, then linked into place only if the name is still free |
//! | a regular file, directly or through symbolic links | replaced whole: a new file beside it (beside the last link's target) with the old file's permissions and owner, renamed over it only if a regular file is still there; links stay links, other hard links keep the old contents |
//! | this process's stdout or stderr (`/dev/stdout`, `/dev/fd/2`, or the very file stdout is redirected to) | written through that stream |
//! | a character device (`/dev/null`, a terminal) or a FIFO that a process reads | written through: never created, truncated, renamed or replaced |
//! | a FIFO that no process reads | an error at once, not a wait |
//! | a directory, a block device, a socket, a symbolic link to nothing, a regular file that is one of the command's inputs, a file whose owner a replacement could not keep | refused, with the reason |
//!
//! So a reader of the file sees the old contents or the new, never part of either, and two processes that
//! write the same path never mix: each writes a temporary file of its own, and the last rename wins.
//! Between the last check and the rename another process could still swap the file; the check is repeated
//! just before the rename to keep that window as short as the system allows.

use std::ffi::OsString;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why [`write()`] or [`remove_if`] did not do its work.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the path names is never written (or cannot be, like a FIFO nobody reads); nothing was changed.
    #[error("not writing {}: {why}", path.display())]
    Refused {
        /// The path as given.
        path: PathBuf,
        /// The reason, e.g. "it is a block device (a disk or a partition)".
        why: String,
    },
    /// The system refused an operation.
    #[error("writing {}: {error}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The system's error.
        error: io::Error,
    },
}

impl Error {
    /// The system's error, if that is what this is.
    pub fn io(&self) -> Option<&io::Error> {
        match self {
            Error::Io { error, .. } => Some(error),
            Error::Refused { .. } => None,
        }
    }
}

/// How [`write()`] treats a path.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Create the missing parent directories of a path that names nothing yet.
    pub create_dirs: bool,
    /// The command's input files: a path that names one of them (the same file by device and inode, however
    /// it is spelled) is refused when it is a regular file.
    pub inputs: Vec<PathBuf>,
}

/// What [`write()`] wrote to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A new regular file.
    Created,
    /// A regular file, replaced whole.
    Replaced,
    /// This process's stdout or stderr.
    Stream,
    /// A character device or a FIFO, written through.
    Through,
}

/// A file's identity: its device and inode number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> FileId {
        FileId { dev: meta.dev(), ino: meta.ino() }
    }
}

/// How many times [`write()`] looks again at a path that changed under it.
const ATTEMPTS: usize = 5;

/// Writes `contents` to `path` by the rules of this module.
///
/// # Errors
///
/// [`Error::Refused`] for what is never written, [`Error::Io`] when the system refuses (no space, no
/// permission, a missing directory without [`Options::create_dirs`]). On an error a regular file at `path`
/// is unchanged.
pub fn write(path: &Path, contents: &[u8], options: &Options) -> Result<Written, Error> {
    for _ in 0..ATTEMPTS {
        if let Some(written) = attempt(path, contents, options)? {
            return Ok(written);
        }
    }
    Err(refused(path, "it kept changing while it was being written (another process is writing it too)"))
}

/// Removes `path` if it is still the regular file `id`; a symbolic link at `path` is not followed. Says
/// whether it removed it.
///
/// # Errors
///
/// The system refuses to look at or remove it.
pub fn remove_if(path: &Path, id: FileId) -> Result<bool, Error> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() && FileId::of(&m) == id => match fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(path, e)),
        },
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error(path, e)),
    }
}

/// What [`write()`] would refuse at `path` before it writes anything: a directory, a block device, a socket,
/// a symbolic link to nothing, one of the inputs. A command that runs for long checks its output path
/// this way first. (A FIFO's reader and missing directories are looked at only when writing.)
///
/// # Errors
///
/// [`Error::Refused`] as [`write()`] would refuse; [`Error::Io`] when the path cannot be looked at.
pub fn check(path: &Path, options: &Options) -> Result<(), Error> {
    classify(path, options).map(|_| ())
}

/// What a path names, for writing.
enum Target {
    Missing,
    Stream(Stream),
    Regular,
    /// A character device or a FIFO.
    Device(Metadata),
}

/// What `path` names, or why it is not written.
fn classify(path: &Path, options: &Options) -> Result<Target, Error> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Ok(target) = fs::read_link(path) {
                return Err(refused(
                    path,
                    &format!("it is a symbolic link to {}, which does not exist", target.display()),
                ));
            }
            return Ok(Target::Missing);
        }
        Err(e) => return Err(io_error(path, e)),
    };
    let id = FileId::of(&meta);
    if meta.is_file()
        && let Some(input) = options.inputs.iter().find(|i| fs::metadata(i).is_ok_and(|m| FileId::of(&m) == id))
    {
        let why = if input == path {
            "it is an input of this command".to_string()
        } else {
            format!("it is {}, an input of this command", input.display())
        };
        return Err(refused(path, &why));
    }
    if let Some(stream) = Stream::of(id) {
        return Ok(Target::Stream(stream));
    }
    let kind = meta.file_type();
    if kind.is_file() {
        Ok(Target::Regular)
    } else if kind.is_char_device() || kind.is_fifo() {
        Ok(Target::Device(meta))
    } else if kind.is_dir() {
        Err(refused(path, "it is a directory"))
    } else if kind.is_block_device() {
        Err(refused(path, "it is a block device (a disk or a partition)"))
    } else if kind.is_socket() {
        Err(refused(path, "it is a socket"))
    } else {
        Err(refused(path, "it is neither a regular file nor a character device nor a FIFO"))
    }
}

/// One look at `path` and the write it calls for; `None` when the path changed meanwhile (look again).
fn attempt(path: &Path, contents: &[u8], options: &Options) -> Result<Option<Written>, Error> {
    match classify(path, options)? {
        Target::Missing => create(path, contents, options),
        Target::Stream(stream) => {
            stream.write(contents).map_err(|e| io_error(path, e))?;
            Ok(Some(Written::Stream))
        }
        Target::Regular => replace(path, contents),
        Target::Device(meta) => through(path, &meta, contents),
    }
}

/// A new file at `path`, linked into place only if the name is still free.
fn create(path: &Path, contents: &[u8], options: &Options) -> Result<Option<Written>, Error> {
    let (dir, name) = split(path)?;
    if options.create_dirs {
        fs::create_dir_all(dir).map_err(|e| io_error(path, e))?;
    }
    let mut tmp = temporary(dir, name, 0o666).map_err(|e| io_error(path, e))?;
    fill(tmp.as_file_mut(), contents).map_err(|e| io_error(path, e))?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(Some(Written::Created)),
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(io_error(path, e.error)),
    }
}

/// The regular file at `path` (or where its symbolic links lead) replaced by a new one.
fn replace(path: &Path, contents: &[u8]) -> Result<Option<Written>, Error> {
    let real = match fs::canonicalize(path) {
        Ok(real) => Some(real),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(path, e)),
    };
    let Some((real, meta)) = real.and_then(|r| fs::symlink_metadata(&r).ok().filter(Metadata::is_file).map(|m| (r, m)))
    else {
        if fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return Err(refused(path, "it leads to a file that has no name of its own (a deleted file, say)"));
        }
        return Ok(None);
    };
    let (dir, name) = split(&real)?;
    let mut tmp = temporary(dir, name, 0o600).map_err(|e| io_error(path, e))?;
    // SAFETY: geteuid and getegid only read the process's credentials.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if (meta.uid(), meta.gid()) != (uid, gid)
        && let Err(e) = std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid()))
    {
        if e.raw_os_error() == Some(libc::EPERM) {
            return Err(refused(
                path,
                &format!(
                    "it belongs to user {} (group {}), and a replacement made by this user could not keep that owner",
                    meta.uid(),
                    meta.gid()
                ),
            ));
        }
        return Err(io_error(path, e));
    }
    tmp.as_file().set_permissions(fs::Permissions::from_mode(meta.mode() & 0o777)).map_err(|e| io_error(path, e))?;
    fill(tmp.as_file_mut(), contents).map_err(|e| io_error(path, e))?;
    // Rename only over a regular file (another writer of the same path may have replaced it meanwhile).
    if !fs::symlink_metadata(&real).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    tmp.persist(&real).map_err(|e| io_error(path, e.error))?;
    Ok(Some(Written::Replaced))
}

/// Writes to the character device or FIFO `meta` at `path` without creating, truncating or replacing it.
fn through(path: &Path, meta: &Metadata, contents: &[u8]) -> Result<Option<Written>, Error> {
    let fifo = meta.file_type().is_fifo();
    // A FIFO is opened without waiting: with no reader, that fails at once (ENXIO) instead of hanging.
    let flags = libc::O_NOCTTY | if fifo { libc::O_NONBLOCK } else { 0 };
    let file = match OpenOptions::new().write(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if fifo && e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(refused(path, "it is a FIFO that no process is reading"));
        }
        Err(e) => return Err(io_error(path, e)),
    };
    let now = file.metadata().map_err(|e| io_error(path, e))?;
    if FileId::of(&now) != FileId::of(meta) || now.file_type() != meta.file_type() {
        return Ok(None);
    }
    if fifo {
        blocking(&file).map_err(|e| io_error(path, e))?;
    }
    (&file).write_all(contents).map_err(|e| io_error(path, e))?;
    Ok(Some(Written::Through))
}

/// Clears `O_NONBLOCK`, so that writes wait for a slow reader instead of failing.
fn blocking(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL and F_SETFL on a descriptor this function borrows.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags == -1 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// This process's stdout or stderr.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The stream that is the file `id`, if one is.
    fn of(id: FileId) -> Option<Stream> {
        let is = |fd: std::os::fd::BorrowedFd<'_>| {
            fd.try_clone_to_owned().and_then(|fd| File::from(fd).metadata()).is_ok_and(|m| FileId::of(&m) == id)
        };
        if is(io::stdout().as_fd()) {
            Some(Stream::Stdout)
        } else if is(io::stderr().as_fd()) {
            Some(Stream::Stderr)
        } else {
            None
        }
    }

    fn write(self, contents: &[u8]) -> io::Result<()> {
        match self {
            Stream::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(contents)?;
                out.flush()
            }
            Stream::Stderr => io::stderr().lock().write_all(contents),
        }
    }
}

/// A new file with a unique name beside `name` in `dir` (created exclusively), with permissions `mode`
/// (less the umask).
fn temporary(dir: &Path, name: &std::ffi::OsStr, mode: u32) -> io::Result<tempfile::NamedTempFile> {
    // Long enough to tell whose it is, short enough for any file name limit.
    let mut prefix = b".".to_vec();
    prefix.extend(name.as_bytes().iter().take(64));
    prefix.push(b'.');
    tempfile::Builder::new()
        .prefix(&OsString::from_vec(prefix))
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(if dir.as_os_str().is_empty() { Path::new(".") } else { dir })
}

/// Writes all of `contents` and makes it durable before the file gets its name.
fn fill(file: &mut File, contents: &[u8]) -> io::Result<()> {
    file.write_all(contents)?;
    file.sync_all()
}

/// The directory and file name of `path`.
fn split(path: &Path) -> Result<(&Path, &std::ffi::OsStr), Error> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(refused(path, "it names no file")),
    }
}

fn refused(path: &Path, why: &str) -> Error {
    Error::Refused { path: path.to_path_buf(), why: why.to_string() }
}

fn io_error(path: &Path, error: io::Error) -> Error {
    Error::Io { path: path.to_path_buf(), error }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    fn dir() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("nk-output-").tempdir().unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{}", io::Error::last_os_error());
    }

    #[test]
    fn a_new_file_is_created_whole_and_no_temporary_file_is_left() {
        let d = dir();
        let p = d.path().join("sub/dir/out.jsonl");
        let err = write(&p, b"a\n", &Options::default()).unwrap_err();
        assert!(err.io().is_some_and(|e| e.kind() == io::ErrorKind::NotFound), "{err}");
        let w = write(&p, b"a\n", &Options { create_dirs: true, ..Options::default() }).unwrap();
        assert_eq!(w, Written::Created);
        assert_eq!(fs::read(&p).unwrap(), b"a\n");
        assert_eq!(names(p.parent().unwrap()), ["out.jsonl"]);
    }

    #[test]
    fn a_regular_file_is_replaced_with_its_mode_and_a_new_inode() {
        let d = dir();
        let p = d.path().join("out.svg");
        fs::write(&p, b"old contents, longer than the new").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        let before = FileId::of(&fs::metadata(&p).unwrap());
        // A reader holding the old file keeps reading the old contents: the file was replaced, not rewritten.
        let mut held = File::open(&p).unwrap();
        assert_eq!(write(&p, b"new", &Options::default()).unwrap(), Written::Replaced);
        let after = fs::metadata(&p).unwrap();
        assert_ne!(FileId::of(&after), before);
        assert_eq!(after.mode() & 0o777, 0o640);
        assert_eq!(fs::read(&p).unwrap(), b"new");
        let mut old = String::new();
        held.read_to_string(&mut old).unwrap();
        assert_eq!(old, "old contents, longer than the new");
        assert_eq!(names(d.path()), ["out.svg"]);
    }

    /// As root, a file of another user is replaced with that owner kept.
    #[test]
    fn a_replacement_keeps_the_owner() {
        // SAFETY: geteuid only reads the process's credentials.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let d = dir();
        let p = d.path().join("theirs.svg");
        fs::write(&p, b"old").unwrap();
        std::os::unix::fs::chown(&p, Some(4321), Some(4322)).unwrap();
        assert_eq!(write(&p, b"new", &Options::default()).unwrap(), Written::Replaced);
        let m = fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (4321, 4322));
        assert_eq!(fs::read(&p).unwrap(), b"new");
    }

    /// `/proc/self/fd/N` of a deleted file leads to no name that could be replaced.
    #[test]
    fn a_file_with_no_name_is_refused() {
        let d = dir();
        let p = d.path().join("deleted");
        let f = File::create(&p).unwrap();
        fs::remove_file(&p).unwrap();
        let magic = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
        let err = write(&magic, b"x", &Options::default()).unwrap_err();
        assert!(
            err.to_string().ends_with("it leads to a file that has no name of its own (a deleted file, say)"),
            "{err}"
        );
        assert!(names(d.path()).is_empty());
    }

    #[test]
    fn a_symbolic_link_stays_a_link_and_its_target_is_replaced() {
        let d = dir();
        fs::create_dir(d.path().join("real")).unwrap();
        let target = d.path().join("real/m.jsonl");
        fs::write(&target, b"old").unwrap();
        let link = d.path().join("link.jsonl");
        symlink("real/m.jsonl", &link).unwrap();
        assert_eq!(write(&link, b"new", &Options::default()).unwrap(), Written::Replaced);
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("real/m.jsonl"));
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(names(&d.path().join("real")), ["m.jsonl"]);
    }

    #[test]
    fn a_link_to_nothing_is_refused_and_nothing_is_created() {
        let d = dir();
        let link = d.path().join("dangling");
        symlink(d.path().join("gone/elsewhere"), &link).unwrap();
        let err = write(&link, b"x", &Options { create_dirs: true, ..Options::default() }).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(err.to_string().contains("symbolic link to") && err.to_string().contains("does not exist"), "{err}");
        assert_eq!(names(d.path()), ["dangling"]);
    }

    #[test]
    fn a_fifo_is_written_through_to_its_reader_and_stays_a_fifo() {
        let d = dir();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                File::open(&fifo).unwrap().read_to_string(&mut s).unwrap();
                s
            })
        };
        // The reader opens the FIFO in its own time; until then there is no reader and the write is refused.
        let written = loop {
            match write(&fifo, b"line 1\nline 2\n", &Options::default()) {
                Ok(w) => break w,
                Err(Error::Refused { .. }) => std::thread::sleep(std::time::Duration::from_millis(5)),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(written, Written::Through);
        assert_eq!(reader.join().unwrap(), "line 1\nline 2\n");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(names(d.path()), ["fifo"]);
    }

    #[test]
    fn a_fifo_nobody_reads_is_an_error_at_once() {
        let d = dir();
        let fifo = d.path().join("fifo");
        mkfifo(&fifo);
        let err = write(&fifo, b"x", &Options::default()).unwrap_err();
        assert_eq!(err.to_string(), format!("not writing {}: it is a FIFO that no process is reading", fifo.display()));
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(names(d.path()), ["fifo"]);
    }

    #[test]
    fn directories_and_sockets_are_refused() {
        let d = dir();
        let sock = d.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let link = d.path().join("to-dir");
        symlink(d.path(), &link).unwrap();
        for (p, why) in [(d.path(), "it is a directory"), (&link, "it is a directory"), (&sock, "it is a socket")] {
            let err = write(p, b"x", &Options::default()).unwrap_err();
            assert!(err.to_string().ends_with(why), "{err}");
        }
        assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }

    #[test]
    fn an_input_is_refused_however_it_is_spelled() {
        let d = dir();
        let conf = d.path().join("nginx.conf");
        fs::write(&conf, b"events {}").unwrap();
        let hard = d.path().join("hard-link.svg");
        fs::hard_link(&conf, &hard).unwrap();
        let soft = d.path().join("soft-link.svg");
        symlink("nginx.conf", &soft).unwrap();
        let options = Options { inputs: vec![conf.clone()], ..Options::default() };
        for p in [conf.clone(), hard, soft, d.path().join("./nginx.conf")] {
            let err = write(&p, b"<svg/>", &options).unwrap_err();
            assert!(err.to_string().contains("an input of this command"), "{err}");
        }
        assert_eq!(fs::read(&conf).unwrap(), b"events {}");
        assert_eq!(write(&d.path().join("ok.svg"), b"<svg/>", &options).unwrap(), Written::Created);
    }

    /// Writers racing on one path each write a whole file: none fails, and a reader at any moment sees
    /// nothing yet or one writer's whole file, never a mix or a torn line. (With one fixed temporary name,
    /// as before issue 18, writers fail with "No such file or directory" and readers see partial files.)
    #[test]
    fn concurrent_writers_never_mix() {
        const LINES: usize = 20_000;
        let d = dir();
        let p = d.path().join("m.jsonl");
        let start = std::sync::Arc::new(std::sync::Barrier::new(9));
        let writers: Vec<_> = (0..8u8)
            .map(|i| {
                let (p, start) = (p.clone(), start.clone());
                std::thread::spawn(move || {
                    let text = format!("{{\"writer\":{i}}}\n").repeat(LINES);
                    start.wait();
                    for _ in 0..40 {
                        write(&p, text.as_bytes(), &Options::default()).unwrap();
                    }
                })
            })
            .collect();
        start.wait();
        let whole = |text: &str| {
            let first = text.lines().next().unwrap_or_default();
            text.lines().count() == LINES && text.lines().all(|l| l == first)
        };
        let mut reads = 0;
        while !writers.iter().all(std::thread::JoinHandle::is_finished) {
            if let Ok(text) = fs::read_to_string(&p) {
                assert!(whole(&text), "a reader saw a partial or mixed file");
                reads += 1;
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        assert!(whole(&fs::read_to_string(&p).unwrap()), "after {reads} reads while writing");
        assert_eq!(names(d.path()), ["m.jsonl"]);
    }

    #[test]
    fn remove_if_removes_only_the_same_regular_file() {
        let d = dir();
        let p = d.path().join("m.jsonl");
        fs::write(&p, b"x").unwrap();
        let id = FileId::of(&fs::metadata(&p).unwrap());
        let link = d.path().join("link");
        symlink("m.jsonl", &link).unwrap();
        assert!(!remove_if(&link, id).unwrap(), "a link is not followed");
        write(&p, b"y", &Options::default()).unwrap();
        assert!(!remove_if(&p, id).unwrap(), "a replaced file is another file");
        let id = FileId::of(&fs::metadata(&p).unwrap());
        assert!(remove_if(&p, id).unwrap());
        assert!(!p.exists());
    }
}
