//! Lints the language-neutral fixtures in `vectors/v1/`: schema, unique ids, counts, flags, names,
//! internal consistency, and that the files are exactly what the generator makes from the records.

use nginx_ketama_harness::golden::intermediate::generate_intermediate;
use nginx_ketama_harness::golden::{generate_vectors, intermediate_path, load_records, records_dir, vectors_dir};
use nginx_ketama_harness::testkit::schema::validate;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

fn schema() -> Value {
    let text = std::fs::read_to_string(vectors_dir().join("schema.json")).expect("vectors/v1/schema.json");
    serde_json::from_str(&text).expect("schema.json is JSON")
}

/// The fixture files (everything in vectors/v1 except the schema), by file name.
fn fixture_files() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(vectors_dir()).expect("vectors/v1 exists") {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name != "schema.json" {
            out.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    assert!(!out.is_empty(), "no fixtures in vectors/v1");
    out
}

#[test]
fn fixtures_validate_against_the_schema() {
    let schema = schema();
    for (name, text) in fixture_files() {
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut errors = Vec::new();
        validate(&schema, &schema, &v, &name, &mut errors);
        assert!(errors.is_empty(), "{name} does not match schema.json:\n  {}", errors.join("\n  "));
    }
}

#[test]
fn validator_rejects_bad_documents() {
    let schema = schema();
    let good: Value = serde_json::from_str(fixture_files().values().next().unwrap()).unwrap();
    let mut bad = good.clone();
    bad["testGroups"][0]["tests"][0]["extra"] = Value::Bool(true);
    bad["testGroups"][0]["peers"][0].as_object_mut().unwrap().remove("refuses");
    bad["testGroups"][0]["tests"][0]["crc32"] = Value::String("XYZ".into());
    bad["formatVersion"] = Value::from(2);
    bad["testGroups"][0]["tests"][1]["status"] = Value::from(600);
    bad["testGroups"][0]["tests"][1]["requestMethod"] = Value::from("PUT");
    let mut errors = Vec::new();
    validate(&schema, &schema, &bad, "bad", &mut errors);
    assert_eq!(errors.len(), 6, "{errors:#?}");
}

#[test]
fn ids_counts_flags_and_names() {
    let mut all_groups = BTreeSet::new();
    for (name, text) in fixture_files() {
        let v: Value = serde_json::from_str(&text).unwrap();
        let groups = v["testGroups"].as_array().unwrap();
        let mut ids = BTreeSet::new();
        let mut used = BTreeSet::new();
        let mut count = 0;
        for g in groups {
            let gname = g["name"].as_str().unwrap();
            assert!(all_groups.insert(gname.to_string()), "{name}: group name {gname} is not unique");
            let desc = g["description"].as_str().unwrap();
            assert!(!desc.contains("UNEXPLAINED"), "{name}: {gname}: {desc}");
            let src = &g["source"];
            let n = src["versions"].as_array().unwrap().len();
            assert_eq!(src["packages"].as_array().unwrap().len(), n, "{gname}: one package per version");
            assert_eq!(src["libc"].as_array().unwrap().len(), n, "{gname}: one libc per version");
            // The group's tie rules are exactly the C libraries of its source builds (their first words).
            let mut from_source: Vec<&str> = src["libc"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().split_whitespace().next().unwrap())
                .collect();
            from_source.sort_unstable();
            from_source.dedup();
            let libc: Vec<&str> = g["libc"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
            assert_eq!(libc, from_source, "{gname}: libc must list its source builds' C libraries");
            let peers = g["peers"].as_array().unwrap();
            let server_of: BTreeMap<&str, &str> =
                peers.iter().map(|p| (p["address"].as_str().unwrap(), p["server"].as_str().unwrap())).collect();
            for t in g["tests"].as_array().unwrap() {
                count += 1;
                let id = t["tcId"].as_u64().unwrap();
                assert!(ids.insert(id), "{name}: tcId {id} is not unique");
                for f in t["flags"].as_array().unwrap() {
                    used.insert(f.as_str().unwrap().to_string());
                }
                let key = hex(t["keyHex"].as_str().unwrap());
                assert_eq!(t["crc32"].as_str().unwrap(), format!("{:08x}", crc32fast::hash(&key)), "{name} {id}");
                match std::str::from_utf8(&key) {
                    Ok(s) => assert_eq!(t["key"].as_str(), Some(s), "{name} {id}: key/keyHex"),
                    Err(_) => assert!(t["key"].is_null(), "{name} {id}: non-UTF-8 key must be null"),
                }
                let attempts: Vec<&str> =
                    t["attempts"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
                let servers: Vec<&str> = t["servers"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
                let mapped: Vec<&str> =
                    attempts.iter().map(|a| *server_of.get(a).expect("attempt is a peer")).collect();
                assert_eq!(servers, mapped, "{name} {id}: servers must be the attempts' server strings");
                let (outcome, status) = (t["outcome"].as_str().unwrap(), t["status"].as_u64().unwrap());
                let failure_kinds = g.get("policy").is_some();
                let has = |flag: &str| t["flags"].as_array().unwrap().iter().any(|f| f == flag);
                assert_eq!(
                    failure_kinds,
                    has("FailureKinds"),
                    "{name} {id}: FailureKinds exactly in groups with a policy"
                );
                if failure_kinds {
                    // A passed-on status is `answered`; nginx's own 502/504 ends `failed`.
                    let statuses = t["upstreamStatuses"].as_array().expect("upstreamStatuses");
                    assert!(t["requestMethod"].is_string(), "{name} {id}: requestMethod");
                    let peerless = usize::from(outcome == "noLiveUpstreams");
                    assert_eq!(statuses.len(), attempts.len() + peerless, "{name} {id}: one status per attempt");
                    if outcome == "answered" {
                        assert_eq!(statuses.last().and_then(Value::as_str), Some(status.to_string().as_str()));
                    } else {
                        assert!([502, 504].contains(&status), "{name} {id}: outcome {outcome} with {status}");
                    }
                } else {
                    assert_eq!(outcome == "answered", status == 200, "{name} {id}: outcome {outcome} with {status}");
                    for field in ["requestMethod", "upstreamStatuses", "clock"] {
                        assert!(t.get(field).is_none(), "{name} {id}: {field} outside a group with failure kinds");
                    }
                }
                assert_eq!(
                    t.get("clock").is_some(),
                    has("ClockAdvances"),
                    "{name} {id}: clock exactly with ClockAdvances"
                );
                assert!(outcome == "noLiveUpstreams" || !attempts.is_empty(), "{name} {id}");
            }
        }
        assert_eq!(v["numberOfTests"].as_u64().unwrap(), count, "{name}: numberOfTests");
        let defined: BTreeSet<String> = v["notes"].as_object().unwrap().keys().cloned().collect();
        let undefined: Vec<&String> = used.difference(&defined).collect();
        let unused: Vec<&String> = defined.difference(&used).collect();
        assert!(undefined.is_empty(), "{name}: flags used but not defined in notes: {undefined:?}");
        assert!(unused.is_empty(), "{name}: flags defined in notes but never used: {unused:?}");
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

/// vectors/v1 is generated: regenerating from the unchanged records must give byte-identical files, and no
/// other file may sit next to them. (`scripts/record-vectors --offline` rewrites them.)
/// Dependence is flagged per test: a test carries `VersionDependent` or `LibcDependent` exactly when its own
/// result differs between the groups of its case (`<case>@<builds>`); the other tests of a split case hold
/// for every build.
#[test]
fn dependence_flags_are_per_test() {
    let (mut flagged, mut split_tests) = (0, 0);
    for (name, text) in fixture_files() {
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut by_case: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
        for g in v["testGroups"].as_array().unwrap() {
            let gname = g["name"].as_str().unwrap();
            by_case.entry(gname.split('@').next().unwrap()).or_default().push(g);
        }
        for (case, groups) in by_case {
            let tests: Vec<&Vec<Value>> = groups.iter().map(|g| g["tests"].as_array().unwrap()).collect();
            for i in 0..tests[0].len() {
                let result = |t: &Value| {
                    let keep = ["attempts", "outcome", "status", "upstreamStatuses"];
                    keep.iter().map(|k| t.get(*k).cloned().unwrap_or(Value::Null)).collect::<Vec<_>>()
                };
                let differs = tests.iter().any(|ts| result(&ts[i]) != result(&tests[0][i]));
                for ts in &tests {
                    let flags = ts[i]["flags"].as_array().unwrap();
                    let dependent = flags.iter().any(|f| f == "VersionDependent" || f == "LibcDependent");
                    assert_eq!(dependent, differs, "{name}: {case} test #{}: dependence flag", i + 1);
                    split_tests += usize::from(groups.len() > 1);
                    flagged += usize::from(dependent);
                }
            }
        }
    }
    eprintln!("{flagged} of {split_tests} tests of split cases are flagged as depending on the build");
    assert!(flagged > 0 && flagged < split_tests, "{flagged} of {split_tests}");
}

#[test]
fn fixtures_are_exactly_what_the_records_generate() {
    let records = load_records(&records_dir()).unwrap();
    let generated = generate_vectors(&records);
    let on_disk = fixture_files();
    let names_gen: Vec<&String> = generated.keys().collect();
    let names_disk: Vec<&String> = on_disk.keys().collect();
    assert_eq!(names_disk, names_gen, "vectors/v1 holds other files than the generator makes");
    for (name, text) in &generated {
        assert!(
            on_disk[name] == *text,
            "vectors/v1/{name} differs from what vectors/records generates: never edit it by hand; run \
             scripts/record-vectors --offline"
        );
    }
    // Generating twice is deterministic.
    assert_eq!(generate_vectors(&records), generated);
}

/// `vectors/intermediate.json` is exactly what the records generate, and it agrees with nginx: every
/// consistent lookup lands on the server of nginx's recorded first attempt for that key, every plain key's
/// first rehash step on nginx's first address; each chain starts with the CRC32 of its stated input and
/// each step's numbers follow from its input.
#[test]
fn intermediate_values_are_generated_and_agree_with_nginx() {
    let records = load_records(&records_dir()).unwrap();
    let text = std::fs::read_to_string(intermediate_path()).expect("vectors/intermediate.json");
    assert!(
        text == generate_intermediate(&records),
        "vectors/intermediate.json differs from what vectors/records generates: run scripts/record-vectors --offline"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let fixtures = fixture_files();
    let first_attempts = |file: &str, group: &str| -> BTreeMap<String, (String, String)> {
        let f: Value = serde_json::from_str(&fixtures[file]).unwrap();
        let g = f["testGroups"].as_array().unwrap().iter().find(|g| g["name"] == group).expect("group in fixtures");
        g["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let s = |k: &str| t[k][0].as_str().unwrap_or("").to_string();
                (t["keyHex"].as_str().unwrap().to_string(), (s("servers"), s("attempts")))
            })
            .collect()
    };
    let mut checked = 0;
    let consistent = v["consistent"].as_array().unwrap();
    assert!(consistent.len() >= 3, "at least three consistent groups");
    for g in consistent {
        let nginx = first_attempts("consistent.json", g["group"].as_str().unwrap());
        for s in g["servers"].as_array().unwrap() {
            let input = hex(s["firstInputHex"].as_str().unwrap());
            assert_eq!(s["firstPoints"][0], format!("{:08x}", crc32fast::hash(&input)), "{s}");
        }
        assert!(!g["lookups"].as_array().unwrap().is_empty());
        for l in g["lookups"].as_array().unwrap() {
            let key = hex(l["keyHex"].as_str().unwrap());
            assert_eq!(l["crc32"], format!("{:08x}", crc32fast::hash(&key)));
            assert!(l["pointHash"].as_str().unwrap() >= l["crc32"].as_str().unwrap() || l["pointIndex"] == 0, "{l}");
            let (server, _) = &nginx[l["keyHex"].as_str().unwrap()];
            assert_eq!(l["server"].as_str().unwrap(), server, "{}: {l}", g["group"]);
            checked += 1;
        }
    }
    for g in v["plain"].as_array().unwrap() {
        let nginx = first_attempts("plain.json", g["group"].as_str().unwrap());
        let total = g["totalWeight"].as_u64().unwrap();
        for k in g["keys"].as_array().unwrap() {
            let mut sum = 0u32;
            for step in k["steps"].as_array().unwrap() {
                let crc = crc32fast::hash(&hex(step["inputHex"].as_str().unwrap()));
                sum = sum.wrapping_add((crc >> 16) & 0x7fff);
                assert_eq!(step["sum"].as_u64(), Some(u64::from(sum)), "{step}");
                assert_eq!(step["slot"].as_u64(), Some(u64::from(sum) % total), "{step}");
            }
            let (_, address) = &nginx[k["keyHex"].as_str().unwrap()];
            assert_eq!(k["steps"][0]["address"].as_str().unwrap(), address, "{}: {k}", g["group"]);
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} intermediate lookups checked against nginx");
}
