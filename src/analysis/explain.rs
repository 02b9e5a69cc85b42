//! Why one key went where it went: its CRC32, where it lands (ring point and arc, or plain-hash slot), and
//! every step the worker takes, ending with the attempts [`Worker::request`] makes.

use super::picks::Arc;
use crate::peer::{List, PeerId};
use crate::plain::RehashStep;
use crate::upstream::{Method, Upstream};
use crate::worker::{Fallback, Outcome, Status, Step, Verdict, Worker};
use std::fmt::Write as _;

/// Where a key lands before any peer is looked at: a function of the key alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// Consistent hash: the first point at or above the key's CRC32 (algorithm §3.3).
    Point {
        /// The point's index.
        index: usize,
        /// Its hash.
        hash: u32,
        /// Its server, as an index of [`Ring::servers`](crate::Ring::servers).
        server: usize,
        /// The arc the point closes (every CRC32 on it lands here).
        arc: Arc,
    },
    /// Plain hash: the first step and its slot of the primary list (algorithm §4).
    Slot {
        /// The step (counter 0: the key hashed alone).
        step: RehashStep,
        /// `sum mod total_weight`.
        slot: u64,
        /// The slot's peer, by index in the primary list.
        owner: usize,
    },
    /// nginx does not hash this key at all.
    NotHashed(Fallback),
}

/// One key, explained: what it is, where it lands, and what the worker did with it.
///
/// # Example
///
/// ```
/// use nginx_ketama::analysis::explain::{Landing, explain};
/// use nginx_ketama::{Method, Peer, Upstream, Worker};
///
/// let up = Upstream::builder(Method::Consistent)
///     .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
///     .build()?;
/// let mut worker = Worker::new(&up);
/// let e = explain(&mut worker, b"k0", 0, |_| false);
/// // docs/nginx-algorithm.md §11, worked example 2.
/// assert_eq!(e.crc32, 0xe109903f);
/// assert!(matches!(e.landing, Landing::Point { index: 700, hash: 0xe15b2f49, .. }));
/// assert_eq!(up.peer(e.outcome.attempts[0]).server().as_str(), "127.0.0.1:9005");
/// println!("{}", e.render(&up));
/// # Ok::<(), nginx_ketama::UpstreamError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The key's bytes.
    pub key: Vec<u8>,
    /// `crc32(key)`.
    pub crc32: u32,
    /// Where it lands.
    pub landing: Landing,
    /// Every step of the request, in order (see [`Step`]).
    pub steps: Vec<Step>,
    /// The request's outcome: the same as [`Worker::request`] gives.
    pub outcome: Outcome,
}

/// Runs one request for `key` on `worker` (fresh, or with the history of earlier requests) and explains
/// it. `now` and `fails` are as for [`Worker::request`], whose outcome this is.
pub fn explain(worker: &mut Worker<'_>, key: &[u8], now: u64, fails: impl FnMut(&crate::Peer) -> bool) -> Explanation {
    let up = worker.upstream();
    let crc32 = crc32fast::hash(key);
    let mut steps = Vec::new();
    let outcome = worker.request_traced(key, now, fails, &mut steps);
    Explanation { key: key.to_vec(), crc32, landing: landing(up, key, crc32), steps, outcome }
}

/// [`explain`] with failure kinds: `reply`, `policy` and `client` are as for [`Worker::request_with`],
/// whose outcome this is.
pub fn explain_with(
    worker: &mut Worker<'_>,
    key: &[u8],
    now: u64,
    policy: &crate::failure::RetryPolicy,
    client: &crate::failure::ClientRequest,
    reply: impl FnMut(&crate::Peer) -> crate::failure::Reply,
) -> Explanation {
    let up = worker.upstream();
    let crc32 = crc32fast::hash(key);
    let mut steps = Vec::new();
    let outcome = worker.request_with_traced(key, now, policy, client, reply, &mut steps);
    Explanation { key: key.to_vec(), crc32, landing: landing(up, key, crc32), steps, outcome }
}

fn landing(up: &Upstream, key: &[u8], crc32: u32) -> Landing {
    if key.is_empty() {
        return Landing::NotHashed(Fallback::EmptyKey);
    }
    match up.method() {
        Method::Consistent => {
            let ring = up.ring().expect("a consistent upstream has a ring");
            if up.is_single(List::Primary) {
                return Landing::NotHashed(Fallback::SinglePeer);
            }
            if ring.is_empty() {
                return Landing::NotHashed(Fallback::NothingToHash);
            }
            let index = ring.locate(crc32);
            Landing::Point {
                index,
                hash: ring.point(index).hash,
                server: ring.server_index_at(index),
                arc: Arc::of_point(ring, index),
            }
        }
        Method::Plain => {
            if up.plain_bypasses(List::Primary) {
                return Landing::NotHashed(if up.is_single(List::Primary) {
                    Fallback::SinglePeer
                } else {
                    Fallback::FewerThanTwoPeers
                });
            }
            let step = crate::plain::RehashSequence::new(key).next_step();
            let weights = up.primary().iter().map(|p| p.weight());
            let total: u64 = weights.clone().map(u64::from).sum();
            let owner = crate::plain::slot_owner(weights, step.sum).expect("weights are not 0");
            Landing::Slot { step, slot: u64::from(step.sum) % total, owner }
        }
    }
}

impl Explanation {
    /// The explanation as readable lines (what `nginx-ketama explain` prints), naming peers by their
    /// server string and, where it differs, their address.
    pub fn render(&self, up: &Upstream) -> String {
        let peer = |id: PeerId| {
            let p = up.peer(id);
            let list = if id.list == List::Backup { " (backup)" } else { "" };
            if p.name() == p.server().as_str() {
                format!("{}{list}", p.server())
            } else {
                format!("{} [{}]{list}", p.server(), p.name())
            }
        };
        let server = |s: usize| up.ring().map_or_else(String::new, |r| r.servers()[s].to_string());
        let mut out = String::new();
        let key = String::from_utf8_lossy(&self.key);
        let _ = writeln!(out, "key {key:?} ({} bytes), crc32 {:08x}", self.key.len(), self.crc32);
        match self.landing {
            Landing::Point { index, hash, server: s, arc } => {
                let _ = writeln!(
                    out,
                    "lands on point {index} ({hash:08x}, {}), which closes the arc {:08x}..={:08x} ({} values)",
                    server(s),
                    arc.start,
                    arc.end,
                    arc.len
                );
            }
            Landing::Slot { step, slot, owner } => {
                let _ = writeln!(
                    out,
                    "first step {} (crc32 >> 16 & 0x7fff), slot {slot} of {}: {}",
                    step.step,
                    up.primary().iter().map(|p| u64::from(p.weight())).sum::<u64>(),
                    peer(PeerId { list: List::Primary, index: owner })
                );
            }
            Landing::NotHashed(reason) => {
                let _ = writeln!(out, "not hashed: {reason}");
            }
        }
        let verdict = |out: &mut String, v: &Verdict| match v {
            Verdict::Chosen(id) => {
                let _ = write!(out, "chose {}", peer(*id));
            }
            Verdict::Miss { misses, passed } => {
                let _ = write!(out, "miss {misses}: ");
                if passed.is_empty() {
                    let _ = write!(out, "no peer of this list has this server");
                }
                let reasons: Vec<String> = passed.iter().map(|(id, why)| format!("{} {why}", peer(*id))).collect();
                let _ = write!(out, "{}", reasons.join(", "));
            }
        };
        let mut attempt = 0;
        for step in &self.steps {
            match step {
                Step::Point { index, hash, server: s, verdict: v } => {
                    let _ = write!(out, "  point {index} ({hash:08x}, {}): ", server(*s));
                    verdict(&mut out, v);
                    out.push('\n');
                }
                Step::Rehash { step, slot, list, owner: _, verdict: v } => {
                    let bytes =
                        if step.rehash == 0 { "key".to_string() } else { format!("\"{}\" ‖ key", step.rehash) };
                    let list = if *list == List::Backup { " of the backup list" } else { "" };
                    let _ = write!(
                        out,
                        "  rehash {}: crc32({bytes}) = {:08x}, step {}, sum {}, slot {slot}{list}: ",
                        step.rehash, step.crc, step.step, step.sum
                    );
                    verdict(&mut out, v);
                    out.push('\n');
                }
                Step::Fallback(reason) => {
                    let _ = writeln!(out, "  round-robin, because {reason}");
                }
                Step::RoundRobin { list, chosen } => {
                    let which = if *list == List::Backup { "backup" } else { "primary" };
                    match chosen {
                        Some(i) => {
                            let _ = writeln!(
                                out,
                                "  round-robin on the {which} list chose {}",
                                peer(PeerId { list: *list, index: *i })
                            );
                        }
                        None => {
                            let _ = writeln!(out, "  round-robin on the {which} list: nothing usable");
                        }
                    }
                }
                Step::SwitchToBackup => {
                    let _ = writeln!(out, "  switch to the backup list");
                }
                Step::Attempt { peer: id, failed } => {
                    attempt += 1;
                    let how = if *failed { "failed" } else { "answered" };
                    let _ = writeln!(out, "  attempt {attempt}: {} {how}", peer(*id));
                }
                Step::End(status) => {
                    let how = match status {
                        Status::Answered => "answered",
                        Status::Failed => "failed: every attempt failed and the retry budget ran out (502)",
                        Status::NoLiveUpstreams => "no live upstreams (502)",
                    };
                    let _ = writeln!(out, "  end: {how}");
                }
            }
        }
        let attempts: Vec<String> = self.outcome.attempts.iter().map(|&id| up.peer(id).server().to_string()).collect();
        let _ = writeln!(out, "attempts: {}", attempts.join(", "));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Peer;

    /// The attempts a trace records, in order.
    fn attempts_of(steps: &[Step]) -> Vec<PeerId> {
        steps.iter().filter_map(|s| if let Step::Attempt { peer, .. } = s { Some(*peer) } else { None }).collect()
    }

    fn upstream(method: Method, servers: &[&str]) -> Upstream {
        Upstream::builder(method)
            .peers(servers.iter().map(|s| Peer::new(format!("127.0.0.1:{s}")).with_max_fails(0)))
            .build()
            .unwrap()
    }

    /// Algorithm §11, worked example 3: k0's failover walk on vector C, step by step.
    #[test]
    fn failover_walk_of_worked_example_3() {
        let up = upstream(Method::Consistent, &["9001", "9002", "9901", "9902", "9903"]);
        let e = explain(&mut Worker::new(&up), b"k0", 100, |p| p.name().contains(":99"));
        let points: Vec<(usize, Option<u32>)> = e
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Point { index, verdict: Verdict::Chosen(_), .. } => Some((*index, None)),
                Step::Point { index, verdict: Verdict::Miss { misses, .. }, .. } => Some((*index, Some(*misses))),
                _ => None,
            })
            .collect();
        assert_eq!(
            points,
            [
                (691, None),
                (691, Some(1)),
                (692, None),
                (692, Some(2)),
                (693, Some(3)),
                (694, Some(4)),
                (695, Some(5)),
                (696, Some(6)),
                (697, None)
            ]
        );
        assert_eq!(attempts_of(&e.steps), e.outcome.attempts);
        let text = e.render(&up);
        assert!(text.contains("miss 1: 127.0.0.1:9903 tried"), "{text}");
        assert!(text.ends_with("attempts: 127.0.0.1:9903, 127.0.0.1:9901, 127.0.0.1:9002\n"), "{text}");
    }

    /// Algorithm §11, worked example 5 with 9002 refusing: the second step hashes "1k0".
    #[test]
    fn plain_rehash_steps() {
        let up = upstream(Method::Plain, &["9001", "9002", "9003", "9004", "9005"]);
        let e = explain(&mut Worker::new(&up), b"k0", 0, |p| p.name() == "127.0.0.1:9002");
        let sums: Vec<(u32, u64)> = e
            .steps
            .iter()
            .filter_map(|s| if let Step::Rehash { step, slot, .. } = s { Some((step.sum, *slot)) } else { None })
            .collect();
        assert_eq!(sums, [(24841, 1), (56129, 4)]);
        assert!(matches!(e.landing, Landing::Slot { slot: 1, owner: 1, .. }));
        assert!(e.render(&up).contains("rehash 1: crc32(\"1\" ‖ key) = 7a38d475, step 31288, sum 56129, slot 4"));
    }

    #[test]
    fn empty_key_and_miss_budget() {
        let up = upstream(Method::Consistent, &["9001", "9002"]);
        let e = explain(&mut Worker::new(&up), b"", 0, |_| false);
        assert_eq!(e.landing, Landing::NotHashed(Fallback::EmptyKey));
        assert_eq!(e.steps[0], Step::Fallback(Fallback::EmptyKey));
        // 25 down servers: some key walks past 21 of their points and falls to round-robin.
        let mut b = Upstream::builder(Method::Consistent);
        for i in 0..25 {
            b = b.peer(Peer::new(format!("10.0.0.{i}:80")).with_down(true));
        }
        let up = b.peer(Peer::new("127.0.0.1:1")).peer(Peer::new("127.0.0.1:2")).build().unwrap();
        let e = (0..)
            .map(|i| explain(&mut Worker::new(&up), format!("k{i}").as_bytes(), 0, |_| false))
            .find(|e| e.outcome.round_robin)
            .unwrap();
        let misses: Vec<u32> = e
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Point { verdict: Verdict::Miss { misses, passed }, .. } => {
                    assert!(passed.iter().all(|(_, why)| *why == crate::worker::Skip::Down));
                    Some(*misses)
                }
                _ => None,
            })
            .collect();
        assert_eq!(misses, (1..=21).collect::<Vec<_>>());
        assert_eq!(e.steps[21], Step::Fallback(Fallback::MissBudget));
    }
}
