//! The analysis commands (`crates/cli/src/analysis/`), offline, through the binary:
//! each command's formats, its agreement with `route` on the same keys, pictures that render, and errors.

#[path = "support/common.rs"]
mod common;

use common::{CLI, conf, fails, json, ok, run};
use nginx_ketama_harness::testkit::TempFile;
use serde_json::Value;
use std::process::Command;

const FIVE: &str = "upstream app {\n  hash $arg_k consistent;\n  server 127.0.0.1:9001;\n  server 127.0.0.1:9002;\n  server 127.0.0.1:9003;\n  server 127.0.0.1:9004;\n  server 127.0.0.1:9005;\n}";

#[test]
fn share_json_sums_to_the_hash_space_and_csv_and_table_agree() {
    let c = conf("share.conf", FIVE);
    let c = c.to_str().unwrap();
    let doc = json(&run(&["share", "--config", c, "--failed", "127.0.0.1:9003", "--format", "json"], b""));
    let servers = doc["servers"].as_array().unwrap();
    let sum: u64 =
        servers.iter().map(|s| s["share"].as_u64().unwrap()).sum::<u64>() + doc["round_robin"].as_u64().unwrap();
    assert_eq!(sum, 1 << 32);
    assert_eq!(doc["basis"], "ring");
    assert_eq!(servers[2]["server"], "127.0.0.1:9003");
    assert_eq!((servers[2]["health"].as_str(), servers[2]["share"].as_u64()), (Some("failing"), Some(0)));
    let csv = ok(&run(&["share", "--config", c, "--failed", "127.0.0.1:9003", "--format", "csv"], b""));
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "server,health,points,arcs,share,fraction");
    assert_eq!(rows.len(), 1 + 5 + 1);
    for (row, s) in rows[1..6].iter().zip(servers) {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[0], s["server"]);
        assert_eq!(cells[4], s["share"].as_u64().unwrap().to_string());
    }
    let table = ok(&run(&["share", "--config", c], b""));
    assert!(table.starts_with("upstream app (consistent, nginx 1.30.6): exact over all 2^32 CRC32 values\n"));
    assert!(table.contains("total") && table.contains("4294967296  100.000%"), "{table}");
}

/// `share --keys` counts each key where `route` sends it.
#[test]
fn share_over_keys_equals_route() {
    let c = conf("keys.conf", FIVE);
    let c = c.to_str().unwrap();
    let keys: String = (0..300).map(|i| format!("/item/{i}\n")).collect::<String>() + "\n";
    let file = TempFile::new("keys.txt", &keys);
    let doc = json(&run(&["share", "--config", c, "--keys", file.to_str().unwrap(), "--format", "json"], b""));
    let routed = ok(&run(&["route", "--config", c], keys.as_bytes()));
    let mut want = std::collections::BTreeMap::<String, u64>::new();
    let mut rr = 0;
    for line in routed.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match v["fallback"].as_str() {
            Some(_) => rr += 1,
            None => *want.entry(v["server"].as_str().unwrap().to_string()).or_insert(0) += 1,
        }
    }
    assert_eq!(doc["keys"]["total"], 301);
    assert_eq!(doc["keys"]["round_robin"], rr);
    for s in doc["keys"]["servers"].as_array().unwrap() {
        assert_eq!(s["keys"].as_u64().unwrap(), want.get(s["server"].as_str().unwrap()).copied().unwrap_or(0));
    }
}

/// `explain`'s attempts are `route`'s, key by key, on one worker (failover and round-robin included).
#[test]
fn explain_attempts_equal_route() {
    let c = conf(
        "explain.conf",
        "upstream app {\n  hash $arg_k consistent;\n  server 127.0.0.1:9001 max_fails=0;\n  server 127.0.0.1:9002 max_fails=0;\n  server 127.0.0.1:9901 max_fails=0;\n  server 127.0.0.1:9902 max_fails=0;\n  server 127.0.0.1:9903 max_fails=0;\n}",
    );
    let c = c.to_str().unwrap();
    let keys = ["k0", "k1", "k4", "", "k6", "k9", "k10", "k11"];
    let mut args = vec!["explain", "--config", c, "--format", "json"];
    for f in ["127.0.0.1:9901", "127.0.0.1:9902", "127.0.0.1:9903"] {
        args.extend(["--failed", f]);
    }
    args.extend(keys);
    let explained = json(&run(&args, b""));
    let input: String = keys.iter().map(|k| format!("{k}\n")).collect();
    let mut route = vec!["route", "--config", c];
    route.extend(&args[5..11]);
    let routed = ok(&run(&route, input.as_bytes()));
    assert_eq!(explained["schema"], "nginx-ketama/explain/v1");
    let explained = &explained["keys"];
    for (e, r) in explained.as_array().unwrap().iter().zip(routed.lines()) {
        let r: Value = serde_json::from_str(r).unwrap();
        assert_eq!(e["key"], r["key"]);
        assert_eq!(e["attempts"], r["attempts"], "{}", e["key"]);
        assert_eq!(e["fallback"], r["fallback"]);
    }
    // Worked example 3 of the algorithm document: k0 lands on point 691 and misses 6 times.
    let k0 = &explained[0];
    assert_eq!(k0["landing"]["index"], 691);
    let misses: Vec<u64> = k0["steps"].as_array().unwrap().iter().filter_map(|s| s["miss"].as_u64()).collect();
    assert_eq!(misses, [1, 2, 3, 4, 5, 6]);
    let text = ok(&run(&["explain", "--config", c, "--failed", "127.0.0.1:9903", "k0"], b""));
    assert!(text.contains("  point 691 (") && text.contains("miss 1: 127.0.0.1:9903 tried"), "{text}");
    assert!(fails(&run(&["explain", "--config", c, "--format", "csv", "k0"], b"")).contains("no CSV form"));
}

/// `forge` keys go where it says, according to `route`, with and without failing servers.
#[test]
fn forged_keys_route_to_their_server() {
    let c = conf("forge.conf", FIVE);
    let c = c.to_str().unwrap();
    for failed in [None, Some("127.0.0.1:9003")] {
        let mut args = vec![
            "forge",
            "--config",
            c,
            "--server",
            "127.0.0.1:9002",
            "--count",
            "40",
            "--prefix",
            "/u/",
            "--format",
            "json",
        ];
        if let Some(f) = failed {
            args.extend(["--failed", f]);
        }
        let keys = json(&run(&args, b""));
        assert_eq!(keys["server"], "127.0.0.1:9002");
        let keys: Vec<&str> = keys["keys"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
        assert_eq!(keys.len(), 40);
        let input: String = keys.iter().map(|k| format!("{k}\n")).collect();
        let mut route = vec!["route", "--config", c];
        if let Some(f) = failed {
            route.extend(["--failed", f]);
        }
        for line in ok(&run(&route, input.as_bytes())).lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["attempts"].as_array().unwrap().last().unwrap(), "127.0.0.1:9002", "{v}");
        }
    }
    let err = fails(&run(&["forge", "--config", c, "--server", "10.9.9.9:1"], b""));
    assert!(err.starts_with("nginx-ketama: no server \"10.9.9.9:1\" in upstream \"app\""), "{err}");
    let err = fails(&run(&["forge", "--config", c, "--server", "127.0.0.1:9001", "--point", "100000"], b""));
    assert!(err.contains("point 100000 is out of range (the ring has 800 points)"), "{err}");
}

#[test]
fn diff_of_a_file_with_itself_is_zero_and_adding_a_server_moves_keys_only_to_it() {
    let a = conf("a.conf", FIVE);
    let b = conf(
        "b.conf",
        &FIVE.replace("  server 127.0.0.1:9005;\n", "  server 127.0.0.1:9005;\n  server 127.0.0.1:9006;\n"),
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let same = json(&run(&["diff", "--from", a, "--to", a, "--format", "json"], b""));
    assert_eq!(same["hash_space"]["moved"], 0);
    let grow = json(&run(&["diff", "--from", a, "--to", b, "--format", "json"], b""));
    let moved = grow["hash_space"]["moved"].as_u64().unwrap();
    assert!(moved > 0);
    let moves = grow["hash_space"]["moves"].as_array().unwrap();
    assert!(moves.iter().all(|m| m["to"] == "127.0.0.1:9006"));
    assert_eq!(moves.iter().map(|m| m["count"].as_u64().unwrap()).sum::<u64>(), moved);
    let csv = ok(&run(&["diff", "--from", a, "--to", b, "--format", "csv"], b""));
    assert_eq!(csv.lines().next(), Some("measure,from,to,count,fraction"));
    assert_eq!(csv.lines().count(), 1 + moves.len());
    // Versions: plain hash with one primary and a backup is hashed before 1.27.3 and not after.
    let p = conf(
        "plain.conf",
        "upstream p {\n  server 127.0.0.1:9009 backup;\n  hash $arg_k;\n  server 127.0.0.1:9001;\n}",
    );
    let p = p.to_str().unwrap();
    let v = json(&run(
        &["diff", "--from", p, "--from-version", "1.26.3", "--to-version", "1.30.6", "--format", "json"],
        b"",
    ));
    assert_eq!(v["hash_space"]["moved"].as_u64(), Some(1 << 32));
    assert_eq!(v["hash_space"]["round_robin"]["after"].as_u64(), Some(1 << 32));
}

#[test]
fn compare_is_exact_against_pingora_and_sampled_against_md5_rings() {
    let c = conf("cmp.conf", FIVE);
    let c = c.to_str().unwrap();
    let p = json(&run(&["compare", "--config", c, "--against", "pingora-ketama", "--format", "json"], b""));
    assert_eq!(p["uniform"]["method"], "exact");
    assert_eq!(p["uniform"]["agree"].as_u64(), Some(1 << 32), "canonical ip:port strings agree everywhere");
    let m = json(&run(
        &["compare", "--config", c, "--against", "md5-vnodes", "--samples", "5000", "--format", "json"],
        b"",
    ));
    let u = &m["uniform"];
    assert_eq!((u["method"].as_str(), u["total"].as_u64()), (Some("sampled"), Some(5000)));
    let (lo, hi) = (u["interval"][0].as_f64().unwrap(), u["interval"][1].as_f64().unwrap());
    let agree = u["agree_fraction"].as_f64().unwrap();
    assert!(lo <= agree && agree <= hi && hi < 0.5, "{u}");
    let unix = conf(
        "unix.conf",
        "upstream u {\n  hash $arg_k consistent;\n  server unix:/tmp/a.sock;\n  server 127.0.0.1:1;\n}",
    );
    let err = fails(&run(&["compare", "--config", unix.to_str().unwrap(), "--against", "pingora-ketama"], b""));
    assert!(err.contains("pingora-ketama takes IP socket addresses"), "{err}");
}

#[test]
fn compare_against_a_proxy_is_exact_where_it_hashes_with_crc32_and_says_what_is_proven() {
    let c = conf("cmp-engines.conf", FIVE);
    let c = c.to_str().unwrap();
    // APISIX's ids are nginx's `host\0port` for ip:port lines: every key agrees, counted exactly.
    let a = json(&run(&["compare", "--config", c, "--against", "apisix", "--format", "json"], b""));
    assert_eq!((a["uniform"]["method"].as_str(), a["uniform"]["agree"].as_u64()), (Some("exact"), Some(1 << 32)));
    assert!(a["provenance"].as_str().unwrap().ends_with("not proven live"), "{a}");
    let h = json(&run(&["compare", "--config", c, "--against", "haproxy@2.6.12:crc32", "--format", "json"], b""));
    assert_eq!(h["uniform"]["method"], "exact");
    assert!(h["uniform"]["agree"].as_u64().unwrap() < 1 << 31, "a different ring: {h}");
    let t = ok(&run(&["compare", "--config", c, "--against", "caddy@2.6.2", "--samples", "2000"], b""));
    assert!(
        t.contains("sampled: 2000 random keys")
            && t.contains("caddy@2.6.2: modelled from")
            && t.contains("proven live"),
        "{t}"
    );
    let err = fails(&run(&["compare", "--config", c, "--against", "haproxy@2.2.9:hash-key=addr"], b""));
    assert!(err.contains("haproxy 2.2.9 has no hash-key (3.0 on)"), "{err}");
    let err = fails(&run(&["compare", "--config", c, "--against", "nginx"], b""));
    assert!(err.contains("unknown engine \"nginx\""), "{err}");
}

#[test]
fn compare_against_envoy_kong_and_traefik_is_sampled_and_not_proven_live() {
    let c = conf("cmp-envoy.conf", FIVE);
    let c = c.to_str().unwrap();
    for (engine, shown) in [
        ("envoy", "envoy: modelled from envoyproxy/envoy 1.36 ring_hash"),
        ("envoy:maglev", "envoy:maglev: modelled from envoyproxy/envoy 1.36 maglev"),
        ("envoy:murmur2,min-ring-size=4096", "envoy:murmur2,min-ring-size=4096: modelled from"),
        ("kong:slots=20000", "kong:slots=20000: modelled from Kong/kong 3.9.3"),
        ("traefik", "traefik: modelled from traefik/traefik v3.7.9"),
    ] {
        let t = ok(&run(&["compare", "--config", c, "--against", engine, "--samples", "2000"], b""));
        assert!(
            t.contains("sampled: 2000 random keys") && t.contains(shown) && t.contains("not proven live"),
            "{engine}: {t}"
        );
        let j =
            json(&run(&["compare", "--config", c, "--against", engine, "--samples", "2000", "--format", "json"], b""));
        let agree = j["uniform"]["agree_fraction"].as_f64().unwrap();
        // Five servers, hashes independent of CRC-32: about one key in five keeps its server.
        assert!((0.1..0.3).contains(&agree), "{engine}: {agree}");
    }
    for (engine, message) in [
        ("envoy:maglev,table-size=65536", "envoy: The table size of maglev must be prime number"),
        ("envoy:min-ring-size=20,max-ring-size=10", "ring hash: minimum_ring_size (20) > maximum_ring_size (10)"),
        ("kong:slots=5", "kong: invalid option \"slots=5\" (expected slots=N (10 to 65536))"),
        ("traefik:sticky", "traefik: invalid option \"sticky\" (expected none)"),
    ] {
        let err = fails(&run(&["compare", "--config", c, "--against", engine], b""));
        assert!(err.contains(message), "{engine}: {err}");
    }
}

#[test]
fn bad_failed_arguments_are_refused_with_the_peers_listed() {
    let c = conf("bad.conf", FIVE);
    let c = c.to_str().unwrap();
    for cmd in ["share", "forge", "explain"] {
        let mut args = vec![cmd, "--config", c, "--failed", "127.0.0.1:1"];
        if cmd == "forge" {
            args.extend(["--server", "127.0.0.1:9001"]);
        }
        if cmd == "explain" {
            args.push("k");
        }
        let err = fails(&run(&args, b""));
        assert!(err.contains("--failed \"127.0.0.1:1\" matches no server string or peer address"), "{cmd}: {err}");
    }
}

/// Reads a PNG's width and height from its IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    (be(&png[16..20]), be(&png[20..24]))
}

/// The pictures render with `rsvg-convert` (Debian's librsvg2-bin) into PNGs of the SVG's size.
#[test]
fn svg_pictures_render() {
    let a = conf("pa.conf", FIVE);
    let b = conf("pb.conf", &FIVE.replace("127.0.0.1:9003", "127.0.0.1:09003"));
    let dir = std::env::temp_dir().join(format!("nginx-ketama-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let share = dir.join("share.svg");
    let diff = dir.join("diff.svg");
    ok(&run(&["share", "--config", a.to_str().unwrap(), "--svg", share.to_str().unwrap()], b""));
    ok(&run(
        &["diff", "--from", a.to_str().unwrap(), "--to", b.to_str().unwrap(), "--svg", diff.to_str().unwrap()],
        b"",
    ));
    for svg in [&share, &diff] {
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
        let png = svg.with_extension("png");
        match Command::new("rsvg-convert").arg("-o").arg(&png).arg(svg).status() {
            Ok(status) => {
                assert!(status.success(), "rsvg-convert {}", svg.display());
                let (w, h) = png_size(&std::fs::read(&png).unwrap());
                assert_eq!((w, h), (1100, 700), "{}", svg.display());
            }
            Err(_) => {
                nginx_ketama_harness::testkit::skip("rsvg-convert is not installed (apt-get install librsvg2-bin)")
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pictures in docs/commands.md (`docs/images/`) are what the commands draw today. To redraw them, from
/// `crates/cli/tests/data/examples/`: `nginx-ketama share --config nginx.conf --svg ../../../../../docs/images/share.svg`
/// and `nginx-ketama diff --from nginx.conf --to grow.conf --svg ../../../../../docs/images/diff.svg`, and
/// `nginx-ketama migrate --config cdn.conf --to haproxy@2.6.12,ingress-nginx,envoy --samples 20000 --svg ../../../../../docs/images/migrate.svg`.
#[test]
fn documented_pictures_are_current() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/examples");
    let images = nginx_ketama_harness::repo_root().join("docs/images");
    let dir = std::env::temp_dir().join(format!("nginx-ketama-pictures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs: [(&str, Vec<&str>); 3] = [
        ("share.svg", vec!["share", "--config", "nginx.conf"]),
        ("diff.svg", vec!["diff", "--from", "nginx.conf", "--to", "grow.conf"]),
        (
            "migrate.svg",
            vec!["migrate", "--config", "cdn.conf", "--to", "haproxy@2.6.12,ingress-nginx,envoy", "--samples", "20000"],
        ),
    ];
    for (name, args) in runs {
        let fresh = dir.join(name);
        let out = Command::new(CLI).args(&args).arg("--svg").arg(&fresh).current_dir(&data).output().unwrap();
        ok(&out);
        let want = std::fs::read_to_string(images.join(name)).unwrap();
        let got = std::fs::read_to_string(&fresh).unwrap();
        assert!(got == want, "docs/images/{name} is stale: redraw it (see this test's comment)");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--svg` never writes over one of the command's inputs, however the path is spelled: the configuration,
/// a file it includes, `--keys`, the other side of a `diff`. The inputs are left as they were.
#[test]
fn svg_onto_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("up.inc"), "hash $arg_k consistent;\nserver 127.0.0.1:9001;\nserver 127.0.0.1:9002;\n")
        .unwrap();
    std::fs::write(d.join("nginx.conf"), "events {}\nhttp {\n upstream app {\n  include up.inc;\n }\n}\n").unwrap();
    std::fs::write(d.join("grow.conf"), format!("events {{}}\nhttp {{\n{FIVE}\n}}\n")).unwrap();
    std::fs::write(d.join("keys.txt"), "a\nb\n").unwrap();
    std::fs::hard_link(d.join("nginx.conf"), d.join("hard.svg")).unwrap();
    std::os::unix::fs::symlink("up.inc", d.join("soft.svg")).unwrap();
    let before: Vec<Vec<u8>> =
        ["nginx.conf", "up.inc", "grow.conf", "keys.txt"].iter().map(|f| std::fs::read(d.join(f)).unwrap()).collect();
    let p = |f: &str| d.join(f).to_str().unwrap().to_string();
    let share = |svg: &str| run(&["share", "--config", &p("nginx.conf"), "--keys", &p("keys.txt"), "--svg", svg], b"");
    let diff = |svg: &str| run(&["diff", "--from", &p("nginx.conf"), "--to", &p("grow.conf"), "--svg", svg], b"");
    for (out, svg, input) in [
        (share(&p("nginx.conf")), "nginx.conf", None),
        (share(&p("hard.svg")), "hard.svg", Some("nginx.conf")),
        (share(&p("soft.svg")), "soft.svg", Some("up.inc")),
        (share(&p("up.inc")), "up.inc", Some("up.inc")),
        (share(&p("keys.txt")), "keys.txt", None),
        (diff(&p("grow.conf")), "grow.conf", None),
        (diff(&p("up.inc")), "up.inc", Some("up.inc")),
    ] {
        let err = fails(&out);
        let why = match input {
            Some(input) if input != svg => format!("it is {}, an input of this command", p(input)),
            _ => "it is an input of this command".to_string(),
        };
        assert_eq!(err, format!("nginx-ketama: not writing {}: {why}\n", p(svg)));
    }
    let after: Vec<Vec<u8>> =
        ["nginx.conf", "up.inc", "grow.conf", "keys.txt"].iter().map(|f| std::fs::read(d.join(f)).unwrap()).collect();
    assert_eq!(before, after, "no input was written");
    ok(&share(&p("fresh.svg")));
    assert!(std::fs::read_to_string(d.join("fresh.svg")).unwrap().starts_with("<svg"));
}

/// The gates: past its limit a command still writes its whole answer, then exits 1 with one line naming the
/// limit and by how much; within it, exit 0; a threshold that does not parse is a usage error naming the
/// accepted forms.
#[test]
fn gates_fail_past_their_limit_with_one_line() {
    let a = conf("gate-a.conf", FIVE);
    let grown = FIVE.replace("  server 127.0.0.1:9005;\n", "  server 127.0.0.1:9005;\n  server 127.0.0.1:9006;\n");
    let b = conf("gate-b.conf", &grown);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let crossed = |args: &[&str]| {
        let out = run(args, b"");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let answer = String::from_utf8(out.stdout).unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        (answer, err)
    };
    let diff = ["diff", "--from", a, "--to", b];
    let (answer, err) = crossed(&[&diff[..], &["--fail-moved-above", "10%"]].concat());
    assert!(answer.starts_with("from ") && answer.contains("moved: "), "the whole answer first: {answer}");
    assert!(err.starts_with("nginx-ketama: --fail-moved-above 10% crossed: "), "{err}");
    assert!(err.contains(" of the hash space moved (") && err.contains(" points above the limit"), "{err}");
    assert_eq!(ok(&run(&[&diff[..], &["--fail-moved-above", "0.5"]].concat(), b"")), ok(&run(&diff, b"")));
    let (answer, _) = crossed(&[&diff[..], &["--fail-moved-above", "1%", "--format", "json"]].concat());
    assert!(serde_json::from_str::<Value>(&answer).is_ok(), "the JSON document stays whole");

    let share = ["share", "--config", a];
    let (_, err) = crossed(&[&share[..], &["--fail-skew-above", "1.01"]].concat());
    assert!(err.starts_with("nginx-ketama: --fail-skew-above 1.01 crossed: 127.0.0.1:900"), "{err}");
    assert!(err.contains(" times its fair share of the hash space, "), "{err}");
    assert!(run(&[&share[..], &["--fail-skew-above", "2"]].concat(), b"").status.success());

    // pingora-ketama hashes the socket address, not the server string: `09001` is spelt differently.
    let spelt = conf("gate-spelt.conf", &FIVE.replace(":9001", ":09001").replace(":9002", ":09002"));
    let compare = ["compare", "--config", spelt.to_str().unwrap(), "--against", "pingora-ketama"];
    let (_, err) = crossed(&[&compare[..], &["--fail-agreement-below", "90%"]].concat());
    assert!(err.starts_with("nginx-ketama: --fail-agreement-below 90% crossed: pingora-ketama agrees"), "{err}");
    assert!(err.contains(" points below the limit"), "{err}");
    assert!(run(&[&compare[..], &["--fail-agreement-below", "0%"]].concat(), b"").status.success());

    for (args, bad) in [(&diff[..], "--fail-moved-above"), (&compare[..], "--fail-agreement-below")] {
        for value in ["20", "120%", "lots"] {
            let err = fails(&run(&[args, &[bad, value]].concat(), b""));
            assert!(err.contains("e.g. 20% or 12.5%") && err.contains("(e.g. 0.2)"), "{value}: {err}");
        }
    }
    let err = fails(&run(&[&share[..], &["--fail-skew-above", "0.9"]].concat(), b""));
    assert!(err.contains("a ratio of at least 1"), "{err}");
}

/// Fair share follows the weights: a server of weight 2 answering twice as much is not skewed.
#[test]
fn the_skew_gate_weighs_servers() {
    let c = conf(
        "weights.conf",
        "upstream app {\n  hash $arg_k;\n  server 127.0.0.1:9001 weight=2;\n  server 127.0.0.1:9002;\n}",
    );
    let c = c.to_str().unwrap();
    // Plain hash: 32,768 values over 3 slots, within 0.01% of the weights.
    assert!(run(&["share", "--config", c, "--fail-skew-above", "1.001"], b"").status.success());
    assert_eq!(run(&["share", "--config", c, "--fail-skew-above", "1"], b"").status.code(), Some(1));
}

// --- Leaving nginx: `compare --backends`, `diff --engine`, `migrate` (docs/engines.md) ---

/// ingress-nginx's ring written out here, independently of the library, from lua-resty-balancer's
/// `chash.lua`/`chash.c` (v0.05) and ingress-nginx controller-v1.15.1's `util.get_nodes`: per endpoint
/// `address:port`, 160 points chained as `crc32(id ‖ le32(previous))` from 0; a key goes to the first point
/// `≥ crc32(key)`, wrapping. Returns the points `(hash, endpoint)`, sorted (stable).
fn ingress_ring(ids: &[&str]) -> Vec<(u32, usize)> {
    let mut points = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let mut prev = 0u32;
        for _ in 0..160 {
            let mut h = crc32fast::Hasher::new();
            h.update(id.as_bytes());
            h.update(&prev.to_le_bytes());
            prev = h.finalize();
            points.push((prev, n));
        }
    }
    points.sort_by_key(|p| p.0);
    points
}

fn ingress_pick(ring: &[(u32, usize)], key: &[u8]) -> usize {
    let crc = crc32fast::hash(key);
    let i = ring.partition_point(|p| p.0 < crc);
    ring[if i == ring.len() { 0 } else { i }].1
}

/// The share of the 2³² values endpoint `n` answers on `ring` (first of equal hashes kept).
fn ingress_share(ring: &[(u32, usize)], n: usize) -> u64 {
    let mut total = 0u64;
    let mut prev: Option<u32> = None;
    for &(h, owner) in ring {
        if prev == Some(h) {
            continue;
        }
        let from = prev.map_or(0, |p| u64::from(p) + 1);
        if owner == n {
            total += u64::from(h) + 1 - from;
        }
        prev = Some(h);
    }
    if ring[0].1 == n {
        total += u64::from(u32::MAX) - u64::from(prev.unwrap());
    }
    total
}

/// `kubectl ingress-nginx backends` output (the shape of controller-v1.15.1's `Backend`) with one hashed
/// backend over `endpoints` and one other backend.
fn backends_json(endpoints: &[(&str, &str)], subset: bool) -> String {
    let eps: Vec<String> = endpoints
        .iter()
        .map(|(a, p)| format!(r#"{{"address":"{a}","port":"{p}","target":{{"kind":"Pod","name":"app-{p}"}}}}"#))
        .collect();
    format!(
        r#"[
  {{"name":"default-app-80","service":{{"metadata":{{"name":"app"}}}},"port":80,"sslPassthrough":false,
    "endpoints":[{}],
    "sessionAffinityConfig":{{"name":"","mode":"","cookieSessionAffinity":{{"name":""}}}},
    "upstreamHashByConfig":{{"upstream-hash-by":"$request_uri"{}}},
    "noServer":false,"trafficShapingPolicy":{{"weight":0,"weightTotal":0,"header":"","headerValue":"","headerPattern":"","cookie":""}}}},
  {{"name":"upstream-default-backend","port":0,"sslPassthrough":false,
    "endpoints":[{{"address":"127.0.0.1","port":"8181"}}],
    "sessionAffinityConfig":{{"name":"","mode":"","cookieSessionAffinity":{{"name":""}}}},
    "upstreamHashByConfig":{{}},"noServer":false,"trafficShapingPolicy":{{"weight":0,"weightTotal":0,"header":"","headerValue":"","headerPattern":"","cookie":""}}}}
]
"#,
        eps.join(","),
        if subset { r#","upstream-hash-by-subset":true,"upstream-hash-by-subset-size":2"# } else { "" }
    )
}

const FIVE_EPS: [(&str, &str); 5] =
    [("127.0.0.1", "9001"), ("127.0.0.1", "9002"), ("127.0.0.1", "9003"), ("127.0.0.1", "9004"), ("127.0.0.1", "9005")];

/// `compare --against ingress-nginx --backends`: the endpoints of the JSON, counted exactly. Over real keys
/// the count equals an independent tally: nginx's pick from `route` (proven against nginx) and
/// ingress-nginx's from the ring written out above.
#[test]
fn compare_reads_ingress_nginx_backends() {
    let c = conf("ing.conf", FIVE);
    let c = c.to_str().unwrap();
    // Endpoint 9003 gone, 9006 added, 9001 listed twice (get_nodes keeps one node).
    let eps = [FIVE_EPS[4], FIVE_EPS[0], FIVE_EPS[1], FIVE_EPS[3], ("127.0.0.1", "9006"), FIVE_EPS[0]];
    let file = TempFile::new("backends.json", backends_json(&eps, false));
    let f = file.to_str().unwrap();
    let keys: String = (0..400).map(|i| format!("/video/{i}.mp4\n")).collect();
    let keys_file = TempFile::new("ing-keys", &keys);
    let doc = json(&run(
        &[
            "compare",
            "--config",
            c,
            "--against",
            "ingress-nginx",
            "--backends",
            f,
            "--keys",
            keys_file.to_str().unwrap(),
            "--format",
            "json",
        ],
        b"",
    ));
    assert_eq!(doc["endpoints"]["backend"], "default-app-80");
    assert_eq!(doc["endpoints"]["count"], 5);
    assert_eq!(doc["uniform"]["method"], "exact");
    let servers = doc["uniform"]["servers"].as_array().unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s["server"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003", "127.0.0.1:9004", "127.0.0.1:9005", "127.0.0.1:9006"]
    );
    // What ingress-nginx sends to each endpoint over 2^32, from the ring above.
    let ids = ["127.0.0.1:9005", "127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9004", "127.0.0.1:9006"];
    let ring = ingress_ring(&ids);
    let other = |addr: &str| servers.iter().find(|s| s["server"] == addr).unwrap()["other"].as_u64().unwrap();
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(other(id), ingress_share(&ring, n), "{id}");
    }
    assert_eq!((other("127.0.0.1:9003"), servers[5]["nginx"].as_u64()), (0, Some(0)));
    // Over the keys: nginx's answer from `route`, ingress-nginx's from the ring.
    let routed = ok(&run(&["route", "--config", c], keys.as_bytes()));
    let agree = routed
        .lines()
        .zip(keys.lines())
        .filter(|(line, key)| {
            let v: Value = serde_json::from_str(line).unwrap();
            v["server"] == ids[ingress_pick(&ring, key.as_bytes())]
        })
        .count();
    assert_eq!(doc["keys"]["agree"].as_u64(), Some(agree as u64));
    assert_eq!(doc["keys"]["total"], 400);
    let table = ok(&run(&["compare", "--config", c, "--against", "ingress-nginx", "--backends", f], b""));
    assert!(table.contains(&format!("endpoints: 5 of ingress-nginx backend default-app-80 ({f})\n")), "{table}");
}

/// Bad `--backends` input: each refused with the file and the problem named, exit 2.
#[test]
fn bad_backends_files_are_refused_naming_the_file_and_the_problem() {
    let c = conf("bad-ing.conf", FIVE);
    let c = c.to_str().unwrap();
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        ("[{\"name\": \"a\",\n \"endpoints\": [}]".into(), vec![], ":2:16: not JSON (expected value"),
        ("A backend of this name was not found.\n".into(), vec![], ":1:1: not JSON"),
        ("[{\"endpoints\": []}]".into(), vec![], "not an ingress-nginx backend list: missing field `name`"),
        ("42".into(), vec![], "expected an array of backends or one backend object"),
        (backends_json(&FIVE_EPS, true), vec![], "uses upstream-hash-by-subset"),
        (
            backends_json(&FIVE_EPS, false),
            vec!["--ingress-backend", "nope"],
            "no backend named \"nope\"; backends: default-app-80, upstream-default-backend",
        ),
        (
            backends_json(&[("10.0.0.300", "80")], false),
            vec!["--ingress-backend", "default-app-80"],
            "endpoint 0: address \"10.0.0.300\" is not an IP address",
        ),
        (
            backends_json(&[("10.0.0.3", "http")], false),
            vec!["--ingress-backend", "default-app-80"],
            "endpoint 0: port \"http\" is not a port number",
        ),
    ];
    for (i, (text, extra, want)) in cases.iter().enumerate() {
        let file = TempFile::new(&format!("bad{i}.json"), text);
        let f = file.to_str().unwrap();
        let mut args = vec!["compare", "--config", c, "--against", "ingress-nginx", "--backends", f];
        args.extend(extra);
        let err = fails(&run(&args, b""));
        assert!(err.contains(&format!("--backends {f}")) && err.contains(want), "case {i}: {err}");
    }
    // Two hashed backends with endpoints: one must be chosen (ingress-nginx's own default backend, with
    // endpoints but not hashed, is not a candidate: case 4 above took the hashed one).
    let ep = r#""endpoints":[{"address":"10.0.0.1","port":"80"}]"#;
    let hashed = r#""upstreamHashByConfig":{"upstream-hash-by":"$uri"}"#;
    let two = format!(
        r#"[{{"name":"a-app-80",{ep},{hashed}}},{{"name":"b-api-80",{ep},{hashed}}},{{"name":"upstream-default-backend",{ep}}}]"#
    );
    let two = TempFile::new("two.json", two);
    let err = fails(&run(&["compare", "--config", c, "--against", "apisix", "--backends", two.to_str().unwrap()], b""));
    assert!(
        err.contains("2 backends hash by upstream-hash-by; choose one with --ingress-backend NAME: a-app-80, b-api-80"),
        "{err}"
    );
    let one = TempFile::new("one.json", format!(r#"{{"name":"x",{ep}}}"#));
    let out = run(&["compare", "--config", c, "--against", "apisix", "--backends", one.to_str().unwrap()], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("backend \"x\" has no upstream-hash-by"), "{out:?}");
    let err = fails(&run(&["compare", "--config", c, "--against", "apisix", "--backends", "/nonexistent/b.json"], b""));
    assert!(err.contains("--backends /nonexistent/b.json: cannot open"), "{err}");
    let good = TempFile::new("good.json", backends_json(&FIVE_EPS, false));
    let args = [
        "compare",
        "--config",
        c,
        "--against",
        "pingora-ketama",
        "--backends",
        good.to_str().unwrap(),
        "--ingress-backend",
        "default-app-80",
    ];
    assert!(fails(&run(&args, b"")).contains("use it with --against ENGINE, not pingora-ketama"));
}

/// `diff --engine`: nginx's moves (exact) beside the engine's. Adding a server: on nginx and on
/// ingress-nginx's ring keys move only to it, and ingress-nginx moves exactly the new endpoint's share of
/// the ring written out above; Envoy's fixed-size ring also moves keys between the servers that stay.
#[test]
fn diff_on_an_engine_shows_both_sides() {
    let a = conf("ea.conf", FIVE);
    let b = conf("eb.conf", &FIVE.replace("127.0.0.1:9005;", "127.0.0.1:9005;\n  server 127.0.0.1:9006;"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let doc = json(&run(&["diff", "--from", a, "--to", b, "--engine", "ingress-nginx", "--format", "json"], b""));
    assert_eq!(doc["schema"], "nginx-ketama/engine-diff/v2");
    let sides = doc["sides"].as_array().unwrap();
    assert_eq!((sides[0]["side"].as_str(), sides[1]["side"].as_str()), (Some("nginx"), Some("ingress-nginx")));
    let ring = ingress_ring(&[
        "127.0.0.1:9001",
        "127.0.0.1:9002",
        "127.0.0.1:9003",
        "127.0.0.1:9004",
        "127.0.0.1:9005",
        "127.0.0.1:9006",
    ]);
    assert_eq!(sides[1]["counted"], "exact");
    assert_eq!(sides[1]["moved"].as_u64(), Some(ingress_share(&ring, 5)));
    assert_eq!((sides[0]["between_kept"].as_u64(), sides[1]["between_kept"].as_u64()), (Some(0), Some(0)));
    // nginx's side is `diff`'s own figure; APISIX's ring is nginx's over IPv4 lines of equal weights
    // (lua-resty-balancer's `t/chash.t` TEST 2), so it moves exactly as much.
    let plain = json(&run(&["diff", "--from", a, "--to", b, "--format", "json"], b""));
    assert_eq!(sides[0]["moved"], plain["hash_space"]["moved"]);
    let apisix = json(&run(&["diff", "--from", a, "--to", b, "--engine", "apisix", "--format", "json"], b""));
    assert_eq!(
        (apisix["sides"][1]["moved"].as_u64(), apisix["sides"][1]["counted"].as_str()),
        (plain["hash_space"]["moved"].as_u64(), Some("exact"))
    );
    let envoy = json(&run(
        &["diff", "--from", a, "--to", b, "--engine", "envoy", "--samples", "20000", "--format", "json"],
        b"",
    ));
    let e = &envoy["sides"][1];
    assert_eq!((e["counted"].as_str(), e["total"].as_u64()), (Some("sampled: 20000 keys, seed 1"), Some(20000)));
    let (lo, _) = (e["between_kept_interval"][0].as_f64().unwrap(), 0);
    assert!(lo > 0.0, "Envoy's ring moves keys between survivors: {e}");
    assert!(sides[0]["moved_interval"].is_null());
    let table = ok(&run(&["diff", "--from", a, "--to", b, "--engine", "envoy", "--samples", "2000"], b""));
    assert!(table.contains("not proven live") && table.contains("sampled: 2000 keys, seed 1"), "{table}");
    let csv = ok(&run(&["diff", "--from", a, "--to", b, "--engine", "haproxy:crc32", "--format", "csv"], b""));
    assert!(csv.starts_with("side,counted,total,moved,moved_fraction,moved_interval,between_kept,"), "{csv}");
    assert_eq!(csv.lines().count(), 3);
    // Bad input.
    assert!(
        fails(&run(&["diff", "--from", a, "--to", b, "--engine", "nginx"], b"")).contains("unknown engine \"nginx\"")
    );
    assert!(
        fails(&run(&["diff", "--from", a, "--to", b, "--engine", "kong:slots=3"], b""))
            .contains("slots=N (10 to 65536)")
    );
    let err = fails(&run(&["diff", "--from", a, "--to", b, "--engine", "envoy", "--failed", "127.0.0.1:9001"], b""));
    assert!(err.contains("cannot be used with"), "{err}");
}

/// `diff --engine` over real keys (`--keys`, `--log`): nginx's side is `diff --keys`'s own figure, every key
/// is counted once on each side, APISIX's ring (nginx's over IPv4 lines of equal weights, lua-resty-balancer's
/// `t/chash.t` TEST 2) moves exactly the keys nginx moves, and ingress-nginx, adding a server, moves none
/// between the servers that stay.
#[test]
fn diff_on_an_engine_counts_real_keys() {
    let a = conf("ka.conf", FIVE);
    let b = conf("kb.conf", &FIVE.replace("127.0.0.1:9005;", "127.0.0.1:9005;\n  server 127.0.0.1:9006;"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let keys: String = (0..2000).map(|i| format!("/obj/{i}\n")).collect();
    let file = TempFile::new("keys.txt", &keys);
    let k = file.to_str().unwrap();
    let plain = json(&run(&["diff", "--from", a, "--to", b, "--keys", k, "--format", "json"], b""));
    let nginx_moved = plain["keys"]["moved"].as_u64().unwrap();
    assert!(nginx_moved > 0 && nginx_moved < 2000, "{plain}");
    for engine in ["apisix", "ingress-nginx", "caddy", "envoy"] {
        let doc =
            json(&run(&["diff", "--from", a, "--to", b, "--engine", engine, "--keys", k, "--format", "json"], b""));
        let keys = &doc["keys"];
        assert_eq!(keys["source"].as_str(), Some(k));
        let sides = keys["sides"].as_array().unwrap();
        assert_eq!(sides.len(), 2);
        for side in sides {
            assert_eq!((side["counted"].as_str(), side["total"].as_u64()), (Some("keys"), Some(2000)), "{side}");
            assert!(side["moved_interval"].is_null());
        }
        assert_eq!(sides[0]["moved"].as_u64(), Some(nginx_moved), "{engine}");
        assert_eq!(sides[0]["between_kept"].as_u64(), Some(0));
        match engine {
            "apisix" => assert_eq!(sides[1]["moved"].as_u64(), Some(nginx_moved)),
            "ingress-nginx" => assert_eq!(sides[1]["between_kept"].as_u64(), Some(0)),
            _ => assert!(sides[1]["moved"].as_u64().unwrap() > 0),
        }
        // The hash-space figures are unchanged by the keys.
        let alone = json(&run(&["diff", "--from", a, "--to", b, "--engine", engine, "--format", "json"], b""));
        assert_eq!(alone["sides"], doc["sides"], "{engine}");
        assert!(alone.get("keys").is_none());
    }
    let table = ok(&run(&["diff", "--from", a, "--to", b, "--engine", "apisix", "--keys", k], b""));
    assert!(table.contains(&format!("over the 2000 keys of {k}:")), "{table}");
    let csv = ok(&run(&["diff", "--from", a, "--to", b, "--engine", "apisix", "--keys", k, "--format", "csv"], b""));
    assert_eq!(csv.lines().count(), 5, "{csv}");
    // Logged requests: each key as each side's configuration computes it.
    let site = |upstream: &str| {
        format!(
            "events {{}}\nhttp {{\n  log_format main '$remote_addr \"$request\" \"$http_host\"';\n  {upstream}\n  \
             server {{ listen 8080; server_name app.test; location / {{ proxy_pass http://app; }} }}\n}}\n"
        )
    };
    let sa = TempFile::new("sa.conf", site(FIVE));
    let sb =
        TempFile::new("sb.conf", site(&FIVE.replace("127.0.0.1:9005;", "127.0.0.1:9005;\n  server 127.0.0.1:9006;")));
    let lines: String = (0..500).map(|i| format!("10.0.0.1 \"GET /?k={i} HTTP/1.1\" \"app.test\"\n")).collect();
    let log = TempFile::new("access.log", &lines);
    let (sa, sb, log) = (sa.to_str().unwrap(), sb.to_str().unwrap(), log.to_str().unwrap());
    let logged = ["--log", log, "--log-format", "main", "--format", "json"];
    let plain = json(&run(&[&["diff", "--from", sa, "--to", sb][..], &logged].concat(), b""));
    let doc = json(&run(&[&["diff", "--from", sa, "--to", sb, "--engine", "apisix"][..], &logged].concat(), b""));
    let sides = doc["keys"]["sides"].as_array().unwrap();
    assert_eq!(sides[0]["total"].as_u64(), Some(500));
    assert_eq!(sides[0]["moved"], plain["keys"]["moved"]);
    assert_eq!(sides[1]["moved"], plain["keys"]["moved"], "APISIX moves what nginx moves: {doc}");
}

const TWO_UPSTREAMS: &str = "upstream app {\n  hash $request_uri consistent;\n  server 10.0.0.1:8080;\n  server 10.0.0.2:8080;\n  server 10.0.0.3:8080;\n}\nupstream cache {\n  hash $arg_k consistent;\n  server 10.0.1.1:11211 weight=2;\n  server 10.0.1.2:11211;\n}\nupstream sock {\n  hash $uri consistent;\n  server unix:/run/a.sock;\n}\nupstream rr {\n  server 10.0.2.1;\n}";

/// `migrate`: every hash upstream, every setting, one best per upstream and engine. APISIX over IPv4
/// lines of equal weights is nginx's ring (lua-resty-balancer's own `t/chash.t` TEST 2): 100%, exact;
/// HAProxy's `crc32` settings are exact, the others sampled with intervals; an upstream the engines
/// cannot take (a `unix:` socket) is skipped with the reason.
#[test]
fn migrate_reports_every_setting_and_the_best() {
    let c = conf("mig.conf", TWO_UPSTREAMS);
    let c = c.to_str().unwrap();
    let doc = json(&run(
        &["migrate", "--config", c, "--to", "apisix,haproxy@2.6.12", "--samples", "3000", "--format", "json"],
        b"",
    ));
    assert_eq!(doc["schema"], "nginx-ketama/migrate/v1");
    assert_eq!(doc["skipped"][0]["upstream"], "sock");
    let settings = doc["settings"].as_array().unwrap();
    // Per upstream: apisix (1) and HAProxy 2.6's 4 functions × avalanche (8).
    assert_eq!(settings.len(), 2 * 9);
    for s in settings {
        let exact = s["method"] == "exact";
        assert_eq!(exact, s["engine"] == "apisix" || s["setting"] == "haproxy@2.6.12:crc32", "{s}");
        assert_eq!(s["interval"].is_null(), exact);
        assert_eq!(s["total"].as_u64(), Some(if exact { 1 << 32 } else { 3000 }));
    }
    let apisix: Vec<&Value> = settings.iter().filter(|s| s["engine"] == "apisix").collect();
    assert!(apisix.iter().all(|s| s["kept_fraction"] == 1.0), "{apisix:?}");
    // The exact crc32 figure is compare's.
    let crc = settings.iter().find(|s| s["upstream"] == "app" && s["setting"] == "haproxy@2.6.12:crc32").unwrap();
    let cmp = json(&run(
        &["compare", "--config", c, "--upstream", "app", "--against", "haproxy@2.6.12:crc32", "--format", "json"],
        b"",
    ));
    assert_eq!(crc["kept"], cmp["uniform"]["agree"]);
    let best = doc["best"].as_array().unwrap();
    assert_eq!(best.len(), 4);
    for b in best {
        let group: Vec<&Value> =
            settings.iter().filter(|s| s["upstream"] == b["upstream"] && s["engine"] == b["engine"]).collect();
        let max = group.iter().map(|s| s["kept_fraction"].as_f64().unwrap()).fold(0.0, f64::max);
        assert_eq!(b["kept_fraction"].as_f64(), Some(max));
        assert_eq!(group.iter().filter(|s| s["best"] == "best").count(), 1);
    }
    let csv = ok(&run(&["migrate", "--config", c, "--to", "apisix", "--format", "csv"], b""));
    assert_eq!(csv.lines().next(), Some("upstream,engine,setting,method,kept,total,kept_fraction,interval,best"));
    assert_eq!(csv.lines().count(), 3);
    let table = ok(&run(&["migrate", "--config", c, "--upstream", "cache", "--to", "kong", "--samples", "2000"], b""));
    assert!(
        table.contains("kong:slots=1000") && table.contains("kong:slots=65536") && table.contains("not proven live"),
        "{table}"
    );
    assert!(!table.contains("app"), "{table}");
}

#[test]
fn migrate_refuses_bad_input() {
    let c = conf("migbad.conf", TWO_UPSTREAMS);
    let c = c.to_str().unwrap();
    assert!(fails(&run(&["migrate", "--config", c, "--to", "nginx"], b"")).contains("unknown engine \"nginx\""));
    assert!(fails(&run(&["migrate", "--config", c, "--to", "haproxy:crc32"], b"")).contains("name it without options"));
    assert!(fails(&run(&["migrate", "--config", c, "--to", "caddy@2.5"], b"")).contains("caddy"));
    assert!(fails(&run(&["migrate", "--config", c], b"")).contains("--to"));
    assert!(fails(&run(&["migrate", "--config", c, "--to", "envoy", "--samples", "x"], b"")).contains("--samples"));
    let good = TempFile::new("mig.json", backends_json(&FIVE_EPS, false));
    let args = [
        "migrate",
        "--config",
        c,
        "--to",
        "ingress-nginx",
        "--backends",
        good.to_str().unwrap(),
        "--ingress-backend",
        "default-app-80",
    ];
    assert!(fails(&run(&args, b"")).contains("choose it with --upstream (app, cache, sock)"));
    let bad = TempFile::new("mig-bad.json", "{");
    let err = fails(&run(
        &["migrate", "--config", c, "--upstream", "app", "--to", "apisix", "--backends", bad.to_str().unwrap()],
        b"",
    ));
    assert!(err.contains(&format!("--backends {}:1:1: not JSON", bad.to_str().unwrap())), "{err}");
    let rr = conf("rr.conf", "upstream rr {\n  server 10.0.2.1;\n}");
    assert!(
        fails(&run(&["migrate", "--config", rr.to_str().unwrap(), "--to", "apisix"], b""))
            .contains("no upstream uses hash")
    );
    let unix = conf("unix.conf", "upstream sock {\n  hash $uri consistent;\n  server unix:/run/a.sock;\n}");
    assert!(
        fails(&run(&["migrate", "--config", unix.to_str().unwrap(), "--to", "apisix"], b""))
            .contains("IP socket addresses")
    );
}

/// `migrate --svg` renders (rsvg-convert) at the size the SVG states.
#[test]
fn migrate_picture_renders() {
    let c = conf("migsvg.conf", FIVE);
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("migrate.svg");
    ok(&run(
        &[
            "migrate",
            "--config",
            c.to_str().unwrap(),
            "--to",
            "apisix,kong",
            "--samples",
            "2000",
            "--svg",
            svg.to_str().unwrap(),
        ],
        b"",
    ));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("kong:slots=65536") && text.contains("#59a14f"));
    let size = |attr: &str| -> u32 {
        let at = text.find(&format!("{attr}=\"")).unwrap() + attr.len() + 2;
        text[at..at + text[at..].find('"').unwrap()].parse::<f64>().unwrap() as u32
    };
    let png = dir.path().join("migrate.png");
    match Command::new("rsvg-convert").arg("-o").arg(&png).arg(&svg).status() {
        Ok(status) => {
            assert!(status.success());
            assert_eq!(png_size(&std::fs::read(&png).unwrap()), (size("width"), size("height")));
        }
        Err(_) => nginx_ketama_harness::testkit::skip("rsvg-convert is not installed (apt-get install librsvg2-bin)"),
    }
}

// --- `--target-servers FILE`: the target platform's own server list (docs/engines.md) ---

/// A list that names exactly nginx's peers gives the figures `compare` gives without a list; a list with
/// one server fewer and one more pairs servers by address:port and says which side lacks which.
#[test]
fn compare_reads_the_targets_own_server_list_and_pairs_by_address() {
    let c = conf("target.conf", FIVE);
    let c = c.to_str().unwrap();
    let same = TempFile::new(
        "same.cfg",
        "backend app\n  balance url_param k\n  hash-type consistent crc32\n".to_string()
            + &(1..=5).map(|i| format!("  server s{i} 127.0.0.1:900{i} check\n")).collect::<String>(),
    );
    let engine = "haproxy@2.6.12:crc32";
    let plain = json(&run(&["compare", "--config", c, "--against", engine, "--format", "json"], b""));
    let listed = json(&run(
        &[
            "compare",
            "--config",
            c,
            "--against",
            engine,
            "--target-servers",
            same.to_str().unwrap(),
            "--format",
            "json",
        ],
        b"",
    ));
    assert_eq!(listed["uniform"]["agree"], plain["uniform"]["agree"]);
    assert_eq!(listed["endpoints"]["format"], "HAProxy backend");
    assert_eq!(listed["endpoints"]["backend"], "app");
    // 9003 gone, 9006 added, weights from the file.
    let changed = TempFile::new(
        "changed.cfg",
        "backend app\n  server a 127.0.0.1:9001 weight 2\n  server b 127.0.0.1:9002\n  server d 127.0.0.1:9004\n  \
         server e 127.0.0.1:9005\n  server f 127.0.0.1:9006\n",
    );
    let f = changed.to_str().unwrap();
    let doc =
        json(&run(&["compare", "--config", c, "--against", engine, "--target-servers", f, "--format", "json"], b""));
    let servers = doc["uniform"]["servers"].as_array().unwrap();
    let row = |s: &str| servers.iter().find(|r| r["server"] == s).unwrap().clone();
    assert_eq!(
        (row("127.0.0.1:9003")["listed"].as_str(), row("127.0.0.1:9003")["other"].as_u64()),
        (Some("nginx only"), Some(0))
    );
    assert_eq!(
        (row("127.0.0.1:9006")["listed"].as_str(), row("127.0.0.1:9006")["nginx"].as_u64()),
        (Some("engine only"), Some(0))
    );
    assert!(row("127.0.0.1:9006")["other"].as_u64().unwrap() > 0);
    assert_eq!(row("127.0.0.1:9001")["listed"], "both");
    // HAProxy's weight 2 on 9001: about twice the others' share (16 nodes per weight unit).
    let share = |s: &str| row(s)["other"].as_u64().unwrap() as f64;
    assert!(share("127.0.0.1:9001") > 1.4 * share("127.0.0.1:9002"), "{servers:?}");
    assert_eq!(servers.iter().map(|s| s["other"].as_u64().unwrap()).sum::<u64>(), 1 << 32);
    let table = ok(&run(&["compare", "--config", c, "--against", engine, "--target-servers", f], b""));
    assert!(table.contains(&format!("servers: 5 of HAProxy backend app ({f})\n")), "{table}");
    assert!(table.contains("only nginx has: 127.0.0.1:9003 "), "{table}");
    assert!(table.contains("only the engine's list has: 127.0.0.1:9006 "), "{table}");
}

/// lua-resty-balancer's `t/chash.t` TEST 2: APISIX's ring over IPv4 `ip:port` nodes agrees with nginx's on
/// every key; read from APISIX's own `nodes` (hash form), the agreement is the whole hash space.
#[test]
fn apisix_nodes_of_the_same_servers_agree_everywhere() {
    let c = conf(
        "apisix.conf",
        "upstream app {\n  hash $arg_key consistent;\n  server 127.0.0.1:1985 weight=2;\n  server 127.0.0.1:1986 weight=2;\n  server 127.0.0.1:1987;\n}",
    );
    let nodes = TempFile::new(
        "nodes.json",
        r#"{"type": "chash", "hash_on": "vars", "key": "arg_key", "nodes": {"127.0.0.1:1985": 2, "127.0.0.1:1986": 2, "127.0.0.1:1987": 1}}"#,
    );
    let args = [
        "compare",
        "--config",
        c.to_str().unwrap(),
        "--against",
        "apisix",
        "--target-servers",
        nodes.to_str().unwrap(),
    ];
    let doc = json(&run(&[&args[..], &["--format", "json"]].concat(), b""));
    assert_eq!(doc["uniform"]["agree"].as_u64(), Some(1 << 32));
    assert_eq!(doc["endpoints"]["format"], "APISIX upstream nodes");
}

/// Envoy's EDS with `hash_key` metadata: the key is hashed instead of the address, so naming each host by
/// its own address string changes nothing, and another key changes the figure; `diff --engine` takes the
/// lists before and after.
#[test]
fn envoy_eds_hash_keys_and_diff_on_the_target_lists() {
    let c = conf("envoy.conf", FIVE);
    let c = c.to_str().unwrap();
    let eds = |ports: &[u16], key: &dyn Fn(u16) -> String| {
        let eps: Vec<String> = ports
            .iter()
            .map(|p| {
                format!(
                    r#"{{"endpoint": {{"address": {{"socket_address": {{"address": "127.0.0.1", "port_value": {p}}}}}}},
                        "metadata": {{"filter_metadata": {{"envoy.lb": {{"hash_key": "{}"}}}}}}}}"#,
                    key(*p)
                )
            })
            .collect();
        format!(r#"{{"cluster_name": "app", "endpoints": [{{"lb_endpoints": [{}]}}]}}"#, eps.join(","))
    };
    let ports = [9001, 9002, 9003, 9004, 9005];
    let own = TempFile::new("eds-own.json", eds(&ports, &|p| format!("127.0.0.1:{p}")));
    let other = TempFile::new("eds-other.json", eds(&ports, &|p| format!("pod-{p}")));
    let agree = |args: &[&str]| {
        let doc = json(&run(
            &[&["compare", "--config", c, "--against", "envoy", "--samples", "4000"], args, &["--format", "json"]]
                .concat(),
            b"",
        ));
        doc["uniform"]["agree"].as_u64().unwrap()
    };
    let plain = agree(&[]);
    let out = run(&["compare", "--config", c, "--against", "envoy:use-hostname-for-hashing", "--samples", "100"], b"");
    assert!(String::from_utf8_lossy(&out.stderr).contains("5 host(s) have no hostname"), "{out:?}");
    assert_eq!(agree(&["--target-servers", own.to_str().unwrap()]), plain);
    assert_ne!(agree(&["--target-servers", other.to_str().unwrap()]), plain);
    // The wrong engine for the list, and diff over two lists.
    let err = fails(&run(
        &["compare", "--config", c, "--against", "haproxy", "--target-servers", own.to_str().unwrap()],
        b"",
    ));
    assert!(err.contains("an Envoy EDS ClusterLoadAssignment list is envoy's own"), "{err}");
    let after = TempFile::new("eds-after.json", eds(&[9001, 9002, 9003, 9004, 9005, 9006], &|p| format!("pod-{p}")));
    let table = ok(&run(
        &[
            "diff",
            "--from",
            c,
            "--engine",
            "envoy",
            "--samples",
            "4000",
            "--target-servers",
            other.to_str().unwrap(),
            "--to-target-servers",
            after.to_str().unwrap(),
        ],
        b"",
    ));
    assert!(table.contains("envoy before: servers: 5 of Envoy EDS ClusterLoadAssignment app"), "{table}");
    assert!(table.contains("envoy after:  servers: 6 of Envoy EDS ClusterLoadAssignment app"), "{table}");
    let err =
        fails(&run(&["diff", "--from", c, "--engine", "envoy", "--target-servers", other.to_str().unwrap()], b""));
    assert!(err.contains("--to-target-servers"), "{err}");
}

/// Bad `--target-servers` files: the file and the line named, exit 2.
#[test]
fn bad_target_server_lists_name_the_file_and_line() {
    let c = conf("bad-target.conf", FIVE);
    let c = c.to_str().unwrap();
    for (engine, text, want) in [
        (
            "haproxy",
            "backend app\n  server a 127.0.0.1:9001\n  server b 127.0.0.1\n",
            ":3: server 127.0.0.1 has no port",
        ),
        ("kong", "{\"data\": [\n  {\"target\": \"web.internal:80\"}\n]}", ":2: \"web.internal\" is not an IP address"),
        (
            "envoy",
            "{\"cluster_name\": \"a\",\n \"endpoint\": []}",
            ":2:11: not an Envoy ClusterLoadAssignment: unknown field `endpoint`, expected one of `@type`, `clusterName`, `cluster_name`, `endpoints`, `namedEndpoints`, `named_endpoints`, `policy`",
        ),
        ("traefik", "servers:\n  - url: http://127.0.0.1:9001\n    wieght: 2\n", "unknown field `wieght`"),
        ("caddy", ":80 {\n  reverse_proxy\n}\n", ":2: reverse_proxy without upstreams"),
        ("apisix", "{\"nodes\": {\"127.0.0.1\": 1}}", ":1: server 127.0.0.1 has no port"),
        ("haproxy", "this is not a list\n", "not JSON, not a HAProxy backend"),
    ] {
        let file = TempFile::new("bad-target", text);
        let f = file.to_str().unwrap();
        let err = fails(&run(&["compare", "--config", c, "--against", engine, "--target-servers", f], b""));
        assert!(err.contains(&format!("--target-servers {f}")) && err.contains(want), "{engine}: {err}");
    }
}

/// Caddy hashes no empty key (an absent header): `compare --keys` counts them as not hashed, never kept.
#[test]
fn caddy_empty_keys_are_not_hashed_but_counted_apart() {
    let c = conf("caddy-empty.conf", FIVE);
    let keys = TempFile::new("caddy-keys", "a\n\nb\n\nc\n");
    let args =
        ["compare", "--config", c.to_str().unwrap(), "--against", "caddy@2.6.2", "--keys", keys.to_str().unwrap()];
    let doc = json(&run(&[&args[..], &["--format", "json"]].concat(), b""));
    assert_eq!((doc["keys"]["total"].as_u64(), doc["keys"]["not_hashed_fallback"].as_u64()), (Some(5), Some(2)));
    assert!(doc["keys"]["agree"].as_u64().unwrap() <= 3);
    let table = ok(&run(&args, b""));
    assert!(table.contains("not hashed: fallback: 2 (40.000%): empty keys"), "{table}");
    // Stated even when no key is empty, and in migrate's table.
    let none = TempFile::new("caddy-keys-full", "a\nb\n");
    let table = ok(&run(
        &["compare", "--config", c.to_str().unwrap(), "--against", "caddy", "--keys", none.to_str().unwrap()],
        b"",
    ));
    assert!(table.contains("not hashed: fallback: 0 (0.000%)"), "{table}");
    let table = ok(&run(&["migrate", "--config", c.to_str().unwrap(), "--to", "caddy", "--samples", "500"], b""));
    assert!(table.contains("caddy: an empty key (no such header, query parameter or cookie) is not hashed"), "{table}");
    // diff --engine over keys: the empty keys are neither kept nor moved.
    let grown = conf(
        "caddy-grown.conf",
        &FIVE.replace("server 127.0.0.1:9005;", "server 127.0.0.1:9005;\n  server 127.0.0.1:9006;"),
    );
    let (from, to) = (c.to_str().unwrap(), grown.to_str().unwrap());
    let args = ["diff", "--from", from, "--to", to, "--engine", "caddy", "--keys", keys.to_str().unwrap()];
    let table = ok(&run(&args, b""));
    assert!(table.contains("not hashed: fallback: 2 of the keys are empty"), "{table}");
    let doc = json(&run(&[&args[..], &["--format", "json"]].concat(), b""));
    assert_eq!(doc["keys"]["not_hashed_fallback"], 2);
}

/// `migrate --target-servers`: the list goes to its own engine only, and one upstream.
#[test]
fn migrate_takes_a_target_list_for_its_own_engine() {
    let c = conf("migrate-target.conf", FIVE);
    let c = c.to_str().unwrap();
    let list = TempFile::new(
        "kong-targets.json",
        r#"{"data": [{"target": "127.0.0.1:9001", "weight": 100}, {"target": "127.0.0.1:9002", "weight": 100}, {"target": "127.0.0.1:9007", "weight": 100}]}"#,
    );
    let f = list.to_str().unwrap();
    let doc = json(&run(
        &["migrate", "--config", c, "--to", "kong", "--samples", "2000", "--target-servers", f, "--format", "json"],
        b"",
    ));
    assert!(doc["endpoints"].as_str().unwrap().starts_with("- (Kong upstream targets, "), "{doc}");
    assert!(!doc["settings"].as_array().unwrap().is_empty());
    let err = fails(&run(&["migrate", "--config", c, "--to", "kong,haproxy", "--target-servers", f], b""));
    assert!(err.contains("a Kong upstream targets list is kong's own") && err.contains("not haproxy"), "{err}");
    let err = fails(&run(&["migrate", "--config", c, "--to", "kong", "--target-servers", f, "--backends", f], b""));
    assert!(err.contains("--backends and --target-servers both give the engine its servers"), "{err}");
}

/// Traefik hashes the server's URL as written, Caddy the dial address it forms: a list that writes nginx's
/// servers as the engine would name them by default gives the figure `compare` gives without a list; a
/// Traefik URL with another scheme is another name, so another figure.
#[test]
fn traefik_and_caddy_hash_the_names_their_lists_give() {
    let c = conf("names.conf", FIVE);
    let c = c.to_str().unwrap();
    let agree = |engine: &str, list: Option<&str>| {
        let file = list.map(|l| TempFile::new("names-list", l));
        let mut args = vec!["compare", "--config", c, "--against", engine, "--samples", "3000", "--format", "json"];
        if let Some(f) = &file {
            args.extend(["--target-servers", f.to_str().unwrap()]);
        }
        json(&run(&args, b""))["uniform"]["agree"].as_u64().unwrap()
    };
    let urls = |scheme: &str| {
        "servers:\n".to_string()
            + &(1..=5).map(|i| format!("  - url: {scheme}://127.0.0.1:900{i}\n")).collect::<String>()
    };
    let plain = agree("traefik", None);
    assert_eq!(agree("traefik", Some(&urls("http"))), plain);
    // Traefik names h2c servers `h2c://…` (the port still 9001…). (FNV-1a's low bits depend only on the
    // input's low bits: `HTTP://` for `http://` leaves every pick as it was.)
    assert_ne!(agree("traefik", Some(&urls("h2c"))), plain);
    let caddyfile = ":80 {\n  reverse_proxy http://127.0.0.1:9001 127.0.0.1:9002 {\n    to 127.0.0.1:9003 127.0.0.1:9004 127.0.0.1:9005\n  }\n}\n";
    assert_eq!(agree("caddy@2.6.2", Some(caddyfile)), agree("caddy@2.6.2", None));
}
