//! The catalog's cases with failure kinds (issue 20; algorithm §5 and §5.1): servers that answer with a
//! status code, time out, send an invalid header or close reused keepalive connections, under a front
//! `proxy_next_upstream` policy, with GET and POST requests, and one case whose clock advances (the
//! `fail_timeout` window's boundary). Which rule each case pins is in its description; what nginx did is
//! only in the recordings.

use super::flag::Flag;
use super::keys::{key, sample_keys, twice};
use super::lines::{LineExt, line, topo};
use super::{Case, CaseKey, RequestMethod};
use crate::site::failures::{Answer, Failures};
use crate::site::topology::{ServerLine, Topology};
use nginx_ketama::failure::{Condition, NextUpstream, RetryPolicy};
use nginx_ketama::upstream::Method;
use std::collections::BTreeMap;

/// The cases with failure kinds, in review order (after the refused-only ones).
pub(super) const CASES: &[fn() -> Case] = &[
    fail_statuses_retried,
    fail_tries_cap_last_status,
    fail_403_404_next_429_failed,
    fail_post_not_retried,
    fail_post_non_idempotent,
    fail_timeout_invalid_header,
    fail_off_still_counts,
    fail_none_left,
    fail_stale_keepalive,
    fail_stale_single_server,
    plain_fail_statuses,
    fail_timeout_boundary,
];

/// The failures of a case: answers by server text, and the policy.
fn failures(answers: &[(&ServerLine, Answer)], words: &[Condition], tries: u32) -> Failures {
    let next_upstream: NextUpstream = words.iter().copied().collect();
    Failures {
        answers: answers.iter().map(|(l, a)| (l.server.clone(), *a)).collect::<BTreeMap<_, _>>(),
        policy: RetryPolicy { next_upstream, tries, timeout_ms: 0 },
        post_percent: 0,
    }
}

/// `keys` sent as POST (empty body).
fn posts(keys: Vec<CaseKey>) -> Vec<CaseKey> {
    keys.into_iter()
        .map(|mut k| {
            k.method = RequestMethod::Post;
            k.flags.push(Flag::NonIdempotent);
            k
        })
        .collect()
}

/// Each key as GET, then the same key as POST.
fn get_then_post(keys: Vec<CaseKey>) -> Vec<CaseKey> {
    keys.into_iter().flat_map(|k| [k.clone(), posts(vec![k]).remove(0)]).collect()
}

/// `n` sample keys whose ring point (first pick, with every server live) is `server`'s (a selection made with
/// this library's ring; what nginx does with them is recorded).
fn keys_on(topology: &Topology, server: &str, prefix: &str, n: usize) -> Vec<CaseKey> {
    let up = topology
        .upstream(nginx_ketama::version::NginxVersion::LATEST, nginx_ketama::Libc::Glibc)
        .expect("catalog topologies are valid");
    let ring = up.ring().expect("consistent");
    let found: Vec<CaseKey> = sample_keys(prefix, 77, 4000)
        .into_iter()
        .filter(|k| ring.owner(&k.key).is_some_and(|s| s.as_str() == server))
        .take(n)
        .collect();
    assert_eq!(found.len(), n, "not enough sample keys on {server}");
    found
}

/// `n` sample keys whose failover order (every server failing, max_fails=0) starts `first`, then `second`
/// (a selection made with this library's worker; what nginx does with them is recorded).
fn keys_ordered(topology: &Topology, first: &str, second: &str, prefix: &str, n: usize) -> Vec<CaseKey> {
    let up = topology
        .upstream(nginx_ketama::version::NginxVersion::LATEST, nginx_ketama::Libc::Glibc)
        .expect("catalog topologies are valid");
    let found: Vec<CaseKey> = sample_keys(prefix, 78, 20_000)
        .into_iter()
        .filter(|k| {
            let out = nginx_ketama::Worker::new(&up).request(&k.key, 0, |_| true);
            let servers: Vec<String> =
                out.attempts.iter().map(|&id| up.peer(id).server().as_str().to_string()).collect();
            servers.len() >= 2 && servers[0] == first && servers[1] == second
        })
        .take(n)
        .collect();
    assert_eq!(found.len(), n, "not enough sample keys trying {first} then {second}");
    found
}

use Condition::*;

fn fail_statuses_retried() -> Case {
    let l: Vec<ServerLine> = (1..=9).map(|i| line(&format!("127.0.40.{i}:9001"))).collect();
    let f = failures(
        &[
            (&l[0], Answer::Status(500)),
            (&l[1], Answer::Status(502)),
            (&l[2], Answer::Status(503)),
            (&l[3], Answer::Status(504)),
            (&l[4], Answer::Status(429)),
            (&l[7], Answer::Status(403)),
            (&l[8], Answer::Status(404)),
        ],
        &[Error, Timeout, Http500, Http502, Http503, Http504, Http429, Http403, Http404],
        0,
    );
    Case::new(
        "fail-statuses-retried",
        "Seven servers answer 500, 502, 503, 504, 429, 403 and 404, all listed in proxy_next_upstream, two \
         answer 200; max_fails=0: each listed status with budget left moves on to the next point's server, and \
         $upstream_status shows every attempt.",
        topo(Method::Consistent, l),
        sample_keys("fs-", 40, 60),
    )
    .failing(f)
    .with_flags(&[Flag::FailureKinds])
}

fn fail_tries_cap_last_status() -> Case {
    let l: Vec<ServerLine> = (1..=8).map(|i| line(&format!("127.0.41.{i}:9001")).accounting()).collect();
    let f = failures(
        &[
            (&l[0], Answer::Status(502)),
            (&l[1], Answer::Status(503)),
            (&l[2], Answer::Status(500)),
            (&l[3], Answer::Status(502)),
            (&l[4], Answer::Status(503)),
            (&l[5], Answer::Status(500)),
        ],
        &[Error, Timeout, Http500, Http502, Http503],
        2,
    );
    let t = topo(Method::Consistent, l);
    // Three pairs of failing servers (O, S): a key that tries O first and S second (O fails; S's answer is
    // passed on, a success), then a key whose first server is S (still usable: tried, failing, retried).
    let mut keys = Vec::new();
    for (o, s) in [(1, 2), (3, 4), (5, 6)] {
        let (o, s) = (format!("127.0.41.{o}:9001"), format!("127.0.41.{s}:9001"));
        keys.extend(keys_ordered(&t, &o, &s, "tc-o-", 1));
        keys.extend(keys_on(&t, &s, "tc-s-", 1));
    }
    keys.extend(twice(sample_keys("tc-", 41, 40)));
    Case::new(
        "fail-tries-cap-last-status",
        "proxy_next_upstream_tries 2 and max_fails=1: a listed 5xx with budget left is a failure (the server is \
         skipped by later requests); the second attempt's 5xx is passed to the client and frees its server as a \
         success, so a later request whose first server it is still tries it.",
        t,
        keys,
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::FailureAccounting, Flag::TriesCap])
}

fn fail_403_404_next_429_failed() -> Case {
    let l = vec![
        line("127.0.42.1:9001").accounting(),
        line("127.0.42.2:9001").accounting(),
        line("127.0.42.3:9001").accounting(),
        line("127.0.42.4:9001").accounting(),
        line("127.0.42.5:9001").accounting(),
    ];
    let f = failures(
        &[(&l[0], Answer::Status(403)), (&l[1], Answer::Status(404)), (&l[2], Answer::Status(429))],
        &[Error, Timeout, Http403, Http404, Http429],
        0,
    );
    Case::new(
        "fail-403-404-next-429-failed",
        "max_fails=1: a retried 403 or 404 frees its server as NEXT (tried, not failed: later requests try it \
         again), a retried 429 as FAILED (later requests skip it); the last attempt's status is passed on.",
        topo(Method::Consistent, l),
        twice(sample_keys("nf-", 42, 40)),
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::FailureAccounting])
}

/// The topology and failures of the two POST cases on `127.0.C.x`: a 502, a refusing server, an invalid
/// header and two healthy servers, under `words`.
fn post_servers(c: u8, words: &[Condition]) -> (Topology, Failures) {
    let l = vec![
        line(&format!("127.0.{c}.1:9001")),
        line(&format!("127.0.{c}.2:9001")).dead(),
        line(&format!("127.0.{c}.3:9001")),
        line(&format!("127.0.{c}.4:9001")),
        line(&format!("127.0.{c}.5:9001")),
    ];
    let f = failures(&[(&l[0], Answer::Status(502)), (&l[2], Answer::InvalidHeader)], words, 0);
    (topo(Method::Consistent, l), f)
}

fn fail_post_not_retried() -> Case {
    let (t, f) = post_servers(43, &[Error, Timeout, InvalidHeader, Http502]);
    Case::new(
        "fail-post-not-retried",
        "Each key as GET, then as POST, without non_idempotent: a POST whose request was sent (a 502, an invalid \
         header) is not retried (the 502 is passed on; the invalid header ends with nginx's 502); a refused POST \
         (never sent) is.",
        t,
        get_then_post(sample_keys("pn-", 43, 40)),
    )
    .failing(f)
    .with_flags(&[Flag::FailureKinds, Flag::DeadServers])
}

fn fail_post_non_idempotent() -> Case {
    let (t, f) = post_servers(44, &[Error, Timeout, InvalidHeader, NonIdempotent, Http502]);
    Case::new(
        "fail-post-non-idempotent",
        "The same servers with non_idempotent listed: POST is retried like GET.",
        t,
        get_then_post(sample_keys("pi-", 44, 40)),
    )
    .failing(f)
    .with_flags(&[Flag::FailureKinds, Flag::DeadServers])
}

fn fail_timeout_invalid_header() -> Case {
    let l = vec![
        line("127.0.45.1:9001").accounting(),
        line("127.0.45.2:9001").accounting(),
        line("127.0.45.3:9001").accounting(),
        line("127.0.45.4:9001").accounting(),
        line("127.0.45.5:9001").accounting(),
    ];
    let f = failures(
        &[(&l[0], Answer::Stall), (&l[1], Answer::InvalidHeader), (&l[4], Answer::Status(504))],
        &[Error, Timeout, InvalidHeader, Http504],
        0,
    );
    Case::new(
        "fail-timeout-invalid-header",
        "A server that never completes its header within proxy_read_timeout (2 s), one that sends an invalid \
         header and one that answers 504, each max_fails=1: the timeout and the invalid header fail and move on \
         (once; later requests skip those servers).",
        topo(Method::Consistent, l),
        twice(sample_keys("ti-", 45, 24)),
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::FailureAccounting])
}

fn fail_off_still_counts() -> Case {
    let l = vec![
        line("127.0.46.1:9001").accounting().dead(),
        line("127.0.46.2:9001").accounting(),
        line("127.0.46.3:9001").accounting(),
        line("127.0.46.4:9001").accounting(),
    ];
    let f = failures(&[(&l[1], Answer::Status(502))], &[Off], 0);
    Case::new(
        "fail-off-still-counts",
        "proxy_next_upstream off: nothing is retried, but a refused connection still frees its server as FAILED \
         (max_fails=1), so later requests for the same keys skip it; a 502 (not retried) is a success.",
        topo(Method::Consistent, l),
        twice(sample_keys("of-", 46, 24)),
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::FailureAccounting, Flag::DeadServers])
}

fn fail_none_left() -> Case {
    let l = vec![
        line("127.0.51.1:9001").accounting().dead(),
        line("127.0.51.2:9001").accounting(),
        line("127.0.51.3:9001").accounting().dead(),
    ];
    let f = failures(&[(&l[1], Answer::InvalidHeader)], &[Error, Timeout], 0);
    Case::new(
        "fail-none-left",
        "Two refusing servers and one sending an invalid header, max_fails=1, proxy_next_upstream error timeout: \
         the invalid header is not retried (invalid_header is not listed; it ends with nginx's 502) but counts, \
         and once all three have failed a request finds no live upstream ($upstream_status ends with nginx's 502).",
        topo(Method::Consistent, l),
        twice(sample_keys("nl-", 51, 6)),
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::FailureAccounting, Flag::DeadServers])
}

fn fail_stale_keepalive() -> Case {
    let l = vec![
        line("127.0.47.1:9001").accounting(),
        line("127.0.47.2:9001"),
        line("127.0.47.3:9001"),
        line("127.0.47.4:9001"),
    ];
    let f = failures(&[(&l[0], Answer::StaleKeepalive), (&l[1], Answer::StaleKeepalive)], &[Error, Timeout], 1);
    let t = topo(Method::Consistent, l);
    let mut keys = Vec::new();
    for k in keys_on(&t, "127.0.47.1:9001", "sk-a-", 3) {
        keys.extend([k.clone(), k.clone(), k]);
    }
    for k in keys_on(&t, "127.0.47.2:9001", "sk-b-", 3) {
        keys.extend([k.clone(), k.clone(), k.clone()]);
        keys.extend(posts(vec![k]));
    }
    keys.extend(sample_keys("sk-", 47, 20));
    Case::new(
        "fail-stale-keepalive",
        "Two servers answer a new connection and close it when it is reused; proxy_next_upstream_tries 1. The \
         error on a cached connection gives the attempt back (a retry despite tries 1) to the next point's \
         server; the server is freed as FAILED (with max_fails=1 it is skipped afterwards; with max_fails=0 it \
         is used again, on a new connection). A POST on a stale connection was sent: not retried.",
        t,
        keys,
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::StaleKeepalive])
}

fn fail_stale_single_server() -> Case {
    let l = vec![line("127.0.48.1:9001")];
    let f = failures(&[(&l[0], Answer::StaleKeepalive)], &[Error, Timeout], 0);
    let keys = (0..6).map(|i| key(format!("ss-{i}"))).collect();
    Case::new(
        "fail-stale-single-server",
        "One server that closes reused connections: every second request meets a stale connection, and the \
         attempt given back goes to the same server again (the single-peer getter has no tried test), on a new \
         connection.",
        topo(Method::Consistent, l),
        keys,
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::StaleKeepalive, Flag::SingleServer])
}

fn plain_fail_statuses() -> Case {
    let l = vec![
        line("127.0.49.1:9001").weight(2).accounting(),
        line("127.0.49.2:9001").accounting(),
        line("127.0.49.3:9001").weight(3).accounting(),
        line("127.0.49.4:9001").accounting(),
        line("127.0.49.5:9001").weight(2).accounting().dead(),
        line("127.0.49.6:9001").accounting(),
    ];
    let f = failures(
        &[(&l[0], Answer::Status(503)), (&l[1], Answer::Status(404)), (&l[3], Answer::InvalidHeader)],
        &[Error, Timeout, InvalidHeader, Http503, Http404],
        3,
    );
    Case::new(
        "plain-fail-statuses",
        "Plain hash with weights, statuses, an invalid header, a refusing server and proxy_next_upstream_tries 3 \
         (max_fails=1): retries continue the request's rehash sequence and running sum.",
        topo(Method::Plain, l),
        twice(sample_keys("pf-", 49, 40)),
    )
    .failing(f)
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::FailureAccounting, Flag::Weighted, Flag::TriesCap])
}

fn fail_timeout_boundary() -> Case {
    let mut one = line("127.0.50.1:9001").dead();
    (one.max_fails, one.fail_timeout) = (1, 1);
    let mut zero = line("127.0.50.2:9001").dead();
    (zero.max_fails, zero.fail_timeout) = (1, 0);
    let t = topo(Method::Consistent, vec![one, zero, line("127.0.50.3:9001"), line("127.0.50.4:9001")]);
    let a = keys_on(&t, "127.0.50.1:9001", "fb-a-", 2);
    let z = keys_on(&t, "127.0.50.2:9001", "fb-z-", 2);
    let mut keys = Vec::new();
    // Each second: both keys of each server, so the first of them may fail it and the second sees the result.
    for second in 0..4 {
        for k in a.iter().chain(&z) {
            keys.push(CaseKey { at: Some(second), comment: format!("at second {second}"), ..k.clone() });
        }
    }
    Case::new(
        "fail-timeout-boundary",
        "Two refusing servers with max_fails=1, fail_timeout=1s and 0s, and requests at seconds 0 to 3 of \
         nginx's clock: a failed server is skipped while now - checked <= fail_timeout (inclusive), so the 1 s \
         one is skipped at second 1 and tried again at 2, the 0 s one is skipped for the rest of its second only.",
        t,
        keys,
    )
    .failing(failures(&[], &[Error, Timeout], 0))
    .stateful()
    .with_flags(&[Flag::FailureKinds, Flag::ClockAdvances, Flag::DeadServers, Flag::FailureAccounting])
}
