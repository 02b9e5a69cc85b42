//! The golden-vector catalog: named, reviewed upstreams with explicit keys, recorded from real nginx by
//! `scripts/record-vectors` (see [`crate::golden`]) and replayed offline by `tests/golden.rs`.
//!
//! Every [`Case`] is an explicit [`Topology`] (server lines as written, which of them refuse connections)
//! plus an explicit key list sent in order to one fresh nginx worker. Only loopback addresses (`127.0.C.x`,
//! with C ≥ 1 so they never meet the random topologies of the parity sweep, and `[::1]`) and unix sockets
//! under [`UNIX_DIR`] are used. Nothing here says what nginx answers: that comes only from recordings.
//!
//! A case is *stateless* when each key's result does not depend on the requests before it; the recorder
//! proves that claim against nginx by recording such cases twice, in order and in reverse order, each on a
//! fresh nginx. *Stateful* cases (round-robin sequences, alternation among addresses of one name, failure
//! accounting) must be replayed in order on one fresh worker.
//!
//! [`lines`] builds server lines in every spelling, [`keys`] the key lists (sampled, forged onto ring
//! points, colliding), and `cases` holds one small function per case, listed in review order.

mod cases;
mod failing;
pub mod flag;
pub mod keys;
pub mod lines;

use crate::run::client::Method as RequestMethod;
use crate::site::failures::Failures;
use crate::site::topology::Topology;
pub use flag::{BugType, Flag};

pub use keys::{COLLISION, SPEC_COLLISION, sample_keys};
pub use lines::{host_line, line};

/// Where the catalog's unix sockets live (a fixed path, because it is part of the recorded config).
pub const UNIX_DIR: &str = "/tmp/nkv";

/// One request key of a case, with why it is there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaseKey {
    /// The raw key bytes (sent as the `X-Key` header; empty = no header).
    pub key: Vec<u8>,
    /// A short human note (e.g. `on point 17 (127.0.2.3:9001)`), or empty.
    pub comment: String,
    /// Flags describing the key.
    pub flags: Vec<Flag>,
    /// The request's method: GET, or POST with an empty body (cases with failure kinds).
    pub method: RequestMethod,
    /// In a case whose clock advances ([`Case::clocked`]): the second nginx's clock must read when the
    /// request is sent, counted from the case's first request (which is at 0). The recorder waits for it
    /// and checks nginx's own clock.
    pub at: Option<u64>,
}

/// One named catalog case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Kebab-case name, unique in the catalog (also the vector group name and, with `-` → `_`, the
    /// snapshot name `catalog__<name>`).
    pub name: &'static str,
    /// One line saying what the case shows.
    pub description: &'static str,
    /// The upstream nginx runs.
    pub topology: Topology,
    /// Keys in sending order.
    pub keys: Vec<CaseKey>,
    /// Whether results depend on request order (replay in order on one worker).
    pub stateful: bool,
    /// Flags that apply to every key of the case.
    pub flags: Vec<Flag>,
    /// Why nginx versions are expected to disagree on this case (docs/nginx-algorithm.md §8), if they are. A
    /// recording where versions disagree without such a note is reported as unexplained.
    pub versions_differ: Option<&'static str>,
    /// Why one version's builds against glibc and against musl are expected to disagree on this case
    /// (docs/nginx-algorithm.md §3.2), if they are; unexplained otherwise, like `versions_differ`.
    pub libcs_differ: Option<&'static str>,
    /// How the live servers fail and the front's retry policy (issue 20's failure kinds), if they do:
    /// `None` is the refused-only catalog (dead servers refuse, the rest answer `200 OK`, `proxy_next_upstream
    /// error`).
    pub failures: Option<Failures>,
}

impl Case {
    /// A stateless case without case-wide flags or a version note; the setters below add them.
    pub fn new(name: &'static str, description: &'static str, topology: Topology, keys: Vec<CaseKey>) -> Case {
        Case {
            name,
            description,
            topology,
            keys,
            stateful: false,
            flags: Vec::new(),
            versions_differ: None,
            libcs_differ: None,
            failures: None,
        }
    }

    /// Live servers answer as `failures` says, under its retry policy.
    #[must_use]
    pub fn failing(mut self, failures: Failures) -> Case {
        self.failures = Some(failures);
        self
    }

    /// Whether the case's keys are sent at set seconds of nginx's clock ([`CaseKey::at`]).
    pub fn clocked(&self) -> bool {
        self.keys.iter().any(|k| k.at.is_some())
    }

    /// Results depend on request order: replay in order on one worker.
    #[must_use]
    pub fn stateful(mut self) -> Case {
        self.stateful = true;
        self
    }

    /// Flags that apply to every key.
    #[must_use]
    pub fn with_flags(mut self, flags: &[Flag]) -> Case {
        self.flags = flags.to_vec();
        self
    }

    /// Why nginx versions are expected to disagree.
    #[must_use]
    pub fn with_versions_differ(mut self, why: &'static str) -> Case {
        self.versions_differ = Some(why);
        self
    }

    /// Why builds against glibc and musl are expected to disagree.
    #[must_use]
    pub fn with_libcs_differ(mut self, why: &'static str) -> Case {
        self.libcs_differ = Some(why);
        self
    }
}

/// The whole catalog, in review order.
pub fn catalog() -> Vec<Case> {
    cases::CASES.iter().chain(failing::CASES).map(|case| case()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::netns::EPHEMERAL_PORTS;
    use crate::site::conf::{FRONT_HTTP_PORT, FRONT_STREAM_PORT};
    use crate::site::topology::Listen;
    use nginx_ketama::ring::reference;
    use nginx_ketama::server::Server;

    /// The fixed addresses never use a port the kernel may hand out as a source port (a dead one could
    /// connect to itself), nor the front servers' ports.
    #[test]
    fn fixed_addresses_stay_out_of_the_ephemeral_range() {
        for case in catalog() {
            for ep in case.topology.lines.iter().flat_map(|l| &l.endpoints) {
                if let Listen::Tcp(a) = ep.listen {
                    assert!(!EPHEMERAL_PORTS.contains(&a.port()), "{}: {a}", case.name);
                    assert!(![FRONT_HTTP_PORT, FRONT_STREAM_PORT].contains(&a.port()), "{}: {a}", case.name);
                }
            }
        }
    }

    #[test]
    fn names_are_unique_and_kebab_case() {
        let cases = catalog();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
        assert!(names.iter().all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')));
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn collision_pairs_really_collide() {
        let point_chain = |s: &str, n| reference::chain(&Server::new(s), n);
        for (a, b, h) in [COLLISION, SPEC_COLLISION] {
            let ca = point_chain(a, 160);
            let cb = point_chain(b, 160);
            assert!(ca.contains(&h) && cb.contains(&h), "{a} {b} {h:08x}");
        }
        assert_eq!(point_chain(COLLISION.0, 160)[104], COLLISION.2);
        assert_eq!(point_chain(COLLISION.1, 160)[47], COLLISION.2);
        let found = crate::site::topology::find_point_collisions(&[COLLISION.0.to_string(), COLLISION.1.to_string()]);
        assert_eq!(found, vec![(COLLISION.0.to_string(), 104, COLLISION.1.to_string(), 47, COLLISION.2)]);
    }

    /// The tables hold every case once, in the order the catalog names them: the refused-only cases, then
    /// the cases with failure kinds.
    #[test]
    fn cases_in_review_order() {
        let names: Vec<&str> = catalog().iter().map(|c| c.name).collect();
        assert_eq!(names.len(), 31 + failing::CASES.len());
        assert_eq!(names.first(), Some(&"weights-equal"));
        assert_eq!(names[30], "plain-single-server");
    }

    #[test]
    fn keys_are_sendable() {
        for case in catalog() {
            for k in &case.keys {
                assert!(k.key.len() < 60_000, "{}", case.name);
                assert!(!k.key.contains(&b'\r') && !k.key.contains(&b'\n'), "{}", case.name);
                if !k.key.is_empty() {
                    assert!(!k.key[0].is_ascii_whitespace() && !k.key.last().unwrap().is_ascii_whitespace());
                }
            }
        }
    }
}
