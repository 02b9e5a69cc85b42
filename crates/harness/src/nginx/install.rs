//! nginx builds on this machine: the trees provisioned by `scripts/provision-nginx` (Debian packages
//! unpacked under `.nginx/<version>/`) and `scripts/provision-nginx-musl` (Debian's nginx source built
//! statically against musl, under `.nginx/<version>-musl/`), and any nginx binary named on the command line
//! (`verify --nginx PATH`). Each is described by what `nginx -V` says ([`BuildInfo`]), the C library its
//! executable is linked with ([`detect_libc`]) and where its stream module is ([`Stream`]).

use anyhow::{Context, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use std::fmt;
use std::path::{Path, PathBuf};

/// One nginx build that runs as a local process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// Upstream version, e.g. 1.26.3 (`nginx -V`'s first line).
    pub version: NginxVersion,
    /// The C library the executable is linked with, detected from the executable itself ([`detect_libc`]).
    pub libc: Libc,
    /// Where the stream module is, if the build has one.
    pub stream: Stream,
    /// `nginx -V`'s configure arguments.
    pub configure: Vec<String>,
    /// Where the build came from.
    pub origin: Origin,
}

/// Where a local build came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A tree of `scripts/provision-nginx` or `scripts/provision-nginx-musl`, found by
    /// [`Installation::discover`].
    Provisioned {
        /// The tree (`.nginx/<version>` or `.nginx/<version>-musl`).
        dir: PathBuf,
        /// Debian package version, e.g. `1.26.3-3+deb13u11` (for a musl build: of the source package).
        package: String,
    },
    /// A binary named by `--nginx PATH`.
    Named {
        /// The path as given: what runs.
        path: PathBuf,
        /// The executable whose bytes tell the C library: `path` itself, or, for the wrapper script of a
        /// provisioned tree, the tree's `root/usr/sbin/nginx`.
        executable: PathBuf,
    },
}

/// Where a build's stream module is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stream {
    /// Compiled in (`--with-stream`): no `load_module` line.
    BuiltIn,
    /// A loadable module (`--with-stream=dynamic`) at this path (as nginx sees it: inside the container for
    /// an image).
    Module(PathBuf),
    /// The build has no stream module: not configured, or configured as a module that is not where nginx
    /// would look. Says why, for the report.
    Absent(String),
}

impl Stream {
    /// The `load_module` path, if nginx needs one.
    pub fn module(&self) -> Option<&Path> {
        match self {
            Stream::Module(p) => Some(p),
            Stream::BuiltIn | Stream::Absent(_) => None,
        }
    }

    /// Whether the build can serve a `stream {}` block.
    pub fn available(&self) -> bool {
        !matches!(self, Stream::Absent(_))
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stream::BuiltIn => f.write_str("stream module (built in)"),
            Stream::Module(_) => f.write_str("stream module (dynamic)"),
            Stream::Absent(_) => f.write_str("no stream module"),
        }
    }
}

/// How a build's configure arguments declare the stream module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamConfig {
    /// `--with-stream`.
    BuiltIn,
    /// `--with-stream=dynamic`.
    Dynamic,
    /// Neither.
    Absent,
}

/// What `nginx -V` says about a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    /// The release (`nginx version: nginx/1.26.3`).
    pub version: NginxVersion,
    /// The configure arguments, split as the shell would (`--with-cc-opt='-g -O2'` is one argument).
    pub configure: Vec<String>,
}

/// `nginx -V` output that does not describe an nginx release.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildInfoError {
    /// No `nginx version:` line.
    #[error("no \"nginx version:\" line in the output of nginx -V: {0:?}")]
    NoVersionLine(String),
    /// A version line naming another product (`openresty/1.21.4.1`, `freenginx/1.25.4`) or an unreadable
    /// version.
    #[error("nginx -V says {0:?}: not an nginx release of the form nginx/MAJOR.MINOR.PATCH")]
    NotNginx(String),
}

/// The file name of the stream module.
pub const STREAM_MODULE_FILE: &str = "ngx_stream_module.so";

impl BuildInfo {
    /// Reads `nginx -V` output (nginx prints it on stderr).
    ///
    /// # Errors
    ///
    /// No version line, or one that is not `nginx/MAJOR.MINOR.PATCH` (optionally followed by a
    /// distribution's note, as in `nginx/1.18.0 (Ubuntu)`).
    pub fn parse(text: &str) -> Result<BuildInfo, BuildInfoError> {
        let line = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("nginx version:"))
            .ok_or_else(|| BuildInfoError::NoVersionLine(text.lines().next().unwrap_or("").to_string()))?
            .trim();
        let not_nginx = || BuildInfoError::NotNginx(line.to_string());
        let release = line.split_whitespace().next().and_then(|w| w.strip_prefix("nginx/")).ok_or_else(not_nginx)?;
        let version = release.parse().map_err(|_| not_nginx())?;
        let configure = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("configure arguments:"))
            .map(shell_words)
            .unwrap_or_default();
        Ok(BuildInfo { version, configure })
    }

    /// The value of a `--name=value` configure argument (the last one given, as configure takes it).
    pub fn option(&self, name: &str) -> Option<&str> {
        self.configure.iter().rev().find_map(|a| a.strip_prefix(name)?.strip_prefix('='))
    }

    /// How the configure arguments declare the stream module.
    pub fn stream_config(&self) -> StreamConfig {
        match self.configure.iter().rev().find(|a| *a == "--with-stream" || a.starts_with("--with-stream=")) {
            Some(a) if a == "--with-stream" => StreamConfig::BuiltIn,
            Some(a) if a == "--with-stream=dynamic" => StreamConfig::Dynamic,
            _ => StreamConfig::Absent,
        }
    }

    /// Where a dynamic stream module would be, in the order looked at: `modules/` and `../lib/nginx/modules`
    /// next to the binary (a provisioned tree, an unpacked package, a `make install` tree), then the
    /// configured `--modules-path` (relative to `--prefix` unless absolute; nginx's default is
    /// `<prefix>/modules`).
    pub fn module_candidates(&self, binary_dir: &Path) -> Vec<PathBuf> {
        let prefix = self.option("--prefix").unwrap_or("/usr/local/nginx");
        let configured = match self.option("--modules-path") {
            Some(p) if p.starts_with('/') => PathBuf::from(p),
            Some(p) => Path::new(prefix).join(p),
            None => Path::new(prefix).join("modules"),
        };
        let mut out = vec![binary_dir.join("modules"), binary_dir.join("../lib/nginx/modules"), configured];
        out.dedup();
        out.into_iter().map(|d| d.join(STREAM_MODULE_FILE)).collect()
    }

    /// The build's stream module, located with `exists` over [`BuildInfo::module_candidates`]. A module is
    /// looked for also when the configure arguments do not name the stream module: a distribution may build
    /// it apart (Debian 11's `libnginx-mod-stream` for nginx 1.18.0, whose `nginx -V` has no
    /// `--with-stream`; `--with-compat` lets nginx load it).
    pub fn locate_stream(&self, binary_dir: &Path, exists: impl Fn(&Path) -> bool) -> Stream {
        if self.stream_config() == StreamConfig::BuiltIn {
            return Stream::BuiltIn;
        }
        let candidates = self.module_candidates(binary_dir);
        if let Some(found) = candidates.iter().find(|c| exists(c)) {
            return Stream::Module(found.clone());
        }
        let looked = candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", ");
        Stream::Absent(match self.stream_config() {
            StreamConfig::Dynamic => {
                format!("built with --with-stream=dynamic, but {STREAM_MODULE_FILE} is in none of {looked}")
            }
            _ => format!("built without --with-stream, and no {STREAM_MODULE_FILE} in {looked}"),
        })
    }
}

/// Splits a configure-arguments line as the shell would: on blanks outside quotes, with single and double
/// quotes grouping (and removed) and a backslash escaping the next character outside single quotes.
fn shell_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    out.push(w);
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => word.get_or_insert_with(String::new).push(c),
            (_, '\\') => {
                if let Some(next) = chars.next() {
                    word.get_or_insert_with(String::new).push(next);
                }
            }
            (_, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    out
}

/// The directory-name suffix of musl builds (`.nginx/1.26.3-musl`) and of their image tags.
pub const MUSL_SUFFIX: &str = "-musl";

/// Which C library an nginx binary is linked with: glibc if it carries glibc's symbol versions
/// (`GLIBC_2.…`, in every binary linked against glibc), musl if it names musl's dynamic loader
/// (`/lib/ld-musl-…`, Alpine's dynamically linked builds) or carries musl's `strerror` table (static
/// builds: its text for error 0 is "No error information"; glibc's is "Success"), `None` otherwise.
pub fn detect_libc(binary: &[u8]) -> Option<Libc> {
    let has = |needle: &[u8]| binary.windows(needle.len()).any(|w| w == needle);
    if has(b"GLIBC_2.") {
        Some(Libc::Glibc)
    } else if has(b"/ld-musl-") || has(b"No error information") {
        Some(Libc::Musl)
    } else {
        None
    }
}

impl Installation {
    /// What runs nginx: the tree's wrapper (through the tree's own loader and libraries, for glibc builds),
    /// or the binary named.
    pub fn binary(&self) -> PathBuf {
        match &self.origin {
            Origin::Provisioned { dir, .. } => dir.join("nginx"),
            Origin::Named { path, .. } => path.clone(),
        }
    }

    /// The nginx executable itself (what [`Installation::binary`] runs).
    pub fn executable(&self) -> PathBuf {
        match &self.origin {
            Origin::Provisioned { dir, .. } => dir.join("root/usr/sbin/nginx"),
            Origin::Named { executable, .. } => executable.clone(),
        }
    }

    /// The dynamic stream module to load, or `None` when the build has it built in or has none.
    pub fn stream_module(&self) -> Option<PathBuf> {
        self.stream.module().map(Path::to_path_buf)
    }

    /// The provisioned tree, if the build is one.
    pub fn dir(&self) -> Option<&Path> {
        match &self.origin {
            Origin::Provisioned { dir, .. } => Some(dir),
            Origin::Named { .. } => None,
        }
    }

    /// The directories the build runs from (which a private mount namespace must leave visible): the tree
    /// of a provisioned build; for a named binary, the directories of the binary, its executable and its
    /// stream module.
    pub fn paths(&self) -> Vec<PathBuf> {
        match &self.origin {
            Origin::Provisioned { dir, .. } => vec![dir.clone()],
            Origin::Named { path, executable } => {
                let mut out: Vec<PathBuf> = [Some(path.as_path()), Some(executable.as_path()), self.stream.module()]
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.parent().map(Path::to_path_buf))
                    .collect();
                out.dedup();
                out
            }
        }
    }

    /// The Debian package version of a provisioned tree (or of the tree a named wrapper belongs to).
    pub fn package(&self) -> Option<String> {
        match &self.origin {
            Origin::Provisioned { package, .. } => Some(package.clone()),
            Origin::Named { path, .. } => {
                let tree = wrapper_tree(path)?;
                Some(std::fs::read_to_string(tree.join("version.txt")).ok()?.trim().to_string())
            }
        }
    }

    /// How reports and image tags name this build: the version, with [`MUSL_SUFFIX`] for a musl build
    /// (`1.26.3`, `1.26.3-musl`).
    pub fn label(&self) -> String {
        build_label(self.version, self.libc)
    }

    /// The local Docker image `scripts/build-images` makes from the same files.
    pub fn image(&self) -> (String, String) {
        ("nginx-ketama/nginx".to_string(), self.label())
    }

    /// One line for reports: which build and what `nginx -V` says, e.g. `/usr/sbin/nginx: nginx 1.26.3,
    /// glibc, stream module (dynamic)` (a provisioned build by its package: `Debian 1.26.3-3+deb13u11: …`).
    pub fn summary(&self) -> String {
        let place = match &self.origin {
            Origin::Provisioned { package, .. } => format!("Debian {package}"),
            Origin::Named { path, .. } => path.display().to_string(),
        };
        build_summary(&place, self.version, self.libc, &self.stream)
    }

    /// The C library as the golden vectors name it, with its version: `glibc 2.36 (Debian 2.36-9+deb12u14)`
    /// from the tree's `packages.txt`, `musl 1.2.3 (Debian 1.2.3-1, static)` from its `libc.txt`; for a
    /// named binary outside a provisioned tree, the C library's own banner when it prints one.
    pub fn libc_description(&self) -> String {
        let tree = match &self.origin {
            Origin::Provisioned { dir, .. } => Some(dir.clone()),
            Origin::Named { path, .. } => wrapper_tree(path),
        };
        match tree {
            Some(dir) => tree_libc_description(&dir, self.libc),
            None => system_libc_description(self.libc),
        }
    }

    /// Every provisioned installation under `root`, oldest first (glibc before musl for one version). A tree
    /// whose `nginx-V.txt` does not name the version of its directory, whose binary is neither glibc's nor
    /// musl's, or whose name does not match its C library, is skipped.
    pub fn discover(root: &Path) -> Vec<Installation> {
        // Absolute: a relative `--nginx-dir` would name nothing once nginx runs in its own directory.
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let Ok(entries) = std::fs::read_dir(&root) else { return Vec::new() };
        let mut out: Vec<Installation> = entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_type().map(|t| t.is_symlink()).unwrap_or(true))
            .filter_map(|e| Installation::provisioned(&e.path()))
            .collect();
        out.sort_by_key(|i| (i.version, i.libc));
        out
    }

    /// The provisioned tree `dir`, if it is one (see [`Installation::discover`]).
    fn provisioned(dir: &Path) -> Option<Installation> {
        let name = dir.file_name()?.to_str()?.to_string();
        let (version, musl_name): (NginxVersion, bool) = match name.strip_suffix(MUSL_SUFFIX) {
            Some(v) => (v.parse().ok()?, true),
            None => (name.parse().ok()?, false),
        };
        let package = std::fs::read_to_string(dir.join("version.txt")).ok()?.trim().to_string();
        if !dir.join("nginx").is_file() {
            return None;
        }
        let info = BuildInfo::parse(&std::fs::read_to_string(dir.join("nginx-V.txt")).ok()?).ok()?;
        let libc = detect_libc(&std::fs::read(dir.join("root/usr/sbin/nginx")).ok()?)?;
        if info.version != version || musl_name != (libc == Libc::Musl) {
            return None;
        }
        let stream = info.locate_stream(dir, Path::is_file);
        Some(Installation {
            version,
            libc,
            stream,
            configure: info.configure,
            origin: Origin::Provisioned { dir: dir.to_path_buf(), package },
        })
    }

    /// The build at `path` (`verify --nginx PATH`): runs `PATH -V`, detects the C library from the
    /// executable (for the wrapper script of a provisioned tree, from the tree's executable) and locates
    /// the stream module next to the binary or in the configured modules path.
    ///
    /// # Errors
    ///
    /// `PATH` cannot be run, `nginx -V` does not name an nginx release, or the C library cannot be told.
    pub fn named(path: &Path) -> Result<Installation> {
        let out = std::process::Command::new(path)
            .arg("-V")
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("running {} -V", path.display()))?;
        // nginx prints -V on stderr; accept stdout too.
        let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            bail!("{} -V failed ({}): {}", path.display(), out.status, text.trim());
        }
        let info = BuildInfo::parse(&text).with_context(|| format!("reading {} -V", path.display()))?;
        let executable = match wrapper_tree(path) {
            Some(tree) => tree.join("root/usr/sbin/nginx"),
            None => path.to_path_buf(),
        };
        let bytes = std::fs::read(&executable).with_context(|| format!("reading {}", executable.display()))?;
        let Some(libc) = detect_libc(&bytes) else {
            bail!(
                "cannot tell which C library {} is linked with (neither glibc's symbol versions nor musl's loader \
                 or strerror table are in it); name the executable itself, not a wrapper script",
                executable.display()
            );
        };
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let binary_dir = real.parent().unwrap_or(Path::new("/"));
        let stream = info.locate_stream(binary_dir, Path::is_file);
        Ok(Installation {
            version: info.version,
            libc,
            stream,
            configure: info.configure,
            origin: Origin::Named { path: path.to_path_buf(), executable },
        })
    }

    /// Where `scripts/provision-nginx` puts its trees: `$NGINX_KETAMA_NGINX_DIR`, else `.nginx/` in this
    /// repository.
    pub fn default_root() -> PathBuf {
        std::env::var_os("NGINX_KETAMA_NGINX_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::repo_root().join(".nginx"))
    }
}

/// The provisioned tree whose wrapper script `path` is: a file starting with `#!` whose directory holds
/// `root/usr/sbin/nginx` and `version.txt`.
fn wrapper_tree(path: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(path).ok()?;
    let head = std::fs::read(&real).ok()?;
    let dir = real.parent()?;
    (head.starts_with(b"#!") && dir.join("root/usr/sbin/nginx").is_file() && dir.join("version.txt").is_file())
        .then(|| dir.to_path_buf())
}

/// See [`Installation::libc_description`]: from a provisioned tree's `packages.txt` or `libc.txt`.
fn tree_libc_description(dir: &Path, libc: Libc) -> String {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    match libc {
        Libc::Glibc => match read("packages.txt").lines().find_map(|l| l.strip_prefix("libc6=")) {
            Some(v) => format!("glibc {} (Debian {v})", v.split('-').next().unwrap_or(v)),
            None => "glibc (version unknown)".to_string(),
        },
        Libc::Musl => match read("libc.txt").trim().strip_prefix("musl ") {
            Some(v) => format!("musl {} (Debian {v}, static)", v.split('-').next().unwrap_or(v)),
            None => "musl (version unknown)".to_string(),
        },
    }
}

/// The C library of this machine as a named binary runs with it, from glibc's banner (running `libc.so.6`
/// prints `GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.`).
fn system_libc_description(libc: Libc) -> String {
    if libc == Libc::Glibc {
        for so in ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6"] {
            if let Ok(out) = std::process::Command::new(so).output()
                && let Some(d) = glibc_banner(&String::from_utf8_lossy(&out.stdout))
            {
                return d;
            }
        }
    }
    format!("{libc} (version unknown)")
}

/// `glibc 2.36 (Debian 2.36-9+deb12u14)` from glibc's banner; `glibc 2.39` without a distribution's note.
pub fn glibc_banner(text: &str) -> Option<String> {
    let first = text.lines().next()?;
    let version = first.split("release version ").nth(1)?.trim_end_matches('.').trim().to_string();
    let distro = first.split('(').nth(1).and_then(|s| s.split(')').next()).and_then(|s| {
        let (vendor, v) = s.split_once(" GLIBC ")?;
        Some(format!("{vendor} {v}"))
    });
    Some(match distro {
        Some(d) => format!("glibc {version} ({d})"),
        None => format!("glibc {version}"),
    })
}

/// The label of the build of `version` against `libc` (see [`Installation::label`]).
pub fn build_label(version: NginxVersion, libc: Libc) -> String {
    match libc {
        Libc::Glibc => version.to_string(),
        Libc::Musl => format!("{version}{MUSL_SUFFIX}"),
    }
}

/// `WHERE: nginx 1.26.3, glibc, stream module (dynamic)`.
pub fn build_summary(place: &str, version: NginxVersion, libc: Libc, stream: &Stream) -> String {
    format!("{place}: nginx {version}, {libc}, {stream}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_is_told_by_the_binary() {
        assert_eq!(detect_libc(b"\x7fELF...memcpy@GLIBC_2.14..."), Some(Libc::Glibc));
        assert_eq!(detect_libc(b"\x7fELF...No error information\0Illegal byte sequence"), Some(Libc::Musl));
        assert_eq!(detect_libc(b"\x7fELF.../lib/ld-musl-x86_64.so.1\0libssl.so.3"), Some(Libc::Musl));
        assert_eq!(detect_libc(b"\x7fELF... statically linked, something else"), None);
        assert_eq!(build_label(NginxVersion::new(1, 26, 3), Libc::Musl), "1.26.3-musl");
        assert_eq!(build_label(NginxVersion::new(1, 26, 3), Libc::Glibc), "1.26.3");
    }

    const DEBIAN_1_18_0: &str = include_str!("../../testdata/nginx-V/1.18.0-debian.txt");
    const DEBIAN_1_22_1: &str = include_str!("../../testdata/nginx-V/1.22.1-debian.txt");
    const DEBIAN_1_30_6: &str = include_str!("../../testdata/nginx-V/1.30.6-debian.txt");
    const MUSL_1_26_3: &str = include_str!("../../testdata/nginx-V/1.26.3-musl-static.txt");

    /// Debian's build (recorded from `.nginx/1.22.1/nginx -V`): the stream module is a loadable module,
    /// and the quoted `--with-cc-opt` stays one argument.
    #[test]
    fn debian_nginx_v_is_read() {
        let info = BuildInfo::parse(DEBIAN_1_22_1).unwrap();
        assert_eq!(info.version, NginxVersion::new(1, 22, 1));
        assert_eq!(info.stream_config(), StreamConfig::Dynamic);
        assert_eq!(info.option("--modules-path"), Some("/usr/lib/nginx/modules"));
        assert_eq!(info.option("--prefix"), Some("/usr/share/nginx"));
        assert!(info.configure[0].starts_with("--with-cc-opt=-g -O2 -ffile-prefix-map="), "{:?}", info.configure[0]);
        assert!(info.configure[0].ends_with("-D_FORTIFY_SOURCE=2"), "{:?}", info.configure[0]);
        assert_eq!(info.configure[1], "--with-ld-opt=-Wl,-z,relro -Wl,-z,now -fPIC");
        assert!(info.configure.contains(&"--with-stream_ssl_module".to_string()));
        assert_eq!(info.configure.last().map(String::as_str), Some("--with-stream_geoip_module=dynamic"));
        let newer = BuildInfo::parse(DEBIAN_1_30_6).unwrap();
        assert_eq!((newer.version, newer.stream_config()), (NginxVersion::new(1, 30, 6), StreamConfig::Dynamic));
    }

    /// Debian 11's nginx 1.18.0 (recorded from `.nginx/1.18.0/nginx -V`): no `--with-stream` at all, yet
    /// its stream module is a package of its own (`libnginx-mod-stream`) that loads: found where it is.
    #[test]
    fn a_stream_module_built_apart_is_found() {
        let info = BuildInfo::parse(DEBIAN_1_18_0).unwrap();
        assert_eq!((info.version, info.stream_config()), (NginxVersion::new(1, 18, 0), StreamConfig::Absent));
        assert!(info.configure.contains(&"--with-compat".to_string()));
        let module = Path::new("/t/modules/ngx_stream_module.so");
        assert_eq!(info.locate_stream(Path::new("/t"), |p| p == module), Stream::Module(module.into()));
        let none = info.locate_stream(Path::new("/t"), |_| false);
        assert!(
            matches!(&none, Stream::Absent(why) if why.starts_with("built without --with-stream, and no")),
            "{none:?}"
        );
    }

    /// The static musl build of `scripts/provision-nginx-musl` (recorded from its `nginx -V`): stream built
    /// in, no modules path.
    #[test]
    fn musl_static_nginx_v_is_read() {
        let info = BuildInfo::parse(MUSL_1_26_3).unwrap();
        assert_eq!(info.version, NginxVersion::new(1, 26, 3));
        assert_eq!(info.stream_config(), StreamConfig::BuiltIn);
        assert_eq!(info.locate_stream(Path::new("/nowhere"), |_| false), Stream::BuiltIn);
    }

    #[test]
    fn the_stream_module_is_looked_for_next_to_the_binary_then_in_the_modules_path() {
        let info = BuildInfo::parse(DEBIAN_1_22_1).unwrap();
        let candidates = info.module_candidates(Path::new("/opt/n/sbin"));
        let shown: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
        assert_eq!(
            shown,
            [
                "/opt/n/sbin/modules/ngx_stream_module.so",
                "/opt/n/sbin/../lib/nginx/modules/ngx_stream_module.so",
                "/usr/lib/nginx/modules/ngx_stream_module.so"
            ]
        );
        let found = info.locate_stream(Path::new("/opt/n/sbin"), |p| p.starts_with("/usr/lib"));
        assert_eq!(found, Stream::Module("/usr/lib/nginx/modules/ngx_stream_module.so".into()));
        let missing = info.locate_stream(Path::new("/opt/n/sbin"), |_| false);
        assert!(matches!(&missing, Stream::Absent(why) if why.contains("--with-stream=dynamic")), "{missing:?}");
        // A relative modules path is relative to the prefix; without one, nginx's default.
        let rel = BuildInfo::parse(
            "nginx version: nginx/1.26.3\nconfigure arguments: --prefix=/srv/ngx \
                                    --modules-path=mods --with-stream=dynamic\n",
        )
        .unwrap();
        assert_eq!(rel.module_candidates(Path::new("/b"))[2], Path::new("/srv/ngx/mods/ngx_stream_module.so"));
        let bare =
            BuildInfo::parse("nginx version: nginx/1.26.3\nconfigure arguments: --with-stream=dynamic\n").unwrap();
        assert_eq!(
            bare.module_candidates(Path::new("/b"))[2],
            Path::new("/usr/local/nginx/modules/ngx_stream_module.so")
        );
    }

    #[test]
    fn builds_without_stream_or_other_products_are_told_apart() {
        let plain = BuildInfo::parse("nginx version: nginx/1.18.0 (Ubuntu)\nbuilt with OpenSSL 1.1.1f\n").unwrap();
        assert_eq!(plain.version, NginxVersion::new(1, 18, 0));
        assert!(plain.configure.is_empty());
        assert_eq!(plain.stream_config(), StreamConfig::Absent);
        assert!(!plain.locate_stream(Path::new("/"), |_| false).available());
        assert_eq!(
            BuildInfo::parse("nginx version: openresty/1.21.4.1\n").unwrap_err(),
            BuildInfoError::NotNginx("openresty/1.21.4.1".into())
        );
        assert!(matches!(BuildInfo::parse("nginx: invalid option: \"V\"\n"), Err(BuildInfoError::NoVersionLine(_))));
        assert!(matches!(BuildInfo::parse(""), Err(BuildInfoError::NoVersionLine(_))));
    }

    #[test]
    fn configure_arguments_split_like_the_shell() {
        assert_eq!(shell_words(r#" a 'b c'  "d e"f g\ h "#), ["a", "b c", "d ef", "g h"]);
        assert_eq!(shell_words("--x='' y"), ["--x=", "y"]);
    }

    #[test]
    fn glibc_banners_are_read() {
        assert_eq!(
            glibc_banner("GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\nCopyright"),
            Some("glibc 2.36 (Debian 2.36-9+deb12u14)".into())
        );
        assert_eq!(glibc_banner("GNU C Library (GNU libc) stable release version 2.39.\n"), Some("glibc 2.39".into()));
        assert_eq!(glibc_banner("musl libc (x86_64)\n"), None);
    }

    /// Where builds are provisioned, each one's binary says the C library its directory name says, and its
    /// stream module is found.
    #[test]
    fn provisioned_builds_name_their_libc() {
        for install in Installation::discover(&Installation::default_root()) {
            let text = install.libc_description();
            let dir = install.dir().expect("provisioned").display().to_string();
            assert!(text.starts_with(install.libc.as_str()), "{dir}: {text}");
            assert!(!text.contains("unknown"), "{dir}: {text}");
            assert!(install.stream.available(), "{dir}: {:?}", install.stream);
        }
    }
}
