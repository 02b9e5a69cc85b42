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
