//! The flags a golden-vector case may carry (Wycheproof style), with their descriptions and bug types: the
//! on-disk spelling of records and fixtures.

use serde::{Deserialize, Serialize};

/// A flag a vector may carry (Wycheproof style). Declared in alphabetical order, so `Ord` sorts flags
/// as their names do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[allow(missing_docs)] // each flag's meaning is its `description()`
pub enum Flag {
    AllFailed,
    Backup,
    ClockAdvances,
    Collision,
    DeadServers,
    Down,
    DuplicateLines,
    EmptyKey,
    Failover,
    FailureAccounting,
    FailureKinds,
    Hostname,
    InvalidUtf8,
    Ipv6,
    LargeRing,
    LibcDependent,
    LongKey,
    ManyMisses,
    MultiAddress,
    NoLiveUpstreams,
    NonAscii,
    NonIdempotent,
    OddSpelling,
    OnPoint,
    PastPoint,
    RepeatedKey,
    RingEdge,
    SingleServer,
    StaleKeepalive,
    TriesCap,
    UnixSocket,
    VersionDependent,
    Weighted,
}

/// Wycheproof's `bugType` of a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum BugType {
    Basic,
    Functionality,
    EdgeCase,
    Legacy,
}

impl Flag {
    /// Every flag, in name order.
    pub const ALL: [Flag; 33] = [
        Flag::AllFailed,
        Flag::Backup,
        Flag::ClockAdvances,
        Flag::Collision,
        Flag::DeadServers,
        Flag::Down,
        Flag::DuplicateLines,
        Flag::EmptyKey,
        Flag::Failover,
        Flag::FailureAccounting,
        Flag::FailureKinds,
        Flag::Hostname,
        Flag::InvalidUtf8,
        Flag::Ipv6,
        Flag::LargeRing,
        Flag::LibcDependent,
        Flag::LongKey,
        Flag::ManyMisses,
        Flag::MultiAddress,
        Flag::NoLiveUpstreams,
        Flag::NonAscii,
        Flag::NonIdempotent,
        Flag::OddSpelling,
        Flag::OnPoint,
        Flag::PastPoint,
        Flag::RepeatedKey,
        Flag::RingEdge,
        Flag::SingleServer,
        Flag::StaleKeepalive,
        Flag::TriesCap,
        Flag::UnixSocket,
        Flag::VersionDependent,
        Flag::Weighted,
    ];

    /// The flag's name as written in records and fixtures.
    pub fn name(self) -> &'static str {
        match self {
            Flag::AllFailed => "AllFailed",
            Flag::Backup => "Backup",
            Flag::Collision => "Collision",
            Flag::DeadServers => "DeadServers",
            Flag::Down => "Down",
            Flag::DuplicateLines => "DuplicateLines",
            Flag::EmptyKey => "EmptyKey",
            Flag::Failover => "Failover",
            Flag::FailureAccounting => "FailureAccounting",
            Flag::Hostname => "Hostname",
            Flag::InvalidUtf8 => "InvalidUtf8",
            Flag::Ipv6 => "Ipv6",
            Flag::LargeRing => "LargeRing",
            Flag::LongKey => "LongKey",
            Flag::ManyMisses => "ManyMisses",
            Flag::MultiAddress => "MultiAddress",
            Flag::NoLiveUpstreams => "NoLiveUpstreams",
            Flag::NonAscii => "NonAscii",
            Flag::OddSpelling => "OddSpelling",
            Flag::OnPoint => "OnPoint",
            Flag::PastPoint => "PastPoint",
            Flag::RepeatedKey => "RepeatedKey",
            Flag::RingEdge => "RingEdge",
            Flag::SingleServer => "SingleServer",
            Flag::UnixSocket => "UnixSocket",
            Flag::VersionDependent => "VersionDependent",
            Flag::LibcDependent => "LibcDependent",
            Flag::Weighted => "Weighted",
            Flag::ClockAdvances => "ClockAdvances",
            Flag::FailureKinds => "FailureKinds",
            Flag::NonIdempotent => "NonIdempotent",
            Flag::StaleKeepalive => "StaleKeepalive",
            Flag::TriesCap => "TriesCap",
        }
    }

    /// The flag's Wycheproof `bugType`.
    pub fn bug_type(self) -> BugType {
        match self {
            Flag::Ipv6 | Flag::SingleServer | Flag::UnixSocket | Flag::Weighted => BugType::Basic,
            Flag::Collision
            | Flag::DuplicateLines
            | Flag::InvalidUtf8
            | Flag::LongKey
            | Flag::ManyMisses
            | Flag::NonAscii
            | Flag::OddSpelling
            | Flag::OnPoint
            | Flag::PastPoint
            | Flag::RingEdge => BugType::EdgeCase,
            Flag::VersionDependent => BugType::Legacy,
            Flag::ClockAdvances | Flag::StaleKeepalive => BugType::EdgeCase,
            Flag::FailureKinds | Flag::NonIdempotent | Flag::TriesCap => BugType::Functionality,
            Flag::LibcDependent => BugType::EdgeCase,
            Flag::AllFailed
            | Flag::Backup
            | Flag::DeadServers
            | Flag::Down
            | Flag::EmptyKey
            | Flag::Failover
            | Flag::FailureAccounting
            | Flag::Hostname
            | Flag::LargeRing
            | Flag::MultiAddress
            | Flag::NoLiveUpstreams
            | Flag::RepeatedKey => BugType::Functionality,
        }
    }

    /// What the flag means (the fixtures' `notes`).
    pub fn description(self) -> &'static str {
        match self {
            Flag::AllFailed => "Every attempt was refused and the retry budget ran out: 502 with the last error.",
            Flag::Backup => {
                "The upstream has `backup` servers declared before `hash`; only the round-robin fallback reaches them."
            }
            Flag::Collision => {
                "The key lands on a point hash that two different server strings generate; glibc's stable sort keeps the earlier peer's point."
            }
            Flag::DeadServers => "Some servers refuse connections (`refuses: true`), so requests fail over.",
            Flag::Down => "Some servers are marked `down`: they keep their points/slots but are never picked.",
            Flag::DuplicateLines => {
                "The same server line appears twice: two peers with one server string and one chain of points."
            }
            Flag::EmptyKey => "The empty key is never hashed: nginx uses weighted round-robin (stateful).",
            Flag::Failover => "nginx made more than one attempt for this key.",
            Flag::FailureAccounting => {
                "max_fails=1 with a long fail_timeout: a refused connection takes the peer out for later requests."
            }
            Flag::Hostname => {
                "A server line names a host (resolved at startup from a private hosts file); the name is hashed as written."
            }
            Flag::InvalidUtf8 => "The key is not valid UTF-8: use keyHex (key is null).",
            Flag::Ipv6 => "An [::1] server line: the brackets are part of the hashed host.",
            Flag::LargeRing => "A ring of 1000 servers (160,000 points).",
            Flag::LongKey => "A key of 4 KiB or more.",
            Flag::ManyMisses => {
                "Long runs of unusable points/slots: more than 20 misses in one request switch it to round-robin."
            }
            Flag::MultiAddress => {
                "One server line resolves to two addresses: two peers sharing one server string, alternating by weighted round-robin."
            }
            Flag::NoLiveUpstreams => {
                "nginx found no usable peer: $upstream_addr ends with the upstream name (outcome noLiveUpstreams)."
            }
            Flag::NonAscii => "The key has bytes above 0x7f (UTF-8 text or raw bytes); nginx hashes the raw bytes.",
            Flag::OddSpelling => {
                "Server strings spelled unusually (no port, leading-zero ports, unix:/UNIX:): hashed exactly as written."
            }
            Flag::OnPoint => "The key's CRC32 equals a ring point's hash (lookup is 'first point ≥ hash').",
            Flag::PastPoint => "The key's CRC32 is one more than a ring point's hash: it belongs to the next point.",
            Flag::RepeatedKey => "A key sent again later in the same stateful sequence.",
            Flag::RingEdge => {
                "The key's CRC32 is 0 or 0xffffffff (below the first point / above the last point, which wraps)."
            }
            Flag::SingleServer => "One server only: nginx skips hashing altogether.",
            Flag::UnixSocket => "A unix: (or UNIX:) server: the ring hashes the path without the prefix.",
            Flag::VersionDependent => {
                "nginx versions disagree on this case; the group holds one version set's behaviour (see its description)."
            }
            Flag::LibcDependent => {
                "nginx built against glibc and against musl disagree on this case (which server keeps a ring point two servers share, docs/nginx-algorithm.md §3.2); the group's libc says whose tie rule it needs."
            }
            Flag::Weighted => "Servers with weights other than 1.",
            Flag::ClockAdvances => {
                "nginx's clock advances during the group: each test's `clock` is the second it ran at (fail_timeout windows open and close)."
            }
            Flag::FailureKinds => {
                "Servers fail with status codes, timeouts, invalid headers or stale keepalive connections (peers' `answer`), under the group's `policy` (proxy_next_upstream, _tries); tests carry requestMethod and upstreamStatuses."
            }
            Flag::NonIdempotent => "POST requests: once sent, nginx retries them only when `non_idempotent` is listed.",
            Flag::StaleKeepalive => {
                "A server closes reused keepalive connections: an error on a cached connection gives the attempt back (algorithm §5.1)."
            }
            Flag::TriesCap => {
                "proxy_next_upstream_tries caps the attempts; the last attempt's listed status is passed to the client and counts as a success."
            }
        }
    }
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name()`, serde and `Ord` agree: names are the serde spellings, in sorted order, each once.
    #[test]
    fn flag_names_are_serde_spellings_in_order() {
        let names: Vec<&str> = Flag::ALL.iter().map(|f| f.name()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        for f in Flag::ALL {
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.name()));
            assert_eq!(serde_json::from_str::<Flag>(&format!("\"{f}\"")).unwrap(), f);
        }
        let mut by_ord = Flag::ALL;
        by_ord.sort_unstable();
        assert_eq!(by_ord, Flag::ALL);
    }
}
