//! Failure kinds for a live run (issue 20 point 4): how each live server of a topology answers — a status
//! code, a stall past `proxy_read_timeout`, an invalid response header — and the front location's retry
//! policy (`proxy_next_upstream`, `proxy_next_upstream_tries`). Dead servers still refuse (the topology's
//! `dead`). Every answer is made by the nginx under test itself (a `server` block per answer), so the same
//! run works on every build, locally and in a container, without the stream module.
//!
//! Timing: a stalled server sends its response header at one byte per second (`limit_rate 1`), so it can
//! never complete a header within [`READ_TIMEOUT_MS`]; only lines with `max_fails=1 fail_timeout=3600s`
//! stall, so each stalled peer is waited for once per run and then skipped for the rest of it. The one
//! timing assumption left is that a healthy peer (served by the same nginx worker) answers within
//! [`READ_TIMEOUT_MS`] (docs/proof.md, "Failure kinds").

use super::token::token;
use super::topology::{Listen, Topology};
use nginx_ketama::Peer;
use nginx_ketama::failure::{Condition, NextUpstream, Reply, RetryPolicy};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;

/// How a live server answers when it does not answer `200 OK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Answer {
    /// `return STATUS;` (500, 502, 503, 504, 403, 404 or 429).
    Status(u16),
    /// Never completes a response header within `proxy_read_timeout` (a read timeout).
    Stall,
    /// A response header nginx cannot parse (a bare CR in a header value): `invalid_header`.
    InvalidHeader,
    /// `200 OK` on a new connection, kept alive; the next request on that connection is closed unanswered
    /// (`$connection_requests` above 1: `return 444`). So every attempt nginx makes on a cached keepalive
    /// connection to this server meets a stale connection (algorithm §5.1), deterministically: the server,
    /// not a timer, closes it ([`Connections`]).
    StaleKeepalive,
}

impl Answer {
    /// The answer's name in vectors and shim messages: nginx's `proxy_next_upstream` word for it
    /// (`http_502`, `timeout`, `invalid_header`), or `stale_keepalive`.
    pub fn word(self) -> String {
        match self {
            Answer::Status(s) => format!("http_{s}"),
            Answer::Stall => "timeout".to_string(),
            Answer::InvalidHeader => "invalid_header".to_string(),
            Answer::StaleKeepalive => "stale_keepalive".to_string(),
        }
    }

    /// The answer named `word` ([`Answer::word`]).
    pub fn from_word(word: &str) -> Option<Answer> {
        Some(match word {
            "timeout" => Answer::Stall,
            "invalid_header" => Answer::InvalidHeader,
            "stale_keepalive" => Answer::StaleKeepalive,
            _ => {
                let status: u16 = word.strip_prefix("http_")?.parse().ok()?;
                STATUSES.contains(&status).then_some(Answer::Status(status))?
            }
        })
    }
}

/// The worker's cached keepalive connections to [`Answer::StaleKeepalive`] servers, by peer address: a
/// `200 OK` leaves one cached (it ends the request, and its peer is freed as a success), and the next
/// attempt at that address runs on it and meets the server's close. A fresh worker has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Connections(std::collections::BTreeSet<String>);

impl Connections {
    /// How an attempt at the peer printed as `name` ends, given its `answer` (`None`: `200 OK`) and
    /// whether it `refuses`; keeps track of the cached connections.
    pub fn reply(&mut self, name: &str, refuses: bool, answer: Option<Answer>) -> Reply {
        if refuses {
            return Reply::Refused;
        }
        match answer {
            None => Reply::OK,
            Some(Answer::Status(s)) => Reply::Status(s),
            Some(Answer::Stall) => Reply::ReadTimeout,
            Some(Answer::InvalidHeader) => Reply::InvalidHeader,
            Some(Answer::StaleKeepalive) => {
                if self.0.remove(name) {
                    Reply::StaleConnection
                } else {
                    self.0.insert(name.to_string());
                    Reply::OK
                }
            }
        }
    }
}

/// The statuses a server may answer with: every status `proxy_next_upstream` can name.
pub const STATUSES: [u16; 7] = [500, 502, 503, 504, 403, 404, 429];

/// How long the upstream block keeps idle keepalive connections (`keepalive_timeout`, upstream context)
/// and a [`Answer::StaleKeepalive`] server keeps them open: longer than any run, so only the server's close
/// on a reused connection ends one.
pub const STALE_KEEPALIVE_TIMEOUT: &str = "3600s";

/// `proxy_read_timeout` of the front location in a run with failure kinds.
pub const READ_TIMEOUT_MS: u64 = 2000;

/// What one attempt met, for reports: the failure kinds of issue 20 (and `ok`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The connection was refused (a dead server).
    Refused,
    /// A status code other than 200.
    Status(u16),
    /// A read timeout.
    Timeout,
    /// An invalid header.
    InvalidHeader,
    /// A cached keepalive connection found closed.
    StaleKeepalive,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Refused => f.write_str("refused"),
            Kind::Status(s) => write!(f, "http_{s}"),
            Kind::Timeout => f.write_str("timeout"),
            Kind::InvalidHeader => f.write_str("invalid_header"),
            Kind::StaleKeepalive => f.write_str("stale_keepalive"),
        }
    }
}

/// The failure kinds of one run: each failing live server's answer (by its `server` text, so duplicate
/// lines agree) and the front's retry policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failures {
    /// Answers by server text; a live server not listed answers `200 OK`.
    pub answers: BTreeMap<String, Answer>,
    /// `proxy_next_upstream` and `proxy_next_upstream_tries` (`proxy_next_upstream_timeout` stays 0).
    pub policy: RetryPolicy,
    /// Percent of requests sent as POST (the rest are GET).
    pub post_percent: u8,
}

impl Failures {
    /// Random failure kinds for `topology`, reproducible from `seed`: about a third of the live servers
    /// fail (at most two stall, and only lines that stall once: `max_fails=1`, primary, with another
    /// primary peer beside them), and a random policy.
    pub fn random(topology: &Topology, seed: u64) -> Failures {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6661_696c_6b69_6e64);
        let primary_peers: usize = topology.lines.iter().filter(|l| !l.backup).map(|l| l.endpoints.len()).sum();
        let mut answers = BTreeMap::new();
        let mut stalls = 0;
        for line in topology.lines.iter().filter(|l| !l.dead) {
            if answers.contains_key(&line.server) || rng.random_range(0..100) >= 35 {
                continue;
            }
            let same: Vec<_> = topology.lines.iter().filter(|l| l.server == line.server).collect();
            let stall_ok = stalls < 2
                && primary_peers >= 2
                && same.iter().all(|l| l.max_fails >= 1 && l.fail_timeout >= 3600 && !l.backup);
            let mut choices: Vec<Answer> = STATUSES.iter().map(|&s| Answer::Status(s)).collect();
            choices.extend([
                Answer::InvalidHeader,
                Answer::InvalidHeader,
                Answer::StaleKeepalive,
                Answer::StaleKeepalive,
            ]);
            if stall_ok {
                choices.extend([Answer::Stall; 4]);
            }
            let answer = choices[rng.random_range(0..choices.len())];
            stalls += usize::from(answer == Answer::Stall);
            answers.insert(line.server.clone(), answer);
        }
        Failures { answers, policy: random_policy(&mut rng), post_percent: 30 }
    }

    /// [`Failures::random`] under `policy` instead of a random one: the retry rules of a user's location
    /// (`verify --config`). Its `proxy_next_upstream_timeout` is not written (timing: not proven live).
    pub fn random_under(topology: &Topology, seed: u64, policy: RetryPolicy) -> Failures {
        let policy = RetryPolicy { timeout_ms: 0, ..policy };
        Failures { policy, ..Failures::random(topology, seed) }
    }

    /// How an attempt at `peer` (of `topology`'s upstream) ends, on a worker holding `connections`.
    pub fn reply(&self, topology: &Topology, peer: &Peer, connections: &mut Connections) -> Reply {
        connections.reply(peer.name(), topology.refuses(peer.name()), self.answers.get(peer.server().as_str()).copied())
    }

    /// The answer of the server whose peer nginx printed as `name` (`None`: `200 OK`, or not a peer).
    pub fn answer_of(&self, topology: &Topology, name: &str) -> Option<Answer> {
        let line = topology.lines.iter().find(|l| l.endpoints.iter().any(|e| e.name == name))?;
        self.answers.get(&line.server).copied()
    }

    /// Whether a server answers [`Answer::StaleKeepalive`] (the upstream then keeps idle connections for
    /// an hour: [`STALE_KEEPALIVE_TIMEOUT`]).
    pub fn has_stale_keepalive(&self) -> bool {
        self.answers.values().any(|a| *a == Answer::StaleKeepalive)
    }

    /// What an attempt at the address nginx printed as `name` met (`None`: `200 OK`, or not a peer).
    pub fn kind(&self, topology: &Topology, name: &str) -> Option<Kind> {
        let line = topology.lines.iter().find(|l| l.endpoints.iter().any(|e| e.name == name))?;
        if topology.refuses(name) {
            return Some(Kind::Refused);
        }
        self.answers.get(&line.server).map(|a| match a {
            Answer::Status(s) => Kind::Status(*s),
            Answer::Stall => Kind::Timeout,
            Answer::InvalidHeader => Kind::InvalidHeader,
            Answer::StaleKeepalive => Kind::StaleKeepalive,
        })
    }

    /// Adds to `met`, per kind, the requests whose attempts (nginx's `$upstream_addr` of each, `None` when
    /// it sent none) met that kind at least once.
    pub fn count_met<'r>(
        &self,
        topology: &Topology,
        upstream_addrs: impl IntoIterator<Item = Option<&'r str>>,
        met: &mut BTreeMap<String, usize>,
    ) {
        for addr in upstream_addrs {
            let kinds: std::collections::BTreeSet<String> = addr
                .unwrap_or_default()
                .split(", ")
                .filter_map(|name| self.kind(topology, name))
                .map(|k| k.to_string())
                .collect();
            for kind in kinds {
                *met.entry(kind).or_default() += 1;
            }
        }
    }

    /// The listeners of `topology` that answer with a failure, grouped by answer.
    pub fn listeners(&self, topology: &Topology) -> Vec<(Answer, Vec<Listen>)> {
        let mut groups: BTreeMap<Answer, Vec<Listen>> = BTreeMap::new();
        for line in topology.lines.iter().filter(|l| !l.dead) {
            if let Some(&a) = self.answers.get(&line.server) {
                let group = groups.entry(a).or_default();
                for ep in &line.endpoints {
                    if !group.contains(&ep.listen) {
                        group.push(ep.listen.clone());
                    }
                }
            }
        }
        groups.into_iter().collect()
    }

    /// What the rendered nginx.conf needs: the failing listeners and the policy.
    pub fn failing(&self, topology: &Topology) -> Failing {
        Failing { groups: self.listeners(topology), policy: self.policy }
    }
}

/// The part of a site that fails on purpose: listeners grouped by answer, and the front's retry policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// Listeners by answer (they are left out of the echo listeners).
    pub groups: Vec<(Answer, Vec<Listen>)>,
    /// The front location's policy.
    pub policy: RetryPolicy,
}

impl Failing {
    /// The front location's retry directives.
    pub fn front_directives(&self) -> String {
        let p = &self.policy;
        format!(
            "proxy_next_upstream {};\nproxy_next_upstream_tries {};\nproxy_read_timeout {}ms;\n",
            p.next_upstream, p.tries, READ_TIMEOUT_MS
        )
    }
}

/// The location of a listener that fails with `answer` (inside its `server` block).
pub fn answer_location(answer: Answer) -> String {
    match answer {
        Answer::Status(s) => format!("location / {{ return {s}; }}"),
        // One byte per second: the header is never complete within the front's proxy_read_timeout.
        Answer::Stall => "location / { limit_rate 1; return 200 \"stall\"; }".to_string(),
        // A bare CR inside a header value: ngx_http_parse_header_line() answers NGX_HTTP_PARSE_INVALID_HEADER.
        Answer::InvalidHeader => "location / { add_header X-Bad \"a\\rb\" always; return 200 \"ok\"; }".to_string(),
        // The first request of a connection is answered and the connection kept (for an hour: no timer
        // closes it); any later one on it is closed unanswered (444).
        Answer::StaleKeepalive => format!(
            "keepalive_timeout {STALE_KEEPALIVE_TIMEOUT};\n        location / {{ if ($connection_requests != \"1\") {{ return 444; }} return 200 \"ok\"; }}"
        ),
    }
}

/// The `server` blocks of the failing listeners.
pub fn render_listeners(groups: &[(Answer, Vec<Listen>)], listen_arg: impl Fn(&Listen) -> String) -> String {
    let mut out = String::new();
    for (answer, listeners) in groups {
        let _ = writeln!(out, "    server {{");
        for l in listeners {
            let _ = writeln!(out, "        listen {};", listen_arg(l));
        }
        let _ = writeln!(out, "        {}\n    }}", answer_location(*answer));
    }
    out
}

fn random_policy(rng: &mut ChaCha8Rng) -> RetryPolicy {
    use Condition::*;
    let next_upstream = if rng.random_range(0..10) == 0 {
        NextUpstream::OFF
    } else {
        let odds = [
            (Error, 85),
            (Timeout, 70),
            (InvalidHeader, 50),
            (NonIdempotent, 40),
            (Http500, 35),
            (Http502, 35),
            (Http503, 35),
            (Http504, 35),
            (Http403, 35),
            (Http404, 35),
            (Http429, 35),
        ];
        let set: NextUpstream =
            odds.into_iter().filter(|&(_, pct)| rng.random_range(0..100) < pct).map(|(c, _)| c).collect();
        // An empty set cannot be written: `proxy_next_upstream` needs a word.
        if set == NextUpstream::EMPTY { NextUpstream::OFF } else { set }
    };
    let tries = [0, 0, 0, 1, 2, 3, 5][rng.random_range(0..7)];
    RetryPolicy { next_upstream, tries, timeout_ms: 0 }
}

/// The `listen` argument of a listener (as the echo listeners are rendered).
pub fn listen_arg(l: &Listen) -> String {
    match l {
        Listen::Tcp(a) => token(&a.to_string()),
        Listen::Unix(p) => token(&format!("unix:{p}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::topology::{Capabilities, TopologyOptions};

    #[test]
    fn random_failures_are_reproducible_and_stall_only_where_they_cost_one_wait() {
        let caps = Capabilities { ipv6: false, port80: false, hostnames: false, unix_dir: None };
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let t = Topology::random(seed, &TopologyOptions::default(), &caps);
            let f = Failures::random(&t, seed);
            assert_eq!(f, Failures::random(&t, seed));
            assert!(f.answers.values().filter(|a| **a == Answer::Stall).count() <= 2);
            for (server, a) in &f.answers {
                let lines: Vec<_> = t.lines.iter().filter(|l| &l.server == server).collect();
                assert!(lines.iter().all(|l| !l.dead), "{server}");
                if *a == Answer::Stall {
                    assert!(lines.iter().all(|l| l.max_fails == 1 && l.fail_timeout == 3600 && !l.backup));
                }
                seen.insert(*a);
            }
            assert_ne!(f.policy.next_upstream, NextUpstream::EMPTY);
        }
        assert!(seen.contains(&Answer::Stall) && seen.contains(&Answer::InvalidHeader), "{seen:?}");
        assert!(seen.contains(&Answer::StaleKeepalive), "{seen:?}");
        for s in STATUSES {
            assert!(seen.contains(&Answer::Status(s)), "{s}");
        }
    }

    #[test]
    fn answers_render_as_nginx_server_blocks() {
        let groups = vec![
            (Answer::Status(503), vec![Listen::Tcp("127.0.0.2:10001".parse().unwrap())]),
            (Answer::InvalidHeader, vec![Listen::Unix("/tmp/a.sock".into())]),
        ];
        let text = render_listeners(&groups, listen_arg);
        assert!(text.contains("listen 127.0.0.2:10001;\n        location / { return 503; }"), "{text}");
        assert!(text.contains("listen unix:/tmp/a.sock;"), "{text}");
        assert!(text.contains(r#"add_header X-Bad "a\rb" always;"#), "{text}");
        assert_eq!(Kind::Status(429).to_string(), "http_429");
    }
}
