//! A running nginx, wherever it runs: the one interface a run talks to.

use super::netns::Net;
use std::net::SocketAddr;
use std::path::PathBuf;

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
