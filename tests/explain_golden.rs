//! `explain` against the golden vectors (recorded from every nginx of nginx/versions; groups with failure
//! kinds through `explain_with`, each peer answering as recorded): for every recorded
//! request, the attempts `explain` reports equal nginx's `$upstream_addr` and the [`Worker`]'s attempts, and
//! its trace is self-consistent (the walk starts on the key's point, steps point by point, counts misses one
//! by one, and every attempt follows the step that chose its peer).

use nginx_ketama::analysis::explain::{Landing, explain, explain_with};
use nginx_ketama::failure::ClientRequest;
use nginx_ketama::worker::{Step, Verdict};
use nginx_ketama::{Method, Status, Upstream, Worker};
use nginx_ketama_harness::golden::{PeerAnswers, Record, Run, load_records, records_dir, upstream_of_peers};
use nginx_ketama_harness::run::parity::RUN_CLOCK;
use nginx_ketama_harness::site::failures::Connections;

/// The attempts a trace records, in order.
fn attempts_of(steps: &[Step]) -> Vec<nginx_ketama::PeerId> {
    steps.iter().filter_map(|s| if let Step::Attempt { peer, .. } = s { Some(*peer) } else { None }).collect()
}

/// Structural checks of one explanation.
fn check_trace(up: &Upstream, e: &nginx_ketama::analysis::Explanation) -> Result<(), String> {
    if attempts_of(&e.steps) != e.outcome.attempts {
        return Err("trace attempts differ from the outcome".into());
    }
    if e.steps.last() != Some(&Step::End(e.outcome.status)) {
        return Err("the trace does not end with the status".into());
    }
    let mut misses = 0;
    // Where the next point step must be: the key's point first; after a pick the same point (a retry
    // re-examines it), after a miss the next one.
    let mut next_point: Option<usize> = match e.landing {
        Landing::Point { index, .. } => Some(index),
        _ => None,
    };
    let mut chosen: Option<nginx_ketama::PeerId> = None;
    for step in &e.steps {
        let verdict = match step {
            Step::Point { index, hash, server, verdict } => {
                let ring = up.ring().ok_or("a point step without a ring")?;
                let p = ring.point(*index);
                if p.hash != *hash || ring.servers()[*server] != *p.server {
                    return Err(format!("point {index} is not ({hash:08x}, server {server})"));
                }
                if next_point != Some(*index) {
                    return Err(format!("point {index} where {next_point:?} was due"));
                }
                next_point = Some(match verdict {
                    Verdict::Chosen(_) => *index,
                    Verdict::Miss { .. } => (*index + 1) % ring.len(),
                });
                verdict
            }
            Step::Rehash { verdict, .. } => verdict,
            Step::RoundRobin { list, chosen: Some(i) } => {
                chosen = Some(nginx_ketama::PeerId { list: *list, index: *i });
                continue;
            }
            Step::Attempt { peer, .. } => {
                if chosen.take() != Some(*peer) {
                    return Err(format!("attempt of {peer:?} that no step chose"));
                }
                continue;
            }
            _ => continue,
        };
        match verdict {
            Verdict::Chosen(id) => chosen = Some(*id),
            Verdict::Miss { misses: m, .. } => {
                misses += 1;
                if *m != misses {
                    return Err(format!("miss {m} after {} misses", misses - 1));
                }
            }
        }
    }
    Ok(())
}

fn records() -> Vec<Record> {
    let r = load_records(&records_dir()).expect("vectors/records is readable");
    assert!(!r.is_empty(), "no records");
    r
}

#[test]
fn explain_reproduces_every_golden_vector() {
    let mut failures = Vec::new();
    let (mut checked, mut walked) = (0, 0);
    for record in &records() {
        for run in &record.runs {
            failures.extend(replay(record, run, &mut checked, &mut walked));
        }
    }
    eprintln!("explain: {checked} recorded requests, {walked} with a walk past at least one point or slot");
    assert!(checked > 1500, "only {checked} requests");
    assert!(failures.is_empty(), "{} differ:\n{}", failures.len(), failures[..failures.len().min(20)].join("\n"));
}

fn replay(record: &Record, run: &Run, checked: &mut usize, walked: &mut usize) -> Vec<String> {
    let up = upstream_of_peers(record.method, run.nginx, run.c_library(), &run.peers).unwrap();
    let answers = PeerAnswers::of(run);
    let refuses = |p: &nginx_ketama::Peer| answers.refuses(p.name());
    // Groups with failure kinds: each peer answers as recorded, under the group's policy and each request's
    // method and clock; a stale-keepalive peer's cached connection is per worker.
    let policy = record.policy.as_ref().map(|p| p.policy().expect("a recorded policy"));
    let mut failures = Vec::new();
    let (mut explained, mut plain) = (Worker::new(&up), Worker::new(&up));
    let (mut c_explained, mut c_plain) = (Connections::default(), Connections::default());
    for (i, (k, want)) in record.keys.iter().zip(&run.results).enumerate() {
        if !record.stateful {
            (explained, plain) = (Worker::new(&up), Worker::new(&up));
            (c_explained, c_plain) = (Connections::default(), Connections::default());
        }
        let key = k.bytes();
        let now = RUN_CLOCK + k.clock.unwrap_or(0);
        let (e, w) = match &policy {
            None => (explain(&mut explained, &key, now, refuses), plain.request(&key, now, refuses)),
            Some(policy) => {
                let client = ClientRequest { method: k.method().as_request_method(), ..ClientRequest::default() };
                let (c_e, c_p) = (&mut c_explained, &mut c_plain);
                (
                    explain_with(&mut explained, &key, now, policy, &client, |p| answers.reply(p.name(), c_e)),
                    plain.request_with(&key, now, policy, &client, |p| answers.reply(p.name(), c_p)),
                )
            }
        };
        let at = format!("{} (nginx {}) key #{}", record.case, run.label(), i + 1);
        *checked += 1;
        if e.steps.iter().any(|s| {
            matches!(
                s,
                Step::Point { verdict: Verdict::Miss { .. }, .. } | Step::Rehash { verdict: Verdict::Miss { .. }, .. }
            )
        }) {
            *walked += 1;
        }
        if e.outcome != w {
            failures.push(format!("{at}: explain {:?}, worker {:?}", e.outcome, w));
        }
        if let Err(why) = check_trace(&up, &e) {
            failures.push(format!("{at}: {why}\n{}", e.render(&up)));
        }
        let (names, _) = want.attempts();
        let got: Vec<&str> = e.outcome.attempts.iter().map(|&id| up.peer(id).name()).collect();
        let status = match (&policy, e.outcome.status) {
            (Some(_), _) => e.outcome.client_status,
            (None, Status::Answered) => 200,
            (None, _) => 502,
        };
        if got != names || status != want.status {
            failures.push(format!("{at}: nginx {} {:?}, explain {status} {got:?}", want.status, names));
        }
        if record.method == Method::Consistent
            && !key.is_empty()
            && !matches!(e.landing, Landing::Point { .. } | Landing::NotHashed(_))
        {
            failures.push(format!("{at}: consistent key without a point"));
        }
    }
    failures
}
