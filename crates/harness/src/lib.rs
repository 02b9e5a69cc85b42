//! The live conformance harness: real nginx on one side, this library on the other, the same requests
//! sent to both, and every `$upstream_addr` compared.
//!
//! * [`install`] finds the nginx builds `scripts/provision-nginx` unpacked from Debian's packages.
//! * [`backend`] runs one as a local process ([`local`], in a network namespace of its own: [`netns`]) or in
//!   a container (testcontainers).
//! * [`topology`] generates random upstreams in every legal `server` spelling; [`site`] renders them with
//!   echo listeners inside the same nginx.
//! * [`parity`] plans request sequences (random keys, the empty key, and [`forge`]d keys at both ends of
//!   every ring arc), sends them pipelined on one connection ([`client`]) and compares them with the
//!   per-worker simulator ([`clock`]: following nginx's clock, which decides when a failed server comes
//!   back); [`stream`] does the same for the stream module.
//! * [`shim`] drives any implementation through a line protocol instead of the library.
//! * [`tree`] starts nginx and shims as process trees killed whole on every exit path; [`scratch`] makes the
//!   directories they use; both record their owner ([`owner`]) so that [`cleanup`] removes only what runs
//!   that are gone left behind.
//! * [`own_config`] proves the upstreams of a user's own `nginx.conf` as written, their addresses made
//!   local inside a private network namespace (`verify --config`).
//! * [`sweep`] runs many topologies per version (the CLI's `verify` drives it); [`testkit`] holds what the
//!   integration tests share.
//! * [`catalog`] names the golden-vector cases; [`golden`] records them from nginx and derives the
//!   snapshots, the fixtures in `vectors/v1/` and the offline replay.

pub mod backend;
pub mod catalog;
pub mod cleanup;
pub mod client;
pub mod clock;
pub mod golden;
pub mod install;
pub mod local;
pub mod netns;
pub mod own_config;
pub mod owner;
pub mod parity;
pub mod scratch;
pub mod shim;
pub mod site;
pub mod stream;
pub mod sweep;
pub mod testkit;
pub mod topology;
pub mod tree;

/// Forging printable keys with a chosen CRC32: the library's [`nginx_ketama::analysis::forge`].
pub use nginx_ketama::analysis::forge;

use std::path::{Path, PathBuf};

/// The repository this harness was built from: where `nginx/`, `vectors/`, `snapshots/` and `.nginx/` live.
pub fn repo_root() -> PathBuf {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR"));
    harness.parent().and_then(Path::parent).unwrap_or(harness).to_path_buf()
}
