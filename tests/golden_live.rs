//! Live check of the golden vectors: re-records the whole catalog from every provisioned nginx (without
//! writing any record) and asserts that the result renders to the committed snapshots. An nginx upgrade that
//! changes any routing decision therefore shows up as an insta diff (`cargo insta review`), to be accepted
//! with `scripts/record-vectors`.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use nginx_ketama_harness::catalog::catalog;
use nginx_ketama_harness::golden::{
    load_records, lock_catalog, merge, record_case, records_dir, render_snapshot, snapshot_name, utc_today,
};
use nginx_ketama_harness::install::Installation;

use nginx_ketama_harness::testkit::{report, skip, snapshot_settings};

#[test]
fn live_nginx_still_produces_the_snapshots() {
    let root = Installation::default_root();
    let installs = Installation::discover(&root);
    if installs.is_empty() {
        skip(&format!("golden_live: no nginx under {} — run scripts/provision-nginx", root.display()));
        return;
    }
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
    let records: Vec<_> = cases
        .iter()
        .map(|case| {
            let fresh =
                record_case(&installs, case, &date).unwrap_or_else(|e| panic!("recording {}: {e:#}", case.name));
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
