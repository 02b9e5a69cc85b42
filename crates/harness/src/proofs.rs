//! The drivers, on top of every other layer but [`crate::testkit`]:
//!
//! * [`sweep`] runs many random topologies per build (`verify`);
//! * [`own_config`] proves the upstreams of a user's own `nginx.conf` as written, their addresses made
//!   local inside a private network namespace (`verify --config`);
//! * [`shim`] drives any implementation through a line protocol instead of the library.

pub mod own_config;
pub mod shim;
pub mod sweep;
