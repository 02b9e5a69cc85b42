use super::*;
use crate::run::parity::{LibraryModel, Model};
use crate::site::topology::{Endpoint, Listen, ServerLine, Spelling};
use nginx_ketama::upstream::Method;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

#[test]
fn windows_come_from_msec_and_request_time() {
    assert_eq!(Window::parse("1764620000.123 0.000"), Some(Window::at(1764620000)));
    assert_eq!(Window::parse("1764620001.002 0.003"), Some(Window { first: 1764619999 + 1, last: 1764620001 }));
    assert_eq!(Window::parse("1764620001.002 0.002"), Some(Window::at(1764620001)), "created at .000");
    assert_eq!(Window::parse("1764620001.002 0.003"), Some(Window { first: 1764620000, last: 1764620001 }));
    assert_eq!(Window::parse("1764620001.002 2.500"), Some(Window { first: 1764619998, last: 1764620001 }));
    for bad in ["", "1764620000.123", "1764620000 0.000", "1764620000.12 0.000", "x.123 0.000", "1.000 0.000 1"] {
        assert_eq!(Window::parse(bad), None, "{bad:?}");
    }
}

/// `n` live-or-dead lines `10.0.0.i:80` (every third dead) with `fail_timeout`.
fn topology(n: usize, fail_timeout: u64, method: Method) -> Topology {
    let lines = (1..=n)
        .map(|i| {
            let addr: std::net::SocketAddr = format!("10.0.0.{i}:80").parse().unwrap();
            ServerLine {
                server: addr.to_string(),
                spelling: Spelling::IpPort,
                weight: 1 + (i % 3) as u32,
                down: false,
                dead: i % 3 == 0,
                backup: false,
                max_fails: 1,
                fail_timeout,
                endpoints: vec![Endpoint { listen: Listen::Tcp(addr), name: addr.to_string() }],
            }
        })
        .collect();
    Topology { seed: 1, method, lines, hosts: Vec::new() }
}

/// What an nginx worker answers when its clock is read at hidden moments: each read `step_ms` apart at
/// most, the requests back to back. Returns each request's answer and the window nginx would report.
fn hidden_clock_run(
    up: &Upstream,
    t: &Topology,
    keys: &[Vec<u8>],
    step_ms: u64,
    seed: u64,
) -> Vec<(Observation, Window, bool)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut nginx = Worker::new(up);
    let mut ms: u64 = 1_700_000_000_000;
    keys.iter()
        .map(|key| {
            let start = ms;
            let mut seconds = Vec::new();
            let out = nginx.request_with_clock(
                key,
                || {
                    ms += rng.random_range(0..=step_ms);
                    seconds.push(ms / 1000);
                    ms / 1000
                },
                |p| t.refuses(p.name()),
            );
            ms += rng.random_range(0..=step_ms);
            let window = Window { first: start / 1000, last: ms / 1000 };
            // Whether the clock really moved between the request's reads (not only before or after them).
            let ticked = seconds.first() != seconds.last();
            (observation(up, &out), window, ticked)
        })
        .collect()
}

fn keys(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut v = crate::site::topology::random_keys(seed, n);
    for i in (0..n).step_by(40) {
        v[i] = Vec::new();
    }
    v
}

/// Against an nginx whose clock moves during runs of many seconds, with fail_timeouts of 0, 1 and 3
/// seconds: the clocked model finds no mismatch, and calls nothing not comparable before a second boundary
/// has fallen inside a request. A fixed clock (the old model) and a
/// model that ignores ticks inside a request (each window taken at its first second) both report
/// mismatches on the same answers.
#[test]
fn the_clocked_model_follows_a_moving_clock_and_the_fixed_one_does_not() {
    let mut fixed_wrong = 0;
    let mut first_second_wrong = 0;
    let mut not_comparable = 0;
    for (fail_timeout, method, step_ms, seed) in [
        (0, Method::Consistent, 40, 1),
        (1, Method::Consistent, 15, 2),
        (1, Method::Plain, 15, 3),
        (3, Method::Consistent, 8, 4),
        (0, Method::Plain, 300, 5),
    ] {
        let t = topology(12, fail_timeout, method);
        let up = t.upstream(nginx_ketama::NginxVersion::LATEST, nginx_ketama::Libc::Glibc).unwrap();
        let keys = keys(2000, seed);
        let answers = hidden_clock_run(&up, &t, &keys, step_ms, seed);
        let seconds = answers.last().unwrap().1.last - answers[0].1.first;
        assert!(seconds > fail_timeout + 2, "the run outlasts fail_timeout: {seconds} s");
        let mut model = ClockedModel::new(&up, &t);
        let mut compared = 0;
        let mut ticked = false;
        for (i, (key, (actual, window, _))) in keys.iter().zip(&answers).enumerate() {
            ticked |= window.first < window.last;
            match model.judge(key, Some(*window), actual) {
                Judgement::Match => compared += 1,
                Judgement::Differs(expected) => {
                    panic!("request {i} (ft {fail_timeout}, {method:?}): expected {expected:?}, nginx {actual:?}")
                }
                Judgement::NotComparable(why) => {
                    assert_eq!(why, Unclocked::Tick, "request {i}");
                    assert!(ticked, "request {i}: before the first tick inside a request, everything is compared");
                    not_comparable += 1;
                }
            }
        }
        assert!(compared > keys.len() * 9 / 10, "{compared} of {}", keys.len());
        assert!(model.states() <= MAX_STATES);
        let mut old = LibraryModel::new(&up, &t);
        fixed_wrong += keys.iter().zip(&answers).filter(|(k, (a, _, _))| old.expect(k) != *a).count();
        let mut first_only = ClockedModel::new(&up, &t);
        first_second_wrong += keys
            .iter()
            .zip(&answers)
            .filter(|(k, (a, w, _))| matches!(first_only.judge(k, Some(Window::at(w.first)), a), Judgement::Differs(_)))
            .count();
    }
    assert!(fixed_wrong > 100, "a fixed clock is wrong once failed servers come back: {fixed_wrong}");
    assert!(first_second_wrong > 0, "ticks inside a request matter");
    assert!(not_comparable > 0, "some answers depend on the tick");
}

/// One request with a one-second window is run once; with a two-second window in every way its reads
/// can tick (reads + 1 ways).
#[test]
fn a_tick_inside_a_request_is_tried_at_every_read() {
    let t = topology(6, 0, Method::Consistent);
    let up = t.upstream(nginx_ketama::NginxVersion::LATEST, nginx_ketama::Libc::Glibc).unwrap();
    let refuses = |p: &Peer| t.refuses(p.name());
    // A key whose first attempt fails: at least three reads (get, failure, get).
    let key = (0..)
        .map(|i| format!("k{i}").into_bytes())
        .find(|k| Worker::new(&up).request(k, 5, refuses).attempts.len() >= 2)
        .unwrap();
    let w = Worker::new(&up);
    let one = every_way(&w, &key, Window::at(5), refuses, 100).unwrap();
    assert_eq!(one.len(), 1);
    let mut reads = 0;
    Worker::new(&up).request_with_clock(
        &key,
        || {
            reads += 1;
            5
        },
        refuses,
    );
    let two = every_way(&w, &key, Window { first: 5, last: 6 }, refuses, 100).unwrap();
    assert_eq!(two.len(), reads + 1, "{reads} reads");
    let three = every_way(&w, &key, Window { first: 5, last: 7 }, refuses, 1000).unwrap();
    assert_eq!(three.len(), (reads + 1) * (reads + 2) / 2, "non-decreasing sequences over 3 seconds");
    assert!(every_way(&w, &key, Window { first: 5, last: 7 }, refuses, 3).is_none(), "bounded");
}

/// Without a clock, or with more possible states than it keeps, the model stops comparing for the rest
/// of the run and never calls anything a mismatch.
#[test]
fn a_model_that_cannot_follow_the_clock_compares_nothing_more() {
    let t = topology(30, 0, Method::Consistent);
    let up = t.upstream(nginx_ketama::NginxVersion::LATEST, nginx_ketama::Libc::Glibc).unwrap();
    let keys = keys(300, 9);
    let answers = hidden_clock_run(&up, &t, &keys, 5, 9);
    let mut model = ClockedModel::new(&up, &t);
    assert_eq!(model.judge(&keys[0], Some(answers[0].1), &answers[0].0), Judgement::Match);
    assert_eq!(model.judge(&keys[1], None, &answers[1].0), Judgement::NotComparable(Unclocked::NoClock));
    assert_eq!(model.judge(&keys[2], Some(answers[2].1), &answers[2].0), Judgement::NotComparable(Unclocked::NoClock));
    // Windows of 40 seconds around every request: the ways multiply until the model gives up.
    let mut model = ClockedModel::new(&up, &t);
    let mut gave_up = false;
    for (k, (a, w, _)) in keys.iter().zip(&answers) {
        match model.judge(k, Some(Window { first: w.first.saturating_sub(20), last: w.last + 20 }), a) {
            Judgement::Differs(e) => panic!("{e:?} vs {a:?}"),
            Judgement::NotComparable(Unclocked::TooManyStates) => gave_up = true,
            _ => assert!(!gave_up, "nothing is compared after giving up"),
        }
    }
    assert!(gave_up);
}
