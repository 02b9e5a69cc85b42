//! Live check of the golden vectors: re-records the whole catalog from every provisioned nginx (without
//! writing any record) and asserts that the result renders to the committed snapshots. An nginx upgrade that
//! changes any routing decision therefore shows up as an insta diff (`cargo insta review`), to be accepted
//! with `scripts/record-vectors`.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use nginx_ketama_harness::catalog::catalog;
use nginx_ketama_harness::golden::{lock_catalog, record_case, render_snapshot, snapshot_name, utc_today};
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
    // Record everything first (nginx processes end with each case), then compare.
    let records: Vec<_> = cases
        .iter()
        .map(|case| record_case(&installs, case, &date).unwrap_or_else(|e| panic!("recording {}: {e:#}", case.name)))
        .collect();
    settings.bind(|| {
        for record in &records {
            requests += record.keys.len() * record.runs.len();
            insta::assert_snapshot!(snapshot_name(&record.case), render_snapshot(record));
        }
    });
    let versions: Vec<String> = installs.iter().map(|i| i.version.to_string()).collect();
    report(&format!(
        "golden_live: {} cases re-recorded on nginx {} ({requests} requests, stateless cases twice): snapshots unchanged",
        records.len(),
        versions.join(", ")
    ));
}
