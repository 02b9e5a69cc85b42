//! Live check of the golden vectors: re-records the whole catalog from every provisioned nginx (without
//! writing any record) and asserts that the result renders to the committed snapshots. An nginx upgrade that
//! changes any routing decision therefore shows up as an insta diff (`cargo insta review`), to be recorded
//! with `scripts/record-vectors` (docs/upgrading.md, "Upgrading nginx"), whose workflow the second test runs.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use nginx_ketama::NginxVersion;
use nginx_ketama_harness::catalog::catalog;
use nginx_ketama_harness::golden::{
    Layout, Record, RecordArgs, RecordStatus, load_records, lock_catalog, merge, record_case, record_json,
    record_vectors, records_dir, render_snapshot, snapshot_name, utc_today, vectors_dir, version_groups,
};
use nginx_ketama_harness::nginx::build::Build;
use nginx_ketama_harness::nginx::cleanup::OWNER_LABEL;
use nginx_ketama_harness::nginx::docker;
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::selection::{Selection, Source};
use std::collections::BTreeMap;
use std::path::Path;

use nginx_ketama_harness::testkit::{provisioned_or_skip, report, skip, snapshot_settings};

#[test]
fn live_nginx_still_produces_the_snapshots() {
    let Some(installs) = provisioned_or_skip() else { return };
    let _lock = lock_catalog().expect("catalog lock");
    let date = utc_today();
    let settings = snapshot_settings();
    let mut requests = 0;
    let cases = catalog();
    // The builds the records hold that are not provisioned here (e.g. the musl build without
    // scripts/provision-nginx-musl): their runs are taken from the committed records, not re-recorded, and
    // the report says so; with NGINX_PARITY=require every recorded build must be here.
    let committed = load_records(&records_dir()).expect("vectors/records is readable");
    let mut missing: Vec<String> = committed
        .iter()
        .flat_map(|r| &r.runs)
        .filter(|run| !installs.iter().any(|i| i.version == run.nginx && i.libc == run.c_library()))
        .map(|run| run.label())
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty() || std::env::var("NGINX_PARITY").map_or(true, |v| v != "require"),
        "NGINX_PARITY=require but these recorded builds are not provisioned: {missing:?}"
    );
    // Record everything first (nginx processes end with each case), then compare.
    let builds: Vec<Build> = installs.iter().cloned().map(Build::Local).collect();
    let records: Vec<_> = cases
        .iter()
        .map(|case| {
            let fresh = record_case(&builds, case, &date).unwrap_or_else(|e| panic!("recording {}: {e:#}", case.name));
            merge(fresh, committed.iter().find(|r| r.case == case.name))
        })
        .collect();
    settings.bind(|| {
        for record in &records {
            requests += record.keys.len() * installs.len();
            insta::assert_snapshot!(snapshot_name(&record.case), render_snapshot(record));
        }
    });
    let versions: Vec<String> = installs.iter().map(|i| i.label()).collect();
    let not_here = if missing.is_empty() {
        String::new()
    } else {
        format!(" (not provisioned, kept as recorded: {})", missing.join(", "))
    };
    report(&format!(
        "golden_live: {} cases re-recorded on nginx {} ({requests} requests, stateless cases twice): snapshots unchanged{not_here}",
        records.len(),
        versions.join(", ")
    ));
}

/// The cases the upgrade test records: the two where nginx 1.18.0 routes differently from 1.22.1 (before
/// 1.19.6 the retry budget counts `down` servers, so it runs out earlier) and two where it does not.
const UPGRADE_CASES: [&str; 4] = ["retry-budget-skips-down", "all-dead-then-none-left", "down", "weights-equal"];

/// Recording on another nginx is reviewed, never accepted silently: in a copy of the records (holding
/// the committed runs of 1.22.1 and later, none of 1.18.0), `record-vectors --nginx` on an unchanged build
/// (1.26.3) changes nothing at all, and on nginx 1.18.0 it splits exactly the two cases where 1.18.0
/// routes differently into their own version groups, regenerates records and fixtures to match, and leaves
/// every changed snapshot pending (`.snap.new`) for `cargo insta review`.
#[test]
fn recording_on_another_nginx_leaves_its_differences_for_review() {
    let root = Installation::default_root();
    let (old, same) = (root.join("1.18.0/nginx"), root.join("1.26.3/nginx"));
    if !old.is_file() || !same.is_file() {
        skip(&format!("golden_live: the upgrade test needs nginx 1.18.0 and 1.26.3 under {}", root.display()));
        return;
    }
    let (tmp, layout) = scratch_layout();
    // The starting point: the committed records of these cases without any 1.18.0 run, and their
    // fixtures and snapshots as the workflow itself derives and a reviewer accepts them.
    for record in load_records(&records_dir()).unwrap().into_iter().filter(|r| UPGRADE_CASES.contains(&r.case.as_str()))
    {
        let runs = record.runs.iter().filter(|r| r.nginx != NginxVersion::new(1, 18, 0)).cloned().collect();
        let record = Record { runs, ..record };
        std::fs::write(layout.records().join(format!("{}.json", record.case)), record_json(&record)).unwrap();
    }
    let args = |builds| RecordArgs {
        offline: false,
        cases: UPGRADE_CASES.iter().map(|c| c.to_string()).collect(),
        builds,
        layout: Some(layout.clone()),
    };
    record_vectors(&RecordArgs { offline: true, ..args(RecordArgs::default().builds) }).expect("offline regeneration");
    accept_pending(&layout.snapshots());
    let before = tree_text(tmp.path());
    assert_eq!(pending(&layout.snapshots()), Vec::<String>::new());

    // An unchanged nginx: nothing changes, not even a date.
    record_vectors(&args(Selection::to_record(Source::Named { binaries: vec![same.clone()], images: Vec::new() })))
        .expect("recording on 1.26.3");
    assert_eq!(pending(&layout.snapshots()), Vec::<String>::new(), "an unchanged nginx leaves no snapshot change");
    let after = tree_text(tmp.path());
    let changed: Vec<&String> = after.keys().filter(|f| before.get(*f) != after.get(*f)).collect();
    assert!(changed.is_empty(), "re-recording on an unchanged nginx changed {changed:?}");

    // nginx 1.18.0: exactly the two version splits, the records and fixtures regenerated, every
    // snapshot's change pending review.
    let status =
        record_vectors(&args(Selection::to_record(Source::Named { binaries: vec![old.clone()], images: Vec::new() })))
            .expect("recording on 1.18.0");
    assert_eq!(status, RecordStatus::Clean, "the catalog explains both splits (versions_differ)");
    let records = load_records(&layout.records()).unwrap();
    let mut split: Vec<&str> = Vec::new();
    for record in &records {
        assert!(record.runs.iter().any(|r| r.nginx == NginxVersion::new(1, 18, 0)), "{}: no 1.18.0 run", record.case);
        let groups = version_groups(record);
        let group_of = |v: NginxVersion| groups.iter().position(|g| g.versions().contains(&v));
        if group_of(NginxVersion::new(1, 18, 0)) != group_of(NginxVersion::new(1, 22, 1)) {
            split.push(&record.case);
        }
    }
    split.sort_unstable();
    assert_eq!(split, ["all-dead-then-none-left", "retry-budget-skips-down"], "cases where 1.18.0 differs");
    let fixtures = std::fs::read_to_string(layout.vectors().join("consistent.json")).unwrap();
    for group in ["retry-budget-skips-down@1.18.0", "all-dead-then-none-left@1.18.0"] {
        assert!(fixtures.contains(&format!("\"{group}\"")), "the fixtures name the group {group}");
    }
    assert!(!fixtures.contains("\"down@"), "down is not split");
    let mut want: Vec<String> = UPGRADE_CASES.iter().map(|c| format!("{}.snap.new", snapshot_name(c))).collect();
    want.sort();
    assert_eq!(pending(&layout.snapshots()), want, "every recorded case's snapshot now names 1.18.0");
    for case in ["retry-budget-skips-down", "all-dead-then-none-left"] {
        let text =
            std::fs::read_to_string(layout.snapshots().join(format!("{}.snap.new", snapshot_name(case)))).unwrap();
        assert!(text.contains("\n=== nginx 1.18.0 ===\n"), "{case}: 1.18.0 has a group of its own:\n{text}");
    }
    let down = std::fs::read_to_string(layout.snapshots().join(format!("{}.snap.new", snapshot_name("down")))).unwrap();
    assert!(down.contains("\n=== nginx 1.18.0, 1.22.1,"), "down: 1.18.0 agrees with 1.22.1:\n{down}");
    report(&format!(
        "golden_live: recording {} cases on nginx 1.26.3 changed nothing; on 1.18.0 it split {split:?} and left {} \
         snapshot changes for review (status {status:?})",
        UPGRADE_CASES.len(),
        want.len()
    ));
}

/// The cases the container test records: every address kind a container must provide as the machine does
/// (`[::1]` with and without a port, port 80, unix sockets under the catalog's directory in both spellings,
/// hostnames with one and two addresses from the hosts file).
const CONTAINER_CASES: [&str; 3] = ["spellings", "unix-prefix-case", "hostname-two-addresses"];

/// `record-vectors --image REF` records in containers of a local image: in a copy of the committed records
/// (recorded from the provisioned binaries), recording these cases in containers of
/// `nginx-ketama/nginx:1.26.3` changes nothing at all, not even a date, and leaves no container behind.
#[test]
fn recording_in_containers_of_an_image_matches_its_binary() {
    let image = "nginx-ketama/nginx:1.26.3";
    if !docker::can_run_containers() {
        skip("golden_live: recording with --image needs a Docker engine and the harness's `docker` feature");
        return;
    }
    let present = std::process::Command::new("docker").args(["image", "inspect", image]).output();
    if !present.is_ok_and(|o| o.status.success()) {
        skip(&format!("golden_live: image {image} is not built (scripts/build-images 1.26.3)"));
        return;
    }
    let (tmp, layout) = scratch_layout();
    for case in CONTAINER_CASES {
        let name = format!("{case}.json");
        std::fs::copy(records_dir().join(&name), layout.records().join(&name)).unwrap();
    }
    let args = |offline, builds| RecordArgs {
        offline,
        cases: CONTAINER_CASES.iter().map(|c| c.to_string()).collect(),
        builds,
        layout: Some(layout.clone()),
    };
    record_vectors(&args(true, RecordArgs::default().builds)).expect("offline regeneration");
    accept_pending(&layout.snapshots());
    let before = tree_text(tmp.path());

    let status = record_vectors(&args(
        false,
        Selection::to_record(Source::Named { binaries: Vec::new(), images: vec![image.to_string()] }),
    ))
    .expect("recording on the image");
    assert_eq!(status, RecordStatus::Clean);
    assert_eq!(pending(&layout.snapshots()), Vec::<String>::new(), "the image leaves no snapshot change");
    let after = tree_text(tmp.path());
    let changed: Vec<&String> = after.keys().filter(|f| before.get(*f) != after.get(*f)).collect();
    assert!(changed.is_empty(), "recording in containers of {image} changed {changed:?}");
    let leftovers = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("label={OWNER_LABEL}={}", std::process::id())])
        .output()
        .expect("docker ps");
    assert!(leftovers.stdout.is_empty(), "containers left behind: {}", String::from_utf8_lossy(&leftovers.stdout));
    report(&format!(
        "golden_live: recording {} cases ({}) in containers of {image} changed nothing",
        CONTAINER_CASES.len(),
        CONTAINER_CASES.join(", ")
    ));
}

/// The pending `.snap.new` files in `dir`, sorted.
/// An empty records/vectors layout in a fresh temporary directory (kept while the guard lives), with the
/// committed vector schema in place.
fn scratch_layout() -> (tempfile::TempDir, Layout) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let layout = Layout::at(tmp.path());
    std::fs::create_dir_all(layout.records()).unwrap();
    std::fs::create_dir_all(layout.vectors()).unwrap();
    std::fs::copy(vectors_dir().join("schema.json"), layout.vectors().join("schema.json")).unwrap();
    (tmp, layout)
}

fn pending(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().to_string()).collect())
        .unwrap_or_default();
    out.retain(|n| n.ends_with(".snap.new"));
    out.sort();
    out
}

/// What `cargo insta accept` does: every pending `.snap.new` becomes the `.snap`.
fn accept_pending(dir: &Path) {
    for name in pending(dir) {
        std::fs::rename(dir.join(&name), dir.join(name.trim_end_matches(".new"))).unwrap();
    }
}

/// Every file under `root` by path, with its text.
fn tree_text(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.insert(path.display().to_string(), std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    out
}
