//! Where nginx runs: a local process or a Docker container, behind one interface.

use super::install::Origin;
use super::install::{BuildInfo, Installation, Stream, build_label, build_summary, detect_libc, glibc_banner};
use super::local::{LocalNginx, fresh_prefix};
use super::netns::Net;
use super::scratch::ScratchDir;
use super::site::{self, Environment, Site};
use super::topology::Capabilities;
use anyhow::{Context, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The environment variable that names the container image (e.g. `nginx:1.27` where a registry exists).
pub const IMAGE_ENV: &str = "NGINX_KETAMA_IMAGE";

/// A way to run nginx.
#[derive(Debug, Clone)]
pub enum Backend {
    /// A build run as a local process: a provisioned tree or a binary named by `--nginx PATH`.
    Local(Installation),
    /// A container image run through testcontainers.
    Docker(Image),
}

/// A container image of nginx, described by what its `nginx -V` says and its executable's C library
/// ([`Image::probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `name:tag`.
    pub reference: String,
    /// The nginx version inside (`nginx -V`).
    pub version: NginxVersion,
    /// The C library `/usr/sbin/nginx` is linked with (read from the executable).
    pub libc: Libc,
    /// Where the stream module is inside the image.
    pub stream: Stream,
    /// The C library as the golden vectors name it (`glibc 2.36 (Debian 2.36-9+deb12u14)`).
    pub libc_description: String,
    /// The Debian package version the image says it holds (label `nginx-ketama.debian-version`), if any.
    pub package: Option<String>,
    /// How the image was chosen.
    pub origin: ImageOrigin,
}

/// How an image was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageOrigin {
    /// `nginx-ketama/nginx:<version>[-musl]`, built by `scripts/build-images` for a provisioned version.
    Built,
    /// Named by `--image REF` or `$NGINX_KETAMA_IMAGE`.
    Named,
}

/// A running nginx.
pub trait Instance {
    /// The HTTP front server (reachable from this process).
    fn http_front(&self) -> SocketAddr;
    /// The stream front server, if this backend can serve one with client-chosen source ports.
    fn stream_front(&self) -> Option<SocketAddr>;
    /// Where the stream access log is (local processes only).
    fn stream_log(&self) -> Option<PathBuf>;
    /// nginx's error output so far.
    fn logs(&self) -> String;
    /// The directory holding the rendered `nginx.conf` (and `hosts`), for local processes.
    fn prefix(&self) -> Option<PathBuf>;
    /// Where connections to the front servers are opened.
    fn net(&self) -> Net<'_>;
    /// The local master process, if nginx runs as one.
    fn pid(&self) -> Option<u32>;
}

/// How many lines of nginx's error log a fault report shows.
pub const LOG_TAIL_LINES: usize = 20;

/// The last [`LOG_TAIL_LINES`] relevant lines of nginx's error output: its `[emerg]`, `[alert]`, `[crit]`,
/// `[error]` and `[warn]` lines (all lines when it printed none of those), never the whole log.
pub fn log_tail(logs: &str) -> String {
    const LEVELS: [&str; 5] = ["[emerg]", "[alert]", "[crit]", "[error]", "[warn]"];
    let lines: Vec<&str> = logs.lines().collect();
    let relevant: Vec<&str> = lines.iter().copied().filter(|l| LEVELS.iter().any(|lv| l.contains(lv))).collect();
    let chosen = if relevant.is_empty() { lines } else { relevant };
    let skipped = chosen.len().saturating_sub(LOG_TAIL_LINES);
    let mut out = String::new();
    if skipped > 0 {
        out.push_str(&format!("[... {skipped} earlier lines]\n"));
    }
    for line in &chosen[skipped..] {
        out.push_str(line);
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("(nginx printed nothing)\n");
    }
    out
}

impl Instance for LocalNginx {
    fn http_front(&self) -> SocketAddr {
        LocalNginx::http_front(self)
    }
    fn stream_front(&self) -> Option<SocketAddr> {
        Some(LocalNginx::stream_front(self))
    }
    fn stream_log(&self) -> Option<PathBuf> {
        Some(self.prefix().join("logs/stream.log"))
    }
    fn logs(&self) -> String {
        self.stderr()
    }
    fn prefix(&self) -> Option<PathBuf> {
        Some(LocalNginx::prefix(self).to_path_buf())
    }
    fn net(&self) -> Net<'_> {
        LocalNginx::net(self)
    }
    fn pid(&self) -> Option<u32> {
        Some(LocalNginx::pid(self))
    }
}

impl Backend {
    /// The nginx version this backend runs.
    pub fn version(&self) -> NginxVersion {
        match self {
            Backend::Local(i) => i.version,
            Backend::Docker(image) => image.version,
        }
    }

    /// The C library this backend's nginx was built with (its `qsort` decides ring collisions).
    pub fn libc(&self) -> Libc {
        match self {
            Backend::Local(i) => i.libc,
            Backend::Docker(image) => image.libc,
        }
    }

    /// The build's label: the version, with `-musl` for a musl build (`1.26.3-musl`).
    pub fn label(&self) -> String {
        build_label(self.version(), self.libc())
    }

    /// `local` or `docker`, as `verify --backend` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Local(_) => "local",
            Backend::Docker(_) => "docker",
        }
    }

    /// A short description for reports, e.g. `local 1.26.3 (Debian 1.26.3-3+deb13u11, glibc)`, `local
    /// /usr/sbin/nginx`, `docker nginx-ketama/nginx:1.26.3`.
    pub fn describe(&self) -> String {
        match self {
            Backend::Local(i) => match (&i.origin, i.package()) {
                (Origin::Provisioned { .. }, Some(package)) => {
                    format!("local {} (Debian {package}, {})", i.label(), i.libc)
                }
                _ => format!("local {}", i.binary().display()),
            },
            Backend::Docker(image) => format!("docker {}", image.reference),
        }
    }

    /// One line naming the build with what its `nginx -V` says: `/usr/sbin/nginx: nginx 1.26.3, glibc, stream
    /// module (dynamic)`, `nginx-ketama/nginx:1.26.3: …`.
    pub fn summary(&self) -> String {
        match self {
            Backend::Local(i) => i.summary(),
            Backend::Docker(image) => build_summary(&image.reference, image.version, image.libc, &image.stream),
        }
    }

    /// The stream module of the build.
    pub fn stream(&self) -> &Stream {
        match self {
            Backend::Local(i) => &i.stream,
            Backend::Docker(image) => &image.stream,
        }
    }

    /// The Debian package version of the build, when it is known (a provisioned tree, an image of
    /// `scripts/build-images`).
    pub fn package(&self) -> Option<String> {
        match self {
            Backend::Local(i) => i.package(),
            Backend::Docker(image) => image.package.clone(),
        }
    }

    /// The C library as the golden vectors name it, with its version.
    pub fn libc_description(&self) -> String {
        match self {
            Backend::Local(i) => i.libc_description(),
            Backend::Docker(image) => image.libc_description.clone(),
        }
    }

    /// What topologies this backend can host.
    pub fn capabilities(&self, unix_dir: &str) -> Capabilities {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        match self {
            // As root nginx gets a private network namespace with its own `lo`; otherwise it shares this
            // machine's loopback, where `[::1]` and port 80 are one address for everybody.
            Backend::Local(_) => {
                Capabilities { ipv6: root, port80: root, hostnames: root, unix_dir: Some(unix_dir.to_string()) }
            }
            // The container's `lo` has `::1` (see `docker::start`): the golden catalog's `[::1]` cases run
            // there; verify's random topologies keep to IPv4 in a container.
            Backend::Docker(_) => {
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
            Backend::Local(install) => Ok(Box::new(LocalNginx::start(install, site, prefix)?)),
            Backend::Docker(image) => {
                drop(prefix);
                Ok(Box::new(docker::start(image, site)?))
            }
        }
    }

    /// A prefix directory for the next instance (its `sock/` holds unix sockets), removed when dropped.
    pub fn prefix(&self) -> Result<ScratchDir> {
        fresh_prefix()
    }
}

/// Whether a Docker engine answers.
pub fn docker_available() -> bool {
    docker::available()
}

/// The image to use for the build of `version` against `libc`: `$NGINX_KETAMA_IMAGE` if set (`name:tag`;
/// its version and C library are read from the image), else the locally built
/// `nginx-ketama/nginx:<version>` (glibc) or `nginx-ketama/nginx:<version>-musl`, which must hold that
/// build.
///
/// # Errors
///
/// The image is not present locally (nothing is ever pulled), or does not hold the build asked for.
pub fn docker_backend(version: NginxVersion, libc: Libc) -> Result<Backend> {
    if let Ok(spec) = std::env::var(IMAGE_ENV) {
        return Ok(Backend::Docker(Image::probe(&spec, ImageOrigin::Named)?));
    }
    let reference = format!("nginx-ketama/nginx:{}", build_label(version, libc));
    if docker::labels(&reference).is_none() {
        bail!(
            "docker image {reference} is not present locally; build it with scripts/build-images {}",
            build_label(version, libc)
        );
    }
    let image = Image::probe(&reference, ImageOrigin::Built)?;
    if (image.version, image.libc) != (version, libc) {
        bail!(
            "docker image {reference} holds nginx {} built with {}, not {version} with {libc}; rebuild it with \
             scripts/build-images",
            image.version,
            image.libc
        );
    }
    Ok(Backend::Docker(image))
}

/// Where the images run nginx from (the harness starts `/usr/sbin/nginx` in them).
pub const IMAGE_NGINX: &str = "/usr/sbin/nginx";

impl Image {
    /// Reads the image `reference` (`verify --image REF`): `nginx -V` run inside it (no network), the C
    /// library from its `/usr/sbin/nginx`, the stream module looked for in the image's files as
    /// [`BuildInfo::locate_stream`] says. Never pulls.
    ///
    /// # Errors
    ///
    /// The image is not present locally ("docker pull REF first"), no Docker engine, or an image without an
    /// nginx release at `/usr/sbin/nginx`.
    pub fn probe(reference: &str, origin: ImageOrigin) -> Result<Image> {
        if !docker::available() {
            bail!("no Docker engine answers (docker version failed): cannot read image {reference}");
        }
        let Some(labels) = docker::labels(reference) else {
            bail!("image {reference} is not present locally (docker pull {reference} first)");
        };
        let text = docker::run(reference, IMAGE_NGINX, &["-V"])?;
        let info = BuildInfo::parse(&text).with_context(|| format!("reading nginx -V in image {reference}"))?;
        let files = docker::Files::of(reference)?;
        let executable =
            files.read(IMAGE_NGINX).with_context(|| format!("reading {IMAGE_NGINX} in image {reference}"))?;
        let Some(libc) = detect_libc(&executable) else {
            bail!("cannot tell which C library {IMAGE_NGINX} in image {reference} is linked with");
        };
        let bin_dir = Path::new(IMAGE_NGINX).parent().unwrap_or(Path::new("/"));
        let stream = info.locate_stream(bin_dir, |p| files.read(&p.display().to_string()).is_ok());
        let libc_description = match libc {
            Libc::Glibc => ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6"]
                .iter()
                .find_map(|so| docker::run(reference, so, &[]).ok().and_then(|t| glibc_banner(&t)))
                .unwrap_or_else(|| "glibc (version unknown)".to_string()),
            Libc::Musl => match labels.libc.trim().strip_prefix("musl ") {
                Some(v) => format!("musl {} (Debian {v}, static)", v.split('-').next().unwrap_or(v)),
                None => "musl (version unknown)".to_string(),
            },
        };
        let package = (!labels.package.is_empty()).then_some(labels.package);
        Ok(Image {
            reference: reference.to_string(),
            version: info.version,
            libc,
            stream,
            libc_description,
            package,
            origin,
        })
    }

    /// The image's name and tag, as testcontainers takes them.
    pub fn name_and_tag(&self) -> (&str, &str) {
        let slash = self.reference.rfind('/').map_or(0, |i| i + 1);
        match self.reference[slash..].rfind(':') {
            Some(i) => (&self.reference[..slash + i], &self.reference[slash + i + 1..]),
            None => (&self.reference, "latest"),
        }
    }
}

mod docker {
    use super::*;
    use crate::netns::EPHEMERAL_PORTS;
    use crate::topology::Listen;
    use std::collections::HashMap;
    use testcontainers::bollard::models::PortBinding;
    use testcontainers::core::{IntoContainerPort, WaitFor};
    use testcontainers::runners::SyncRunner;
    use testcontainers::{Container, GenericImage, ImageExt};

    /// A running container; removed when dropped.
    pub(super) struct DockerNginx {
        container: Container<GenericImage>,
        front: SocketAddr,
    }

    impl std::fmt::Debug for DockerNginx {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("DockerNginx").field("id", &self.container.id()).field("front", &self.front).finish()
        }
    }

    impl Instance for DockerNginx {
        fn http_front(&self) -> SocketAddr {
            self.front
        }
        fn stream_front(&self) -> Option<SocketAddr> {
            None
        }
        fn stream_log(&self) -> Option<PathBuf> {
            None
        }
        fn logs(&self) -> String {
            String::from_utf8_lossy(&self.container.stderr_to_vec().unwrap_or_default()).into_owned()
        }
        fn prefix(&self) -> Option<PathBuf> {
            None
        }
        fn net(&self) -> Net<'_> {
            Net::Own
        }
        fn pid(&self) -> Option<u32> {
            None
        }
    }

    fn docker(args: &[&str]) -> Option<std::process::Output> {
        std::process::Command::new("docker").args(args).stdin(std::process::Stdio::null()).output().ok()
    }

    pub(super) fn available() -> bool {
        docker(&["version", "--format", "{{.Server.Version}}"]).is_some_and(|o| o.status.success())
    }

    /// The labels `scripts/build-images` sets that the harness reads (empty when absent).
    pub(super) struct Labels {
        pub(super) libc: String,
        pub(super) package: String,
    }

    /// The image's labels, or `None` if the image is not present locally.
    pub(super) fn labels(reference: &str) -> Option<Labels> {
        let format =
            r#"{{index .Config.Labels "nginx-ketama.libc"}}|{{index .Config.Labels "nginx-ketama.debian-version"}}"#;
        let out = docker(&["image", "inspect", "-f", format, reference])?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).trim().replace("<no value>", "");
        let (libc, package) = text.split_once('|').unwrap_or((&text, ""));
        Some(Labels { libc: libc.to_string(), package: package.to_string() })
    }

    /// Runs `program args` in a throw-away container of the (local) image, without a network, and returns
    /// what it printed (stderr, then stdout).
    pub(super) fn run(reference: &str, program: &str, args: &[&str]) -> Result<String> {
        let mut argv = vec!["run", "--rm", "--pull=never", "--network", "none", "--entrypoint", program, reference];
        argv.extend_from_slice(args);
        let out = docker(&argv).context("running the docker CLI")?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            bail!("{program} in image {reference} failed ({}): {}", out.status, text.trim());
        }
        Ok(text)
    }

    /// A created (never started) container of an image, to read its files; removed when dropped.
    pub(super) struct Files {
        id: String,
    }

    impl Files {
        pub(super) fn of(reference: &str) -> Result<Files> {
            let out = docker(&["create", "--pull=never", "--network", "none", reference])
                .context("running the docker CLI")?;
            if !out.status.success() {
                bail!("creating a container of {reference}: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            Ok(Files { id: String::from_utf8_lossy(&out.stdout).trim().to_string() })
        }

        /// The file at `path` (symbolic links followed), as a tar stream: the file's bytes are in it
        /// unchanged, which is all [`detect_libc`] needs.
        pub(super) fn read(&self, path: &str) -> Result<Vec<u8>> {
            let out = docker(&["cp", "-L", &format!("{}:{path}", self.id), "-"]).context("running the docker CLI")?;
            if !out.status.success() {
                bail!("{path}: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            Ok(out.stdout)
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = docker(&["rm", "-f", &self.id]);
        }
    }

    /// The sysctls that turn IPv6 back on in a container (set to `0`), so that `[::1]` listens on its `lo`.
    const IPV6_SYSCTLS: [&str; 3] =
        ["net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6", "net.ipv6.conf.lo.disable_ipv6"];

    /// The directories of the site's unix listeners, each once.
    fn unix_dirs(site: &Site) -> Vec<String> {
        let mut dirs: Vec<String> = Vec::new();
        for part in [&site.http, &site.stream].into_iter().flatten() {
            for listen in &part.listeners {
                if let Listen::Unix(path) = listen
                    && let Some(dir) = Path::new(path).parent()
                {
                    let dir = dir.display().to_string();
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                }
            }
        }
        dirs
    }

    pub(super) fn start(image: &Image, site: &Site) -> Result<DockerNginx> {
        let env = Environment {
            prefix: "/tmp".into(),
            http_front: site::FRONT_HTTP_PORT.to_string(),
            stream_front: site::FRONT_STREAM_PORT.to_string(),
            stream_module: image.stream.module().map(|m| m.display().to_string()),
            user_root: true,
        };
        let conf = site::render(site, &env);
        crate::cleanup::starting_container();
        let (name, tag) = image.name_and_tag();
        let mut request = GenericImage::new(name, tag)
            .with_exposed_port(site::FRONT_HTTP_PORT.tcp())
            .with_wait_for(WaitFor::message_on_stderr("start worker process"))
            // No `-e stderr` (nginx 1.19.5+ only): the start-up log goes to the image's /var/log/nginx (errors
            // are echoed to stderr), then the rendered config's `error_log stderr notice;` applies.
            .with_cmd([IMAGE_NGINX, "-c", "/etc/nginx/nginx.conf"])
            .with_copy_to("/etc/nginx/nginx.conf", conf.into_bytes())
            .with_label(crate::cleanup::OWNER_LABEL, std::process::id().to_string())
            .with_startup_timeout(std::time::Duration::from_secs(30));
        // The directory of every unix listener, at the very path the site names (the golden catalog's
        // server strings are hashed as written): copying a placeholder file into it creates it.
        for dir in unix_dirs(site) {
            request = request.with_copy_to(format!("{dir}/.nginx-ketama"), Vec::new());
        }
        // Not `with_host`: it keeps one address per name, sorted by name. Docker writes ExtraHosts to the
        // container's /etc/hosts in the order given, which is the order nginx's resolver sees.
        let mut extra = Vec::new();
        for line in site.hosts.as_deref().unwrap_or("").lines().skip(1) {
            let (ip, name) = line.split_once(' ').context("hosts line")?;
            extra.push(format!("{name}:{ip}"));
        }
        // Publish the front port on loopback only (testcontainers' default publishes on every interface).
        let request = request.with_host_config_modifier(move |hc| {
            hc.extra_hosts = Some(extra.clone());
            hc.publish_all_ports = Some(false);
            let binding = PortBinding { host_ip: Some("127.0.0.1".into()), host_port: Some(String::new()) };
            hc.port_bindings = Some(HashMap::from([(format!("{}/tcp", site::FRONT_HTTP_PORT), Some(vec![binding]))]));
            // The container's own namespace: fix its ephemeral range so that no topology port is in it
            // (a dead server's port must never become nginx's source port; see `super::netns`).
            let range = format!("{} {}", EPHEMERAL_PORTS.start(), EPHEMERAL_PORTS.end());
            let mut sysctls = HashMap::from([("net.ipv4.ip_local_port_range".to_string(), range)]);
            // Docker disables IPv6 in a container; the container's own `lo` gets `::1` back.
            for conf in IPV6_SYSCTLS {
                sysctls.insert(conf.to_string(), "0".to_string());
            }
            hc.sysctls = Some(sysctls);
        });
        let container = request.start().with_context(|| format!("starting container {}", image.reference))?;
        let port = container.get_host_port_ipv4(site::FRONT_HTTP_PORT.tcp())?;
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        Ok(DockerNginx { container, front })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_split_into_name_and_tag() {
        let image = |reference: &str| Image {
            reference: reference.to_string(),
            version: NginxVersion::new(1, 26, 3),
            libc: Libc::Glibc,
            stream: Stream::BuiltIn,
            libc_description: String::new(),
            package: None,
            origin: ImageOrigin::Named,
        };
        assert_eq!(image("nginx-ketama/nginx:1.26.3").name_and_tag(), ("nginx-ketama/nginx", "1.26.3"));
        assert_eq!(image("localhost:5000/nginx:1.27").name_and_tag(), ("localhost:5000/nginx", "1.27"));
        assert_eq!(image("localhost:5000/nginx").name_and_tag(), ("localhost:5000/nginx", "latest"));
        assert_eq!(image("nginx").name_and_tag(), ("nginx", "latest"));
    }

    #[test]
    fn log_tail_keeps_the_last_relevant_lines() {
        let mut log = String::from("2026/12/01 [notice] 1#1: start worker process 2\n");
        for i in 1..=25 {
            log.push_str(&format!("2026/12/01 [error] 2#2: *{i} connect() failed\n"));
            log.push_str("2026/12/01 [info] 2#2: client closed keepalive connection\n");
        }
        let tail = log_tail(&log);
        let lines: Vec<&str> = tail.lines().collect();
        assert_eq!(lines.len(), LOG_TAIL_LINES + 1);
        assert_eq!(lines[0], "[... 5 earlier lines]");
        assert!(lines[1].contains("*6 connect()") && lines[20].contains("*25 connect()"));
        assert!(lines[1..].iter().all(|l| l.contains("[error]")));
        assert_eq!(log_tail("a\nb\n"), "a\nb\n", "without levelled lines, the last lines as they are");
        assert_eq!(log_tail(""), "(nginx printed nothing)\n");
    }
}
