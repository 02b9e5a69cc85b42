use super::*;
use crate::repo_root;

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
    let ts: Vec<&Topology> = choice.prove.iter().map(|u| &u.topology).collect();
    let resolve = |n: &str| (n == "localhost").then(|| vec![IpAddr::from([127, 0, 0, 1])]);
    let plan = NetworkPlan::new(&ts, resolve, &[]).unwrap_or_else(|e| panic!("{e:#}"));
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
    assert_eq!(plan.shadows[0].sockets, [PathBuf::from("/run/app/app.sock")]);
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
