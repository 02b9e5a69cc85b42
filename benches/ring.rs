//! Ring benchmarks (and `Upstream::route` for both methods): our [`Ring`] against `pingora-ketama`'s `Continuum` and against the cost of hashing the
//! key alone (`crc32fast::hash`, the floor no exact lookup can go under). Results and how to read them are in
//! BENCHMARKS.md; `cargo bench --bench ring` runs everything, `benches/summarize.py` prints the table.
//!
//! Before anything is timed, every shape is checked three ways on the same keys: ours, pingora's and a
//! straightforward reference ring (chained CRC32 points, stable sort, keep the first of equal hashes,
//! `partition_point`) must pick the same server. The bench also prints the memory table (measured with a
//! counting global allocator, not estimated).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nginx_ketama::ring::reference;
use nginx_ketama::{Libc, Method, Peer, Ring, Route, Server, Upstream};
use pingora_ketama::{Bucket, Continuum};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Ring shapes: (servers, weight of each). 160 points per unit of weight.
const SHAPES: [(usize, u32); 5] = [(3, 1), (100, 1), (9, 100), (1000, 1), (253, 10)];

/// Keys per timed iteration (all lookups of one iteration use different keys).
const KEYS: usize = 4096;

/// Extra keys used only by the agreement check.
const CHECK_KEYS: usize = 20_000;

// ---------------------------------------------------------------------------------------------------------
// Heap accounting: live bytes, so that "memory per point" is measured rather than taken from a layout.

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; the counter has no influence on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `build` and returns its result with the heap bytes it still holds.
fn retained<T>(build: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::SeqCst);
    let value = build();
    (value, LIVE.load(Ordering::SeqCst) - before)
}

// ---------------------------------------------------------------------------------------------------------
// Inputs.

/// Deterministic xorshift64*, so every run times the same rings and keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `n` distinct IPv4 `ip:port` server strings, written exactly as `SocketAddr` displays them (no leading
/// zeros), so that pingora (which hashes `ip ‖ 0 ‖ port` from a `SocketAddr`) and nginx hash the same bytes.
fn server_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("10.{}.{}.{}:{}", i / 65536, (i / 256) % 256, i % 256, 8000 + i % 17)).collect()
}

/// `n` keys of 20..=30 bytes (25 on average), like cache keys or URIs: one contiguous buffer and its slices.
fn keys(n: usize, seed: u64) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut rng = Rng(seed);
    let mut buf = Vec::new();
    let mut spans = Vec::with_capacity(n);
    for _ in 0..n {
        let len = 20 + (rng.next() % 11) as usize;
        let start = buf.len();
        buf.extend_from_slice(b"/cache/");
        while buf.len() - start < len {
            buf.push(b"0123456789abcdef"[(rng.next() % 16) as usize]);
        }
        spans.push((start, len));
    }
    (buf, spans)
}

fn slices<'a>(buf: &'a [u8], spans: &[(usize, usize)]) -> Vec<&'a [u8]> {
    spans.iter().map(|&(s, l)| &buf[s..s + l]).collect()
}

// ---------------------------------------------------------------------------------------------------------
// The reference ring (`nginx_ketama::ring::reference`): nginx's algorithm written as plainly as possible
// (docs/nginx-algorithm.md §3.1–3.3).

/// Sorted, deduplicated `(hash, server index)` points, plus the hashes that more than one point generated.
fn reference_ring(servers: &[Server], weight: u32) -> (Vec<(u32, usize)>, HashSet<u32>) {
    let all = reference::sorted_points(servers.iter().map(|s| (s, weight)));
    let collided: HashSet<u32> = all.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| w[0].0).collect();
    (reference::points(servers.iter().map(|s| (s, weight))), collided)
}

fn reference_lookup(points: &[(u32, usize)], key: &[u8]) -> (u32, usize) {
    points[reference::locate(points, crc32fast::hash(key))]
}

/// Everything one shape needs: both rings built from the same servers.
struct Fixture {
    label: String,
    servers: Vec<Server>,
    weight: u32,
    buckets: Vec<Bucket>,
    ours: Ring,
    pingora: Continuum,
}

fn fixture(n: usize, weight: u32) -> Fixture {
    let names = server_names(n);
    let servers: Vec<Server> = names.iter().map(|s| Server::new(s.as_str())).collect();
    let addrs: Vec<SocketAddr> = names.iter().map(|s| s.parse().expect("IPv4 ip:port")).collect();
    for (name, addr) in names.iter().zip(&addrs) {
        assert_eq!(name, &addr.to_string(), "pingora must hash the bytes nginx hashes");
    }
    let buckets: Vec<Bucket> = addrs.iter().map(|&a| Bucket::new(a, weight)).collect();
    let ours = Ring::new(servers.iter().map(|s| (s, weight))).expect("ring");
    let pingora = Continuum::new(&buckets);
    Fixture { label: format!("{n}x{weight}"), servers, weight, buckets, ours, pingora }
}

/// Asserts that ours, pingora's and the reference ring agree, before anything is timed.
///
/// pingora sorts points with an unstable sort, so where two servers generate the same hash it may keep
/// either; nginx (glibc's stable sort) keeps the earlier one. Keys on such a point are the only ones allowed
/// to differ between pingora and the reference, and the bench says how many there were. Ours must always
/// equal the reference.
fn check_agreement(f: &Fixture, keys: &[&[u8]]) {
    let names: Vec<String> = f.servers.iter().map(|s| s.as_str().to_string()).collect();
    let (points, collided) = reference_ring(&f.servers, f.weight);
    assert_eq!(f.ours.len(), points.len(), "{}: point count", f.label);
    for (i, p) in f.ours.points().enumerate() {
        assert_eq!((p.hash, p.server.as_str()), (points[i].0, names[points[i].1].as_str()), "{}: point {i}", f.label);
    }
    // pingora's point count: walk its ring once (get_addr advances the index modulo the length).
    let mut idx = 0;
    let mut pingora_len = 0;
    loop {
        f.pingora.get_addr(&mut idx).expect("non-empty");
        pingora_len += 1;
        if idx == 0 {
            break;
        }
    }
    assert_eq!(pingora_len, points.len(), "{}: pingora point count", f.label);

    let mut pingora_collision_diffs = 0;
    for &key in keys {
        let (hash, want) = reference_lookup(&points, key);
        let ours = f.ours.owner(key).expect("non-empty");
        assert_eq!(ours.as_str(), names[want], "{}: ours vs reference for key {key:?}", f.label);
        let theirs = f.pingora.node(key).expect("non-empty");
        if theirs.to_string() != names[want] {
            assert!(collided.contains(&hash), "{}: pingora vs reference for key {key:?}", f.label);
            pingora_collision_diffs += 1;
        }
    }
    eprintln!(
        "{}: ours == reference == pingora on {} keys ({} colliding hashes on the ring, {} keys on one where pingora's unstable sort kept another server)",
        f.label,
        keys.len(),
        collided.len(),
        pingora_collision_diffs
    );
}

/// Prints memory per point, measured: heap retained by a fresh build, minus what is not per point.
fn print_memory(fixtures: &[Fixture]) {
    eprintln!(
        "| shape | points | ours: points+index B/pt | ours: all heap B/pt | pingora: points B/pt | pingora: all heap B/pt |"
    );
    eprintln!("|---|---:|---:|---:|---:|---:|");
    for f in fixtures {
        let (ours, ours_heap) = retained(|| Ring::new(f.servers.iter().map(|s| (s, f.weight))).expect("ring"));
        let (pingora, pingora_heap) = retained(|| Continuum::new(&f.buckets));
        // pingora keeps its points (a boxed slice, shrunk to fit) and one SocketAddr per bucket.
        let pingora_points = pingora_heap - f.buckets.len() * std::mem::size_of::<SocketAddr>();
        let n = ours.len() as f64;
        eprintln!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            f.label,
            ours.len(),
            ours.memory_bytes() as f64 / n,
            ours_heap as f64 / n,
            pingora_points as f64 / n,
            pingora_heap as f64 / n
        );
        drop(pingora);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The benchmarks.

fn benches(c: &mut Criterion) {
    let (key_buf, key_spans) = keys(KEYS, 0x5eed_0001);
    let keys = slices(&key_buf, &key_spans);
    let (check_buf, check_spans) = keys_for_check();
    let mut check = slices(&check_buf, &check_spans);
    check.extend_from_slice(&keys);

    let fixtures: Vec<Fixture> = SHAPES.iter().map(|&(n, w)| fixture(n, w)).collect();
    for f in &fixtures {
        check_agreement(f, &check);
    }
    print_memory(&fixtures);

    for f in &fixtures {
        let mut g = c.benchmark_group(format!("lookup/{}", f.label));
        g.throughput(Throughput::Elements(KEYS as u64));
        g.bench_function("ours", |b| {
            let ring = &f.ours;
            b.iter(|| {
                let mut acc = 0usize;
                for &k in black_box(&keys) {
                    acc = acc.wrapping_add(ring.owner(k).map_or(0, |s| s as *const Server as usize));
                }
                acc
            })
        });
        g.bench_function("pingora", |b| {
            let ring = &f.pingora;
            b.iter(|| {
                let mut acc = 0usize;
                for &k in black_box(&keys) {
                    acc = acc.wrapping_add(ring.node(k).map_or(0, |a| usize::from(a.port())));
                }
                acc
            })
        });
        g.bench_function("crc32-floor", |b| {
            b.iter(|| {
                let mut acc = 0usize;
                for &k in black_box(&keys) {
                    acc = acc.wrapping_add(crc32fast::hash(k) as usize);
                }
                acc
            })
        });
        // What our lookup pays for hashing: a prepared `Hasher` cloned per key skips the CPU feature
        // detection `crc32fast::hash` repeats on every call (see BENCHMARKS.md).
        g.bench_function("crc32-prepared", |b| {
            let prepared = crc32fast::Hasher::new();
            b.iter(|| {
                let mut acc = 0usize;
                for &k in black_box(&keys) {
                    let mut h = prepared.clone();
                    h.update(k);
                    acc = acc.wrapping_add(h.finalize() as usize);
                }
                acc
            })
        });
        g.finish();

        let mut g = c.benchmark_group(format!("build/{}", f.label));
        g.bench_function("ours", |b| {
            b.iter(|| Ring::new(black_box(&f.servers).iter().map(|s| (s, f.weight))).expect("ring"))
        });
        // nginx built against musl: the same points, sorted by the model of musl's smoothsort.
        g.bench_function("ours-musl", |b| {
            b.iter(|| Ring::with_libc(Libc::Musl, black_box(&f.servers).iter().map(|s| (s, f.weight))).expect("ring"))
        });
        g.bench_function("pingora", |b| b.iter(|| Continuum::new(black_box(&f.buckets))));
        g.finish();
    }

    // `Upstream::route`, the whole stateless answer, for both methods over 100 servers: healthy, and with
    // every third server `down` (consistent walks to the next points, plain rehashes: more CRC32 steps).
    let names = server_names(100);
    let mut g = c.benchmark_group("route/100x1");
    g.throughput(Throughput::Elements(KEYS as u64));
    for (label, method, down_every) in [
        ("consistent", Method::Consistent, 0),
        ("consistent-third-down", Method::Consistent, 3),
        ("plain", Method::Plain, 0),
        ("plain-third-down", Method::Plain, 3),
    ] {
        let peers = names
            .iter()
            .enumerate()
            .map(|(i, s)| Peer::new(s.as_str()).with_down(down_every > 0 && i % down_every == 0));
        let up = Upstream::builder(method).peers(peers).build().expect("upstream");
        g.bench_function(label, |b| {
            b.iter(|| {
                let mut acc = 0usize;
                for &k in black_box(&keys) {
                    if let Route::Server(s) = up.route(k) {
                        acc = acc.wrapping_add(s as *const Server as usize);
                    }
                }
                acc
            })
        });
    }
    g.finish();
}

fn keys_for_check() -> (Vec<u8>, Vec<(usize, usize)>) {
    keys(CHECK_KEYS, 0x5eed_0002)
}

fn config() -> Criterion {
    // Modest times: the machine has two cores and is shared; the whole run takes a few minutes.
    Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = ring;
    config = config();
    targets = benches
}
criterion_main!(ring);
