//! `--backends FILE`: the endpoints ingress-nginx balances, as `kubectl ingress-nginx backends` prints
//! them, given to an engine instead of the nginx upstream's peers (docs/engines.md).
//!
//! The shape is kubernetes/ingress-nginx controller-v1.15.1's: the plugin
//! (`cmd/plugin/commands/backends/backends.go`) runs `/dbg backends all` in the controller's pod, which
//! prints the JSON array of `Backend`s the controller posted to `/configuration/backends`
//! (`cmd/dbg/main.go`, `backendsAll`), indented; `--backend NAME` prints one of them as an object
//! (`backendsGet`). A `Backend` (`pkg/apis/ingress/types.go`) has `name`, `endpoints` (each `Endpoint`:
//! `address`, the IP without brackets, and `port`, a string) and `upstreamHashByConfig`
//! (`upstream-hash-by`, `upstream-hash-by-subset`, `upstream-hash-by-subset-size`). ingress-nginx's
//! `util.get_nodes` keys nodes by `address:port`, so an endpoint listed twice is one node.

use anyhow::{Context, Result, bail};
use nginx_ketama::engines::Backend;
use serde::Deserialize;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// The largest file read (the JSON of thousands of backends is a few MiB).
const MAX_BYTES: u64 = 64 << 20;

/// `--backends FILE` and `--ingress-backend NAME`.
#[derive(clap::Args)]
pub(crate) struct BackendsFile {
    /// The engine's servers: the endpoints of one backend of `kubectl ingress-nginx backends` (its JSON
    /// array, or the object `--backend NAME` prints), each of weight 1 as ingress-nginx gives them, instead
    /// of the upstream's peers; a key is kept when both pick the same address.
    #[arg(long, value_name = "FILE")]
    pub(crate) backends: Option<PathBuf>,
    /// With --backends: the backend to take (`<namespace>-<service>-<port>`); may be left out when one
    /// backend with endpoints sets upstream-hash-by (or only one has endpoints).
    #[arg(long, value_name = "NAME", requires = "backends")]
    pub(crate) ingress_backend: Option<String>,
}

/// One backend's endpoints, read from a file.
#[derive(Debug)]
pub(crate) struct Endpoints {
    /// The file.
    pub(crate) file: PathBuf,
    /// The backend's name.
    pub(crate) name: String,
    /// Its endpoints, in the file's order, duplicates dropped; weight 1 each.
    pub(crate) backends: Vec<Backend>,
}

#[derive(Deserialize)]
struct BackendJson {
    name: String,
    #[serde(default)]
    endpoints: Option<Vec<EndpointJson>>,
    #[serde(default, rename = "upstreamHashByConfig")]
    hash_by: Option<HashByJson>,
}

#[derive(Deserialize)]
struct EndpointJson {
    address: String,
    port: String,
}

#[derive(Deserialize, Default)]
struct HashByJson {
    #[serde(default, rename = "upstream-hash-by")]
    by: Option<String>,
    #[serde(default, rename = "upstream-hash-by-subset")]
    subset: Option<bool>,
}

impl BackendsFile {
    /// The endpoints `--backends` names, if given.
    pub(crate) fn read(&self) -> Result<Option<Endpoints>> {
        self.backends.as_deref().map(|path| read(path, self.ingress_backend.as_deref())).transpose()
    }
}

/// Whether a backend sets `upstream-hash-by`.
fn hashes(b: &BackendJson) -> bool {
    b.hash_by.as_ref().and_then(|h| h.by.as_deref()).is_some_and(|by| !by.is_empty())
}

/// Reads `path` and takes the backend `name` (or the only one with endpoints).
pub(crate) fn read(path: &Path, name: Option<&str>) -> Result<Endpoints> {
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| format!("--backends {shown}: cannot open"))?;
    let mut text = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut text).with_context(|| format!("--backends {shown}: cannot read"))?;
    if text.len() as u64 > MAX_BYTES {
        bail!(
            "--backends {shown}: larger than {} MiB; not the output of kubectl ingress-nginx backends",
            MAX_BYTES >> 20
        );
    }
    let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        anyhow::anyhow!(
            "--backends {shown}:{}:{}: not JSON ({e}); expected the output of `kubectl ingress-nginx backends`",
            e.line(),
            e.column()
        )
    })?;
    let list: Vec<BackendJson> = match value {
        serde_json::Value::Array(_) => serde_json::from_value(value),
        serde_json::Value::Object(_) => serde_json::from_value(value).map(|b| vec![b]),
        _ => bail!("--backends {shown}: expected an array of backends or one backend object, as `kubectl ingress-nginx backends` prints"),
    }
    .map_err(|e| anyhow::anyhow!("--backends {shown}: not an ingress-nginx backend list: {e}"))?;
    let names = || list.iter().map(|b| b.name.as_str()).collect::<Vec<_>>().join(", ");
    let chosen = match name {
        Some(n) => match list.iter().find(|b| b.name == n) {
            Some(b) => b,
            None => bail!("--backends {shown}: no backend named {n:?}; backends: {}", names()),
        },
        None => {
            // ingress-nginx lists its own default backend (`upstream-default-backend`, 127.0.0.1:8181)
            // with endpoints too: a backend with `upstream-hash-by` is preferred.
            let with: Vec<&BackendJson> =
                list.iter().filter(|b| b.endpoints.as_ref().is_some_and(|e| !e.is_empty())).collect();
            let hashed: Vec<&BackendJson> = with.iter().copied().filter(|b| hashes(b)).collect();
            let candidates = if hashed.is_empty() { &with } else { &hashed };
            match candidates.as_slice() {
                [one] => *one,
                [] => bail!("--backends {shown}: no backend has endpoints"),
                _ => bail!(
                    "--backends {shown}: {} backends {}; choose one with --ingress-backend NAME: {}",
                    candidates.len(),
                    if hashed.is_empty() { "have endpoints" } else { "hash by upstream-hash-by" },
                    candidates.iter().map(|b| b.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            }
        }
    };
    let hash_by = chosen.hash_by.as_ref();
    if hash_by.and_then(|h| h.subset).unwrap_or(false) {
        bail!(
            "--backends {shown}: backend {:?} uses upstream-hash-by-subset: ingress-nginx picks a random endpoint of the \
             key's subset, so a key has no one server to keep; only upstream-hash-by is compared",
            chosen.name
        );
    }
    if !hashes(chosen) {
        eprintln!(
            "nginx-ketama: [warn] --backends {shown}: backend {:?} has no upstream-hash-by (ingress-nginx balances it \
             without hashing); its endpoints are used as they are",
            chosen.name
        );
    }
    let mut backends: Vec<Backend> = Vec::new();
    for (i, e) in chosen.endpoints.iter().flatten().enumerate() {
        let bad = |what: &str| anyhow::anyhow!("--backends {shown}: backend {:?}, endpoint {i}: {what}", chosen.name);
        let ip: IpAddr =
            e.address.parse().map_err(|_| bad(&format!("address {:?} is not an IP address", e.address)))?;
        let port: u16 = e.port.parse().map_err(|_| bad(&format!("port {:?} is not a port number", e.port)))?;
        let addr = SocketAddr::new(ip, port);
        if !backends.iter().any(|b| b.addr == addr) {
            backends.push(Backend::new(addr, 1));
        }
    }
    if backends.is_empty() {
        bail!("--backends {shown}: backend {:?} has no endpoints", chosen.name);
    }
    Ok(Endpoints { file: path.to_path_buf(), name: chosen.name.clone(), backends })
}
