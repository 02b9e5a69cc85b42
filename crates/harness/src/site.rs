//! What nginx is given to serve: the upstream under test and the configuration around it. The lowest layer
//! of the harness: it imports nothing of the harness.
//!
//! * [`topology`]: random upstreams in every legal `server` spelling, where each peer really listens, and
//!   the library's `Upstream` for the same lines;
//! * [`conf`]: the nginx configuration of a run — the upstream, a front server that reports
//!   `$upstream_addr`, echo listeners for the live peers;
//! * [`failures`]: failure kinds — how each live server fails (a status, a stall, an invalid header) and
//!   the front's retry policy;
//! * [`expressions`]: the key expressions (and their maps) random topologies draw;
//! * [`token`]: strings spelled as nginx config tokens.

pub mod conf;
pub mod expressions;
pub mod failures;
pub mod token;
pub mod topology;
