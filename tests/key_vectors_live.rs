//! The key-vector recorder against live nginx (`scripts/record-key-vectors`): recording twice on the
//! provisioned builds gives the same bytes, and — when the provisioned builds are the file's — exactly
//! `vectors/keys/v1/keys.json`, so the committed file is what nginx answers today.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use nginx_ketama_harness::golden::keys::{key_vectors_path, load, record, render};
use nginx_ketama_harness::golden::utc_today;
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::repo_root;
use nginx_ketama_harness::testkit::{provisioned_or_skip, report};
use std::collections::BTreeSet;

#[test]
fn recording_twice_gives_the_committed_bytes() {
    let Some(installs) = provisioned_or_skip() else { return };
    let path = key_vectors_path(&repo_root());
    let committed = load(&path).expect("vectors/keys/v1/keys.json");
    let today = utc_today();
    let first = render(&record(&installs, Some(&committed), &today).expect("first recording")).expect("renders");
    let second = render(&record(&installs, Some(&committed), &today).expect("second recording")).expect("renders");
    assert!(first == second, "two recordings on the same builds differ: the recorder is not deterministic");
    let provisioned: BTreeSet<String> = installs.iter().map(Installation::label).collect();
    let recorded: BTreeSet<String> =
        committed.test_groups.iter().flat_map(|g| g.source.versions.iter().cloned()).collect();
    if provisioned == recorded {
        let text = std::fs::read_to_string(&path).expect("keys.json");
        if first != text {
            let out = std::env::temp_dir().join("keys.recorded.json");
            let _ = std::fs::write(&out, &first);
            panic!(
                "nginx now answers differently from vectors/keys/v1/keys.json (new recording in {}): \
                 re-record with scripts/record-key-vectors and review the diff",
                out.display()
            );
        }
        report(&format!("key_vectors_live: recorded twice on {provisioned:?}: identical to keys.json"));
    } else {
        report(&format!(
            "key_vectors_live: recorded twice on {provisioned:?}: identical (the file holds {recorded:?}, not compared)"
        ));
    }
}
