//! An nginx build to run: a local process or a Docker image, behind one interface ([`Instance`]).

use super::docker::Image;
use super::install::{Installation, Origin, Stream, build_label, build_summary};
use super::instance::Instance;
use super::local::{LocalNginx, fresh_prefix};
use super::scratch::ScratchDir;
use crate::site::conf::Site;
use crate::site::topology::Capabilities;
use anyhow::Result;
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;

/// A way to run nginx.
#[derive(Debug, Clone)]
pub enum Build {
    /// A build run as a local process: a provisioned tree or a binary named by `--nginx PATH`.
    Local(Installation),
    /// A container image run through testcontainers.
    Docker(Image),
}
impl Build {
    /// The nginx version this backend runs.
    pub fn version(&self) -> NginxVersion {
        match self {
            Build::Local(i) => i.version,
            Build::Docker(image) => image.version,
        }
    }

    /// The C library this backend's nginx was built with (its `qsort` decides ring collisions).
    pub fn libc(&self) -> Libc {
        match self {
            Build::Local(i) => i.libc,
            Build::Docker(image) => image.libc,
        }
    }

    /// The build's label: the version, with `-musl` for a musl build (`1.26.3-musl`).
    pub fn label(&self) -> String {
        build_label(self.version(), self.libc())
    }

    /// `local` or `docker`, as `verify --backend` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Build::Local(_) => "local",
            Build::Docker(_) => "docker",
        }
    }

    /// A short description for reports, e.g. `local 1.26.3 (Debian 1.26.3-3+deb13u11, glibc)`, `local
    /// /usr/sbin/nginx`, `docker nginx-ketama/nginx:1.26.3`.
    pub fn describe(&self) -> String {
        match self {
            Build::Local(i) => match (&i.origin, i.package()) {
                (Origin::Provisioned { .. }, Some(package)) => {
                    format!("local {} (Debian {package}, {})", i.label(), i.libc)
                }
                _ => format!("local {}", i.binary().display()),
            },
            Build::Docker(image) => format!("docker {}", image.reference),
        }
    }

    /// One line naming the build with what its `nginx -V` says: `/usr/sbin/nginx: nginx 1.26.3, glibc, stream
    /// module (dynamic)`, `nginx-ketama/nginx:1.26.3: …`.
    pub fn summary(&self) -> String {
        match self {
            Build::Local(i) => i.summary(),
            Build::Docker(image) => build_summary(&image.reference, image.version, image.libc, &image.stream),
        }
    }

    /// The stream module of the build.
    pub fn stream(&self) -> &Stream {
        match self {
            Build::Local(i) => &i.stream,
            Build::Docker(image) => &image.stream,
        }
    }

    /// The Debian package version of the build, when it is known (a provisioned tree, an image of
    /// `scripts/build-images`).
    pub fn package(&self) -> Option<String> {
        match self {
            Build::Local(i) => i.package(),
            Build::Docker(image) => image.package.clone(),
        }
    }

    /// The C library as the golden vectors name it, with its version.
    pub fn libc_description(&self) -> String {
        match self {
            Build::Local(i) => i.libc_description(),
            Build::Docker(image) => image.libc_description.clone(),
        }
    }

    /// What topologies this backend can host.
    pub fn capabilities(&self, unix_dir: &str) -> Capabilities {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match self {
            // As root nginx gets a private network namespace with its own `lo`; otherwise it shares this
            // machine's loopback, where `[::1]` and port 80 are one address for everybody.
            Build::Local(_) => {
                Capabilities { ipv6: root, port80: root, hostnames: root, unix_dir: Some(unix_dir.to_string()) }
            }
            // The container's `lo` has `::1` (see `docker::start`): the golden catalog's `[::1]` cases run
            // there; verify's random topologies keep to IPv4 in a container.
            Build::Docker(_) => {
                Capabilities { ipv6: false, port80: true, hostnames: true, unix_dir: Some("/tmp".into()) }
            }
        }
    }

    /// Starts nginx serving `site`.
    ///
    /// # Errors
    ///
    /// nginx failing to start, with its own error output; a missing image or Docker engine.
    pub fn start(&self, site: &Site, prefix: ScratchDir) -> Result<Box<dyn Instance>> {
        match self {
            Build::Local(install) => Ok(Box::new(LocalNginx::start(install, site, prefix)?)),
            #[cfg(feature = "docker")]
            Build::Docker(image) => {
                drop(prefix);
                Ok(Box::new(super::docker::container::start(image, site)?))
            }
            #[cfg(not(feature = "docker"))]
            Build::Docker(image) => {
                drop((prefix, site));
                anyhow::bail!(
                    "cannot start image {}: the harness was built without its `docker` feature",
                    image.reference
                )
            }
        }
    }

    /// A prefix directory for the next instance (its `sock/` holds unix sockets), removed when dropped.
    pub fn prefix(&self) -> Result<ScratchDir> {
        fresh_prefix()
    }
}
