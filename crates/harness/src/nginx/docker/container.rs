//! An image run as a container through testcontainers: the site's config copied in, the front port
//! published on loopback only, the container labelled with its owner (see [`crate::nginx::cleanup`]).

use super::{IMAGE_NGINX, Image};
use crate::nginx::instance::Instance;
use crate::nginx::netns::{EPHEMERAL_PORTS, Net};
use crate::site::conf::{self, Environment, Site};
use crate::site::topology::Listen;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use testcontainers::bollard::models::PortBinding;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::SyncRunner;
use testcontainers::{Container, GenericImage, ImageExt};

/// A running container; removed when dropped.
pub struct DockerNginx {
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

/// Starts `image` serving `site`.
///
/// # Errors
///
/// No Docker engine, a missing image, or nginx failing to start in it.
pub fn start(image: &Image, site: &Site) -> Result<DockerNginx> {
    let env = Environment {
        prefix: "/tmp".into(),
        http_front: conf::FRONT_HTTP_PORT.to_string(),
        stream_front: conf::FRONT_STREAM_PORT.to_string(),
        stream_module: image.stream.module().map(|m| m.display().to_string()),
        user_root: true,
    };
    let conf = conf::render(site, &env);
    crate::nginx::cleanup::starting_container();
    let (name, tag) = image.name_and_tag();
    let mut request = GenericImage::new(name, tag)
        .with_exposed_port(conf::FRONT_HTTP_PORT.tcp())
        .with_wait_for(WaitFor::message_on_stderr("start worker process"))
        // No `-e stderr` (nginx 1.19.5+ only): the start-up log goes to the image's /var/log/nginx (errors
        // are echoed to stderr), then the rendered config's `error_log stderr notice;` applies.
        .with_cmd([IMAGE_NGINX, "-c", "/etc/nginx/nginx.conf"])
        .with_copy_to("/etc/nginx/nginx.conf", conf.into_bytes())
        .with_label(crate::nginx::cleanup::OWNER_LABEL, std::process::id().to_string())
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
        hc.port_bindings = Some(HashMap::from([(format!("{}/tcp", conf::FRONT_HTTP_PORT), Some(vec![binding]))]));
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
    let port = container.get_host_port_ipv4(conf::FRONT_HTTP_PORT.tcp())?;
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    Ok(DockerNginx { container, front })
}
