//! The analysis is linear in the number of ring points, with no per-key work: `share` (build the pick map
//! with one failing server, then sum its arcs) and `diff` (two pick maps, merged), timed on rings from 16,000
//! to 400,000 points in one run. `benches/summarize_analysis.py` prints the per-point times and their ratios
//! for BENCHMARKS.md.
//!
//! Before timing, each shape is checked: shares sum to 2³², and the diff against a ring without its first
//! server moves exactly that server's share.

use criterion::{Criterion, criterion_group, criterion_main};
use nginx_ketama::analysis::{Diff, HASH_SPACE, PickMap, Share};
use nginx_ketama::{Method, Peer, Upstream};
use std::hint::black_box;
use std::num::NonZeroUsize;
use std::time::Duration;

/// (servers, weight): 16,000, 64,000, 160,000 and about 400,000 points.
const SHAPES: [(usize, u32); 4] = [(100, 1), (400, 1), (1000, 1), (253, 10)];

fn upstream(servers: usize, weight: u32, skip_first: bool) -> Upstream {
    Upstream::builder(Method::Consistent)
        .peers(
            (usize::from(skip_first)..servers)
                .map(|i| Peer::new(format!("10.{}.{}.{}:80", i / 65536, i / 256 % 256, i % 256)).with_weight(weight)),
        )
        .build()
        .unwrap()
}

fn benches(c: &mut Criterion) {
    let key_len = NonZeroUsize::new(16).unwrap();
    for (servers, weight) in SHAPES {
        let up = upstream(servers, weight, false);
        let fewer = upstream(servers, weight, true);
        let points = up.ring().unwrap().len();
        let failing = |p: &Peer| p.name() == "10.0.0.7:80";
        // Check before timing.
        let share = Share::of(&PickMap::with_failing(&up, failing, key_len));
        assert_eq!(share.servers.iter().map(|s| s.count).sum::<u64>() + share.round_robin, HASH_SPACE);
        let intact = Share::of(&PickMap::new(&up));
        let diff = Diff::of(&PickMap::new(&up), &PickMap::new(&fewer));
        assert_eq!(diff.moved, intact.servers[0].count, "removing a server moves exactly its share");
        eprintln!("analysis {servers}x{weight}: {points} points");

        let mut g = c.benchmark_group(format!("analysis_{servers}x{weight}"));
        g.bench_function("share", |b| {
            b.iter(|| Share::of(&PickMap::with_failing(black_box(&up), failing, key_len)).round_robin)
        });
        g.bench_function("diff", |b| {
            b.iter(|| Diff::of(&PickMap::new(black_box(&up)), &PickMap::new(black_box(&fewer))).moved)
        });
        g.finish();
    }
}

fn config() -> Criterion {
    // Modest times: the machine has two cores and is shared.
    Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = analysis;
    config = config();
    targets = benches
}
criterion_main!(analysis);
