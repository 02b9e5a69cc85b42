//! What one request did, step by step: the trace [`Worker::request_traced`](crate::Worker::request_traced)
//! records. `analysis::explain` turns it into a readable explanation.
//!
//! Every step is something nginx's getters do (algorithm §3.4, §4 and §5): look at a ring point, compute a
//! rehash step, hand over to round-robin, switch to the backup list, connect to a peer. Peers are named by
//! [`PeerId`], ring servers by their index in [`Ring::servers`](crate::Ring::servers).

use crate::peer::{List, PeerId};

/// How a request ended.
///
/// # Example
///
/// ```
/// use nginx_ketama::{Method, Peer, Status, Upstream, Worker};
///
/// let up = Upstream::builder(Method::Consistent)
///     .peers(["127.0.0.1:1", "127.0.0.1:2"].map(|s| Peer::new(s).with_max_fails(0)))
///     .build()?;
/// // Both refuse: each is tried once, then nginx gives up with the last error (502).
/// let out = Worker::new(&up).request(b"k", 0, |_| true);
/// assert_eq!((out.attempts.len(), out.status), (2, Status::Failed));
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The last attempt's response was passed to the client (any status: a 5xx that is not retried too).
    Answered,
    /// The last attempt failed (an error, a timeout, an invalid header) and nginx did not move on: the
    /// retry budget ran out, or the policy, the method, an unbuffered body or the timeout stopped it
    /// (nginx answers 502, or 504 after a timeout; algorithm §5.1).
    Failed,
    /// nginx found no usable peer (`no live upstreams`, 502; `$upstream_addr` ends with the upstream name).
    NoLiveUpstreams,
}

/// Why a peer was passed over at a ring point or rehash slot (the first reason that applies, in this order).
///
/// # Example
///
/// ```
/// use nginx_ketama::worker::Skip;
///
/// assert_eq!(Skip::Failed.to_string(), "failed (max_fails reached within fail_timeout)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Skip {
    /// Already tried by this request.
    Tried,
    /// Marked `down` in the configuration.
    Down,
    /// `max_fails` failures, the last one within `fail_timeout` seconds.
    Failed,
    /// At its `max_conns` limit.
    MaxConns,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skip::Tried => "tried",
            Skip::Down => "down",
            Skip::Failed => "failed (max_fails reached within fail_timeout)",
            Skip::MaxConns => "at max_conns",
        })
    }
}

/// Why the hash getter handed the request to nginx's round-robin code.
///
/// # Example
///
/// ```
/// use nginx_ketama::worker::Fallback;
///
/// assert_eq!(Fallback::MissBudget.to_string(), "more than 20 points or slots without a usable peer");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fallback {
    /// The key is empty (algorithm §9.1).
    EmptyKey,
    /// The current list is nginx's `single`: one peer and no backup list (algorithm §9.3).
    SinglePeer,
    /// Plain hash from 1.27.3: the current list has fewer than two peers (algorithm §4).
    FewerThanTwoPeers,
    /// More than [`MAX_HASH_MISSES`](crate::upstream::MAX_HASH_MISSES) misses in this request (algorithm §9.8).
    MissBudget,
    /// Consistent hash on a list or ring without peers.
    NothingToHash,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fallback::EmptyKey => f.write_str("the key is empty"),
            Fallback::SinglePeer => f.write_str("the list has a single peer"),
            Fallback::FewerThanTwoPeers => f.write_str("the list has fewer than two peers"),
            Fallback::MissBudget => {
                write!(f, "more than {} points or slots without a usable peer", crate::upstream::MAX_HASH_MISSES)
            }
            Fallback::NothingToHash => f.write_str("nothing to hash over"),
        }
    }
}

/// What happened at one ring point or rehash slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This peer was chosen.
    Chosen(PeerId),
    /// No usable peer: a miss, the request's `misses`-th. `passed` lists the peers of the current list
    /// that belong to the point (same server string) or own the slot, each with why it was passed over;
    /// for a ring point it is empty when no peer of the current list has that server string (the backup
    /// list walking the primary ring).
    Miss {
        /// The request's miss count after this one.
        misses: u32,
        /// The peers passed over, in list order.
        passed: Vec<(PeerId, Skip)>,
    },
}

/// One step of a request, in the order nginx takes them.
///
/// # Example
///
/// ```
/// use nginx_ketama::worker::{Step, Verdict};
/// use nginx_ketama::{Method, Peer, Upstream, Worker};
///
/// let up = Upstream::builder(Method::Consistent).peers(["a:80", "b:80"].map(Peer::new)).build()?;
/// let mut trace = Vec::new();
/// let out = Worker::new(&up).request_traced(b"k", 0, |_| false, &mut trace);
/// // One point looked at, its peer chosen, one attempt that answered.
/// assert!(matches!(&trace[0], Step::Point { verdict: Verdict::Chosen(id), .. } if *id == out.attempts[0]));
/// assert!(matches!(trace[1], Step::Attempt { failed: false, .. }));
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Consistent hash looked at a ring point.
    Point {
        /// The point's index in the ring (the request's counter, already taken modulo the ring's length).
        index: usize,
        /// The point's hash.
        hash: u32,
        /// Index of its server string in [`Ring::servers`](crate::Ring::servers).
        server: usize,
        /// What happened there.
        verdict: Verdict,
    },
    /// Plain hash computed one rehash step.
    Rehash {
        /// The counter, the CRC, the 15-bit step and the running sum.
        step: crate::plain::RehashStep,
        /// `sum mod total_weight` of the current list.
        slot: u64,
        /// The list hashed over.
        list: List,
        /// The slot's owner (index in `list`).
        owner: usize,
        /// What happened there.
        verdict: Verdict,
    },
    /// The hash getter handed over to round-robin, for this reason.
    Fallback(Fallback),
    /// nginx's round-robin code ran on `list` and chose `chosen` (`None`: nothing usable there).
    RoundRobin {
        /// The list.
        list: List,
        /// The peer chosen, by index in `list`.
        chosen: Option<usize>,
    },
    /// Nothing usable was left on the primary list: the request moves to the backup list for good.
    SwitchToBackup,
    /// A connection to `peer`; `failed` says whether it failed.
    Attempt {
        /// The peer.
        peer: PeerId,
        /// Whether the connection failed.
        failed: bool,
    },
    /// The request ended.
    End(Status),
}
