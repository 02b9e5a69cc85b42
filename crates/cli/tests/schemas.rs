//! Every JSON output of the command carries a `schema` field naming a versioned JSON Schema committed under
//! `docs/schemas/`, and follows it: real outputs of the binary, in their variants (consistent and plain
//! hash, failing servers, `--keys`, sampled comparisons, keys that are not UTF-8), are validated against
//! the files with a JSON Schema validator. The schemas are closed (`additionalProperties: false` on every
//! object), so a field added to an output without its schema fails here. (The mismatch file's lines are
//! checked where a live run writes them, in `shims_and_signals_live.rs`; the verify report in `report_live.rs`.)

#[path = "support/common.rs"]
mod common;
#[path = "support/schemas.rs"]
mod schemas;

use common::{ok, run};
use nginx_ketama_harness::testkit::TempFile;
use serde_json::Value;
use std::collections::BTreeSet;

const CONSISTENT: &str = "events {}\nhttp {\n upstream app {\n  hash $arg_k consistent;\n  server 127.0.0.1:9001;\n  server 127.0.0.1:9002 weight=2;\n  server 127.0.0.1:9003;\n  server [::1]:9004;\n }\n}\n";
const GROWN: &str = "events {}\nhttp {\n upstream app {\n  hash $arg_k consistent;\n  server 127.0.0.1:9001;\n  server 127.0.0.1:9002 weight=2;\n  server 127.0.0.1:9003;\n  server [::1]:9004;\n  server 127.0.0.1:9005;\n }\n}\n";
const PLAIN: &str = "events {}\nhttp {\n upstream app {\n  hash $arg_k;\n  server 127.0.0.1:9001;\n  server 127.0.0.1:9002 down;\n  server 127.0.0.1:9003 weight=3;\n  server 127.0.0.1:9004;\n }\n}\n";

/// Every JSON document the command writes for a set of command lines covering each output's variants.
fn outputs() -> Vec<(String, Value)> {
    let a = TempFile::new("a.conf", CONSISTENT);
    let b = TempFile::new("b.conf", GROWN);
    let p = TempFile::new("p.conf", PLAIN);
    let keys = TempFile::new("keys", (0..500).map(|i| format!("/product/{i}\n")).collect::<String>());
    let (a, b, p, keys) = (a.to_str().unwrap(), b.to_str().unwrap(), p.to_str().unwrap(), keys.to_str().unwrap());
    let mut docs: Vec<(String, Value)> = Vec::new();
    let mut one = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--format", "json"]);
        docs.push((args.join(" "), serde_json::from_str(&ok(&run(&args, b""))).unwrap()));
    };
    for c in [a, p] {
        one(&["explain", "--config", c, "--failed", "127.0.0.1:9001", "k0", "", "k4"]);
        one(&["share", "--config", c, "--failed", "127.0.0.1:9003", "--keys", keys]);
        one(&["share", "--config", c, "--failed", "127.0.0.1:9003", "--keys", keys, "--hottest", "3"]);
        one(&["forge", "--config", c, "--server", "127.0.0.1:9003", "--count", "3"]);
    }
    one(&["share", "--config", a, "--nginx-version", "1.18.0", "--libc", "musl"]);
    one(&[
        "share",
        "--config",
        a,
        "--fail",
        "127.0.0.1:9001=502",
        "--fail",
        "127.0.0.1:9002=timeout",
        "--method",
        "POST",
    ]);
    one(&["diff", "--from", a, "--to", b, "--keys", keys]);
    one(&["diff", "--from", a, "--to", b, "--keys", keys, "--hottest", "3"]);
    // Hot keys that are not UTF-8 (`key_hex`); checked below.
    let binary_keys = TempFile::new("binary-keys", b"\xff\xfe\n\xff\xfe\nk1\n\xc8\n".as_slice());
    let bin = binary_keys.to_str().unwrap();
    one(&["share", "--config", a, "--keys", bin, "--hottest", "2"]);
    one(&["diff", "--from", a, "--to", b, "--keys", bin, "--hottest", "2"]);
    one(&["compare", "--config", a, "--against", "pingora-ketama", "--keys", keys, "--hottest", "3"]);
    one(&["diff", "--from", a, "--to", p, "--failed", "127.0.0.1:9001"]);
    one(&["compare", "--config", a, "--against", "pingora-ketama", "--keys", keys]);
    one(&["compare", "--config", a, "--against", "md5-vnodes", "--samples", "2000", "--keys", keys]);
    one(&["compare", "--config", a, "--against", "haproxy@3.0.11:crc32", "--samples", "2000"]);
    one(&["compare", "--config", a, "--against", "apisix"]);
    one(&["compare", "--config", a, "--against", "envoy:maglev", "--samples", "2000"]);
    let ingress = TempFile::new(
        "backends.json",
        r#"[{"name":"default-app-80","port":80,"endpoints":[{"address":"127.0.0.1","port":"9001"},{"address":"10.1.0.7","port":"8080"}],"upstreamHashByConfig":{"upstream-hash-by":"$request_uri"}}]"#,
    );
    one(&[
        "compare",
        "--config",
        a,
        "--against",
        "ingress-nginx",
        "--backends",
        ingress.to_str().unwrap(),
        "--keys",
        keys,
    ]);
    one(&["diff", "--from", a, "--to", b, "--engine", "ingress-nginx"]);
    one(&["diff", "--from", a, "--to", b, "--engine", "caddy", "--keys", keys]);
    one(&["diff", "--from", a, "--to", b, "--engine", "envoy", "--samples", "2000"]);
    one(&["migrate", "--config", a, "--to", "apisix,kong", "--samples", "2000"]);
    one(&["migrate", "--config", a, "--to", "ingress-nginx", "--backends", ingress.to_str().unwrap()]);
    // The target's own lists: an Envoy EDS with a left-out host, a Caddyfile over empty keys.
    let eds = TempFile::new(
        "eds.json",
        r#"{"cluster_name": "app", "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9001}}}}, {"endpoint": {"address": {"socket_address": {"address": "10.1.0.7", "port_value": 80}}}, "health_status": "DRAINING"}, {"endpoint": {"address": {"socket_address": {"address": "10.1.0.8", "port_value": 80}}}}]}]}"#,
    );
    one(&[
        "compare",
        "--config",
        a,
        "--against",
        "envoy",
        "--samples",
        "2000",
        "--target-servers",
        eds.to_str().unwrap(),
    ]);
    let caddyfile = TempFile::new("Caddyfile", ":80 {\n  reverse_proxy 127.0.0.1:9001 10.1.0.9:80\n}\n");
    let empty_keys = TempFile::new("empty-keys", "a\n\nb\n");
    let (cf, ek) = (caddyfile.to_str().unwrap(), empty_keys.to_str().unwrap());
    one(&["compare", "--config", a, "--against", "caddy", "--target-servers", cf, "--keys", ek]);
    one(&["diff", "--from", a, "--to", b, "--engine", "caddy", "--keys", ek]);
    one(&[
        "diff",
        "--from",
        a,
        "--to",
        b,
        "--engine",
        "envoy",
        "--samples",
        "2000",
        "--target-servers",
        eds.to_str().unwrap(),
        "--to-target-servers",
        eds.to_str().unwrap(),
    ]);
    one(&["migrate", "--config", a, "--to", "envoy", "--samples", "1000", "--target-servers", eds.to_str().unwrap()]);
    // Requests that reach the upstream, that nginx answers itself, and that go elsewhere.
    let sites = TempFile::new(
        "sites.conf",
        CONSISTENT.replace(
            "\n}\n",
            "\n upstream rr { server 127.0.0.1:1; }\n server { listen 80; server_name s.test; location / { proxy_pass http://app; } \
             location = /204 { return 204; } location /rr/ { proxy_pass http://rr; } }\n}\n",
        ),
    );
    let requests = TempFile::new(
        "requests.jsonl",
        "{\"target\":\"/a?k=1\",\"headers\":[[\"Host\",\"s.test\"]]}\n{\"target\":\"/a?k=%ff\",\"headers\":[[\"Host\",\"s.test\"]]}\n\
         {\"target\":\"/204\",\"headers\":[[\"Host\",\"s.test\"]]}\n{\"target\":\"/rr/\",\"headers\":[[\"Host\",\"s.test\"]]}\n\
         {\"target\":\"/b\"}\n",
    );
    let explain_request = |conf: &str, line: &str, headers: &[&str]| {
        let mut args = vec!["explain", "--config", conf, "--request", line, "--format", "json"];
        headers.iter().for_each(|h| args.extend(["-H", h]));
        (args.join(" "), serde_json::from_str::<Value>(&ok(&run(&args, b""))).unwrap())
    };
    let s = sites.to_str().unwrap();
    docs.push(explain_request(s, "GET /a?k=1", &["Host: s.test"]));
    docs.push(explain_request(s, "GET /204", &["Host: s.test"]));
    docs.push(explain_request(s, "GET /rr/", &["Host: s.test"]));
    let binary = TempFile::new(
        "binary.conf",
        CONSISTENT
            .replace("$arg_k", "$binary_remote_addr")
            .replace("\n}\n", "\n server { listen 80; location / { proxy_pass http://app; } }\n}\n"),
    );
    // 10.200.0.1 is 0a c8 00 01: not UTF-8.
    let args = ["explain", "--config", binary.to_str().unwrap(), "--request", "GET /", "-H", "Host: b.test"];
    let doc: Value =
        serde_json::from_str(&ok(&run(&[&args[..], &["--client", "10.200.0.1:1", "--format", "json"]].concat(), b"")))
            .unwrap();
    assert!(doc["explanation"]["key_hex"].is_string() && doc["parts"][0]["value_hex"].is_string(), "{doc}");
    docs.push(("explain --request, a key that is not UTF-8".into(), doc));
    let text = ok(&run(&["route", "--config", sites.to_str().unwrap(), "--requests", requests.to_str().unwrap()], b""));
    for line in text.lines() {
        docs.push(("route --requests".to_string(), serde_json::from_str(line).unwrap()));
    }
    for c in [a, p] {
        let text = ok(&run(&["route", "--config", c, "--failed", "127.0.0.1:9003"], b"k0\n\n\xff\xfe\nk4\n"));
        for line in text.lines() {
            docs.push((format!("route --config {c}"), serde_json::from_str(line).unwrap()));
        }
    }
    let hot = &docs.iter().find(|(c, _)| c.contains(bin)).unwrap().1["keys"]["hottest"]["keys"][0];
    assert_eq!((hot["key_hex"].as_str(), hot["requests"].as_u64()), (Some("fffe"), Some(2)), "{hot}");
    docs
}

/// The outputs whose documents only a live run writes (checked in `verify_live.rs`, `engines_live.rs` and
/// `report_live.rs`).
const LIVE: [&str; 3] = ["nginx-ketama/mismatch/v1", "nginx-ketama/engine-mismatch/v1", "nginx-ketama/verify/v1"];

/// Every schema name the code gives an output: each `Schema("…")` in `src/` (`schema.rs` and the analysis
/// commands' own).
fn names_in_code() -> BTreeSet<String> {
    fn walk(dir: &std::path::Path, names: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, names);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let source = std::fs::read_to_string(&path).unwrap();
                let found = source.split("Schema(\"").skip(1).map(|rest| rest[..rest.find('"').unwrap()].to_string());
                names.extend(found);
            }
        }
    }
    let mut names = BTreeSet::new();
    walk(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")), &mut names);
    names
}

/// Every offline output the code names a schema for is produced above and follows it: a new command's
/// JSON fails here until `outputs` runs it.
#[test]
fn every_json_output_follows_the_schema_it_names() {
    let mut named = BTreeSet::new();
    for (command, doc) in outputs() {
        eprintln!("{command}");
        named.insert(schemas::check(&doc));
    }
    let offline: BTreeSet<String> = names_in_code().into_iter().filter(|n| !LIVE.contains(&n.as_str())).collect();
    assert!(offline.contains("nginx-ketama/route/v1") && offline.contains("nginx-ketama/share/v2"), "{offline:?}");
    assert_eq!(named, offline);
}

/// An output with a field its schema does not describe fails: at the top and deep inside.
#[test]
fn a_field_the_schema_does_not_describe_fails() {
    let docs = outputs();
    let (_, share) = docs.iter().find(|(c, _)| c.starts_with("share")).unwrap();
    let schema = schemas::load("nginx-ketama/share/v2");
    assert!(schemas::errors(&schema, share).is_empty());
    let mut top = share.clone();
    top["skew"] = 1.5.into();
    assert!(!schemas::errors(&schema, &top).is_empty(), "a new top-level field");
    let mut deep = share.clone();
    deep["servers"][0]["weight"] = 1.into();
    assert!(!schemas::errors(&schema, &deep).is_empty(), "a new field of a server");
    let mut missing = share.clone();
    missing.as_object_mut().unwrap().remove("total");
    assert!(!schemas::errors(&schema, &missing).is_empty(), "a field taken away");
    let mut renamed = share.clone();
    renamed["schema"] = "nginx-ketama/share/v3".into();
    assert!(!schemas::errors(&schema, &renamed).is_empty(), "another version");
}

/// Every object every schema describes is closed, so the test above holds for each output, not just one.
#[test]
fn every_object_of_every_schema_is_closed() {
    fn walk(v: &Value, at: &str, open: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.contains_key("properties") && m.get("additionalProperties") != Some(&Value::Bool(false)) {
                    open.push(at.to_string());
                }
                for (k, v) in m {
                    walk(v, &format!("{at}/{k}"), open);
                }
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(v, &format!("{at}/{i}"), open)),
            _ => {}
        }
    }
    for entry in std::fs::read_dir(schemas::dir()).unwrap() {
        let path = entry.unwrap().path();
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut open = Vec::new();
        walk(&schema, "", &mut open);
        assert!(open.is_empty(), "{}: objects without additionalProperties: false at {open:?}", path.display());
    }
}

/// One name per schema: each file of `docs/schemas/` is `<output>.v<N>.json`, titled and pinned (`const`)
/// to the name its output carries, and the names the code gives its outputs (`Schema("…")` in `src/`) are
/// exactly the files, but for the older versions of an output kept beside its current one (docs/ci.md,
/// "When the version moves").
#[test]
fn schema_names_and_files_are_one_to_one() {
    let in_code = names_in_code();
    assert!(LIVE.iter().all(|n| in_code.contains(*n)), "{in_code:?}");
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(schemas::dir()).unwrap() {
        let path = entry.unwrap().path();
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = schema["title"].as_str().unwrap().to_string();
        assert_eq!(schemas::file_of(&name), path, "{name}");
        assert_eq!(schema["properties"]["schema"]["const"], name.as_str(), "{}", path.display());
        assert!(schema["required"].as_array().unwrap().contains(&"schema".into()), "{}", path.display());
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        files.insert(name);
    }
    let version = |name: &str| {
        let (output, v) = name.rsplit_once("/v").unwrap();
        (output.to_string(), v.parse::<u32>().unwrap())
    };
    let kept: BTreeSet<String> = files
        .iter()
        .filter(|f| {
            let (output, v) = version(f);
            !in_code.contains(*f) && in_code.iter().any(|c| version(c).0 == output && version(c).1 > v)
        })
        .cloned()
        .collect();
    let current: BTreeSet<String> = files.difference(&kept).cloned().collect();
    assert_eq!(in_code, current, "the names in src/ and the files of docs/schemas/ (older versions kept: {kept:?})");
}
