//! Each local nginx runs in a private network namespace, so nothing else on the machine can take its
//! addresses and it can take nobody else's.
//!
//! Why: the proof needs some addresses to *refuse* connections (dead servers) and others to be bound by
//! nginx at start. On a shared loopback both can fail for reasons of their own: another nginx of a
//! concurrent test may listen on the same `[::1]` port; and a closed port inside the kernel's ephemeral
//! range can be handed to nginx's own outgoing connection as its source port, so the connection to a
//! "dead" `[::1]:port` reaches itself (TCP simultaneous open) and gets its own request back as a reply.
//!
//! How, made impossible rather than rare:
//! * the child is started in fresh network and mount namespaces (`unshare(2)` before `exec`), where only
//!   `lo` exists (brought up here) and nginx is the only process;
//! * the namespace's ephemeral range is set to [`EPHEMERAL_PORTS`], and every address a topology or the
//!   golden catalog listens on or leaves dead uses a port outside it (see
//!   [`crate::site::topology::SERVICE_PORTS`]), so the kernel never picks such a port as a source port;
//! * a private `/etc/hosts` can be bind-mounted for nginx's resolver, and with it a private name service
//!   ([`private_name_service`]): an `nsswitch.conf` whose `hosts` line is `files`, and nscd's socket
//!   directory covered. Inside the namespace glibc could otherwise still reach a daemon of the host through
//!   a unix socket (nscd, systemd-resolved through `nss-resolve`, avahi through `nss-mdns`), which would
//!   resolve names on the host's network; a unix socket path is reachable from any network namespace.
//!
//! This process reaches nginx through sockets it creates inside that namespace ([`NetNs::run`]).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::ops::RangeInclusive;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The ephemeral port range inside every namespace (and container) the harness starts nginx in. No
/// address of a topology, of the golden catalog or of a front server uses a port in it.
pub const EPHEMERAL_PORTS: RangeInclusive<u16> = 32768..=60999;
const _: () = assert!(*crate::site::topology::SERVICE_PORTS.end() < *EPHEMERAL_PORTS.start());

/// Set (to anything) to make the harness act as if it could not create namespaces, as without root: the
/// fallback paths are tested this way.
pub const NO_NAMESPACES_ENV: &str = "NGINX_KETAMA_NO_NAMESPACES";

/// Whether this process can create namespaces (root, unless [`NO_NAMESPACES_ENV`] is set).
pub fn available() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 && std::env::var_os(NO_NAMESPACES_ENV).is_none() }
}

/// What creating the namespaces and setting them up takes, beyond being root: a container's root has none
/// of it by default (Docker grants neither capability, mounts `/proc/sys` read-only, and its default
/// seccomp profile allows `unshare`, `setns` and `mount` only with `CAP_SYS_ADMIN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    /// `CAP_SYS_ADMIN`: `unshare(CLONE_NEWNET | CLONE_NEWNS)`, the bind mounts, `setns` (joining the holder).
    SysAdmin,
    /// `CAP_NET_ADMIN`: bringing `lo` up in the new namespace, adding the config's addresses to it.
    NetAdmin,
    /// A writable `/proc/sys`: the namespace's ephemeral port range is written there.
    WritableProcSys,
}

impl Privilege {
    /// Every privilege, in the order the message names them.
    pub const ALL: [Privilege; 3] = [Privilege::SysAdmin, Privilege::NetAdmin, Privilege::WritableProcSys];

    /// What it is and what it is needed for.
    fn needed_for(self) -> &'static str {
        match self {
            Privilege::SysAdmin => "CAP_SYS_ADMIN (unshare, mount, setns)",
            Privilege::NetAdmin => "CAP_NET_ADMIN (lo up, addresses on lo)",
            Privilege::WritableProcSys => "a writable /proc/sys (the namespace's ephemeral port range)",
        }
    }

    /// The capability, if it is one.
    fn capability(self) -> Option<&'static str> {
        match self {
            Privilege::SysAdmin => Some("CAP_SYS_ADMIN"),
            Privilege::NetAdmin => Some("CAP_NET_ADMIN"),
            Privilege::WritableProcSys => None,
        }
    }
}

/// The `docker run` flags that give a container what [`Privilege::ALL`] names (found by trying each
/// subset with the tool image: docs/ci.md, "The tool image").
pub const DOCKER_RUN_FLAGS: &str = "--cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt systempaths=unconfined";

/// Why this process cannot make private namespaces, said before anything is attempted ([`isolate_with`]
/// checks) or after the kernel refused although nothing was found missing ([`Holder::start`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Privileges this process lacks (non-empty, in [`Privilege::ALL`]'s order).
    #[error(
        "private network and mount namespaces need {needs}, but {missing}. In a container, grant them with \
         `docker run {DOCKER_RUN_FLAGS}`; without them, {NO_NAMESPACES_ENV}=1 in the environment proves only \
         upstreams whose servers are all loopback literals",
        needs = needs(),
        missing = missing(.0)
    )]
    Lacks(Vec<Privilege>),
    /// The kernel refused (`EPERM`, `EACCES`) with every privilege present: a security profile. Holds the
    /// OS error.
    #[error(
        "{0}: the privileges are there ({needs}), so a security profile refused: seccomp, or AppArmor, whose \
         docker-default profile denies mount and writes to /proc/sys/net (add --security-opt \
         apparmor=unconfined to `docker run {DOCKER_RUN_FLAGS}`)",
        needs = needs()
    )]
    Profile(String),
}

/// Every privilege with what it is needed for, for messages.
fn needs() -> String {
    let all = Privilege::ALL.map(Privilege::needed_for);
    format!("{} and {}", all[..all.len() - 1].join(", "), all[all.len() - 1])
}

/// What `lacks` names, for messages: `this process (root) lacks CAP_NET_ADMIN, and /proc/sys is mounted
/// read-only`.
fn missing(lacks: &[Privilege]) -> String {
    let caps: Vec<&str> = lacks.iter().filter_map(|p| p.capability()).collect();
    let mut parts = Vec::new();
    if !caps.is_empty() {
        parts.push(format!("this process (root) lacks {}", caps.join(" and ")));
    }
    if lacks.contains(&Privilege::WritableProcSys) {
        parts.push("/proc/sys is mounted read-only".to_string());
    }
    parts.join(", and ")
}

impl From<Refusal> for io::Error {
    fn from(r: Refusal) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, r)
    }
}

/// What of [`Privilege::ALL`] a process lacks, from the `CapEff:` line of its `/proc/<pid>/status` and
/// whether `/proc/sys` can be written.
pub fn lacking(status: &str, proc_sys_writable: bool) -> Vec<Privilege> {
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_SYS_ADMIN: u32 = 21;
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| effective & (1 << cap) != 0;
    Privilege::ALL
        .into_iter()
        .filter(|p| match p {
            Privilege::SysAdmin => !has(CAP_SYS_ADMIN),
            Privilege::NetAdmin => !has(CAP_NET_ADMIN),
            Privilege::WritableProcSys => !proc_sys_writable,
        })
        .collect()
}

/// The privileges this process lacks (see [`lacking`]); none where `/proc/self/status` cannot be read
/// (the attempt then says what failed).
pub fn own_lacking() -> Vec<Privilege> {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return Vec::new() };
    let range = CString::new(PORT_RANGE_FILE).expect("no NUL");
    // SAFETY: a NUL-terminated path; access only reads it.
    let writable = unsafe { libc::access(range.as_ptr(), libc::W_OK) } == 0;
    lacking(&status, writable)
}

/// Where a network namespace's ephemeral port range is set.
const PORT_RANGE_FILE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// Makes `cmd` start in fresh network and mount namespaces: `lo` up, [`EPHEMERAL_PORTS`] as the ephemeral
/// range, and `hosts` (if any) bind-mounted over `/etc/hosts` with a private name service
/// ([`private_name_service`], its files written in a `names` directory next to `hosts`).
///
/// # Errors
///
/// A hosts path with a NUL byte, the name service's files not written. Failures inside the child (not
/// root, no namespace support) make [`Command::spawn`] fail with the OS error.
pub fn isolate(cmd: &mut Command, hosts: Option<&Path>) -> io::Result<()> {
    let mut binds = Vec::new();
    if let Some(hosts) = hosts {
        binds.push((hosts.to_path_buf(), PathBuf::from("/etc/hosts")));
        binds.extend(private_name_service(&hosts.with_file_name("names"))?);
    }
    isolate_with(cmd, &Isolation { binds, ephemeral: EPHEMERAL_PORTS, cwd: None })
}

/// The system's name service switch file.
pub const NSSWITCH: &str = "/etc/nsswitch.conf";

/// The directory of the socket through which glibc asks nscd, the name service cache daemon, before any
/// `nsswitch.conf` module (glibc's `_PATH_NSCDSOCKET` is `/var/run/nscd/socket`).
pub const NSCD_DIR: &str = "/var/run/nscd";

/// Bind mounts (source, target) that make name resolution inside a namespace private: a copy of
/// [`NSSWITCH`] whose `hosts` line is `files` (no `dns`, `resolve`, `mdns`, `myhostname`, `sss`… module
/// is loaded: only the hosts file answers), and an empty directory over [`NSCD_DIR`] (glibc asks nscd
/// first, whatever `nsswitch.conf` says). A target that does not exist here is left alone: without
/// `nsswitch.conf` glibc reads the hosts file and asks DNS, which cannot leave the namespace; without
/// nscd's directory there is no nscd to ask. The files are written in `dir`.
///
/// # Errors
///
/// `dir` or its files cannot be written.
pub fn private_name_service(dir: &Path) -> io::Result<Vec<(PathBuf, PathBuf)>> {
    std::fs::create_dir_all(dir)?;
    let mut binds = Vec::new();
    let system = Path::new(NSSWITCH);
    if system.is_file() {
        let file = dir.join("nsswitch.conf");
        std::fs::write(&file, private_nsswitch(&std::fs::read_to_string(system).unwrap_or_default()))?;
        binds.push((file, system.to_path_buf()));
    }
    let nscd = Path::new(NSCD_DIR);
    if nscd.is_dir() {
        let empty = dir.join("nscd");
        std::fs::create_dir_all(&empty)?;
        binds.push((empty, nscd.canonicalize().unwrap_or_else(|_| nscd.to_path_buf())));
    }
    Ok(binds)
}

/// `system` (an `nsswitch.conf`) with its `hosts` database answered by the hosts file alone.
pub fn private_nsswitch(system: &str) -> String {
    let mut out = String::from("# nginx-ketama: private name service, the hosts file only\n");
    for line in system.lines().filter(|l| !l.trim_start().starts_with("hosts:")) {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("hosts: files\n");
    out
}

/// What a fresh pair of network and mount namespaces holds besides `lo`.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Bind mounts (source, target), made in order after `/` is made private: a private hosts file over
    /// `/etc/hosts`, private directories over the directories of a config's unix sockets.
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// The namespace's ephemeral port range.
    pub ephemeral: RangeInclusive<u16>,
    /// The working directory of the processes in the namespace (entering a mount namespace resets it to
    /// `/`): relative unix socket paths resolve against it. `None`: `/`.
    pub cwd: Option<PathBuf>,
}

/// Makes `cmd` start in fresh network and mount namespaces as `isolation` describes, with `lo` up.
///
/// # Errors
///
/// A path with a NUL byte; a [`Refusal`] naming the privileges this process lacks (a container's root).
/// Failures inside the child (no namespace support, a bind target missing, a security profile) make
/// [`Command::spawn`] fail with the OS error.
pub fn isolate_with(cmd: &mut Command, isolation: &Isolation) -> io::Result<()> {
    let lacks = own_lacking();
    if !lacks.is_empty() {
        return Err(Refusal::Lacks(lacks).into());
    }
    let cstr = |b: &[u8]| CString::new(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e));
    let binds = isolation
        .binds
        .iter()
        .map(|(from, to)| Ok((cstr(from.as_os_str().as_bytes())?, cstr(to.as_os_str().as_bytes())?)))
        .collect::<io::Result<Vec<(CString, CString)>>>()?;
    let root = cstr(b"/")?;
    let cwd = isolation.cwd.as_ref().map(|c| cstr(c.as_os_str().as_bytes())).transpose()?;
    let range_file = cstr(PORT_RANGE_FILE.as_bytes())?;
    let range = format!("{} {}\n", isolation.ephemeral.start(), isolation.ephemeral.end()).into_bytes();
    // SAFETY: between fork and exec the closure only makes system calls on memory prepared above; it
    // allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let check = |r: libc::c_int| if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) };
            check(libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for (from, to) in &binds {
                check(libc::mount(from.as_ptr(), to.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()))?;
            }
            let fd = check(libc::open(range_file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
            let written = libc::write(fd, range.as_ptr().cast(), range.len());
            libc::close(fd);
            if written != range.len() as isize {
                return Err(io::Error::last_os_error());
            }
            if let Some(cwd) = &cwd {
                check(libc::chdir(cwd.as_ptr()))?;
            }
            loopback_up()
        });
    }
    Ok(())
}

/// A process that only holds a fresh pair of network and mount namespaces open (made by [`isolate_with`]),
/// so that addresses can be added to its `lo` before anything else joins it ([`Holder::join`]). Killed
/// when dropped; the namespaces end with their last process.
#[derive(Debug)]
pub struct Holder {
    child: std::process::Child,
    net: NetNs,
    mnt: File,
    cwd: Option<CString>,
}

impl Holder {
    /// Starts the holder.
    ///
    /// # Errors
    ///
    /// Not root, no namespace support, a bind mount failing; a [`Refusal`] when privileges lack or a security
    /// profile refuses.
    pub fn start(isolation: &Isolation) -> io::Result<Holder> {
        let cwd = match &isolation.cwd {
            Some(c) => Some(
                CString::new(c.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            ),
            None => None,
        };
        let mut cmd = Command::new("sleep");
        cmd.arg("infinity").stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
        isolate_with(&mut cmd, isolation)?;
        // SAFETY: prctl is async-signal-safe; the holder dies with us.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            // isolate_with found every privilege, yet the kernel refused.
            io::ErrorKind::PermissionDenied => Refusal::Profile(e.to_string()).into(),
            _ => e,
        })?;
        let opened =
            NetNs::of(child.id()).and_then(|net| Ok((net, File::open(format!("/proc/{}/ns/mnt", child.id()))?)));
        match opened {
            Ok((net, mnt)) => Ok(Holder { child, net, mnt, cwd }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The network namespace.
    pub fn net(&self) -> &NetNs {
        &self.net
    }

    /// The holder's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Adds each address to `lo` in the namespace (`ip` from iproute2, run through `nsenter`): a /32 for
    /// IPv4, a /128 for IPv6 (`nodad`: usable at once).
    ///
    /// # Errors
    ///
    /// `ip` or `nsenter` missing or failing (its message is included).
    pub fn add_addresses(&self, addresses: &[std::net::IpAddr]) -> io::Result<()> {
        if addresses.is_empty() {
            return Ok(());
        }
        let mut batch = String::new();
        for a in addresses {
            match a {
                std::net::IpAddr::V4(v4) => batch.push_str(&format!("address add {v4}/32 dev lo\n")),
                std::net::IpAddr::V6(v6) => batch.push_str(&format!("address add {v6}/128 dev lo nodad\n")),
            }
        }
        let mut child = Command::new("nsenter")
            .arg(format!("--net={}", self.net.path().display()))
            .args(["ip", "-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        use std::io::Write as _;
        child.stdin.take().expect("piped stdin").write_all(batch.as_bytes())?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            // `ip -batch` names the failing line as "Command failed -:N": name its address.
            let failed = stderr
                .rsplit_once("Command failed -:")
                .and_then(|(_, n)| n.trim().parse::<usize>().ok())
                .and_then(|n| addresses.get(n.checked_sub(1)?));
            let what = failed.map_or_else(String::new, |a| format!(" (adding {a})"));
            return Err(io::Error::other(format!("nsenter ip -batch{what}: {}", stderr.trim())));
        }
        Ok(())
    }

    /// Makes `cmd` start inside the holder's network and mount namespaces, in its working directory.
    pub fn join(&self, cmd: &mut Command) {
        let (net, mnt) = (self.net.file.as_raw_fd(), self.mnt.as_raw_fd());
        let cwd = self.cwd.clone();
        // SAFETY: setns and chdir on descriptors and a string this holder keeps; the child is
        // single-threaded after fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(net, libc::CLONE_NEWNET) != 0 || libc::setns(mnt, libc::CLONE_NEWNS) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // Entering a mount namespace sets the working directory to its root.
                if let Some(cwd) = &cwd
                    && libc::chdir(cwd.as_ptr()) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// The addresses on `lo` in the namespace (`ip -o address show dev lo`), for checks.
    ///
    /// # Errors
    ///
    /// `ip` or `nsenter` failing.
    pub fn lo_addresses(&self) -> io::Result<Vec<std::net::IpAddr>> {
        let out = Command::new("nsenter")
            .arg(format!("--net={}", self.net.path().display()))
            .args(["ip", "-o", "address", "show", "dev", "lo"])
            .output()?;
        Ok(parse_ip_addresses(&String::from_utf8_lossy(&out.stdout)))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The addresses in `ip -o address show` output (`... inet 10.0.0.7/32 ...`).
pub fn parse_ip_addresses(text: &str) -> Vec<std::net::IpAddr> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "inet" || *w == "inet6")?;
            words.next()?.split('/').next()?.parse().ok()
        })
        .collect()
}

/// `program` in fresh namespaces as [`isolate`] makes them.
///
/// # Errors
///
/// As [`isolate`].
pub fn isolated_command(program: impl AsRef<std::ffi::OsStr>, hosts: Option<&Path>) -> io::Result<Command> {
    let mut cmd = Command::new(program);
    isolate(&mut cmd, hosts)?;
    Ok(cmd)
}

/// Brings `lo` up in the current network namespace (only system calls: safe between fork and exec).
fn loopback_up() -> io::Result<()> {
    // SAFETY: an ifreq zero-initialised and filled with a NUL-terminated name; the socket is closed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        let mut r = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        if r == 0 {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            r = libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        let err = io::Error::last_os_error();
        libc::close(fd);
        if r != 0 { Err(err) } else { Ok(()) }
    }
}

/// The network namespace of a running process, entered by short-lived threads to open sockets there.
#[derive(Debug)]
pub struct NetNs {
    file: File,
    path: PathBuf,
}

impl NetNs {
    /// The network namespace of process `pid`.
    ///
    /// # Errors
    ///
    /// The process is gone.
    pub fn of(pid: u32) -> io::Result<NetNs> {
        let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
        Ok(NetNs { file: File::open(&path)?, path })
    }

    /// `/proc/<pid>/ns/net`, e.g. for `nsenter --net=…`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on a thread that has joined this namespace; sockets it creates stay in the namespace.
    ///
    /// # Errors
    ///
    /// Joining the namespace failed.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        let fd = self.file.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns on a namespace descriptor we hold open; affects this thread only.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("thread in the namespace panicked")))
        })
    }
}

/// Where a connection is opened: this process's own network namespace or another one.
#[derive(Debug, Clone, Copy)]
pub enum Net<'a> {
    /// The namespace this process runs in (containers publish their port here).
    Own,
    /// A private namespace.
    Private(&'a NetNs),
}

impl Net<'_> {
    /// Opens a TCP connection to `to`, from the source address `from` if given (the stream check chooses
    /// its source ports).
    ///
    /// # Errors
    ///
    /// Connecting failed (refused, timed out, the source address busy).
    pub fn connect(self, to: SocketAddr, from: Option<SocketAddr>, timeout: Duration) -> io::Result<TcpStream> {
        let open = move || match from {
            None => TcpStream::connect_timeout(&to, timeout),
            Some(from) => connect_from(from, to),
        };
        match self {
            Net::Own => open(),
            Net::Private(ns) => ns.run(open)?,
        }
    }
}

/// A blocking connect from a chosen source address.
pub(crate) fn connect_from(from: SocketAddr, to: SocketAddr) -> io::Result<TcpStream> {
    let (SocketAddr::V4(from), SocketAddr::V4(to)) = (from, to) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "source-bound connections are IPv4 only"));
    };
    // SAFETY: plain socket calls on a descriptor owned by `stream`, which closes it on every error path.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of_val(&one) as libc::socklen_t,
        );
        let sa = |a: std::net::SocketAddrV4| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: a.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let local = sa(from);
        if libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(io::Error::last_os_error());
        }
        let remote = sa(to);
        if libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// The kernel's ephemeral range in this process's own namespace.
///
/// # Errors
///
/// `/proc` unreadable or in an unexpected format.
pub fn own_ephemeral_ports() -> io::Result<RangeInclusive<u16>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("ip_local_port_range: {text:?}"));
    let mut it = text.split_whitespace().map(|p| p.parse::<u16>().map_err(|_| bad()));
    let (lo, hi) = (it.next().ok_or_else(bad)??, it.next().ok_or_else(bad)??);
    Ok(lo..=hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// `CapEff:` lines recorded from `/proc/self/status` in the tool image (`docker run --rm [FLAGS]
    /// nginx-ketama:0.1.0`, Docker 20.10): no flags, `--cap-add SYS_ADMIN`, and both capabilities; and
    /// this machine's root.
    const DOCKER_DEFAULT: &str = "Name:\tsh\nCapInh:\t0000000000000000\nCapEff:\t00000000a80425fb\nSeccomp:\t2\n";
    const DOCKER_SYS_ADMIN: &str = "CapEff:\t00000000a82425fb\n";
    const DOCKER_BOTH: &str = "CapEff:\t00000000a82435fb\n";
    const HOST_ROOT: &str = "CapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n";

    /// A container's root lacks what Docker does not grant by default, each named; the flags that grant
    /// them are in the message (in Docker's spelling, as `docker run` takes them).
    #[test]
    fn a_containers_root_is_told_what_it_lacks() {
        use Privilege::*;
        assert_eq!(lacking(DOCKER_DEFAULT, false), [SysAdmin, NetAdmin, WritableProcSys]);
        assert_eq!(lacking(DOCKER_SYS_ADMIN, false), [NetAdmin, WritableProcSys]);
        assert_eq!(lacking(DOCKER_BOTH, false), [WritableProcSys]);
        assert_eq!(lacking(DOCKER_BOTH, true), []);
        assert_eq!(lacking(HOST_ROOT, true), []);
        assert_eq!(lacking("no capability line", true), [SysAdmin, NetAdmin]);

        let text = Refusal::Lacks(lacking(DOCKER_SYS_ADMIN, false)).to_string();
        assert!(
            text.starts_with(
                "private network and mount namespaces need CAP_SYS_ADMIN (unshare, mount, setns), CAP_NET_ADMIN \
                 (lo up, addresses on lo) and a writable /proc/sys (the namespace's ephemeral port range), but \
                 this process (root) lacks CAP_NET_ADMIN, and /proc/sys is mounted read-only. In a container"
            ),
            "{text}"
        );
        let all = Refusal::Lacks(lacking(DOCKER_DEFAULT, false)).to_string();
        assert!(all.contains("lacks CAP_SYS_ADMIN and CAP_NET_ADMIN, and /proc/sys is mounted read-only."), "{all}");
        let proc_sys = Refusal::Lacks(lacking(DOCKER_BOTH, false)).to_string();
        assert!(proc_sys.contains(", but /proc/sys is mounted read-only."), "{proc_sys}");
        assert!(
            text.contains("`docker run --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt systempaths=unconfined`"),
            "{text}"
        );
        let io: io::Error = Refusal::Lacks(vec![SysAdmin]).into();
        assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);
        assert!(io.to_string().contains("but this process (root) lacks CAP_SYS_ADMIN. In a container"), "{io}");
        let profile = Refusal::Profile("Operation not permitted (os error 1)".into()).to_string();
        assert!(profile.starts_with("Operation not permitted (os error 1): the privileges are there"), "{profile}");
        assert!(profile.contains("apparmor=unconfined"), "{profile}");
    }

    /// This machine's root (where the live tests run) has every privilege, so nothing is refused up front.
    #[test]
    fn root_here_lacks_nothing() {
        if !available() {
            eprintln!("SKIP: not root");
            return;
        }
        assert_eq!(own_lacking(), []);
    }

    /// Inside a private namespace `lo` is up with both loopback addresses, the ephemeral range is ours, and
    /// its addresses are its own: a port bound in this namespace is free there, and a listener there is
    /// reached through [`Net::Private`].
    #[test]
    fn a_private_namespace_has_its_own_loopback() {
        if !available() {
            eprintln!("SKIP: not root");
            return;
        }
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        isolate(&mut cmd, None).expect("isolate");
        let mut child = cmd.spawn().expect("spawn in a namespace");
        let ns = NetNs::of(child.id()).expect("namespace");
        let range = ns.run(own_ephemeral_ports).expect("enter").expect("range");
        assert_eq!(range, EPHEMERAL_PORTS);
        let outside = TcpListener::bind("127.0.0.1:0").expect("bind here");
        let taken = outside.local_addr().unwrap();
        let inside = ns.run(move || TcpListener::bind(taken)).expect("enter");
        let inside = inside.expect("the same address is free in the namespace");
        let v6 = ns.run(|| TcpListener::bind("[::1]:0").map(|l| l.local_addr().unwrap())).expect("enter");
        assert!(v6.is_ok(), "[::1] exists in the namespace: {v6:?}");
        assert!(Net::Private(&ns).connect(taken, None, Duration::from_secs(2)).is_ok());
        drop(inside);
        assert!(Net::Private(&ns).connect(taken, None, Duration::from_secs(2)).is_err(), "closed inside");
        let _ = child.kill();
        let _ = child.wait();
    }
}
