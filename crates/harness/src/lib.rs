#![deny(clippy::mod_module_files)]

//! The live conformance harness: real nginx on one side, this library on the other, the same requests
//! sent to both, and every `$upstream_addr` compared.
//!
//! Seven layers, each a folder named for its job; a layer imports only from the layers above it in this
//! list (never from one below it, never in a circle):
//!
//! 1. [`site`]: what nginx is given to serve — random upstream [`topology`](site::topology) in every legal
//!    `server` spelling, and the nginx configuration ([`conf`](site::conf)) that holds it with echo
//!    listeners for its live peers.
//! 2. [`nginx`]: running an nginx build — finding the provisioned builds ([`install`](nginx::install)), a
//!    [`Build`](nginx::build::Build) run as a local process (in a network namespace of its own) or a Docker
//!    container (with the `docker` feature), and the process trees, scratch directories and clean-up that
//!    keep a killed run from leaving anything behind.
//! 3. [`run`]: one topology on one running nginx — plan requests, send them pipelined on one connection,
//!    compare every answer with the per-worker model that follows nginx's clock; the one
//!    [`Observation`](run::observation::Observation) type.
//! 4. [`catalog`]: the named golden-vector cases (imports [`site`]; its tests also check the ports against
//!    [`nginx`]'s).
//! 5. [`golden`]: recording the catalog from nginx, the records, and everything derived from them.
//! 6. [`proofs`]: the drivers — [`sweep`](proofs::sweep) (`verify`), [`own_config`](proofs::own_config)
//!    (`verify --config`) and the [`shim`](proofs::shim) line protocol for other implementations.
//! 7. [`engines`]: HAProxy and Caddy against their models (`verify --engine`, `tests/engines_live.rs`):
//!    the provisioned builds, the engine processes, echo backends, random topologies, the driver; of the
//!    nginx layers it uses only the scratch directories.
//!
//! [`testkit`] holds what the integration tests share, on top of everything.

pub mod catalog;
pub mod engines;
pub mod golden;
pub mod nginx;
pub mod proofs;
pub mod run;
pub mod site;
pub mod testkit;

/// Forging printable keys with a chosen CRC32: the library's [`nginx_ketama::analysis::forge`].
pub use nginx_ketama::analysis::forge;

use std::path::{Path, PathBuf};

/// The repository this harness was built from: where `nginx/`, `vectors/`, `snapshots/` and `.nginx/` live.
pub fn repo_root() -> PathBuf {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR"));
    harness.parent().and_then(Path::parent).unwrap_or(harness).to_path_buf()
}
