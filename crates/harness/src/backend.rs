//! Where nginx runs: a local process or a Docker container, behind one interface.

use super::install::{Installation, build_label};
use super::local::{LocalNginx, fresh_prefix};
use super::netns::Net;
use super::site::{self, Environment, Site};
use super::topology::Capabilities;
use anyhow::{Context, Result, bail};
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The environment variable that names the container image (e.g. `nginx:1.27` where a registry exists).
pub const IMAGE_ENV: &str = "NGINX_KETAMA_IMAGE";

/// A way to run nginx.
#[derive(Debug, Clone)]
pub enum Backend {
    /// A provisioned binary run as a local process.
    Local(Installation),
    /// A container image run through testcontainers.
    Docker {
        /// Image name.
        image: String,
        /// Image tag.
        tag: String,
        /// nginx version inside.
        version: NginxVersion,
        /// The C library nginx inside was built with (the image's `nginx-ketama.libc` label; for an image
        /// named by `$NGINX_KETAMA_IMAGE`, the one asked for).
        libc: Libc,
        /// The stream module to load, or `None` when it is built in (label `nginx-ketama.stream-module`).
        stream_module: Option<String>,
    },
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
            Backend::Docker { version, .. } => *version,
        }
    }

    /// The C library this backend's nginx was built with (its `qsort` decides ring collisions).
    pub fn libc(&self) -> Libc {
        match self {
            Backend::Local(i) => i.libc,
            Backend::Docker { libc, .. } => *libc,
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
            Backend::Docker { .. } => "docker",
        }
    }

    /// A short description for reports, e.g. `local 1.26.3 (Debian 1.26.3-3+deb13u11)`.
    pub fn describe(&self) -> String {
        match self {
            Backend::Local(i) => format!("local {} (Debian {}, {})", i.label(), i.package, i.libc),
            Backend::Docker { image, tag, .. } => format!("docker {image}:{tag}"),
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
            // Docker disables IPv6 inside containers unless the daemon enables it.
            Backend::Docker { .. } => {
                Capabilities { ipv6: false, port80: true, hostnames: true, unix_dir: Some("/tmp".into()) }
            }
        }
    }

    /// Starts nginx serving `site`.
    ///
    /// # Errors
    ///
    /// nginx failing to start, with its own error output; a missing image or Docker engine.
    pub fn start(&self, site: &Site, prefix: PathBuf) -> Result<Box<dyn Instance>> {
        match self {
            Backend::Local(install) => Ok(Box::new(LocalNginx::start(install, site, prefix)?)),
            Backend::Docker { image, tag, stream_module, .. } => {
                let _ = std::fs::remove_dir_all(&prefix);
                Ok(Box::new(docker::start(image, tag, stream_module.as_deref(), site)?))
            }
        }
    }

    /// A prefix directory for the next instance (its `sock/` holds unix sockets).
    pub fn prefix(&self) -> Result<PathBuf> {
        fresh_prefix()
    }
}

/// Whether a Docker engine answers.
pub fn docker_available() -> bool {
    docker::available()
}

/// Where the images of `scripts/build-images` load the stream module from (unless it is built in).
pub const IMAGE_STREAM_MODULE: &str = "/usr/lib/nginx/modules/ngx_stream_module.so";

/// The image to use for the build of `version` against `libc`: `$NGINX_KETAMA_IMAGE` if set (`name:tag`;
/// taken to be built against `libc`), else the locally built `nginx-ketama/nginx:<version>` (glibc) or
/// `nginx-ketama/nginx:<version>-musl`. The image's labels say whether the stream module is built in, and
/// a local image must be the C library asked for.
pub fn docker_backend(version: NginxVersion, libc: Libc) -> Result<Backend> {
    let (image, tag, version, foreign) = match std::env::var(IMAGE_ENV) {
        Ok(spec) => {
            let (image, tag) = spec.rsplit_once(':').unwrap_or((spec.as_str(), "latest"));
            let v = tag.parse().unwrap_or(version);
            (image.to_string(), tag.to_string(), v, true)
        }
        Err(_) => ("nginx-ketama/nginx".to_string(), build_label(version, libc), version, false),
    };
    let Some(labels) = docker::image_labels(&image, &tag) else {
        bail!("docker image {image}:{tag} is not present locally; build it with scripts/build-images {tag}");
    };
    // Images built before the libc label existed are Debian's (glibc) builds.
    let labelled = labels.libc.split_whitespace().next().unwrap_or("glibc");
    if !foreign && labelled != libc.as_str() {
        bail!("docker image {image}:{tag} is labelled {labelled:?}, not {libc}; rebuild it with scripts/build-images");
    }
    let stream_module = match labels.stream_module.as_str() {
        "built in" => None,
        "" => Some(IMAGE_STREAM_MODULE.to_string()),
        path => Some(path.to_string()),
    };
    Ok(Backend::Docker { image, tag, version, libc, stream_module })
}

mod docker {
    use super::*;
    use crate::netns::EPHEMERAL_PORTS;
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
        pub(super) stream_module: String,
    }

    /// The image's labels, or `None` if the image is not present.
    pub(super) fn image_labels(image: &str, tag: &str) -> Option<Labels> {
        let format =
            r#"{{index .Config.Labels "nginx-ketama.libc"}}|{{index .Config.Labels "nginx-ketama.stream-module"}}"#;
        let out = docker(&["image", "inspect", "-f", format, &format!("{image}:{tag}")])?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).trim().replace("<no value>", "");
        let (libc, stream_module) = text.split_once('|').unwrap_or((&text, ""));
        Some(Labels { libc: libc.to_string(), stream_module: stream_module.to_string() })
    }

    pub(super) fn start(image: &str, tag: &str, stream_module: Option<&str>, site: &Site) -> Result<DockerNginx> {
        let env = Environment {
            prefix: "/tmp".into(),
            http_front: site::FRONT_HTTP_PORT.to_string(),
            stream_front: site::FRONT_STREAM_PORT.to_string(),
            stream_module: stream_module.map(str::to_string),
            user_root: true,
        };
        let conf = site::render(site, &env);
        let request = GenericImage::new(image, tag)
            .with_exposed_port(site::FRONT_HTTP_PORT.tcp())
            .with_wait_for(WaitFor::message_on_stderr("start worker process"))
            // No `-e stderr` (nginx 1.19.5+ only): the start-up log goes to the image's /var/log/nginx (errors
            // are echoed to stderr), then the rendered config's `error_log stderr notice;` applies.
            .with_cmd(["/usr/sbin/nginx", "-c", "/etc/nginx/nginx.conf"])
            .with_copy_to("/etc/nginx/nginx.conf", conf.into_bytes())
            .with_label(crate::cleanup::OWNER_LABEL, std::process::id().to_string())
            .with_startup_timeout(std::time::Duration::from_secs(30));
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
            hc.sysctls = Some(HashMap::from([("net.ipv4.ip_local_port_range".to_string(), range)]));
        });
        let container = request.start().with_context(|| format!("starting container {image}:{tag}"))?;
        let port = container.get_host_port_ipv4(site::FRONT_HTTP_PORT.tcp())?;
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        Ok(DockerNginx { container, front })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
