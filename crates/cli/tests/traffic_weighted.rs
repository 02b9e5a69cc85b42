//! `share`, `diff` and `compare` over requests (`--requests`, `--log`): each request counted with the key
//! its upstream gives it — the key as `route --requests` computes it (proven against nginx by the core's
//! `tests/access_log_live.rs` and `keys_live.rs`), the pick as `route` gives that key (proven by `verify`).

#[path = "support/common.rs"]
mod common;

use common::{json, run};
use nginx_ketama_harness::testkit::TempFile;
use serde_json::Value;
use std::collections::BTreeMap;

fn conf(key: &str) -> String {
    format!(
        "events {{}}\nhttp {{\n  upstream app {{ hash {key} consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; \
         server 127.0.0.1:9003; server 127.0.0.1:9004; }}\n  upstream other {{ server 127.0.0.1:9009; }}\n  \
         server {{ listen 80; server_name s.test; location / {{ proxy_pass http://app; }} location /o/ {{ proxy_pass http://other; }} }}\n}}\n"
    )
}

/// The requests: 40 to the hash upstream (some repeated), 3 elsewhere, 1 unreadable.
fn requests() -> String {
    let mut lines = String::new();
    for i in 0..40 {
        let target = format!("/p/{}?v={}", i % 13, i % 3);
        lines.push_str(&format!("{{\"target\":\"{target}\",\"headers\":[[\"Host\",\"s.test\"]]}}\n"));
    }
    for _ in 0..3 {
        lines.push_str("{\"target\":\"/o/x\",\"headers\":[[\"Host\",\"s.test\"]]}\n");
    }
    lines.push_str("{\"target\":\n");
    lines
}

/// `route --requests`: each request's first pick.
fn picks(conf: &str, requests: &str) -> Vec<String> {
    let out = run(&["route", "--config", conf, "--requests", requests], b"");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["goes"] == "hash")
        .map(|v| v["server"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn share_counts_each_request_at_its_pick() {
    let c = TempFile::new("nginx.conf", conf("$request_uri"));
    let r = TempFile::new("requests.jsonl", requests());
    let (c, r) = (c.to_str().unwrap(), r.to_str().unwrap());
    let mut want = BTreeMap::new();
    for server in picks(c, r) {
        *want.entry(server).or_insert(0u64) += 1;
    }
    let out = run(&["share", "--config", c, "--upstream", "app", "--requests", r, "--format", "json"], b"");
    let doc = json(&out);
    assert_eq!(doc["keys"]["total"], 40);
    let got: BTreeMap<String, u64> = doc["keys"]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["keys"].as_u64().unwrap() > 0)
        .map(|s| (s["server"].as_str().unwrap().to_string(), s["keys"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("40 of 44 requests of") && err.contains("1 could not be read, 3 do not reach upstream \"app\""),
        "{err}"
    );
}

#[test]
fn diff_follows_a_request_whose_key_changes() {
    // The change is the key expression itself: `$request_uri` → `$uri` (the query no longer counts).
    let (a, b) = (TempFile::new("a.conf", conf("$request_uri")), TempFile::new("b.conf", conf("$uri")));
    let r = TempFile::new("requests.jsonl", requests());
    let (a, b, r) = (a.to_str().unwrap(), b.to_str().unwrap(), r.to_str().unwrap());
    let moved = picks(a, r).iter().zip(picks(b, r)).filter(|(x, y)| *x != y).count();
    let doc =
        json(&run(&["diff", "--from", a, "--to", b, "--upstream", "app", "--requests", r, "--format", "json"], b""));
    assert_eq!((doc["keys"]["total"].as_u64(), doc["keys"]["moved"].as_u64()), (Some(40), Some(moved as u64)));
    assert!(moved > 0, "a change that moves nothing proves nothing");
}

#[test]
fn keys_and_requests_are_one_or_the_other() {
    let c = TempFile::new("nginx.conf", conf("$request_uri"));
    let out = run(&["share", "--config", c.to_str().unwrap(), "--keys", "k", "--requests", "r"], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}

/// `route --requests`: each request's key and first pick (`None`: round-robin), for those that reach the
/// hash upstream.
fn keyed(conf: &str, requests: &str) -> Vec<(String, Option<String>)> {
    let out = run(&["route", "--config", conf, "--requests", requests], b"");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["goes"] == "hash")
        .map(|v| (v["key"].as_str().unwrap().to_string(), v["server"].as_str().map(str::to_string)))
        .collect()
}

/// The true count of each key (and where it goes), from `route`'s answers.
fn counted(routed: &[(String, Option<String>)]) -> BTreeMap<String, (u64, Option<String>)> {
    let mut counts = BTreeMap::new();
    for (key, server) in routed {
        let e = counts.entry(key.clone()).or_insert((0, server.clone()));
        e.0 += 1;
        assert_eq!(&e.1, server, "one key, one server");
    }
    counts
}

/// `--hottest` with fewer distinct keys than counters: the exact counts `route` gives, largest first (ties
/// by key), each with its server; the table shows the same after the share.
#[test]
fn share_hottest_is_exact_while_the_keys_fit() {
    let c = TempFile::new("nginx.conf", conf("$request_uri"));
    let r = TempFile::new("requests.jsonl", requests());
    let (c, r) = (c.to_str().unwrap(), r.to_str().unwrap());
    let truth = counted(&keyed(c, r));
    let mut want: Vec<(String, u64, Option<String>)> =
        truth.iter().map(|(k, (n, s))| (k.clone(), *n, s.clone())).collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    want.truncate(4);
    let doc = json(&run(
        &["share", "--config", c, "--upstream", "app", "--requests", r, "--hottest", "4", "--format", "json"],
        b"",
    ));
    let hot = &doc["keys"]["hottest"];
    assert_eq!((hot["exact"].as_bool(), hot["certain"].as_bool()), (Some(true), Some(true)), "{hot}");
    assert_eq!((hot["counted"].as_u64(), hot["distinct"].as_u64()), (Some(40), Some(truth.len() as u64)));
    let got: Vec<(String, u64, Option<String>)> = hot["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            assert_eq!(k["error"], 0);
            (
                k["key"].as_str().unwrap().to_string(),
                k["requests"].as_u64().unwrap(),
                k["server"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(want[0].1 > want[3].1, "a ranking where all counts tie proves little");
    let table = String::from_utf8_lossy(
        &run(&["share", "--config", c, "--upstream", "app", "--requests", r, "--hottest", "4"], b"").stdout,
    )
    .into_owned();
    assert!(
        table.contains(&format!("hottest keys: 4 of 40 requests (exact: {} distinct keys, each counted)", truth.len())),
        "{table}"
    );
    let (k, n, s) = &want[0];
    let first = table.lines().skip_while(|l| !l.starts_with("key ")).nth(1).unwrap();
    assert_eq!(
        first.split_whitespace().collect::<Vec<_>>(),
        [k.as_str(), &n.to_string(), &format!("{:.3}%", *n as f64 * 100.0 / 40.0), s.as_deref().unwrap()]
    );
}

/// More distinct keys than counters (10 × N, at least 100): the counts are estimates, and each true count
/// lies within the bound shown; the hot key is found with its exact server.
#[test]
fn share_hottest_estimates_within_their_bounds() {
    let c = TempFile::new("nginx.conf", conf("$request_uri"));
    let mut lines = String::new();
    for i in 0..600 {
        for target in [format!("/cold/{}", (i * 7919) % 250), "/hot".to_string(), format!("/warm/{}", i % 3)] {
            lines.push_str(&format!("{{\"target\":\"{target}\",\"headers\":[[\"Host\",\"s.test\"]]}}\n"));
        }
    }
    let r = TempFile::new("requests.jsonl", lines);
    let (c, r) = (c.to_str().unwrap(), r.to_str().unwrap());
    let truth = counted(&keyed(c, r));
    assert!(truth.len() > 100);
    let doc = json(&run(
        &["share", "--config", c, "--upstream", "app", "--requests", r, "--hottest", "5", "--format", "json"],
        b"",
    ));
    let hot = &doc["keys"]["hottest"];
    assert_eq!(
        (hot["exact"].as_bool(), hot["counters"].as_u64(), hot["distinct"].as_null()),
        (Some(false), Some(100), Some(()))
    );
    let keys = hot["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 5);
    assert_eq!(keys[0]["key"], "/hot");
    for k in keys {
        let (n, e) = (k["requests"].as_u64().unwrap(), k["error"].as_u64().unwrap());
        let (t, server) = &truth[k["key"].as_str().unwrap()];
        assert!(n - e <= *t && *t <= n, "{k}: true count {t}");
        assert_eq!(k["server"].as_str(), server.as_deref());
    }
    assert!(keys.iter().any(|k| k["error"].as_u64().unwrap() > 0), "the bound matters here");
    let table = String::from_utf8_lossy(
        &run(&["share", "--config", c, "--upstream", "app", "--requests", r, "--hottest", "5"], b"").stdout,
    )
    .into_owned();
    assert!(table.contains("estimated with 100 counters") && table.contains(" over "), "{table}");
}

/// `--hottest` needs requests or keys to count, and has no CSV form: both refused, naming why.
#[test]
fn hottest_is_refused_without_traffic_and_in_csv() {
    let c = TempFile::new("nginx.conf", conf("$request_uri"));
    let r = TempFile::new("requests.jsonl", requests());
    let (c, r) = (c.to_str().unwrap(), r.to_str().unwrap());
    for (args, says) in [
        (vec!["share", "--config", c, "--hottest", "3"], "have no hot keys"),
        (vec!["diff", "--from", c, "--hottest", "3"], "have no hot keys"),
        (vec!["compare", "--config", c, "--against", "pingora-ketama", "--hottest", "3"], "have no hot keys"),
        (vec!["share", "--config", c, "--requests", r, "--hottest", "3", "--format", "csv"], "no CSV form"),
        (vec!["share", "--config", c, "--requests", r, "--hottest", "0"], "0 is not in 1..=10000"),
    ] {
        let out = run(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `diff --hottest`: the requests that move, by key before and after, with their servers — from what
/// `route --requests` gives each side; the change is the key expression, so each key has its key after.
#[test]
fn diff_hottest_are_the_keys_that_move_most() {
    let (a, b) = (TempFile::new("a.conf", conf("$request_uri")), TempFile::new("b.conf", conf("$uri")));
    let r = TempFile::new("requests.jsonl", requests());
    let (a, b, r) = (a.to_str().unwrap(), b.to_str().unwrap(), r.to_str().unwrap());
    // (key before, key after) → (requests, server before, server after).
    type Moves = BTreeMap<(String, String), (u64, Option<String>, Option<String>)>;
    let mut truth = Moves::new();
    for ((ka, sa), (kb, sb)) in keyed(a, r).into_iter().zip(keyed(b, r)) {
        if sa != sb {
            truth.entry((ka, kb)).or_insert((0, sa, sb)).0 += 1;
        }
    }
    let mut want: Vec<_> = truth.into_iter().map(|((ka, kb), (n, sa, sb))| (ka, kb, n, sa, sb)).collect();
    want.sort_by(|x, y| y.2.cmp(&x.2).then(x.0.cmp(&y.0)).then(x.1.cmp(&y.1)));
    let moved: u64 = want.iter().map(|w| w.2).sum();
    want.truncate(3);
    assert!(want.len() == 3 && want[0].2 > want[2].2, "{want:?}");
    let args = ["diff", "--from", a, "--to", b, "--upstream", "app", "--requests", r, "--hottest", "3"];
    let doc = json(&run(&[&args[..], &["--format", "json"]].concat(), b""));
    let hot = &doc["keys"]["hottest"];
    assert_eq!(
        (hot["counted"].as_u64(), doc["keys"]["moved"].as_u64(), hot["exact"].as_bool()),
        (Some(moved), Some(moved), Some(true))
    );
    let got: Vec<_> = hot["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let s = |f: &str| k[f].as_str().map(str::to_string);
            (s("key").unwrap(), s("to_key").unwrap(), k["requests"].as_u64().unwrap(), s("from"), s("to"))
        })
        .collect();
    assert_eq!(got, want);
    let table = String::from_utf8_lossy(&run(&args, b"").stdout).into_owned();
    assert!(table.contains(&format!("hottest moved keys: 3 of {moved} requests (exact:")), "{table}");
    assert!(table.contains("key after"), "{table}");
}

/// `compare --hottest`: the keys the other implementation sends elsewhere, as many requests as `route`
/// counts for them, nginx's server as `route` gives it, and together what `agree` leaves out.
#[test]
fn compare_hottest_are_the_keys_the_other_sends_elsewhere() {
    // Port-less servers: pingora hashes `127.0.0.1\080`, nginx `127.0.0.1\0`, so most keys disagree.
    let c = TempFile::new(
        "nginx.conf",
        conf("$request_uri").replace("127.0.0.1:9001", "127.0.0.1").replace("127.0.0.1:9002", "127.0.0.2"),
    );
    let r = TempFile::new("requests.jsonl", requests());
    let (c, r) = (c.to_str().unwrap(), r.to_str().unwrap());
    let truth = counted(&keyed(c, r));
    let args = ["compare", "--config", c, "--upstream", "app", "--against", "pingora-ketama", "--requests", r];
    let doc = json(&run(&[&args[..], &["--hottest", "100", "--format", "json"]].concat(), b""));
    let (total, agree) = (doc["keys"]["total"].as_u64().unwrap(), doc["keys"]["agree"].as_u64().unwrap());
    let hot = &doc["keys"]["hottest"];
    assert!(total > agree && agree > 0, "{total} {agree}");
    assert_eq!((hot["counted"].as_u64(), hot["exact"].as_bool()), (Some(total - agree), Some(true)));
    let keys = hot["keys"].as_array().unwrap();
    assert_eq!(keys.iter().map(|k| k["requests"].as_u64().unwrap()).sum::<u64>(), total - agree);
    for k in keys {
        let (n, server) = &truth[k["key"].as_str().unwrap()];
        assert_eq!((k["requests"].as_u64(), k["nginx"].as_str()), (Some(*n), server.as_deref()), "{k}");
        assert_ne!(k["nginx"], k["other"], "{k}");
    }
    assert!(keys.windows(2).all(|w| w[0]["requests"].as_u64() >= w[1]["requests"].as_u64()));
}
