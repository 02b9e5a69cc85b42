//! The catalog's cases, one function each, in review order ([`CASES`]).

use super::flag::Flag;
use super::keys::{
    COLLISION, SPEC_COLLISION, collision_keys, empty_keys, flagged, key, numbered_keys, ring_keys, sample_keys, twice,
};
use super::lines::{LineExt, host_line, ip, line, lines, topo};
use super::{Case, UNIX_DIR};
use crate::forge::Forger;
use crate::site::topology::ServerLine;
use crate::site::topology::find_point_collisions;
use nginx_ketama::upstream::Method;

/// The catalog in review order: one function per case.
pub(super) const CASES: &[fn() -> Case] = &[
    // basics
    weights_equal,
    weights_mixed,
    single_server,
    // spellings
    spellings,
    unix_prefix_case,
    // down, dead, failover
    down,
    dead_failover,
    failover_over_20_misses,
    backup_before_hash,
    failure_accounting,
    all_dead_then_none_left,
    retry_budget_skips_down,
    failure_accounting_weights,
    // round-robin state
    empty_key,
    duplicate_lines,
    hostname_two_addresses,
    // collisions and ring edges
    collision_order_ab,
    collision_order_ba,
    collision_spec_order_ab,
    collision_spec_order_ba,
    ring_edges,
    long_and_non_ascii_keys,
    // a large ring
    large_ring,
    // plain hash
    plain_weights_equal,
    plain_weights_failures,
    plain_over_20_misses,
    plain_one_primary_backups,
    plain_backup_before_hash,
    plain_all_dead,
    plain_restart_misses,
    plain_single_server,
];

// --- basics ---------------------------------------------------------------------------------------------

fn weights_equal() -> Case {
    let t = topo(Method::Consistent, lines(2, 1..=5, 9001));
    let mut keys = numbered_keys(12);
    keys.extend(sample_keys("eq-", 1, 60));
    Case::new("weights-equal", "Five servers of weight 1 (800 points); ordinary keys each land on one server.", t, keys)
}

fn weights_mixed() -> Case {
    let weights = [1u32, 2, 5, 10, 37, 100];
    let t = topo(
        Method::Consistent,
        weights.iter().enumerate().map(|(i, &w)| line(&format!("127.0.3.{}:9001", i + 1)).weight(w)).collect(),
    );
    Case::new(
        "weights-mixed",
        "Weights 1, 2, 5, 10, 37 and 100: each weight unit adds 160 points to a server's share.",
        t,
        sample_keys("w-", 2, 80),
    )
    .with_flags(&[Flag::Weighted])
}

fn single_server() -> Case {
    let t = topo(Method::Consistent, vec![line("127.0.4.1:9001")]);
    let mut keys = sample_keys("one-", 3, 10);
    keys.extend(empty_keys(1));
    keys.push(key("k0"));
    Case::new(
        "single-server",
        "One server: nginx skips the hash entirely (round-robin over one peer), for every key.",
        t,
        keys,
    )
    .with_flags(&[Flag::SingleServer])
}

// --- spellings ------------------------------------------------------------------------------------------

fn spellings() -> Case {
    let u = UNIX_DIR;
    let mut t = topo(Method::Consistent, vec![]);
    let mut lines = vec![
        line("127.0.5.1:9001"),
        line("127.0.5.2"),
        line("127.0.5.3:09001"),
        line("127.0.5.4:0080"),
        line("[::1]:9101"),
        line("[::1]"),
        line(&format!("unix:{u}/a.sock")),
        line(&format!("UNIX:{u}/b.sock")),
    ];
    lines.push(host_line(&mut t, "backend.test", Some(9002), &[ip(5, 10)]));
    lines.push(host_line(&mut t, "web.test", None, &[ip(5, 11)]));
    t.lines = lines;
    let mut keys = sample_keys("sp-", 4, 80);
    keys.extend(ring_keys(&t, 97));
    Case::new(
        "spellings",
        "Every server spelling: ip:port, no port (80), leading-zero ports, [::1]:port, [::1], \
         unix:, UNIX:, and hostnames with and without a port; the ring hashes each string as written.",
        t,
        keys,
    )
    .with_flags(&[Flag::OddSpelling, Flag::Ipv6, Flag::UnixSocket, Flag::Hostname])
}

fn unix_prefix_case() -> Case {
    let u = UNIX_DIR;
    let t = topo(
        Method::Consistent,
        vec![line(&format!("unix:{u}/c.sock")), line(&format!("UNIX:{u}/c.sock")), line("127.0.6.1:9001")],
    );
    Case::new(
        "unix-prefix-case",
        "unix:/p and UNIX:/p hash the same bytes, so all 160 points of the two lines collide and one of \
         each pair is dropped: with glibc the first-listed spelling keeps every point, with musl the \
         points are shared out by musl's sort.",
        t,
        sample_keys("ux-", 5, 40),
    )
    .with_flags(&[Flag::UnixSocket, Flag::Collision, Flag::OddSpelling])
    .with_libcs_differ(LIBC_TIES)
}

// --- down, dead, failover -------------------------------------------------------------------------------

fn down() -> Case {
    let t = topo(
        Method::Consistent,
        (1..=6)
            .map(|i| {
                if i % 3 == 0 { line(&format!("127.0.7.{i}:9001")).down() } else { line(&format!("127.0.7.{i}:9001")) }
            })
            .collect(),
    );
    let mut keys = sample_keys("dn-", 6, 60);
    keys.extend(ring_keys(&t, 61));
    Case::new(
        "down",
        "Two of six servers are `down`: they keep their points and keys landing there move to \
         the next point's server.",
        t,
        keys,
    )
    .with_flags(&[Flag::Down])
}

fn dead_failover() -> Case {
    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.8.1:9001"),
            line("127.0.8.1:9002"),
            line("127.0.8.1:9901").dead(),
            line("127.0.8.1:9902").dead(),
            line("127.0.8.1:9903").dead(),
        ],
    );
    let mut keys = numbered_keys(12);
    keys.extend(sample_keys("dd-", 7, 50));
    Case::new(
        "dead-failover",
        "Three of five servers refuse connections (max_fails=0): nginx walks the ring point by \
         point, skipping tried servers, until one answers.",
        t,
        keys,
    )
    .with_flags(&[Flag::DeadServers])
}

fn failover_over_20_misses() -> Case {
    let mut lines = vec![line("127.0.9.1:9001")];
    lines.extend((1..=25).map(|i| line(&format!("127.0.9.{}:9001", 100 + i)).down()));
    lines.push(line("127.0.9.2:9001"));
    lines.push(line("127.0.9.3:9001").dead());
    let t = topo(Method::Consistent, lines);
    let mut keys = sample_keys("mm-", 8, 120);
    keys.extend(ring_keys(&t, 211));
    Case::new(
        "failover-over-20-misses",
        "25 down servers around two live ones and a dead one: a key whose walk meets more than 20 \
         points without a usable server falls back to round-robin for the rest of the request.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::Down, Flag::DeadServers, Flag::ManyMisses])
}

fn backup_before_hash() -> Case {
    let mut lines = vec![line("127.0.10.9:9001").backup()];
    lines.extend((1..=20).map(|i| line(&format!("127.0.10.{}:9001", 100 + i)).down()));
    lines.push(line("127.0.10.1:9001").dead());
    lines.push(line("127.0.10.2:9001").dead());
    lines.push(line("127.0.10.8:9001").backup());
    let t = topo(Method::Consistent, lines);
    let mut keys = sample_keys("bk-", 9, 40);
    keys.extend(empty_keys(2));
    Case::new(
        "backup-before-hash",
        "Backups declared before `hash` (accepted silently): the ring ignores them, so they are \
         reached only through the round-robin fallback once every primary has failed.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::Backup, Flag::Down, Flag::DeadServers, Flag::ManyMisses])
}

fn failure_accounting() -> Case {
    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.11.1:9001").accounting(),
            line("127.0.11.2:9001").accounting().dead(),
            line("127.0.11.3:9001").accounting(),
            line("127.0.11.4:9001").accounting().dead(),
        ],
    );
    Case::new(
        "failure-accounting",
        "max_fails=1 fail_timeout=3600s: the first refused connection takes a server out, so later \
         keys (and the same keys sent again) skip it without trying.",
        t,
        twice(sample_keys("fa-", 10, 30)),
    )
    .stateful()
    .with_flags(&[Flag::DeadServers, Flag::FailureAccounting])
}

fn all_dead_then_none_left() -> Case {
    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.17.1:9001").accounting().dead(),
            line("127.0.17.2:9001").accounting().dead(),
            line("127.0.17.3:9001").down(),
        ],
    );
    let mut keys = sample_keys("ad-", 26, 8);
    keys.extend(empty_keys(1));
    Case::new(
        "all-dead-then-none-left",
        "Every server refuses or is down (max_fails=1): the first request tries both live-looking \
         servers and fails (502); after that none is usable and nginx reports no live upstreams.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::DeadServers, Flag::Down, Flag::FailureAccounting])
    .with_versions_differ(
        "before 1.19.6 (cfa669151e60) the retry budget counts `down` servers too: on 1.18.0 the first request \
         still has budget left after both refusing servers, finds nothing usable and ends with no live \
         upstreams instead of the second server's error (docs/nginx-algorithm.md §5, §8).",
    )
}

fn retry_budget_skips_down() -> Case {
    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.27.1:9001").dead(),
            line("127.0.27.2:9001").down(),
            line("127.0.27.3:9001").dead(),
            line("127.0.27.4:9001").down(),
            line("127.0.27.5:9001").dead(),
            line("127.0.27.6:9001").down(),
        ],
    );
    Case::new(
        "retry-budget-skips-down",
        "Three refusing and three down servers: the retry budget counts only non-down peers (since \
         1.19.6), so each request tries the three refusing servers and fails with a 502.",
        t,
        sample_keys("rb-", 27, 10),
    )
    .with_flags(&[Flag::DeadServers, Flag::Down])
    .with_versions_differ(
        "before 1.19.6 (cfa669151e60) the retry budget counts `down` servers too (6 instead of 3): on 1.18.0 \
         each request tries the same three refusing servers, then, with budget left, finds nothing usable and \
         ends with no live upstreams (502) instead of the third server's error (docs/nginx-algorithm.md §5, §8).",
    )
}

fn failure_accounting_weights() -> Case {
    let mut heavy = line("127.0.28.1:9001").weight(4).dead();
    heavy.max_fails = 2;
    heavy.fail_timeout = 3600;
    let t = topo(Method::Consistent, vec![heavy, line("127.0.28.2:9001").weight(4), line("127.0.28.3:9001")]);
    Case::new(
        "failure-accounting-weights",
        "Round-robin with a refusing weight-4 server (max_fails=2): each failure lowers its \
         effective weight by weight/max_fails, it recovers by 1 per pass, and after two failures it \
         is out for fail_timeout.",
        t,
        empty_keys(24),
    )
    .stateful()
    .with_flags(&[Flag::DeadServers, Flag::FailureAccounting, Flag::Weighted])
}

// --- round-robin state ----------------------------------------------------------------------------------

fn empty_key() -> Case {
    let t = topo(
        Method::Consistent,
        vec![line("127.0.12.1:9001").weight(3), line("127.0.12.2:9001").weight(2), line("127.0.12.3:9001")],
    );
    let mut keys = Vec::new();
    for i in 0..18 {
        keys.extend(empty_keys(1));
        if i % 4 == 3 {
            keys.push(key(format!("k{i}")));
        }
    }
    Case::new(
        "empty-key",
        "The empty key is never hashed: nginx uses smooth weighted round-robin (3:2:1), whose \
         state carries from request to request.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::Weighted])
}

fn duplicate_lines() -> Case {
    let t = topo(
        Method::Consistent,
        vec![
            line("127.0.13.1:9001"),
            line("127.0.13.2:9001").weight(3),
            line("127.0.13.1:9001"),
            line("127.0.13.3:9001"),
        ],
    );
    Case::new(
        "duplicate-lines",
        "The same server line twice: both peers share one chain of points and take turns by \
         weighted round-robin (same address, so $upstream_addr looks the same).",
        t,
        twice(sample_keys("dup-", 11, 30)),
    )
    .stateful()
    .with_flags(&[Flag::DuplicateLines, Flag::Weighted])
}

fn hostname_two_addresses() -> Case {
    let mut t = topo(Method::Consistent, vec![]);
    let multi = host_line(&mut t, "multi.test", Some(9004), &[ip(14, 2), ip(14, 3)]);
    t.lines = vec![line("127.0.14.1:9001"), multi, line("127.0.14.4:9001")];
    let mut keys = Vec::new();
    for k in sample_keys("mu-", 12, 20) {
        for n in 0..3 {
            let mut k = k.clone();
            if n > 0 {
                k.comment = "sent again".into();
                k.flags.push(Flag::RepeatedKey);
            }
            keys.push(k);
        }
    }
    Case::new(
        "hostname-two-addresses",
        "A name with two addresses: one chain of points, and the two addresses alternate for the \
         same key by weighted round-robin.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::Hostname, Flag::MultiAddress])
}

// --- collisions and ring edges --------------------------------------------------------------------------

/// Two servers whose point chains share `hash`, listed in the given order; the spec's pair also gets the
/// spec's key.
/// Why glibc and musl builds disagree on cases where two servers share ring points.
const LIBC_TIES: &str = "the C library's qsort decides which of two servers keeps a ring point they share: \
     glibc's stable sort keeps the point generated first, musl's smoothsort the one it leaves first \
     (docs/nginx-algorithm.md §3.2).";

fn collision_case(name: &'static str, description: &'static str, (first, second, hash): (&str, &str, u32)) -> Case {
    let t = topo(Method::Consistent, vec![line(first), line(second)]);
    let mut keys = collision_keys(hash);
    if name.starts_with("collision-spec") {
        keys.push(flagged("k261", "the spec's key on the shared point", &[Flag::Collision]));
    }
    keys.extend(sample_keys("co-", 13, 10));
    Case::new(name, description, t, keys).with_libcs_differ(LIBC_TIES)
}

fn collision_order_ab() -> Case {
    collision_case(
        "collision-order-ab",
        "Two different servers share point hash f5b54a41 (10064 #104, 10291 #47); 10064 listed first (nginx \
         built with glibc keeps its point).",
        COLLISION,
    )
}

fn collision_order_ba() -> Case {
    collision_case(
        "collision-order-ba",
        "The same collision with the lines swapped: 10291 listed first (nginx built with glibc now keeps 10291).",
        (COLLISION.1, COLLISION.0, COLLISION.2),
    )
}

fn collision_spec_order_ab() -> Case {
    collision_case(
        "collision-spec-order-ab",
        "The spec's pair sharing 32a8f0fa (20195 #45, 20412 #109); 20195 listed first.",
        SPEC_COLLISION,
    )
}

fn collision_spec_order_ba() -> Case {
    collision_case(
        "collision-spec-order-ba",
        "The spec's pair with the lines swapped: 20412 listed first.",
        (SPEC_COLLISION.1, SPEC_COLLISION.0, SPEC_COLLISION.2),
    )
}

fn ring_edges() -> Case {
    let t = topo(
        Method::Consistent,
        vec![line("127.0.15.1:9001"), line("127.0.15.2:9001").weight(2), line("127.0.15.3:9001")],
    );
    let keys = ring_keys(&t, 7);
    Case::new(
        "ring-edges",
        "Forged keys with CRC32 0 and 0xffffffff, exactly on points and one past them (every 7th \
         point, and the last one): lookup takes the first point at or above the key's hash.",
        t,
        keys,
    )
}

fn long_and_non_ascii_keys() -> Case {
    let t = topo(Method::Consistent, lines(16, 1..=4, 9001));
    let mut keys = Vec::new();
    for (n, len) in [(0u8, 4096usize), (1, 4097), (2, 8191), (3, 20000)] {
        let k: Vec<u8> = (0..len).map(|i| b'a' + ((i * 7 + usize::from(n)) % 26) as u8).collect();
        keys.push(flagged(k, format!("{len} bytes of ASCII"), &[Flag::LongKey]));
    }
    for text in ["ключ", "κλειδί", "键值", "キー🔑", "naïve café", "😀😃😄", "ä", "mixed ascii — and dash"]
    {
        keys.push(flagged(text, "UTF-8 text", &[Flag::NonAscii]));
    }
    let long_utf8: String = "日本語テキスト".repeat(200);
    keys.push(flagged(long_utf8, "4200 bytes of UTF-8", &[Flag::LongKey, Flag::NonAscii]));
    for raw in [&b"\xff\xfe\xfd"[..], b"caf\xe9", b"\x80", b"key\xc3(invalid)"] {
        keys.push(flagged(raw, "raw bytes that are not UTF-8", &[Flag::NonAscii, Flag::InvalidUtf8]));
    }
    keys.push(flagged("with inner  spaces\tand tab", "inner white space is kept", &[]));
    keys.extend(sample_keys("lk-", 14, 10));
    Case::new(
        "long-and-non-ascii-keys",
        "Keys of 4 KiB and more, UTF-8 text and raw non-UTF-8 bytes: nginx hashes the raw header \
         bytes.",
        t,
        keys,
    )
}

// --- a large ring ---------------------------------------------------------------------------------------

fn large_ring() -> Case {
    let lines: Vec<ServerLine> = (0..1000u32)
        .map(|i| {
            let l = line(&format!("127.0.{}.{}:9010", 100 + i / 200, 1 + i % 200));
            if i % 10 == 7 { l.dead() } else { l }
        })
        .collect();
    let t = topo(Method::Consistent, lines);
    let names: Vec<String> = t.lines.iter().map(|l| l.server.clone()).collect();
    let forger = Forger::new();
    let mut keys = sample_keys("big-", 15, 300);
    for (a, pa, b, pb, h) in find_point_collisions(&names) {
        keys.push(flagged(
            forger.forge(b"big-coll-", h),
            format!("on {h:08x}, shared by {a} #{pa} and {b} #{pb}"),
            &[Flag::Collision, Flag::OnPoint],
        ));
    }
    keys.extend(ring_keys(&t, 4001));
    Case::new(
        "large-ring",
        "1000 servers (160,000 points, 100 of them refusing): sampled keys, points that two \
         different servers share, and forged keys on every 4001st point.",
        t,
        keys,
    )
    .with_flags(&[Flag::LargeRing, Flag::DeadServers])
    .with_libcs_differ(LIBC_TIES)
}

// --- plain hash -----------------------------------------------------------------------------------------

fn plain_weights_equal() -> Case {
    let t = topo(Method::Plain, lines(30, 1..=5, 9001));
    let mut keys = numbered_keys(12);
    keys.extend(sample_keys("pe-", 20, 50));
    Case::new(
        "plain-weights-equal",
        "Plain `hash`: five servers of weight 1; (crc32 >> 16) & 0x7fff modulo the total weight.",
        t,
        keys,
    )
}

fn plain_weights_failures() -> Case {
    let t = topo(
        Method::Plain,
        vec![
            line("127.0.31.1:9001").weight(3),
            line("127.0.31.2:9001").dead(),
            line("127.0.31.3:9001").weight(5).down(),
            line("127.0.31.4:9001").weight(2).dead(),
            line("127.0.31.5:9001"),
            line("127.0.31.6:9001").weight(100),
        ],
    );
    let mut keys = numbered_keys(12);
    keys.extend(sample_keys("pw-", 21, 80));
    Case::new(
        "plain-weights-failures",
        "Plain `hash` with weights, a down server and two refusing ones: a miss rehashes with a \
         decimal prefix and the running sum continues across retries.",
        t,
        keys,
    )
    .with_flags(&[Flag::Weighted, Flag::Down, Flag::DeadServers])
}

fn plain_restart_misses() -> Case {
    let t = topo(
        Method::Plain,
        (1..=12)
            .map(|i| {
                let l = line(&format!("127.0.37.{i}:9001"));
                if i <= 9 { l.dead() } else { l }
            })
            .collect(),
    );
    Case::new(
        "plain-restart-misses",
        "Plain `hash`, nine of twelve servers refusing (max_fails=0): a request retries up to nine times, each \
         retry continuing the rehash sequence and running sum where the last stopped; a port that restarts \
         them per retry walks the same slots again, counts them as misses and reaches round-robin (21 misses) \
         sooner.",
        t,
        sample_keys("pr-", 37, 160),
    )
    .with_flags(&[Flag::DeadServers, Flag::ManyMisses])
}

fn plain_over_20_misses() -> Case {
    let mut lines = vec![line("127.0.32.1:9001")];
    lines.extend((1..=25).map(|i| line(&format!("127.0.32.{}:9001", 100 + i)).down()));
    lines.push(line("127.0.32.2:9001").dead());
    let t = topo(Method::Plain, lines);
    let mut keys = sample_keys("pm-", 22, 80);
    keys.extend(empty_keys(3));
    Case::new(
        "plain-over-20-misses",
        "Plain `hash` with 25 of 27 servers down: after 21 rehashes without a usable server the \
         request falls back to round-robin, whose state carries over.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::Down, Flag::DeadServers, Flag::ManyMisses])
}

fn plain_one_primary_backups() -> Case {
    let t = topo(
        Method::Plain,
        vec![
            line("127.0.33.2:9001").backup().dead(),
            line("127.0.33.1:9001").dead(),
            line("127.0.33.3:9001").backup().dead(),
            line("127.0.33.4:9001").backup(),
        ],
    );
    Case::new(
        "plain-one-primary-backups",
        "Plain `hash` with one refusing primary and three backups (declared before `hash`), one \
         of which answers.",
        t,
        sample_keys("pb-", 23, 40),
    )
    .stateful()
    .with_flags(&[Flag::Backup, Flag::DeadServers])
    .with_versions_differ(
        "since 1.27.3 (db6870e06dde) plain `hash` bypasses to round-robin when the current list has fewer \
         than two peers, instead of only when the upstream has a single peer and no backups: 1.26.3 and \
         older hash onto the lone primary, miss 21 times and then round-robin through the backups; 1.27.3 \
         and newer round-robin at once and, once on the backup list, hash over it (docs/nginx-algorithm.md §8).",
    )
}

fn plain_backup_before_hash() -> Case {
    let t = topo(
        Method::Plain,
        vec![line("127.0.34.1:9001").backup(), line("127.0.34.2:9001").dead(), line("127.0.34.3:9001").dead()],
    );
    let mut keys = sample_keys("pk-", 24, 20);
    keys.extend(empty_keys(1));
    Case::new(
        "plain-backup-before-hash",
        "Plain `hash`, two refusing primaries and a backup declared before `hash`: the backup is \
         reached through round-robin once both primaries have failed.",
        t,
        keys,
    )
    .stateful()
    .with_flags(&[Flag::Backup, Flag::DeadServers])
}

fn plain_all_dead() -> Case {
    let t = topo(Method::Plain, (1..=3).map(|i| line(&format!("127.0.36.{i}:9001")).dead()).collect());
    Case::new(
        "plain-all-dead",
        "Plain `hash`, every server refuses (max_fails=0): each request tries all three in rehash \
         order, then fails with 502.",
        t,
        sample_keys("pd-", 27, 12),
    )
    .with_flags(&[Flag::DeadServers])
}

fn plain_single_server() -> Case {
    let t = topo(Method::Plain, vec![line("127.0.35.1:9001")]);
    let mut keys = sample_keys("ps-", 25, 6);
    keys.extend(empty_keys(1));
    Case::new("plain-single-server", "Plain `hash` with one server: round-robin over one peer for every key.", t, keys)
        .with_flags(&[Flag::SingleServer])
}
