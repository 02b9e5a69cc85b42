//! `nginx-ketama record-vectors` (hidden; run it through `scripts/record-vectors`): records the catalog from
//! every provisioned nginx and regenerates everything derived from the records.
//!
//! * without `--offline`: runs every catalog case (or the named ones) on each provisioned nginx, writes
//!   `vectors/records/<case>.json` (keeping a run's `recorded` date when its results did not change) and
//!   removes records of cases that left the catalog (full runs only);
//! * with `--offline`: records nothing, but copies edited prose (descriptions, version notes, key comments)
//!   from the catalog into records whose recorded inputs did not change;
//! * always: regenerates `vectors/v1/consistent.json`, `vectors/v1/plain.json` and the derived
//!   `vectors/intermediate.json` from the records and removes snapshots of cases that have no record any
//!   more.

use super::super::catalog::catalog;
use super::super::install::Installation;
use super::fixtures::generate_vectors;
use super::groups::{VersionGroup, version_groups};
use super::intermediate::generate_intermediate;
use super::record::{lock_catalog, record_case, utc_today};
use super::records::{Record, load_records, merge, record_json, skeleton};
use super::snapshots::snapshot_name;
use super::{intermediate_path, records_dir, snapshots_dir, vectors_dir};
use anyhow::{Context, Result, bail};
use nginx_ketama::version::NginxVersion;
use std::path::Path;
use std::time::Instant;

/// What to record.
#[derive(Debug, Clone, Default)]
pub struct RecordArgs {
    /// Record nothing: refresh the records' prose from the catalog and regenerate the fixtures.
    pub offline: bool,
    /// Record only this case (repeatable); records of other cases are kept.
    pub cases: Vec<String>,
    /// Record only on these provisioned nginx versions (comma-separated); runs of the others are kept.
    pub versions: Vec<NginxVersion>,
}

/// How a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordStatus {
    /// Everything recorded; any version difference is explained by its case.
    Clean,
    /// Recorded, but some case's nginx versions disagree without a `versions_differ` note.
    UnexplainedVersionDifference,
}

impl RecordStatus {
    /// The exit code: 0 when clean, 1 for an unexplained version difference (errors exit 2).
    pub fn code(self) -> u8 {
        match self {
            RecordStatus::Clean => 0,
            RecordStatus::UnexplainedVersionDifference => 1,
        }
    }
}

/// Records (unless `--offline`) and regenerates the fixtures, reporting progress on stderr.
///
/// # Errors
///
/// No provisioned nginx, an unknown case, nginx failing, or files that cannot be read or written.
pub fn record_vectors(args: &RecordArgs) -> Result<RecordStatus> {
    let records = records_dir();
    std::fs::create_dir_all(&records)?;
    let status = if args.offline {
        refresh_prose(&records)?;
        RecordStatus::Clean
    } else {
        record_catalog(args, &records)?
    };
    let all = load_records(&records)?;
    let dir = vectors_dir();
    std::fs::create_dir_all(&dir)?;
    let files = generate_vectors(&all);
    for e in std::fs::read_dir(&dir)? {
        let path = e?.path();
        let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string();
        if name.ends_with(".json") && name != "schema.json" && !files.contains_key(&name) {
            std::fs::remove_file(&path)?;
        }
    }
    for (name, text) in &files {
        std::fs::write(dir.join(name), text)?;
    }
    std::fs::write(intermediate_path(), generate_intermediate(&all))?;
    // Snapshots are derived too: drop those of cases that have no record any more.
    if let Ok(entries) = std::fs::read_dir(snapshots_dir()) {
        for e in entries {
            let path = e?.path();
            let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string();
            if name.starts_with("catalog__") && !all.iter().any(|r| format!("{}.snap", snapshot_name(&r.case)) == name)
            {
                eprintln!("removing stale snapshot {}", path.display());
                std::fs::remove_file(&path)?;
            }
        }
    }
    let tests: usize = all.iter().map(|r| r.keys.len() * version_groups(r).len()).sum();
    eprintln!("wrote {} fixture files ({tests} tests from {} records) to {}", files.len(), all.len(), dir.display());
    Ok(status)
}

/// Records the chosen cases on the chosen nginx versions into `records`.
fn record_catalog(args: &RecordArgs, records: &Path) -> Result<RecordStatus> {
    let mut status = RecordStatus::Clean;
    let _lock = lock_catalog()?;
    let root = Installation::default_root();
    let mut installs = Installation::discover(&root);
    if !args.versions.is_empty() {
        installs.retain(|i| args.versions.contains(&i.version));
    }
    if installs.is_empty() {
        bail!("no nginx under {} — run scripts/provision-nginx first", root.display());
    }
    let cases = catalog();
    for name in &args.cases {
        if !cases.iter().any(|c| c.name == name) {
            bail!("no case named {name:?} in the catalog");
        }
    }
    let date = utc_today();
    let started = Instant::now();
    for case in cases.iter().filter(|c| args.cases.is_empty() || args.cases.iter().any(|n| n == c.name)) {
        let t = Instant::now();
        let record = record_case(&installs, case, &date)?;
        let path = records.join(format!("{}.json", case.name));
        let old = std::fs::read_to_string(&path).ok().and_then(|s| serde_json::from_str(&s).ok());
        let record = merge(record, old.as_ref());
        let groups = version_groups(&record);
        let note = match (groups.len(), &record.versions_differ) {
            (1, _) => String::new(),
            (_, Some(_)) => format!("  versions differ (explained): {}", split_label(&groups)),
            (_, None) => {
                status = RecordStatus::UnexplainedVersionDifference;
                format!("  UNEXPLAINED version difference: {}", split_label(&groups))
            }
        };
        std::fs::write(&path, record_json(&record))?;
        eprintln!(
            "recorded {:<28} {:>4} keys × {} nginx in {:>5.1}s{note}",
            case.name,
            record.keys.len(),
            installs.len(),
            t.elapsed().as_secs_f64()
        );
    }
    if args.cases.is_empty() {
        for e in std::fs::read_dir(records)? {
            let path = e?.path();
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
            if path.extension().is_some_and(|x| x == "json") && !cases.iter().any(|c| c.name == stem) {
                eprintln!("removing {} (no longer in the catalog)", path.display());
                std::fs::remove_file(&path)?;
            }
        }
    }
    eprintln!("recording took {:.1}s", started.elapsed().as_secs_f64());
    Ok(status)
}

/// `--offline`: copies the catalog's prose (case description, `versions_differ`, key comments) into the records
/// of cases whose recorded inputs (upstream, hosts, keys, flags, method) are unchanged. Prose does not change
/// what nginx does, so it needs no new recording; any other catalog change still fails the offline checks
/// until the case is re-recorded.
fn refresh_prose(records: &Path) -> Result<()> {
    for case in catalog() {
        let path = records.join(format!("{}.json", case.name));
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let old: Record = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let fresh = skeleton(&case);
        let mut new = old.clone();
        new.description.clone_from(&fresh.description);
        new.versions_differ.clone_from(&fresh.versions_differ);
        if new.keys.len() == fresh.keys.len() {
            for (key, want) in new.keys.iter_mut().zip(&fresh.keys) {
                key.comment.clone_from(&want.comment);
            }
        }
        if new != old && (Record { runs: Vec::new(), ..new.clone() }) == fresh {
            std::fs::write(&path, record_json(&new))?;
            eprintln!("refreshed the prose of {}", path.display());
        }
    }
    Ok(())
}

fn split_label(groups: &[VersionGroup<'_>]) -> String {
    groups.iter().map(|g| g.versions_joined("+")).collect::<Vec<_>>().join(" vs ")
}
