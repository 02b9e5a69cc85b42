//! `route --requests` and `route --log`: requests read from files, each routed where nginx sends it. That
//! nginx computes the same keys from the same logged requests is proven live by the core's
//! `tests/access_log_live.rs`; here, what the command adds: the pick is the one `route` gives the key (itself
//! proven live), bad lines are reported and counted or, with `--strict`, stop the run, and a log that cannot
//! carry the key is refused before anything is read.

#[path = "support/common.rs"]
mod common;

use common::{run, stdout_lines};
use nginx_ketama_harness::testkit::TempFile;
use serde_json::Value;

const CONF: &str = "events {}\nhttp {\n  log_format main '$remote_addr \"$request\" \"$http_host\"';\n  \
    upstream app { hash $request_uri consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; server 127.0.0.1:9003; }\n  \
    upstream byhost { hash $host$uri; server 127.0.0.1:9001; server 127.0.0.1:9002; }\n  \
    server { listen 8080; server_name app.test; location / { proxy_pass http://app; } location /h/ { proxy_pass http://byhost; } }\n}\n";

#[test]
fn a_logged_request_goes_where_its_key_goes() {
    let conf = TempFile::new("nginx.conf", CONF);
    let log = TempFile::new(
        "access.log",
        "10.0.0.1 \"GET /p/1?a=b HTTP/1.1\" \"app.test\"\n10.0.0.2 \"GET /h/x HTTP/1.1\" \"Other.test:8080\"\n",
    );
    let out = run(
        &["route", "--config", conf.to_str().unwrap(), "--log", log.to_str().unwrap(), "--log-format", "main"],
        b"",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = stdout_lines(&out);
    assert_eq!((got[0]["upstream"].as_str(), got[0]["key"].as_str()), (Some("app"), Some("/p/1?a=b")));
    assert_eq!((got[1]["upstream"].as_str(), got[1]["key"].as_str()), (Some("byhost"), Some("other.test/h/x")));
    // The same pick as `route` gives the key itself.
    for (doc, upstream) in got.iter().zip(["app", "byhost"]) {
        let key = format!("{}\n", doc["key"].as_str().unwrap());
        let plain = run(&["route", "--config", conf.to_str().unwrap(), "--upstream", upstream], key.as_bytes());
        assert_eq!(stdout_lines(&plain)[0]["attempts"], doc["attempts"]);
    }
}

#[test]
fn bad_lines_are_counted_or_with_strict_stop_the_run() {
    let conf = TempFile::new("nginx.conf", CONF);
    let requests = TempFile::new(
        "r.jsonl",
        "{\"target\":\"/a\",\"headers\":[[\"Host\",\"app.test\"]]}\n{\"target\":7}\n{\"target\":\"/b\",\"headers\":[[\"Host\",\"app.test\"]]}\n",
    );
    let (c, r) = (conf.to_str().unwrap(), requests.to_str().unwrap());
    let out = run(&["route", "--config", c, "--requests", r], b"");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(stdout_lines(&out).iter().map(|l| l["line"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 3]);
    assert!(err.contains(&format!("{r}:2: invalid type")), "{err}");
    assert!(err.contains(&format!("1 of 3 lines of {r} could not be read as requests")), "{err}");
    let strict = run(&["route", "--config", c, "--requests", r, "--strict"], b"");
    assert_eq!(strict.status.code(), Some(2));
    assert_eq!(stdout_lines(&strict).len(), 1, "the line before the bad one is answered");
    assert!(String::from_utf8_lossy(&strict.stderr).contains(&format!("{r}:2:")));
}

#[test]
fn a_log_that_cannot_carry_the_key_is_refused_up_front() {
    let conf = TempFile::new("nginx.conf", CONF);
    let log = TempFile::new("access.log", "whatever\n");
    let (c, l) = (conf.to_str().unwrap(), log.to_str().unwrap());
    let out = run(&["route", "--config", c, "--log", l, "--host", "app.test"], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("upstream \"byhost\" hashes \"$host$uri\", which needs $host that log_format \"combined\" does not log (it logs $remote_addr, $remote_user, $time_local, $request, $status, $body_bytes_sent, $http_referer, $http_user_agent)"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let unknown = run(&["route", "--config", c, "--log", l, "--log-format", "nosuch"], b"");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no log_format \"nosuch\" in the configuration"));
}

#[test]
fn explain_request_shows_where_it_goes_and_how_its_key_is_built() {
    let conf = TempFile::new("nginx.conf", CONF);
    let c = conf.to_str().unwrap();
    let out = run(&["explain", "--config", c, "--request", "GET /h/a/../b?q=1", "-H", "Host: Shop.Test:8080"], b"");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want_head = format!(
        "request \"GET /h/a/../b?q=1 HTTP/1.1\" from 127.0.0.1:40000 to 127.0.0.1:8080\n  Host: Shop.Test:8080\n\
         server block at {c}:6\nlocation at {c}:6\nupstream byhost: hash $host$uri\n  $host      \"shop.test\"\n  $uri       \"/h/b\"\n\
         key \"shop.test/h/b\" (13 bytes)"
    );
    assert!(text.starts_with(&want_head), "{text}");
    let elsewhere = run(&["explain", "--config", c, "--request", "GET /x HTTP/1.0"], b"");
    let text = String::from_utf8_lossy(&elsewhere.stdout);
    assert!(text.contains("upstream app: hash $request_uri\n  $request_uri \"/x\"\nkey \"/x\""), "{text}");
    let json = run(
        &["explain", "--config", c, "--request", "GET /h/a/../b?q=1", "-H", "Host: Shop.Test:8080", "--format", "json"],
        b"",
    );
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (doc["server_block"].as_str(), doc["location"].as_str()),
        (Some(&*format!("{c}:6")), Some(&*format!("{c}:6")))
    );
    assert_eq!(
        (doc["goes"].as_str(), doc["upstream"].as_str(), doc["expression"].as_str()),
        (Some("hash"), Some("byhost"), Some("$host$uri"))
    );
    let parts: Vec<(&str, &str)> = doc["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["value"].as_str().unwrap()))
        .collect();
    assert_eq!(parts, [("host", "shop.test"), ("uri", "/h/b")]);
    assert_eq!(doc["explanation"]["key"], "shop.test/h/b");
    assert!(!doc["explanation"]["attempts"].as_array().unwrap().is_empty());
    // A request nginx answers itself: said as `route --requests` says it.
    let json = run(&["explain", "--config", c, "--request", "GET / HTTP/1.1", "--format", "json"], b"");
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!((doc["goes"].as_str(), doc["status"].as_u64()), (Some("answered"), Some(400)), "{doc}");
}

/// `--fail` with `--requests`: each request follows its own location's retry rules and its own method;
/// `--method` and `--location` (which pick them for keys from stdin) are refused, and a server no hash
/// upstream has is an error. (That the answers are nginx's is proven live by `failures_live`.)
#[test]
fn failures_follow_each_requests_location_and_method() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp {\n  upstream app { hash $request_uri consistent; server 10.0.0.1:80; server 10.0.0.2:80; }\n  \
         server { listen 8080;\n    location / { proxy_pass http://app; }\n    \
         location /api/ { proxy_pass http://app; proxy_next_upstream error http_502; } }\n}\n",
    );
    let requests = TempFile::new(
        "requests.jsonl",
        "{\"target\": \"/x\", \"headers\": [[\"Host\", \"a\"]]}\n\
         {\"target\": \"/api/x\", \"headers\": [[\"Host\", \"a\"]]}\n\
         {\"target\": \"/api/x\", \"method\": \"POST\", \"headers\": [[\"Host\", \"a\"]]}\n",
    );
    let (c, r) = (conf.to_str().unwrap(), requests.to_str().unwrap());
    let both = ["--fail", "10.0.0.1:80=502", "--fail", "10.0.0.2:80=502"];
    let out = run(&[&["route", "--no-resolve", "--config", c, "--requests", r][..], &both].concat(), b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = stdout_lines(&out);
    let attempts = |i: usize| got[i]["attempts"].as_array().unwrap().len();
    // `location /`: the default `error timeout` passes the 502 on; `/api/` retries it (GET), not a POST.
    assert_eq!((attempts(0), got[0]["status"].as_u64()), (1, Some(502)));
    assert_eq!((attempts(1), got[1]["upstream_status"].to_string().as_str()), (2, "[502,502]"));
    assert_eq!((attempts(2), got[2]["status"].as_u64()), (1, Some(502)));
    // Without failure flags, no status fields.
    let plain = run(&["route", "--no-resolve", "--config", c, "--requests", r], b"");
    assert!(stdout_lines(&plain).iter().all(|l| l.get("status").is_none()));
    for (flags, want) in [
        (&["--method", "POST"][..], "--method \"POST\" applies to keys from stdin"),
        (&["--location", "5"][..], "--location \"5\" applies to keys from stdin"),
        (
            &["--fail", "10.9.9.9:80=502"][..],
            "--fail \"10.9.9.9:80\" matches no server string or peer address of any hash upstream",
        ),
        (&["--failed", "10.9.9.9:80"][..], "--failed \"10.9.9.9:80\" matches no server string"),
    ] {
        let out = run(&[&["route", "--no-resolve", "--config", c, "--requests", r][..], flags].concat(), b"");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{flags:?}: {err}");
    }
}

/// `explain --request --format json` gives the key nginx computes: for the requests of the key vectors
/// (`vectors/keys/v1/keys.json`, recorded from nginx 1.30.6 among others) that a request line and header
/// lines can express, the vectors' configuration with each `return` made a `proxy_pass` to an upstream
/// hashing one recorded expression (a different one per request, in turn), the JSON's key is the bytes
/// nginx recorded for that expression — the expectation is the file's, never this code's — and its parts
/// add up to it.
#[test]
fn explain_request_json_keys_are_the_keys_nginx_recorded() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors/keys/v1/keys.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let hex =
        |s: &str| (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect::<Vec<u8>>();
    let expressions: Vec<&str> =
        file["expressions"].as_array().unwrap().iter().map(|e| e["expression"].as_str().unwrap()).collect();
    // Captures as one `return` text leaves them depend on what that text evaluated before them (a map's
    // regular expression): not the same context as a key of their own.
    let usable: Vec<usize> = (0..expressions.len())
        .filter(|&i| !expressions[i].contains("$1") && !expressions[i].contains("${sub}"))
        .collect();
    let body = file["config"].as_str().unwrap();
    let mut proxied = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("return 200 \"") {
        proxied.push_str(&rest[..at]);
        let after = &rest[at + "return 200 \"".len()..];
        rest = &after[after.find("\";").unwrap() + 2..];
        proxied.push_str("proxy_pass http://app;");
    }
    proxied.push_str(rest);
    let mut confs = std::collections::BTreeMap::new();
    let (mut checked, mut hexed) = (0, 0);
    for group in file["testGroups"].as_array().unwrap() {
        if !group["source"]["versions"].as_array().unwrap().iter().any(|v| v == "1.30.6") {
            continue;
        }
        for t in group["tests"].as_array().unwrap() {
            let Ok(head) = String::from_utf8(hex(t["requestHex"].as_str().unwrap())) else { continue };
            let Some(head) = head.strip_suffix("\r\n\r\n") else { continue };
            let mut lines = head.split("\r\n");
            let line = lines.next().unwrap();
            if t["outcome"] != "key" || head.replace("\r\n", "").contains(['\n', '\0']) || line.split(' ').count() != 3
            {
                continue;
            }
            let e = usable[checked % usable.len()];
            let conf = confs.entry(e).or_insert_with(|| {
                TempFile::new(
                    "keys.conf",
                    format!(
                        "events {{}}\nhttp {{\n  upstream app {{ hash \"{}\" consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; }}\n{proxied}}}\n",
                        expressions[e]
                    ),
                )
            });
            let mut args =
                vec!["explain", "--config", conf.to_str().unwrap(), "--nginx-version", "1.30.6", "--request", line];
            for h in lines {
                args.extend(["-H", h]);
            }
            let (client, server) = (t["client"].as_str().unwrap(), t["server"].as_str().unwrap());
            args.extend(["--client", client, "--server-addr", server, "--format", "json"]);
            let out = run(&args, b"");
            assert!(out.status.success(), "tcId {}: {}", t["tcId"], String::from_utf8_lossy(&out.stderr));
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
            let at = format!("{} tcId {} ({}), {}", group["name"], t["tcId"], t["comment"], expressions[e]);
            assert_eq!(doc["goes"], "hash", "{at}: {doc}");
            let want = hex(t["keys"][e]["hex"].as_str().unwrap());
            let k = &doc["explanation"];
            let got = match k["key_hex"].as_str() {
                Some(h) => {
                    hexed += 1;
                    hex(h)
                }
                None => k["key"].as_str().unwrap().as_bytes().to_vec(),
            };
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want), "{at}");
            assert_eq!(got, want, "{at}");
            let parts: Vec<u8> = doc["parts"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| {
                    p["value_hex"].as_str().map_or_else(|| p["value"].as_str().unwrap().as_bytes().to_vec(), hex)
                })
                .collect();
            assert_eq!(parts, want, "{at}: the parts");
            checked += 1;
        }
    }
    assert!(checked >= 60 && hexed >= 1, "{checked} requests checked, {hexed} keys in hex");
}
