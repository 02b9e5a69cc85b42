//! The other proxies that run here, HAProxy and Caddy, against their models (issue 23): every provisioned
//! build (`scripts/provision-engines`, engines/README.md) started on 127.0.0.1 in front of echo backends in
//! this process, and the backend each key reaches compared with the model's pick
//! (`nginx_ketama::engines`). No nginx runs in these proofs: of the layers above it imports only the
//! scratch directories (`nginx::scratch`, `nginx::local::fresh_prefix`), so that an interrupted run leaves
//! nothing behind.
//!
//! * [`install`]: the provisioned builds (`.engines/<engine>-<release>/run`) and the release a command
//!   line names.
//! * [`process`]: one engine build as a process, killed when its guard drops and by the kernel if this
//!   process dies (`PR_SET_PDEATHSIG`).
//! * [`backends`]: the echo backends, and asking the engine which one a key reaches.
//! * [`random`]: the seeded generator of topologies and keys.
//! * [`haproxy`] and [`caddy`]: each engine's random topologies, its configuration, the keys it is asked.
//! * [`proof`]: the driver: one build, its topologies, the mismatches and a report (`verify --engine`,
//!   `tests/engines_live.rs`).

pub mod backends;
pub mod caddy;
pub mod haproxy;
pub mod install;
pub mod process;
pub mod proof;
pub mod random;
