//! The drivers, on top of every other layer but [`crate::testkit`]:
//!
//! * [`sweep`] runs many random topologies per build (`verify`);
//! * [`own_config`] proves the upstreams of a user's own `nginx.conf` as written, their addresses made
//!   local inside a private network namespace (`verify --config`);
//! * [`shim`] drives any implementation through a line protocol instead of the library;
//! * [`verdict`] judges what any of them counted, by one rule; [`replay`] builds the command that runs a
//!   check again, for all of them.

pub mod own_config;
pub mod replay;
pub mod shim;
pub mod sweep;
pub mod verdict;
