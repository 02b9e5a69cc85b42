//! Offline golden vectors (no nginx needed): the library must reproduce every response nginx gave when
//! `scripts/record-vectors` recorded the catalog (`vectors/records/*.json`, the single source of truth),
//! the readable snapshots in `snapshots/` must match those records, and no snapshot may be stale.
//!
//! A hand-edited record fails `library_reproduces_every_recorded_vector` (and the snapshot check); a
//! mutated model fails too — `mutated_models_are_caught` runs the same comparison against deliberately
//! broken rings and requires failures exactly on the collision and ring-edge vectors.

use nginx_ketama::NginxVersion;
use nginx_ketama::Server;
use nginx_ketama::ring::reference;
use nginx_ketama_harness::catalog::catalog;
use nginx_ketama_harness::catalog::flag::Flag;
use nginx_ketama_harness::golden::{
    LibraryReplayer, Record, Replayer, Run, load_records, records_dir, render_snapshot, replay, skeleton, snapshot_name,
};
use nginx_ketama_harness::run::observation::Observation;
use nginx_ketama_harness::run::parity::Model;
use std::collections::BTreeSet;
use std::path::Path;

use nginx_ketama_harness::testkit::{provisioned_releases, release_matches, snapshot_settings};

fn records() -> Vec<Record> {
    let r = load_records(&records_dir()).expect("vectors/records is readable");
    assert!(!r.is_empty(), "no records in vectors/records — run scripts/record-vectors");
    r
}

#[test]
fn library_reproduces_every_recorded_vector() {
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut per_version: std::collections::BTreeMap<(NginxVersion, String), usize> = Default::default();
    for record in &records() {
        for run in &record.runs {
            let replayer = LibraryReplayer::new(record, run).expect("the library accepts every recorded upstream");
            failures.extend(replay(record, run, &replayer));
            checked += record.keys.len();
            *per_version.entry((run.nginx, run.label())).or_default() += record.keys.len();
        }
    }
    let per_version: Vec<String> = per_version.iter().map(|((_, label), n)| format!("{label}: {n}")).collect();
    eprintln!("golden: {checked} recorded requests replayed ({}), {} differ", per_version.join(", "), failures.len());
    if !failures.is_empty() {
        let shown: Vec<String> = failures.iter().take(20).map(|f| format!("  {f}")).collect();
        panic!("{} recorded vectors differ from the library:\n{}", failures.len(), shown.join("\n"));
    }
}

#[test]
fn snapshots_match_records() {
    let records = records();
    snapshot_settings().bind(|| {
        for record in &records {
            insta::assert_snapshot!(snapshot_name(&record.case), render_snapshot(record));
        }
    });
}

/// The records describe the current catalog: same keys, upstream, flags and description. A catalog edit
/// without re-recording fails here.
#[test]
fn records_are_current_with_the_catalog() {
    let records = records();
    let cases = catalog();
    let recorded: BTreeSet<&str> = records.iter().map(|r| r.case.as_str()).collect();
    let defined: BTreeSet<&str> = cases.iter().map(|c| c.name).collect();
    assert_eq!(recorded, defined, "records and catalog name different cases: run scripts/record-vectors");
    for case in &cases {
        let record = records.iter().find(|r| r.case == case.name).expect("checked above");
        let fresh = skeleton(case);
        assert_eq!(
            Record { runs: Vec::new(), ..record.clone() },
            fresh,
            "{}: re-run scripts/record-vectors",
            case.name
        );
        // Every Debian build of nginx/versions, oldest first, and the musl build of 1.26.3.
        let builds: Vec<String> = record.runs.iter().map(|r| r.label()).collect();
        let glibc: Vec<&String> = builds.iter().filter(|b| !b.ends_with("-musl")).collect();
        let releases = provisioned_releases();
        assert_eq!(glibc.len(), releases.len(), "{}: recorded builds {builds:?}", case.name);
        for (release, build) in releases.iter().zip(&glibc) {
            assert!(release_matches(release, build), "{}: {build} recorded for {release}", case.name);
        }
        assert!(builds.iter().any(|b| b == "1.26.3-musl"), "{}: recorded builds {builds:?}", case.name);
        for run in &record.runs {
            assert_eq!(run.results.len(), record.keys.len(), "{} on {}", case.name, run.nginx);
        }
    }
}

/// Every `snapshots/*.snap` must be produced by some test: catalog snapshots by this file (one per record),
/// any other snapshot by the test file named in its `source:` header, which must mention its name.
/// Pending `.snap.new` files are rejected too.
#[test]
fn no_stale_snapshots() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let expected: BTreeSet<String> = records().iter().map(|r| format!("{}.snap", snapshot_name(&r.case))).collect();
    let mut stale = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("snapshots/ exists") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".snap.new") || name.ends_with(".pending-snap") {
            stale.push(format!("{name}: pending snapshot (review or delete it)"));
            continue;
        }
        if !name.ends_with(".snap") {
            continue;
        }
        seen.insert(name.clone());
        if name.starts_with("catalog__") {
            if !expected.contains(&name) {
                stale.push(format!("{name}: no record produces it"));
            }
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let source = text.lines().find_map(|l| l.strip_prefix("source: ")).map(str::trim);
        let stem = name.trim_end_matches(".snap");
        let short = stem.rsplit("__").next().unwrap_or(stem);
        match source {
            Some(src) => match std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(src)) {
                Ok(code) if code.contains(short) || code.contains(stem) => {}
                Ok(_) => stale.push(format!("{name}: {src} no longer mentions {short:?}")),
                Err(_) => stale.push(format!("{name}: its source {src} does not exist")),
            },
            None => stale.push(format!("{name}: no source header")),
        }
    }
    for e in &expected {
        if !seen.contains(e) {
            stale.push(format!("{e}: missing (run scripts/record-vectors --offline, then cargo insta review)"));
        }
    }
    assert!(stale.is_empty(), "stale snapshot files:\n  {}", stale.join("\n  "));
}

// ---------------------------------------------------------------------------------------------------
// Mutation check: a ring that differs from nginx in one rule must fail the comparison, exactly where the
// vectors were designed to catch it.

/// A deliberately simple consistent-hash model: happy path only (first point's server, first peer with
/// that server string), with two switchable mistakes.
struct NaiveRing {
    /// `(hash, server)`, sorted stably by hash and deduplicated.
    points: Vec<(u32, String)>,
    peers: Vec<(String, String)>,
    strict_lookup: bool,
}

impl NaiveRing {
    fn new(run: &Run, keep_last_duplicate: bool, strict_lookup: bool) -> NaiveRing {
        let primary: Vec<(Server, u32)> =
            run.peers.iter().filter(|p| !p.backup).map(|p| (Server::new(p.server.as_str()), p.weight)).collect();
        // Every point, sorted as the run's C library sorts them; the dedup below is nginx's (keep the first)
        // or the mutation.
        let points = reference::sorted_points_with(run.c_library(), primary.iter().map(|(s, w)| (s, *w)));
        let mut dedup: Vec<(u32, String)> = Vec::new();
        for (h, i) in points {
            let p = (h, primary[i].0.as_str().to_string());
            match dedup.last_mut() {
                Some(last) if last.0 == p.0 => {
                    if keep_last_duplicate {
                        *last = p;
                    }
                }
                _ => dedup.push(p),
            }
        }
        let peers = run.peers.iter().filter(|p| !p.backup).map(|p| (p.server.clone(), p.address.clone())).collect();
        NaiveRing { points: dedup, peers, strict_lookup }
    }
}

impl Model for &NaiveRing {
    fn expect(&mut self, key: &[u8]) -> Observation {
        let h = crc32fast::hash(key);
        let i = if self.strict_lookup {
            self.points.partition_point(|p| p.0 <= h)
        } else {
            self.points.partition_point(|p| p.0 < h)
        };
        let server = &self.points[i % self.points.len()].1;
        let addr = &self.peers.iter().find(|(s, _)| s == server).expect("a peer").1;
        Observation { status: 200, upstream_addr: addr.clone(), upstream_status: None }
    }
}

impl Replayer for NaiveRing {
    fn fresh(&self) -> Box<dyn Model + '_> {
        Box::new(self)
    }
}

/// Failing keys (1-based positions and their flags) of `case` replayed on `model(run)`, per run.
fn failing(records: &[Record], case: &str, model: impl Fn(&Run) -> NaiveRing) -> Vec<(usize, Vec<Flag>)> {
    let record = records.iter().find(|r| r.case == case).unwrap_or_else(|| panic!("record {case}"));
    let mut out = Vec::new();
    for run in &record.runs {
        for f in replay(record, run, &model(run)) {
            out.push((f.position, f.flags));
        }
    }
    out
}

#[test]
fn mutated_models_are_caught() {
    let records = records();
    let collision_cases =
        ["collision-order-ab", "collision-order-ba", "collision-spec-order-ab", "collision-spec-order-ba"];
    // Control: the naive ring with nginx's rules reproduces these healthy-upstream cases completely, so
    // every failure below is caused by the mutation alone.
    for case in collision_cases.iter().chain(&["ring-edges"]) {
        assert_eq!(failing(&records, case, |r| NaiveRing::new(r, false, false)), vec![], "control on {case}");
    }
    // Mutation 1: dedup keeps the last point of a run of equal hashes.
    for case in collision_cases {
        let f = failing(&records, case, |r| NaiveRing::new(r, true, false));
        assert!(!f.is_empty(), "keep-last dedup must fail on {case}");
        assert!(f.iter().all(|(_, flags)| flags.contains(&Flag::Collision)), "{case}: {f:?}");
    }
    // Mutation 2: lookup takes the first point strictly above the key's hash.
    let f = failing(&records, "ring-edges", |r| NaiveRing::new(r, false, true));
    let record = records.iter().find(|r| r.case == "ring-edges").unwrap();
    let on_point = record.keys.iter().filter(|k| k.flags.contains(&Flag::OnPoint)).count();
    // An on-point key is caught unless the next point belongs to the same server (then both rules agree).
    assert!(f.len() * 2 > on_point * record.runs.len(), "most on-point keys must fail: {f:?}");
    assert!(f.iter().all(|(_, flags)| flags.contains(&Flag::OnPoint)));
}

/// The libc rule is needed: replaying the musl build's recordings with glibc's tie rule (and the glibc
/// builds' with musl's) fails, only on cases with shared ring points, and in every case whose builds
/// disagree; with the right rule everything passes (`library_reproduces_every_recorded_vector`).
#[test]
fn the_other_libc_rule_fails_exactly_where_libcs_differ() {
    use nginx_ketama::Libc;
    let records = records();
    let mut failed_cases = BTreeSet::new();
    for record in &records {
        for run in &record.runs {
            let other = match run.c_library() {
                Libc::Glibc => "musl (the other rule)",
                Libc::Musl => "glibc (the other rule)",
            };
            let swapped = Run { libc: other.to_string(), ..run.clone() };
            let replayer = LibraryReplayer::new(record, &swapped).expect("accepted");
            let failures = replay(record, run, &replayer);
            for f in &failures {
                assert!(f.flags.contains(&Flag::Collision), "{}: a key without shared points failed: {f}", record.case);
            }
            if !failures.is_empty() {
                assert!(
                    record.libcs_differ.is_some(),
                    "{}: fails with the other rule but has no libcs_differ",
                    record.case
                );
                failed_cases.insert(record.case.as_str());
            }
        }
    }
    let differ: BTreeSet<&str> = records.iter().filter(|r| r.libcs_differ.is_some()).map(|r| r.case.as_str()).collect();
    assert_eq!(failed_cases, differ);
    assert!(differ.len() >= 5, "{differ:?}");
}

// ---------------------------------------------------------------------------------------------------
// Failure kinds (issue 20): each rule of algorithm §5.1, changed in the library's model, fails the vectors
// recorded from nginx — on the cases built to pin it.

/// Requests of `case` whose replay on `replayer(record, run)` differs from nginx, summed over its runs.
fn differing(records: &[Record], case: &str, replayer: impl Fn(&Record, &Run) -> LibraryReplayer) -> usize {
    let record = records.iter().find(|r| r.case == case).unwrap_or_else(|| panic!("record {case}"));
    record.runs.iter().map(|run| replay(record, run, &replayer(record, run)).len()).sum()
}

#[test]
fn each_failure_rule_changed_fails_the_vectors() {
    use nginx_ketama_harness::run::parity::Mutation;
    let records = records();
    let library = |r: &Record, run: &Run| LibraryReplayer::new(r, run).expect("accepted");
    for (mutation, case) in [
        (Mutation::LastStatusFails, "fail-tries-cap-last-status"),
        (Mutation::TriesIgnored, "fail-tries-cap-last-status"),
        (Mutation::NotFoundFails, "fail-403-404-next-429-failed"),
        (Mutation::TooManyRequestsNext, "fail-403-404-next-429-failed"),
        (Mutation::PostRetried, "fail-post-not-retried"),
        (Mutation::StaleNotGivenBack, "fail-stale-keepalive"),
        (Mutation::StaleNotGivenBack, "fail-stale-single-server"),
    ] {
        assert_eq!(differing(&records, case, library), 0, "control: the library on {case}");
        let n = differing(&records, case, |r, run| library(r, run).mutated(mutation));
        eprintln!("{mutation:?} on {case}: {n} requests differ");
        assert!(n > 0, "{mutation:?} must fail {case}");
    }
    // The fail_timeout window is inclusive (`now - checked <= fail_timeout`): an exclusive boundary fails
    // the case whose clock advances.
    let case = "fail-timeout-boundary";
    assert_eq!(differing(&records, case, library), 0, "control: the library on {case}");
    let n = differing(&records, case, |r, run| library(r, run).with_exclusive_fail_timeout(r, run).expect("accepted"));
    eprintln!("exclusive fail_timeout on {case}: {n} requests differ");
    assert!(n > 0, "an exclusive fail_timeout boundary must fail {case}");
    // ... and a clock that never advances does too.
    let record = records.iter().find(|r| r.case == case).expect("recorded");
    let frozen = Record {
        keys: record
            .keys
            .iter()
            .map(|k| nginx_ketama_harness::golden::RecordKey { clock: None, ..k.clone() })
            .collect(),
        ..record.clone()
    };
    let n: usize = frozen.runs.iter().map(|run| replay(&frozen, run, &library(&frozen, run)).len()).sum();
    assert!(n > 0, "a frozen clock must fail {case}");
}

/// A plain-hash model written here from algorithm §4 and §5 for upstreams without backups or failure
/// accounting (`max_fails=0`), with one switchable mistake: the running sum (and optionally the rehash
/// counter) restarting at every retry of a request instead of continuing.
struct NaivePlain {
    /// `(address, weight, down, refuses)` in list order.
    peers: Vec<(String, u32, bool, bool)>,
    budget: usize,
    restart: Restart,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Restart {
    /// nginx: the sum and the rehash counter carry over from one `get()` of a request to the next.
    Never,
    /// The sum restarts at 0 at every `get()`; the rehash counter carries over.
    Sum,
    /// Both restart at every `get()`.
    SumAndRehash,
}

/// One worker of [`NaivePlain`]: the smooth weighted round-robin state carries over between requests.
struct NaivePlainWorker<'a> {
    model: &'a NaivePlain,
    current: Vec<i64>,
}

impl NaivePlain {
    fn new(run: &Run, restart: Restart) -> NaivePlain {
        assert!(run.peers.iter().all(|p| !p.backup && p.max_fails == 0), "NaivePlain: no backups, max_fails=0");
        let counts_down = run.nginx.rules().routing().contains(&("retryBudget", "countsDown"));
        let peers: Vec<_> = run.peers.iter().map(|p| (p.address.clone(), p.weight, p.down, p.refuses)).collect();
        let budget = peers.iter().filter(|p| counts_down || !p.2).count();
        NaivePlain { peers, budget, restart }
    }
}

impl Replayer for NaivePlain {
    fn fresh(&self) -> Box<dyn Model + '_> {
        Box::new(NaivePlainWorker { model: self, current: vec![0; self.peers.len()] })
    }
}

impl Model for NaivePlainWorker<'_> {
    fn expect(&mut self, key: &[u8]) -> Observation {
        let peers = &self.model.peers;
        let total: u32 = peers.iter().map(|p| p.1).sum();
        let mut tried = vec![false; peers.len()];
        let (mut sum, mut rehash, mut misses) = (0u32, 0usize, 0usize);
        let mut budget = self.model.budget;
        let mut attempts: Vec<&str> = Vec::new();
        loop {
            if self.model.restart != Restart::Never {
                sum = 0;
            }
            if self.model.restart == Restart::SumAndRehash {
                rehash = 0;
            }
            let mut pick = None;
            while pick.is_none() && misses <= 20 && !key.is_empty() {
                let mut bytes = if rehash > 0 { rehash.to_string().into_bytes() } else { Vec::new() };
                bytes.extend_from_slice(key);
                sum = sum.wrapping_add((crc32fast::hash(&bytes) >> 16) & 0x7fff);
                rehash += 1;
                let mut w = sum % total;
                let mut i = 0;
                while w >= peers[i].1 {
                    w -= peers[i].1;
                    i += 1;
                }
                if tried[i] || peers[i].2 {
                    misses += 1;
                } else {
                    pick = Some(i);
                }
            }
            if pick.is_none() {
                // Round robin (§5): smooth weighted over the peers not tried and not down.
                let mut best: Option<usize> = None;
                let mut sum_w = 0i64;
                for (i, p) in peers.iter().enumerate() {
                    if tried[i] || p.2 {
                        continue;
                    }
                    self.current[i] += i64::from(p.1);
                    sum_w += i64::from(p.1);
                    if best.is_none_or(|b| self.current[i] > self.current[b]) {
                        best = Some(i);
                    }
                }
                match best {
                    Some(b) => {
                        self.current[b] -= sum_w;
                        pick = Some(b);
                    }
                    None => {
                        attempts.push("parity");
                        return Observation { status: 502, upstream_addr: attempts.join(", "), upstream_status: None };
                    }
                }
            }
            let i = pick.expect("picked");
            tried[i] = true;
            attempts.push(&peers[i].0);
            if !peers[i].3 {
                return Observation { status: 200, upstream_addr: attempts.join(", "), upstream_status: None };
            }
            budget -= 1;
            if budget == 0 {
                return Observation { status: 502, upstream_addr: attempts.join(", "), upstream_status: None };
            }
        }
    }
}

/// The plain hash's running sum continues across the retries of one request (algorithm §4): restarting it
/// (alone, or with the rehash counter) fails the recorded plain cases with refusing servers.
#[test]
fn a_restarting_plain_hash_sum_fails_the_vectors() {
    let records = records();
    let count = |case: &str, restart: Restart| -> usize {
        let record = records.iter().find(|r| r.case == case).unwrap_or_else(|| panic!("record {case}"));
        record.runs.iter().map(|run| replay(record, run, &NaivePlain::new(run, restart)).len()).sum()
    };
    let cases = ["plain-weights-failures", "plain-over-20-misses", "plain-restart-misses"];
    for case in cases {
        assert_eq!(count(case, Restart::Never), 0, "control: the naive model with nginx's rule on {case}");
    }
    for restart in [Restart::Sum, Restart::SumAndRehash] {
        let per_case: Vec<(&str, usize)> = cases.iter().map(|c| (*c, count(c, restart))).collect();
        eprintln!("{restart:?}: {per_case:?}");
        assert!(per_case.iter().any(|(_, n)| *n > 0), "{restart:?} must fail a plain case: {per_case:?}");
    }
}
