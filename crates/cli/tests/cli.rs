//! The `nginx-ketama` command's contract (`route`, `ring`), offline. Expected routes come from the nginx
//! recordings in docs/nginx-algorithm.md §11 (vectors A and C).

#[path = "support/common.rs"]
mod common;

use common::{CLI, conf, lines, run};
use nginx_ketama_harness::testkit::TempFile;
use std::process::Command;

const FIVE: &str = "http {\n  upstream a {\n    hash $arg_k consistent;\n    server 127.0.0.1:9001;\n    server 127.0.0.1:9002;\n    server 127.0.0.1:9003;\n    server 127.0.0.1:9004;\n    server 127.0.0.1:9005;\n  }\n}\n";

#[test]
fn route_prints_one_json_line_per_key_in_order() {
    let conf = conf("five.conf", FIVE);
    let out = run(&["route", "--config", conf.to_str().unwrap(), "--no-resolve"], b"k0\nk1\n\nk11\n");
    let l = lines(&out);
    assert_eq!(l.len(), 4, "a trailing newline ends the last key; the empty line is the empty key");
    assert_eq!(
        l[0],
        serde_json::json!({"schema": "nginx-ketama/route/v1", "key": "k0", "server": "127.0.0.1:9005", "fallback": null, "attempts": ["127.0.0.1:9005"]})
    );
    assert_eq!(l[1]["server"], "127.0.0.1:9003");
    assert_eq!(l[2]["key"], "");
    assert_eq!(l[2]["fallback"], "round-robin");
    assert_eq!(l[2]["server"], "127.0.0.1:9001", "a fresh worker's first round-robin pick is the first peer");
    assert_eq!(l[3]["server"], "127.0.0.1:9002");
    // Without a trailing newline the last line is still a key; CR belongs to the key.
    let l = lines(&run(&["route", "--config", conf.to_str().unwrap()], b"k0\r\nk0"));
    assert_eq!(l.len(), 2);
    assert_eq!(l[0]["key"], "k0\r");
    assert_eq!(l[1]["server"], "127.0.0.1:9005");
}

#[test]
fn route_follows_failover_with_failed_servers() {
    let conf = conf(
        "failover.conf",
        "upstream b { hash $arg_k consistent; server 127.0.0.1:9001 max_fails=0; server 127.0.0.1:9002 max_fails=0;\n\
         server 127.0.0.1:9901 max_fails=0; server 127.0.0.1:9902 max_fails=0; server 127.0.0.1:9903 max_fails=0; }\n",
    );
    let c = conf.to_str().unwrap();
    let args = [
        "route",
        "--config",
        c,
        "--failed",
        "127.0.0.1:9901",
        "--failed",
        "127.0.0.1:9902",
        "--failed",
        "127.0.0.1:9903",
    ];
    let l = lines(&run(&args, b"k0\nk4\nk11\n"));
    assert_eq!(l[0]["attempts"], serde_json::json!(["127.0.0.1:9903", "127.0.0.1:9901", "127.0.0.1:9002"]));
    assert_eq!(l[0]["server"], "127.0.0.1:9903");
    assert_eq!(
        l[1]["attempts"],
        serde_json::json!(["127.0.0.1:9902", "127.0.0.1:9903", "127.0.0.1:9901", "127.0.0.1:9002"])
    );
    assert_eq!(l[2]["attempts"], serde_json::json!(["127.0.0.1:9901", "127.0.0.1:9002"]));
    // Every server refusing: nginx tries each non-down peer once.
    let all = ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9901", "127.0.0.1:9902", "127.0.0.1:9903"];
    let mut args = vec!["route", "--config", c];
    for s in &all {
        args.extend(["--failed", s]);
    }
    let l = lines(&run(&args, b"k0\n"));
    assert_eq!(l[0]["attempts"].as_array().unwrap().len(), 5);
}

#[test]
fn route_addresses_one_peer_of_a_name_and_shows_non_utf8_keys() {
    // An IPv6 spelling that nginx prints differently: the address and the string name the same peer.
    let conf = conf(
        "v6.conf",
        "upstream c { hash $arg_k consistent; server [0:0::1]:9101 max_fails=0; server 127.0.0.1:1 max_fails=0; }\n",
    );
    let c = conf.to_str().unwrap();
    let by_address = lines(&run(&["route", "--config", c, "--failed", "[::1]:9101"], b"a\nb\nc\nd\n"));
    let by_server = lines(&run(&["route", "--config", c, "--failed", "[0:0::1]:9101"], b"a\nb\nc\nd\n"));
    assert_eq!(by_address, by_server);
    assert!(by_address.iter().any(|l| l["attempts"].as_array().unwrap().len() == 2));
    let l = lines(&run(&["route", "--config", c], b"\xff\xfe\n"));
    assert_eq!(l[0]["key_hex"], "fffe");
}

#[test]
fn route_handles_a_huge_key() {
    let conf = conf("huge.conf", FIVE);
    let mut key = vec![b'x'; 4 << 20];
    key.push(b'\n');
    let l = lines(&run(&["route", "--config", conf.to_str().unwrap()], &key));
    assert_eq!(l.len(), 1);
    assert_eq!(l[0]["key"].as_str().unwrap().len(), 4 << 20);
    assert!(l[0]["server"].is_string());
}

fn fails_with(args: &[&str], needle: &str) {
    let out = run(args, b"k\n");
    assert!(!out.status.success(), "expected failure for {args:?}");
    assert!(out.stdout.is_empty(), "nothing half-written on stdout");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "stderr {err:?} should contain {needle:?}");
}

#[test]
fn bad_input_gets_a_clear_error() {
    let zero = conf("zero.conf", "http {\n upstream z {\n  hash $arg_k;\n  server a weight=0;\n }\n}\n");
    let z = zero.to_str().unwrap();
    fails_with(&["route", "--config", z, "--no-resolve"], &format!("invalid parameter \"weight=0\" in {z}:4"));
    let two = conf("two.conf", "upstream a { hash $arg_k; server a; } upstream b { hash $arg_k; server b; }");
    let t = two.to_str().unwrap();
    fails_with(&["route", "--config", t, "--no-resolve"], "has 2 upstreams (a, b); name one");
    fails_with(&["route", "--config", t, "--no-resolve", "--upstream", "c"], "no upstream \"c\"");
    fails_with(&["route", "--config", "/nonexistent/nginx.conf"], "open() \"/nonexistent/nginx.conf\" failed");
    fails_with(
        &["route", "--config", t, "--no-resolve", "--upstream", "a", "--failed", "zz:1"],
        "--failed \"zz:1\" matches no",
    );
    fails_with(&["ring", "--config", t, "--no-resolve", "--upstream", "a"], "plain `hash`, which has no ring");
    let backup = conf("backup.conf", "upstream u {\n hash $arg_k consistent;\n server a backup;\n}\n");
    fails_with(
        &["route", "--config", backup.to_str().unwrap()],
        "balancing method does not support parameter \"backup\"",
    );
    let rr = conf("rr.conf", "upstream u { server a; }");
    fails_with(&["route", "--config", rr.to_str().unwrap(), "--no-resolve"], "does not use \"hash\"");
}

#[test]
fn ring_dump_lists_every_point() {
    let conf = conf("ring.conf", FIVE);
    let out = run(&["ring", "--config", conf.to_str().unwrap()], b"");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "index\thash\tserver");
    assert_eq!(rows.len(), 801);
    // Recorded from nginx: key k0 (crc 0xe109903f) lands on point 700 = 0xe15b2f49, 127.0.0.1:9005.
    assert_eq!(rows[701], "700\te15b2f49\t127.0.0.1:9005");
}

#[test]
fn failed_address_takes_out_one_address_of_a_name() {
    let addrs = nginx_ketama::resolve::resolve_host("localhost").unwrap();
    if addrs.len() < 2 {
        eprintln!("SKIP: localhost has one address here ({addrs:?}); needs two for this check");
        return;
    }
    let first = std::net::SocketAddr::new(addrs[0], 9001).to_string();
    let conf = conf(
        "multi.conf",
        "upstream m { hash $arg_k consistent; server localhost:9001 max_fails=0; server 127.0.0.9:1 max_fails=0; }",
    );
    let c = conf.to_str().unwrap();
    let keys: Vec<u8> = (0..40).flat_map(|i| format!("key{i}\n").into_bytes()).collect();
    let l = lines(&run(&["route", "--config", c, "--failed", &first], &keys));
    // A key on the name tries the failed address, then the name's other address: the same server string twice.
    let twice = l.iter().filter(|l| l["attempts"] == serde_json::json!(["localhost:9001", "localhost:9001"])).count();
    assert!(twice > 0, "{l:?}");
    // Failing the server string takes out both addresses.
    let l = lines(&run(&["route", "--config", c, "--failed", "localhost:9001"], &keys));
    assert!(l.iter().all(|l| l["server"] == "127.0.0.9:1" || l["attempts"].as_array().unwrap().len() == 3));
}

/// `--libc`: the collision of algorithm §11 F. Key k261 lands on the point 127.0.0.1:20195 and
/// 127.0.0.1:20412 share; nginx built with glibc sends it to the server listed first, nginx built with
/// musl to the one listed second, in both line orders (recorded from the Debian 1.26.3 build and the musl
/// build of the same source, scripts/provision-nginx-musl).
#[test]
fn libc_decides_a_shared_point() {
    for (first, second) in [("127.0.0.1:20195", "127.0.0.1:20412"), ("127.0.0.1:20412", "127.0.0.1:20195")] {
        let conf = conf(
            "collision.conf",
            &format!("upstream c {{ hash $arg_k consistent; server {first}; server {second}; }}"),
        );
        let c = conf.to_str().unwrap();
        for (libc, want) in [(None, first), (Some("glibc"), first), (Some("musl"), second)] {
            let mut args = vec!["route", "--config", c];
            args.extend(libc.iter().flat_map(|l| ["--libc", l]));
            assert_eq!(lines(&run(&args, b"k261\n"))[0]["server"], want, "{first} first, --libc {libc:?}");
        }
        let ring = run(&["ring", "--config", c, "--libc", "musl"], b"");
        let text = String::from_utf8(ring.stdout).unwrap();
        assert!(text.lines().any(|l| l == format!("53\t32a8f0fa\t{second}")), "{text:.200}");
    }
    fails_with(&["route", "--config", "x.conf", "--libc", "uclibc"], "invalid value 'uclibc' for '--libc");
}

/// Every command that reads a configuration offline (`--config` or `--from`, without running nginx) says in
/// its help that host names are resolved with the system resolver, as nginx does at start-up, and what
/// `--no-resolve` changes. The commands are those `--help` lists, so a new one is held to this too.
#[test]
fn help_says_how_names_are_resolved() {
    let mut held = Vec::new();
    for command in commands() {
        let out = Command::new(CLI).args([&command, "--help"]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let reads_a_config = ["--config <", "--from <"].iter().any(|flag| text.contains(flag));
        if !reads_a_config || command == "verify" {
            continue;
        }
        held.push(command.clone());
        for help in ["-h", "--help"] {
            let out = Command::new(CLI).args([command.as_str(), help]).output().unwrap();
            assert!(out.status.success(), "{command} {help}");
            // clap wraps help text to the terminal's width: compare words, not lines.
            let text = String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
            for needle in [
                "resolved with this machine's system resolver (getaddrinfo: /etc/hosts, DNS), as nginx resolves them at start-up",
                "--no-resolve Make every `server` line exactly one peer, with no DNS lookups. Without it a host name is resolved with the system resolver",
            ] {
                assert!(text.contains(needle), "{command} {help} does not say {needle:?}:\n{text}");
            }
        }
    }
    assert!(["route", "ring", "share", "diff"].iter().all(|c| held.contains(&c.to_string())), "{held:?}");
}

/// `--upstream http:NAME` and `stream:NAME` choose between two upstreams of one name, one in each context.
#[test]
fn an_upstream_named_with_its_context_is_the_one_used() {
    let conf = TempFile::new(
        "both.conf",
        "load_module modules/ngx_stream_module.so; events {}\n\
         http { upstream app { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n\
         stream { upstream app { hash $remote_addr consistent; server 127.0.0.2:9001; server 127.0.0.2:9002; } }\n",
    );
    let c = conf.to_str().unwrap();
    for (context, address) in [("http", "127.0.0.1:"), ("stream", "127.0.0.2:")] {
        let l = lines(&run(&["route", "--config", c, "--upstream", &format!("{context}:app")], b"k0\n"));
        assert!(l[0]["server"].as_str().unwrap().starts_with(address), "{context}: {l:?}");
    }
    fails_with(&["route", "--config", c, "--upstream", "app"], "name one (as http:NAME or stream:NAME)");
}

/// The commands `nginx-ketama --help` lists (clap's own `help` left out).
fn commands() -> Vec<String> {
    let out = Command::new(CLI).arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let listed = text.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    let names = listed.lines().filter_map(|l| l.split_whitespace().next()).filter(|&n| n != "help");
    names.map(String::from).collect()
}

/// Every help that names the nginx releases whose routing is modelled names exactly the version table's
/// range (`nginx_ketama::version::MODELLED`), worded as the library's error for a release outside it.
#[test]
fn help_names_the_modelled_range_of_the_version_table() {
    use nginx_ketama::version::MODELLED;
    let refused = nginx_ketama::NginxVersion::new(0, 1, 0).modelled().unwrap_err().to_string();
    let range = refused.split_once("this build models nginx ").unwrap().1;
    let (first, last) = (MODELLED.start(), MODELLED.end());
    assert_eq!(range, format!("{first} to {}.{}.x", last.major, last.minor), "every patch release of the last");
    let mut named = Vec::new();
    for command in commands() {
        let out = Command::new(CLI).args([&command, "--help"]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
        for (at, _) in text.match_indices("(modelled: ") {
            assert_eq!(text[at..].split_once(')').unwrap().0, format!("(modelled: {range}"), "{command} --help");
        }
        let takes_a_version = ["--nginx-version <", "--from-version <"].iter().any(|flag| text.contains(flag));
        assert_eq!(text.contains(&format!("(modelled: {range})")), takes_a_version, "{command} --help");
        if takes_a_version {
            named.push(command);
        }
    }
    assert!(["route", "diff"].iter().all(|c| named.contains(&c.to_string())), "{named:?}");
}

/// Every command `--help` lists has its section in docs/commands.md (a heading naming it) and its row in
/// the table of commands there.
#[test]
fn every_command_is_documented_in_docs_commands_md() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/commands.md")).unwrap();
    for command in commands() {
        let named = |line: &str| line.contains(&format!("`{command}`")) || line.contains(&format!("`{command} "));
        assert!(
            doc.lines().any(|l| l.starts_with('#') && named(l)),
            "no heading of docs/commands.md names `{command}`"
        );
        assert!(
            doc.lines().any(|l| l.starts_with("| [") && named(l)),
            "no row of docs/commands.md's table names `{command}`"
        );
    }
}

/// `--version` names the crate's version and the nginx releases it models, and the range it states is the
/// one the library enforces: its first release and every patch of its last minor are accepted by
/// `--nginx-version`, the releases on either side are refused.
#[test]
fn version_names_the_crate_and_the_modelled_releases() {
    let out = run(&["--version"], b"");
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("nginx-ketama {} (models nginx ", env!("CARGO_PKG_VERSION"));
    let range = text.strip_prefix(&prefix).and_then(|r| r.strip_suffix(")\n")).unwrap_or_else(|| panic!("{text:?}"));
    let (first, last) = range.split_once(" to ").unwrap_or_else(|| panic!("{text:?}"));
    let last = last.strip_suffix(".x").unwrap_or_else(|| panic!("every patch of the last minor: {text:?}"));
    let num = |s: &str| s.parse::<u32>().unwrap_or_else(|_| panic!("{text:?}"));
    let f: Vec<u32> = first.split('.').map(num).collect();
    let l: Vec<u32> = last.split('.').map(num).collect();
    let accepted = |v: String| {
        let conf = conf("version.conf", FIVE);
        run(&["ring", "--config", conf.to_str().unwrap(), "--nginx-version", &v], b"").status.success()
    };
    assert!(accepted(first.to_string()), "{first} is modelled");
    assert!(accepted(format!("{last}.0")) && accepted(format!("{last}.99")), "{last}.x is modelled");
    let before = if f[2] > 0 { format!("{}.{}.{}", f[0], f[1], f[2] - 1) } else { format!("{}.{}.99", f[0], f[1] - 1) };
    assert!(!accepted(before.clone()), "{before} is not modelled");
    assert!(!accepted(format!("{}.{}.0", l[0], l[1] + 1)), "{}.{} is not modelled", l[0], l[1] + 1);
}

/// A stderr that cannot be written (`2>/dev/full`) does not turn an error into a panic (std's `eprintln!`
/// panics, exit 101): the command ends with the exit code its error has.
#[test]
fn an_unwritable_stderr_keeps_the_exit_code() {
    let full = std::fs::File::options().write(true).open("/dev/full").unwrap();
    let status = Command::new(CLI)
        .args(["route", "--config", "/nonexistent/nginx.conf"])
        .stdin(std::process::Stdio::null())
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2), "a usage error's exit code, not a panic's 101");
}

/// `--fail`, `--method` and `--location` refuse what names nothing, with what there is; without them the
/// output is the refused-only one (no `status`), with them every line has `status` and `upstream_status`.
/// (What they compute is checked against nginx in `failures_live.rs`.)
#[test]
fn route_failure_flags_refuse_what_names_nothing() {
    let conf = conf("five.conf", FIVE);
    let c = conf.to_str().unwrap();
    let bad = |args: &[&str], needle: &str| {
        let mut all = vec!["route", "--config", c];
        all.extend(args);
        let out = run(&all, b"k0\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    bad(&["--fail", "127.0.0.1:9001=teapot"], "unknown failure kind \"teapot\"");
    bad(&["--fail", "127.0.0.1:9001=600"], "unknown failure kind \"600\"");
    bad(&["--fail", "127.0.0.1:9001"], "is not SERVER=KIND");
    bad(&["--fail", "127.0.0.1:9009=502"], "--fail \"127.0.0.1:9009\" matches no server string");
    bad(&["--location", "3"], "no *_pass to upstream \"a\" there; it is proxied to from: nowhere");
    bad(&["--location", "x"], "is not [FILE:]LINE");
    let plain = lines(&run(&["route", "--config", c], b"k0\n"));
    assert!(plain[0].get("status").is_none());
    let with = lines(&run(&["route", "--config", c, "--fail", "127.0.0.1:9001=502", "--method", "POST"], b"k0\nk1\n"));
    for l in &with {
        assert!(l["status"].is_u64() && l["upstream_status"].is_array(), "{l}");
    }
}
