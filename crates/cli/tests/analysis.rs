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
/// and `nginx-ketama diff --from nginx.conf --to grow.conf --svg ../../../../../docs/images/diff.svg`.
#[test]
fn documented_pictures_are_current() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/examples");
    let images = nginx_ketama_harness::repo_root().join("docs/images");
    let dir = std::env::temp_dir().join(format!("nginx-ketama-pictures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs: [(&str, Vec<&str>); 2] = [
        ("share.svg", vec!["share", "--config", "nginx.conf"]),
        ("diff.svg", vec!["diff", "--from", "nginx.conf", "--to", "grow.conf"]),
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
