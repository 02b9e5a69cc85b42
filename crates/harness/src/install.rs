//! nginx builds provisioned by `scripts/provision-nginx` (Debian packages unpacked under `.nginx/<version>/`)
//! and `scripts/provision-nginx-musl` (Debian's nginx source built statically against musl, under
//! `.nginx/<version>-musl/`).

use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use std::path::{Path, PathBuf};

/// One provisioned nginx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// Upstream version, e.g. 1.26.3.
    pub version: NginxVersion,
    /// Debian package version, e.g. `1.26.3-3+deb13u11` (for a musl build: of the source package).
    pub package: String,
    /// The C library the binary is linked with, detected from the binary itself ([`detect_libc`]).
    pub libc: Libc,
    /// The tree (`.nginx/<version>` or `.nginx/<version>-musl`).
    pub dir: PathBuf,
}

/// The directory-name suffix of musl builds (`.nginx/1.26.3-musl`) and of their image tags.
pub const MUSL_SUFFIX: &str = "-musl";

/// Which C library an nginx binary is linked with: glibc if it carries glibc's symbol versions
/// (`GLIBC_2.…`, in every binary linked against glibc), musl if it carries musl's `strerror` table instead
/// (its text for error 0 is "No error information"; glibc's is "Success"), `None` otherwise.
pub fn detect_libc(binary: &[u8]) -> Option<Libc> {
    let has = |needle: &[u8]| binary.windows(needle.len()).any(|w| w == needle);
    if has(b"GLIBC_2.") {
        Some(Libc::Glibc)
    } else if has(b"No error information") {
        Some(Libc::Musl)
    } else {
        None
    }
}

impl Installation {
    /// The wrapper that runs nginx (through the tree's own loader and libraries, for glibc builds).
    pub fn binary(&self) -> PathBuf {
        self.dir.join("nginx")
    }

    /// The nginx executable itself (what [`Installation::binary`] runs).
    pub fn executable(&self) -> PathBuf {
        self.dir.join("root/usr/sbin/nginx")
    }

    /// The dynamic stream module, or `None` when the build has the stream module built in (the musl build).
    pub fn stream_module(&self) -> Option<PathBuf> {
        let module = self.dir.join("root/usr/lib/nginx/modules/ngx_stream_module.so");
        module.is_file().then_some(module)
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

    /// The C library as the golden vectors name it, with its version: `glibc 2.36 (Debian 2.36-9+deb12u14)`
    /// from the tree's `packages.txt`, `musl 1.2.3 (Debian 1.2.3-1, static)` from its `libc.txt`.
    pub fn libc_description(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        match self.libc {
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

    /// Every installation under `root`, oldest first (glibc before musl for one version). A tree whose
    /// binary is neither glibc's nor musl's, or whose name does not match its C library, is skipped.
    pub fn discover(root: &Path) -> Vec<Installation> {
        let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
        let mut out: Vec<Installation> = entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_type().map(|t| t.is_symlink()).unwrap_or(true))
            .filter_map(|e| {
                let dir = e.path();
                let name = dir.file_name()?.to_str()?.to_string();
                let (version, musl_name) = match name.strip_suffix(MUSL_SUFFIX) {
                    Some(v) => (v.parse().ok()?, true),
                    None => (name.parse().ok()?, false),
                };
                let package = std::fs::read_to_string(dir.join("version.txt")).ok()?.trim().to_string();
                if !dir.join("nginx").is_file() {
                    return None;
                }
                let libc = detect_libc(&std::fs::read(dir.join("root/usr/sbin/nginx")).ok()?)?;
                (musl_name == (libc == Libc::Musl)).then_some(Installation { version, package, libc, dir })
            })
            .collect();
        out.sort_by_key(|i| (i.version, i.libc));
        out
    }

    /// Where `scripts/provision-nginx` puts its trees: `$NGINX_KETAMA_NGINX_DIR`, else `.nginx/` in this
    /// repository.
    pub fn default_root() -> PathBuf {
        std::env::var_os("NGINX_KETAMA_NGINX_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::repo_root().join(".nginx"))
    }
}

/// The label of the build of `version` against `libc` (see [`Installation::label`]).
pub fn build_label(version: NginxVersion, libc: Libc) -> String {
    match libc {
        Libc::Glibc => version.to_string(),
        Libc::Musl => format!("{version}{MUSL_SUFFIX}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_is_told_by_the_binary() {
        assert_eq!(detect_libc(b"\x7fELF...memcpy@GLIBC_2.14..."), Some(Libc::Glibc));
        assert_eq!(detect_libc(b"\x7fELF...No error information\0Illegal byte sequence"), Some(Libc::Musl));
        assert_eq!(detect_libc(b"\x7fELF... statically linked, something else"), None);
        assert_eq!(build_label(NginxVersion::new(1, 26, 3), Libc::Musl), "1.26.3-musl");
        assert_eq!(build_label(NginxVersion::new(1, 26, 3), Libc::Glibc), "1.26.3");
    }

    /// Where builds are provisioned, each one's binary says the C library its directory name says.
    #[test]
    fn provisioned_builds_name_their_libc() {
        for install in Installation::discover(&Installation::default_root()) {
            let text = install.libc_description();
            assert!(text.starts_with(install.libc.as_str()), "{}: {text}", install.dir.display());
            assert!(!text.contains("unknown"), "{}: {text}", install.dir.display());
        }
    }
}
