use super::*;
use crate::repo_root;
use std::net::SocketAddr;

fn example() -> Config {
    let path = repo_root().join("tests/data/own-config/nginx.conf");
    load(&path, NginxVersion::LATEST, Libc::Glibc).expect("the example config reads")
}

fn strings(t: &Topology) -> Vec<&str> {
    t.lines.iter().map(|l| l.server.as_str()).collect()
}

/// Every server string stays exactly as written (it is hashed), with its parameters, primary lines then
/// backup lines; hostname lines wait for resolution.
#[test]
fn topologies_keep_the_config_as_written() {
    let choice = choose(&example(), &[], 7).unwrap();
    let names: Vec<&str> = choice.prove.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["app", "sessions", "images", "local_cache"]);
    assert_eq!(choice.skipped.len(), 1);
    assert_eq!(choice.skipped[0].name, "static");
    assert_eq!(choice.skipped[0].why, "round-robin, not hash");
    let app = &choice.prove[0];
    assert_eq!(app.key, "$request_uri");
    assert_eq!(app.topology.method, Method::Consistent);
    assert_eq!(
        strings(&app.topology),
        [
            "10.0.0.7:8080",
            "10.0.0.8:8080",
            "10.0.0.9:08080",
            "10.0.1.10:8080",
            "[2001:db8::7]:8080",
            "api.backend.internal:8080"
        ]
    );
    let l = &app.topology.lines;
    assert_eq!((l[0].weight, l[0].max_fails, l[0].fail_timeout), (3, 1, 10));
    assert_eq!((l[1].weight, l[1].max_fails, l[1].fail_timeout), (2, 3, 30));
    assert_eq!(l[2].spelling, Spelling::IpOddPort);
    assert_eq!(l[2].endpoints[0].listen, Listen::Tcp("10.0.0.9:8080".parse().unwrap()));
    assert_eq!(l[2].endpoints[0].name, "10.0.0.9:8080");
    assert!(l[3].down && !l[0].down);
    assert_eq!(l[4].spelling, Spelling::Ipv6Port);
    assert_eq!(l[4].endpoints[0].name, "[2001:db8::7]:8080");
    assert_eq!(l[5].spelling, Spelling::Hostname);
    assert!(l[5].endpoints.is_empty(), "resolved later, privately");
    let sessions = &choice.prove[1];
    assert_eq!(strings(&sessions.topology), ["unix:/run/app/app.sock", "localhost:9090", "10.0.0.7", "10.0.2.20:9090"]);
    let s = &sessions.topology.lines;
    assert_eq!(s[0].endpoints[0].listen, Listen::Unix("/run/app/app.sock".into()));
    assert_eq!(s[2].spelling, Spelling::IpNoPort);
    assert_eq!(s[2].endpoints[0].name, "10.0.0.7:80");
    assert!(s[3].backup && !s[0].backup);
    let images = &choice.prove[2];
    assert_eq!(images.topology.method, Method::Plain);
    assert!(images.location.ends_with("conf.d/images.conf:2"), "{}", images.location);
    assert_eq!(images.topology.lines[3].max_fails, 0);
}

/// The topology's model is the config reader's model: every line's string and parameters for every
/// upstream, and the same ring, point for point, where every server is a literal.
#[test]
fn the_topology_models_the_same_upstream_as_the_config() {
    let config = example();
    for u in &choose(&config, &[], 1).unwrap().prove {
        let from_config = config.hash_upstream(Some(&u.name)).unwrap().upstream;
        let lines: Vec<_> = u
            .topology
            .lines
            .iter()
            .map(|l| (l.server.clone(), l.weight, l.down, l.backup, l.max_fails, l.fail_timeout))
            .collect();
        let peers: Vec<_> = from_config
            .primary()
            .iter()
            .map(|p| (p, false))
            .chain(from_config.backup().iter().map(|p| (p, true)))
            .map(|(p, backup)| {
                (p.server().to_string(), p.weight(), p.is_down(), backup, p.max_fails(), p.fail_timeout())
            })
            .collect();
        assert_eq!(lines, peers, "{}", u.name);
        assert_eq!(u.topology.method, from_config.method(), "{}", u.name);
    }
    let choice = choose(&config, &["local_cache".into(), "images".into()], 1).unwrap();
    assert_eq!(choice.prove.len(), 2);
    for u in &choice.prove {
        let from_config = config.hash_upstream(Some(&u.name)).unwrap().upstream;
        let ours = u.topology.upstream(NginxVersion::LATEST, Libc::Glibc).unwrap();
        let servers = |up: &Upstream| -> Vec<(String, String, u32)> {
            up.primary()
                .iter()
                .chain(up.backup())
                .map(|p| (p.server().to_string(), p.name().to_string(), p.weight()))
                .collect()
        };
        assert_eq!(servers(&ours), servers(from_config), "{}", u.name);
        let points =
            |up: &Upstream| up.ring().map(|r| r.points().map(|p| (p.hash, p.server.to_string())).collect::<Vec<_>>());
        assert_eq!(points(&ours), points(from_config), "{}", u.name);
    }
}

#[test]
fn unknown_and_non_hash_names_are_clear_errors() {
    let config = example();
    let e = choose(&config, &["nope".into()], 1).unwrap_err().to_string();
    assert!(
        e.starts_with("no upstream \"nope\" in ")
            && e.contains("(upstreams: app, sessions, images, static, local_cache)"),
        "{e}"
    );
    let e = choose(&config, &["static".into()], 1).unwrap_err().to_string();
    assert!(e.contains("upstream \"static\"") && e.contains("its balancer is round-robin"), "{e}");
    // Seeds follow the upstream's place in the config, so `--upstream` replays the same keys.
    let all = choose(&config, &[], 5).unwrap();
    let one = choose(&config, &["images".into()], 5).unwrap();
    assert_eq!(one.prove[0].topology.seed, all.prove[2].topology.seed);
}

#[test]
fn spellings() {
    for (s, want) in [
        ("10.0.0.7:8080", Spelling::IpPort),
        ("10.0.0.7:08080", Spelling::IpOddPort),
        ("10.0.0.7", Spelling::IpNoPort),
        ("10.0.0.07:80", Spelling::IpPort),
        ("[fd00::3]:8000", Spelling::Ipv6Port),
        ("[fd00::3]", Spelling::Ipv6NoPort),
        ("unix:/run/a.sock", Spelling::Unix),
        ("UNIX:/run/a.sock", Spelling::UnixUpper),
        ("backend:80", Spelling::Hostname),
        ("localhost", Spelling::Hostname),
    ] {
        assert_eq!(spelling_of(s), want, "{s}");
    }
}

/// Lines sharing an address fail together; every failure set has at least one failing line.
#[test]
fn failing_sets_and_shared_addresses() {
    let config = example();
    let choice = choose(&config, &["sessions".into()], 1).unwrap();
    let mut t = choice.prove[0].topology.clone();
    // Pretend localhost resolved to 10.0.0.7:9090 and 10.0.0.7 also serves line 3 on port 80: distinct.
    t.lines[1].endpoints =
        vec![Endpoint { listen: Listen::Tcp("10.0.0.7:80".parse().unwrap()), name: "10.0.0.7:80".into() }];
    let failed = t.clone().with_failing(&[false, false, true, false]);
    assert!(failed.lines[1].dead && failed.lines[2].dead, "a shared address fails for both lines");
    assert!(!failed.lines[0].dead && !failed.lines[3].dead);
    for set in failing_sets(4, 50, 3) {
        assert!(set.contains(&true));
    }
    assert_ne!(failing_sets(4, 5, 3), failing_sets(4, 5, 4));
}

/// The network plan for the example: every non-loopback address on lo, a stand-in for the name that does
/// not resolve, the front and the ephemeral range clear of every config port.
#[test]
fn the_example_network_plan() {
    let config = example();
    let choice = choose(&config, &[], 1).unwrap();
    let ups: Vec<&ConfigUpstream> = choice.prove.iter().collect();
    let resolve = |n: &str| (n == "localhost").then(|| vec![IpAddr::from([127, 0, 0, 1])]);
    let plan = NetworkPlan::new(&ups, resolve, &[]).unwrap_or_else(|e| panic!("{e:#}"));
    let want: Vec<IpAddr> = [
        "10.0.0.7",
        "10.0.0.8",
        "10.0.0.9",
        "10.0.1.10",
        "10.0.2.20",
        "10.0.3.1",
        "10.0.3.2",
        "10.0.3.4",
        "2001:db8::7",
        "fd00::3",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    assert_eq!(plan.on_lo, want);
    assert_eq!(plan.names.len(), 2);
    assert_eq!(plan.names[0].name, "api.backend.internal");
    assert_eq!(plan.names[0].source, NameSource::StandIn);
    assert_eq!(plan.names[0].addresses, [IpAddr::from([127, 254, 0, 1])]);
    assert_eq!(plan.names[1].source, NameSource::Machine);
    assert_eq!(plan.ports.iter().copied().collect::<Vec<_>>(), [80, 8000, 8080, 9090, 19001, 19002, 19003]);
    assert_eq!(plan.front, "127.0.0.2:1024".parse().unwrap(), "127.0.0.1 is localhost's");
    assert!(plan.ports.iter().all(|p| !plan.ephemeral.contains(p)));
    assert!(!plan.ephemeral.contains(&plan.front.port()));
    assert_eq!(plan.ephemeral, 19004..=65535);
    assert_eq!(plan.shadows.len(), 1);
    assert_eq!(plan.shadows[0].sockets[0].path, PathBuf::from("/run/app/app.sock"));
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert!(plan.hosts_file().contains("127.254.0.1 api.backend.internal\n"));
}

/// Stream upstreams and upstreams with run-time resolved servers are skipped with the reason when no
/// names are given, and refused when named.
#[test]
fn stream_and_run_time_resolved_upstreams_are_skipped() {
    let text = "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\nevents {}\n\
                http {\n upstream dyn { hash $uri; zone z 64k; resolver 127.0.0.1; server app.internal:80 resolve; }\n\
                upstream ok { hash $uri consistent; server 10.0.0.1:80; }\n}\n\
                stream { upstream tcp { hash $remote_addr consistent; server 10.0.0.2:5432; } }\n";
    let options = LoadOptions { resolve: false, version: NginxVersion::new(1, 30, 6), ..LoadOptions::default() };
    let config = Config::parse_str(text, "t.conf", &options).unwrap();
    let choice = choose(&config, &[], 1).unwrap();
    assert_eq!(choice.prove.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(), ["ok"]);
    let skipped: Vec<(&str, &str)> = choice.skipped.iter().map(|s| (s.name.as_str(), s.why.as_str())).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0].0, "dyn");
    assert!(skipped[0].1.starts_with("has servers resolved at run time (`resolve`, t.conf:4)"), "{skipped:?}");
    assert_eq!(skipped[1], ("stream:tcp", "a stream upstream: the proof runs HTTP upstreams (keys in a header)"));
    let e = choose(&config, &["stream:tcp".into()], 1).unwrap_err().to_string();
    assert!(e.starts_with("upstream \"tcp\" in t.conf:7 cannot be proven: a stream upstream"), "{e}");
}

fn parse(text: &str) -> Config {
    let options = LoadOptions { resolve: false, version: NginxVersion::LATEST, ..LoadOptions::fragment() };
    Config::parse_str(text, "odd.conf", &options).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// One upstream per server line `servers[i]` (plus a plain live server), named `u{i}`.
fn one_each(servers: &[&str]) -> String {
    servers
        .iter()
        .enumerate()
        .map(|(i, s)| format!("upstream u{i} {{\n  hash $uri consistent;\n  server {s};\n  server 10.9.9.9:80;\n}}\n"))
        .collect()
}

fn plan_of(config: &Config, resolve: impl FnMut(&str) -> Option<Vec<IpAddr>>) -> NetworkPlan {
    let choice = choose(config, &[], 1).unwrap();
    let ups: Vec<&ConfigUpstream> = choice.prove.iter().collect();
    let needed = plan::needed_paths();
    let needed: Vec<&Path> = needed.iter().map(PathBuf::as_path).collect();
    NetworkPlan::new(&ups, resolve, &needed).unwrap_or_else(|e| panic!("{e}"))
}

/// Addresses no private `lo` can give to one server, and unix sockets whose directory cannot be covered,
/// are refused before anything runs: each upstream with such a line is left out, the refusal names the
/// line (`file:line`) and why; nothing of it is put on `lo`. Upstreams that can be hosted are planned as
/// usual.
#[test]
fn lines_that_cannot_be_hosted_are_refused_with_file_and_line() {
    let odd = [
        ("255.255.255.255:80", "the broadcast address"),
        ("224.0.0.1:80", "a multicast address"),
        ("0.0.0.0:80", "0.0.0.0/8"),
        ("[::]:80", "the unspecified address"),
        ("[ff02::1]:80", "a multicast address"),
        ("[fe80::1]:80", "a link-local address"),
        ("[::ffff:224.0.0.9]:80", "a multicast address"),
        ("unix:/proc/a.sock", "would hide /proc"),
        ("unix:/etc/a.sock", "would hide /etc/passwd"),
        ("unix:/usr/lib/a.sock", "would hide /usr/lib"),
        ("unix:/lib/x/a.sock", "would hide /"),
        ("unix:/no-such-dir-nk/a.sock", "cover /"),
        ("unix:../up/a.sock", "`..`"),
        ("unix:/tmp/../etc/a.sock", "`..`"),
        ("names-zero.test:80", "names-zero.test resolves on this machine to 0.0.0.0"),
    ];
    let mut text = one_each(&odd.map(|(s, _)| s));
    text.push_str("upstream fine {\n  hash $uri;\n  server [::ffff:10.0.0.1]:80;\n  server unix:rel/a.sock;\n}\n");
    let config = parse(&text);
    let plan = plan_of(&config, |n| (n == "names-zero.test").then(|| vec![IpAddr::from([0, 0, 0, 0])]));
    assert_eq!(plan.refused.len(), odd.len(), "{:#?}", plan.refused);
    for (i, ((server, why), refused)) in odd.iter().zip(&plan.refused).enumerate() {
        assert_eq!(refused.upstream, format!("u{i}"));
        let line = 3 + 5 * i;
        assert!(
            refused
                .why
                .starts_with(&format!("server \"{}\" in odd.conf:{line} cannot be hosted: ", server.trim_matches('"')))
                && refused.why.contains(why),
            "{server}: {}",
            refused.why
        );
    }
    // Only the hostable upstream's addresses are planned: the mapped address on its IPv4 address, the
    // relative socket in the namespace's working directory.
    let v4: IpAddr = "10.0.0.1".parse().unwrap();
    assert!(plan.on_lo.contains(&v4), "{:?}", plan.on_lo);
    assert!(plan.on_lo.iter().all(|ip| plan::unhostable_ip(*ip).is_none()), "{:?}", plan.on_lo);
    assert!(!plan.on_lo.contains(&"10.9.9.9".parse().unwrap()), "refused upstreams put nothing on lo");
    assert_eq!(plan.relative, [PathBuf::from("rel/a.sock")]);
    assert!(plan.shadows.is_empty(), "{:?}", plan.shadows);
    let fine = choose(&config, &["fine".into()], 1).unwrap();
    assert_eq!(fine.prove[0].topology.lines[0].endpoints[0].listen, Listen::Tcp("10.0.0.1:80".parse().unwrap()));
    assert_eq!(fine.prove[0].topology.lines[0].endpoints[0].name, "[::ffff:10.0.0.1]:80", "as nginx names it");
}

/// 254 servers on 127.0.0.1–127.0.0.254 leave the front an address further on; configs too big for the
/// namespace (every port taken, more unresolvable names than stand-in addresses) are an error, never a
/// panic.
#[test]
fn crowded_configs_are_planned_or_refused_never_a_panic() {
    let servers: String = (1..=254).map(|i| format!("  server 127.0.0.{i}:8080;\n")).collect();
    let config = parse(&format!("upstream lo254 {{\n  hash $uri;\n{servers}}}\n"));
    let plan = plan_of(&config, |_| None);
    assert!(plan.front.ip().is_loopback() && !(1..=254).any(|i| plan.front.ip() == IpAddr::from([127, 0, 0, i])));
    assert_eq!(plan.front.port(), 1024);
    // Every port from 1024 taken (one server each, plain hash: no ring to build).
    let mut t = choose(&config, &[], 1).unwrap().prove.remove(0);
    let line = t.topology.lines[0].clone();
    t.topology.lines = (1024..=u16::MAX)
        .map(|p| {
            let mut l = line.clone();
            let a: SocketAddr = format!("10.1.0.1:{p}").parse().unwrap();
            l.server = a.to_string();
            l.endpoints = vec![Endpoint { listen: Listen::Tcp(a), name: a.to_string() }];
            l
        })
        .collect();
    let e = NetworkPlan::new(&[&t], |_| None, &[]).unwrap_err().to_string();
    assert!(e.contains("no range of 1000 free ports") && e.contains("… (+"), "{e}");
    // 70,000 names that do not resolve: 127.254.0.0/16 has 65,535 stand-ins.
    t.topology.lines = (0..70_000)
        .map(|i| {
            let mut l = line.clone();
            l.server = format!("h{i}.test:80");
            l.spelling = Spelling::Hostname;
            l.endpoints = Vec::new();
            l
        })
        .collect();
    let e = NetworkPlan::new(&[&t], |_| None, &[]).unwrap_err().to_string();
    assert!(e.contains("stand-in"), "{e}");
}

/// No `expect`/`unwrap` in the proof's own code outside its tests: every fact it derives from a user's
/// config fails with a message instead (the class of item 5 of issue 18, closed by a check).
#[test]
fn no_panics_on_what_a_config_says() {
    let dir = crate::repo_root();
    for file in [
        "crates/harness/src/proofs/own_config.rs",
        "crates/harness/src/proofs/own_config/plan.rs",
        "crates/harness/src/run/clock.rs",
        "crates/cli/src/live/own_config.rs",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, line) in code.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("//") {
                continue;
            }
            for bad in [".unwrap()", ".expect(", "panic!(", "unreachable!("] {
                assert!(!l.contains(bad), "{file}:{}: {bad} in {l}", i + 1);
            }
        }
    }
}
