//! The key vectors (`vectors/keys/v1/keys.json`, recorded from nginx by `scripts/record-key-vectors`),
//! offline: the library computes every recorded key (or nginx's refusal) for every build of every group; the
//! file validates against its schema and is exactly what the recorder writes for the recorder's request list;
//! and a library with any one key rule changed fails the replay.

use nginx_ketama::NginxVersion;
use nginx_ketama::config::expression::Expression;
use nginx_ketama::config::{Config, LoadOptions};
use nginx_ketama::dispatch::{self, Dispatch, Dispatcher, WrongRule};
use nginx_ketama::key::{self, Context};
use nginx_ketama::request::{Request, Scheme};
use nginx_ketama::version::KeyRules;
use nginx_ketama_harness::golden::keys::{
    self as kv, KeyVectors, Listener, Outcome, SERVER_NAME, from_hex, key_vectors_path, load, render,
};
use nginx_ketama_harness::repo_root;
use nginx_ketama_harness::testkit::schema::validate;
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::SocketAddr;

fn file() -> KeyVectors {
    load(&key_vectors_path(&repo_root())).expect("vectors/keys/v1/keys.json")
}

/// The release of a build label (`1.26.3-musl` is 1.26.3).
fn version(label: &str) -> NginxVersion {
    label.strip_suffix("-musl").unwrap_or(label).parse().expect("a version label")
}

/// Replays every group on every build of its `source.versions`, with the key rules `rules` gives for the
/// release; returns one line per mismatch.
fn replay(file: &KeyVectors, rules: impl Fn(NginxVersion) -> KeyRules) -> Vec<String> {
    replay_with(file, rules, None)
}

/// As [`replay`], with one routing rule modelled wrong on the `routed` listener.
fn replay_with(file: &KeyVectors, rules: impl Fn(NginxVersion) -> KeyRules, wrong: Option<WrongRule>) -> Vec<String> {
    let expressions: Vec<Expression> = file
        .expressions
        .iter()
        .map(|e| Expression::parse(e.expression.as_bytes()).expect("the expression parses"))
        .collect();
    let mut out = Vec::new();
    for group in &file.test_groups {
        for label in &group.source.versions {
            let v = version(label);
            let options = LoadOptions { resolve: false, version: v, ..LoadOptions::default() };
            let conf = format!("events {{}}\nhttp {{\n{}}}\n", file.config);
            let config = Config::parse_str(&conf, "keys.conf", &options).expect("the library reads the config");
            let rules = rules(v);
            let defined = dispatch::defined_variables(&config);
            let dispatcher = match wrong {
                Some(w) => Dispatcher::new(&config).with_wrong_rule(w),
                None => Dispatcher::new(&config),
            };
            for t in &group.tests {
                let bytes = from_hex(&t.request_hex).expect("hex");
                let client: SocketAddr = t.client.parse().expect("client address");
                let server: SocketAddr = t.server.parse().expect("server address");
                let req = Request::from_head(&bytes, client, server, Scheme::Http).expect("a request line");
                let at = format!("{} on {label}, tcId {} ({})", group.name, t.tc_id, t.comment);
                if t.listener == Listener::Routed {
                    out.extend(routed(&dispatcher, &req, t, file, &at));
                    continue;
                }
                match (req.parse_as(rules, t.listener.merge_slashes()), t.outcome) {
                    (Err(bad), Outcome::Refused) => {
                        if bad.status() != Some(t.status) {
                            out.push(format!("{at}: nginx refused with {}, library with {:?}", t.status, bad.status()));
                        }
                    }
                    (Err(bad), Outcome::Key) => out.push(format!("{at}: nginx answered, library refuses ({bad})")),
                    (Ok(_), Outcome::Refused) => {
                        out.push(format!("{at}: nginx refused ({}), library accepts", t.status))
                    }
                    (Ok(parsed), Outcome::Key) => {
                        let mut ctx = Context::new(rules, SERVER_NAME.as_bytes(), b"");
                        ctx.maps = config.maps();
                        ctx.set_variables = &defined;
                        for ((expr, info), want) in expressions.iter().zip(&file.expressions).zip(&t.keys) {
                            let got = key::evaluate(expr, &parsed, &ctx).expect("every recorded variable is modelled");
                            let want = from_hex(&want.hex).expect("hex");
                            if got != want {
                                out.push(format!(
                                    "{at}: {}: nginx {:?}, library {:?}",
                                    info.expression,
                                    String::from_utf8_lossy(&want),
                                    String::from_utf8_lossy(&got)
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// A request to the `routed` listener: the server, the location and the regular expressions on the way
/// are the library's ([`Dispatcher::trace`]); the text of the `return` that answers is every expression's
/// value, computed as one complex value as nginx does, then split.
fn routed(d: &Dispatcher<'_>, req: &Request, t: &kv::KeyTest, file: &KeyVectors, at: &str) -> Vec<String> {
    let (answer, trace) = match d.trace(req) {
        Ok(x) => x,
        Err(e) => return vec![format!("{at}: the library cannot route it: {e}")],
    };
    match (answer, t.outcome) {
        (Dispatch::BadRequest(bad), Outcome::Refused) if bad.status() == Some(t.status) => Vec::new(),
        (Dispatch::Return { status: 200 }, Outcome::Key) => {
            let text = trace.return_text.unwrap_or_default();
            let got = kv::split_body(&text);
            if got.len() != t.keys.len() {
                return vec![format!("{at}: the library's answer has {} values, nginx's {}", got.len(), t.keys.len())];
            }
            let mut out = Vec::new();
            for ((info, want), got) in file.expressions.iter().zip(&t.keys).zip(&got) {
                let want = from_hex(&want.hex).expect("hex");
                if *got != want {
                    out.push(format!(
                        "{at}: {}: nginx {:?}, library {:?}",
                        info.expression,
                        String::from_utf8_lossy(&want),
                        String::from_utf8_lossy(got)
                    ));
                }
            }
            out
        }
        (other, _) => vec![format!("{at}: nginx {:?} {}, library {other:?}", t.outcome, t.status)],
    }
}

#[test]
fn library_replays_every_key_vector() {
    let file = file();
    let mismatches = replay(&file, NginxVersion::key_rules);
    assert!(mismatches.is_empty(), "{} mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
    let builds: BTreeSet<&str> =
        file.test_groups.iter().flat_map(|g| g.source.versions.iter().map(String::as_str)).collect();
    assert!(builds.len() >= 2, "recorded on {builds:?} only");
}

/// Each key rule changed alone (for the releases that have it, or that lack it) fails the replay, on the
/// groups of the case the change is about.
#[test]
fn a_changed_key_rule_fails_the_replay() {
    let file = file();
    type Flip = (&'static str, fn(&mut KeyRules), &'static str);
    let flips: [Flip; 5] = [
        ("headers_joined", |r| r.headers_joined = !r.headers_joined, "headers@"),
        ("cookie_semicolon_only", |r| r.cookie_semicolon_only = !r.cookie_semicolon_only, "cookies@"),
        ("strict_host", |r| r.strict_host = !r.strict_host, "host@"),
        ("strict_request_line", |r| r.strict_request_line = !r.strict_request_line, "targets@"),
        ("empty_path_query", |r| r.empty_path_query = !r.empty_path_query, "request-line@"),
    ];
    for (name, flip, case) in flips {
        let mismatches = replay(&file, |v| {
            let mut r = v.key_rules();
            flip(&mut r);
            r
        });
        assert!(
            mismatches.iter().any(|m| m.starts_with(case)),
            "flipping {name} fails nothing in {case}*: {mismatches:#?}"
        );
    }
}

/// Each routing rule of regular expressions modelled wrong fails the replay on the groups it is about.
#[test]
fn a_changed_regex_rule_fails_the_replay() {
    let file = file();
    for (wrong, case) in [
        (WrongRule::RegexLocationsFirst, "regex-locations"),
        (WrongRule::CaselessIgnored, "regex-locations"),
        (WrongRule::RegexNamesFirst, "regex-server-names"),
    ] {
        let mismatches = replay_with(&file, NginxVersion::key_rules, Some(wrong));
        assert!(mismatches.iter().any(|m| m.starts_with(case)), "{wrong:?} fails nothing in {case}: {mismatches:#?}");
    }
    // The library reading a `~*` map key as `~` (the configuration changed the same way).
    let mut changed = file.clone();
    changed.config = changed.config.replace("~*^UP", "~^UP");
    let mismatches = replay(&changed, NginxVersion::key_rules);
    assert!(mismatches.iter().any(|m| m.starts_with("regex-maps")), "a case-sensitive ~* map key: {mismatches:#?}");
}

/// The variables `key_vectors` must cover: every modelled http variable but `$hostname` (not recorded:
/// machine-dependent) appears in some expression.
#[test]
fn every_modelled_variable_is_recorded() {
    let file = file();
    // The variable names of the expressions: `$name` and `${name}`.
    let mut names = BTreeSet::new();
    for e in &file.expressions {
        let mut rest = e.expression.as_str();
        while let Some(i) = rest.find('$') {
            rest = &rest[i + 1..];
            let braced = rest.strip_prefix('{');
            let body = braced.unwrap_or(rest);
            let len = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(body.len());
            names.insert(body[..len].to_ascii_lowercase());
            rest = &body[len..];
        }
    }
    for var in key::HTTP_VARIABLES {
        let covered = match var.strip_suffix('_') {
            Some(_) => names.iter().any(|n| n.len() > var.len() && n.starts_with(var)),
            None => names.contains(*var),
        };
        let excused = file.not_recorded.iter().any(|n| n.variable.trim_start_matches('$') == *var);
        assert!(covered || excused, "${var} is modelled but neither recorded nor listed in notRecorded");
    }
}

#[test]
fn file_validates_against_its_schema() {
    let dir = key_vectors_path(&repo_root()).parent().expect("a directory").to_path_buf();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("keys.schema.json")).expect("keys.schema.json"))
            .expect("JSON");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("keys.json")).expect("keys.json")).expect("JSON");
    let mut errors = Vec::new();
    validate(&schema, &schema, &doc, "keys.json", &mut errors);
    assert!(errors.is_empty(), "keys.json does not match keys.schema.json:\n  {}", errors.join("\n  "));
    let mut bad = doc.clone();
    bad["testGroups"][0]["tests"][0]["extra"] = Value::Bool(true);
    bad["testGroups"][0]["tests"][0]["requestHex"] = Value::String("XYZ".into());
    bad["testGroups"][0]["source"]["versions"][0] = Value::String("1.26".into());
    bad["testGroups"][0]["tests"][0]["outcome"] = Value::String("answered".into());
    let mut errors = Vec::new();
    validate(&schema, &schema, &bad, "bad", &mut errors);
    assert_eq!(errors.len(), 4, "{errors:#?}");
}

/// The file is what the recorder writes: its canonical rendering, the recorder's requests, expressions,
/// configuration and addresses in the recorder's order, one group per case and set of agreeing builds, and
/// self-consistent tests.
#[test]
fn file_is_what_the_recorder_writes() {
    let path = key_vectors_path(&repo_root());
    let text = std::fs::read_to_string(&path).expect("keys.json");
    let file = file();
    assert_eq!(render(&file).expect("renders"), text, "keys.json is not in the recorder's form: edited by hand?");
    assert_eq!(file.config, kv::servers_conf(), "config differs from the recorder's");
    let exprs: Vec<(&str, &str)> = file.expressions.iter().map(|e| (e.name.as_str(), e.expression.as_str())).collect();
    assert_eq!(exprs, kv::EXPRESSIONS, "expressions differ from the recorder's");
    assert_eq!(file.header[0], kv::HEADER);
    assert_eq!(file.number_of_tests, file.test_groups.iter().map(|g| g.tests.len()).sum::<usize>());

    let cases = kv::cases();
    let all_builds: BTreeSet<&str> =
        file.test_groups.iter().flat_map(|g| g.source.versions.iter().map(String::as_str)).collect();
    let mut groups = file.test_groups.iter().peekable();
    let mut tc_id = 0;
    let mut index = 0;
    for case in &cases {
        let mut seen: Vec<&str> = Vec::new();
        // Every group of the case: a test is VersionDependent when its own answer differs between them.
        let siblings: Vec<_> =
            file.test_groups.iter().filter(|g| g.name.split('@').next() == Some(case.name)).collect();
        let answer = |t: &kv::KeyTest| (t.status, t.keys.iter().map(|k| k.hex.clone()).collect::<Vec<_>>());
        while let Some(g) = groups.next_if(|g| g.name.split('@').next() == Some(case.name)) {
            let split = g.name.contains('@');
            if split {
                assert_eq!(g.name, format!("{}@{}", case.name, g.source.versions.join("+")));
            }
            assert_eq!(g.source.versions.len(), g.source.packages.len(), "{}", g.name);
            assert_eq!(g.source.versions.len(), g.source.libc.len(), "{}", g.name);
            seen.extend(g.source.versions.iter().map(String::as_str));
            assert_eq!(g.tests.len(), case.requests.len(), "{}: requests differ from the recorder's", g.name);
            for (i, (t, r)) in g.tests.iter().zip(&case.requests).enumerate() {
                tc_id += 1;
                assert_eq!(t.tc_id, tc_id, "{}: tcIds are 1.. in file order", g.name);
                assert_eq!(t.comment, r.name, "{}", g.name);
                assert_eq!(t.listener, r.listener, "{}", g.name);
                let bytes = kv::wire_bytes(&r.head);
                assert_eq!(from_hex(&t.request_hex).expect("hex"), bytes, "{} {}", g.name, r.name);
                assert_eq!(t.request.as_deref(), std::str::from_utf8(&bytes).ok(), "{} {}", g.name, r.name);
                let client = SocketAddr::new(r.listener.client_ip(), kv::client_port(index + i));
                assert_eq!(t.client, client.to_string(), "{} {}", g.name, r.name);
                assert_eq!(t.server, r.listener.server().to_string(), "{} {}", g.name, r.name);
                assert_eq!(t.outcome == Outcome::Key, t.status == 200, "{} {}", g.name, r.name);
                let n = if t.outcome == Outcome::Key { file.expressions.len() } else { 0 };
                assert_eq!(t.keys.len(), n, "{} {}: one key per expression", g.name, r.name);
                for k in &t.keys {
                    let b = from_hex(&k.hex).expect("hex");
                    assert_eq!(k.text.as_deref(), std::str::from_utf8(&b).ok(), "{} {}: text and hex", g.name, r.name);
                }
                let mut want_flags = Vec::new();
                if split && siblings.iter().any(|o| answer(&o.tests[i]) != answer(t)) {
                    want_flags.push("VersionDependent");
                }
                if t.outcome == Outcome::Refused {
                    want_flags.push("Refused");
                }
                assert_eq!(t.flags, want_flags, "{} {}", g.name, r.name);
            }
        }
        let seen_set: BTreeSet<&str> = seen.iter().copied().collect();
        assert_eq!(seen.len(), seen_set.len(), "{}: a build in two groups", case.name);
        assert_eq!(seen_set, all_builds, "{}: every build in exactly one group", case.name);
        index += case.requests.len();
    }
    assert!(groups.next().is_none(), "groups after the last case, or out of order");
    let used: BTreeSet<&str> =
        file.test_groups.iter().flat_map(|g| &g.tests).flat_map(|t| t.flags.iter().map(String::as_str)).collect();
    let defined: BTreeSet<&str> = file.notes.keys().map(String::as_str).collect();
    assert_eq!(used, defined, "every flag used is defined, and only those");
    let listeners: Vec<Listener> = file.listeners.iter().map(|l| l.name).collect();
    assert_eq!(listeners, Listener::ALL);
    for l in &file.listeners {
        assert_eq!(l.server, l.name.server().to_string());
        assert_eq!(l.client_address, l.name.client_ip().to_string());
        assert_eq!(l.merge_slashes, l.name.merge_slashes());
    }
}
