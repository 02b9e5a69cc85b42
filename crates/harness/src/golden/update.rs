//! `nginx-ketama record-vectors` (hidden; run it through `scripts/record-vectors`): records the catalog from
//! every provisioned nginx (or the binaries named with `--nginx`, or the local images named with `--image`,
//! as `verify` takes them) and regenerates everything derived from
//! the records.
//!
//! * without `--offline`: runs every catalog case (or the named ones) on each build, writes
//!   `vectors/records/<case>.json` (keeping a run's `recorded` date when its results did not change, and the
//!   runs of builds not recorded this time) and removes records of cases that left the catalog (full runs
//!   only);
//! * with `--offline`: records nothing, but copies edited prose (descriptions, version notes, key comments)
//!   from the catalog into records whose recorded inputs did not change;
//! * always: regenerates `vectors/v1/consistent.json`, `vectors/v1/plain.json` and the derived
//!   `vectors/intermediate.json` from the records, removes snapshots of cases that have no record any
//!   more, and leaves every snapshot the records now render differently as a pending
//!   `snapshots/<name>.snap.new` for `cargo insta review`: a routing change is reviewed, never accepted
//!   silently.

use super::Layout;
use super::capture::{lock_catalog, record_case, utc_today};
use super::fixtures::generate_vectors;
use super::groups::{VersionGroup, split_of, version_groups};
use super::intermediate::generate_intermediate;
use super::record_file::{Record, load_records, merge, record_json, skeleton};
use super::snapshots::pending_snapshot;
use super::snapshots::snapshot_name;
use crate::catalog::catalog;
use crate::nginx::install::Installation;
use crate::nginx::selection::{Place, Selection, Source};
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::time::Instant;

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordArgs {
    /// Record nothing: refresh the records' prose from the catalog and regenerate the fixtures.
    pub offline: bool,
    /// Record only this case (repeatable); records of other cases are kept.
    pub cases: Vec<String>,
    /// The builds to record on ([`Selection::to_record`]): runs of other builds already in the records are
    /// kept.
    pub builds: Selection,
    /// Where the records, fixtures and snapshots are (default: this repository).
    pub layout: Option<Layout>,
}

impl Default for RecordArgs {
    /// Every case on every provisioned build.
    fn default() -> Self {
        RecordArgs {
            offline: false,
            cases: Vec::new(),
            builds: Selection::to_record(Source::Provisioned {
                root: Installation::default_root(),
                versions: Vec::new(),
                place: Place::Local,
            }),
            layout: None,
        }
    }
}

/// How a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordStatus {
    /// Everything recorded; any version difference is explained by its case.
    Clean,
    /// Recorded, but some case's builds disagree without a `versions_differ` (or, between C libraries, a
    /// `libcs_differ`) note.
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
    let layout = args.layout.clone().unwrap_or_else(Layout::repo);
    let records = layout.records();
    std::fs::create_dir_all(&records)?;
    let status = if args.offline {
        refresh_prose(&records)?;
        RecordStatus::Clean
    } else {
        record_catalog(args, &records)?
    };
    let all = load_records(&records)?;
    let dir = layout.vectors();
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
        write_file(&dir.join(name), text)?;
    }
    write_file(&layout.intermediate(), generate_intermediate(&all))?;
    let pending = update_snapshots(&all, &layout.snapshots())?;
    let tests: usize = all.iter().map(|r| r.keys.len() * version_groups(r).len()).sum();
    eprintln!("wrote {} fixture files ({tests} tests from {} records) to {}", files.len(), all.len(), dir.display());
    match pending.len() {
        0 => eprintln!("snapshots: unchanged"),
        n => eprintln!(
            "snapshots: {n} changed ({}); review them with `cargo insta review` (each is a pending .snap.new in {})",
            pending.join(", "),
            layout.snapshots().display()
        ),
    }
    Ok(status)
}

/// Snapshots are derived from the records: removes those of cases that have no record any more, and writes
/// a pending `<name>.snap.new` for each record that renders differently from its committed snapshot
/// (removing a pending file that no longer differs). Returns the cases with pending changes.
fn update_snapshots(all: &[Record], dir: &Path) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string();
        let snap = name.strip_suffix(".new").unwrap_or(&name);
        if name.starts_with("catalog__") && !all.iter().any(|r| format!("{}.snap", snapshot_name(&r.case)) == snap) {
            eprintln!("removing stale snapshot {}", path.display());
            std::fs::remove_file(&path)?;
        }
    }
    let mut pending = Vec::new();
    for record in all {
        let snap = dir.join(format!("{}.snap", snapshot_name(&record.case)));
        let new = dir.join(format!("{}.snap.new", snapshot_name(&record.case)));
        let committed = std::fs::read_to_string(&snap).ok();
        match pending_snapshot(record, committed.as_deref()) {
            Some(text) => {
                write_file(&new, text)?;
                pending.push(record.case.clone());
            }
            None => {
                if new.exists() {
                    std::fs::remove_file(&new)?;
                }
            }
        }
    }
    Ok(pending)
}

/// Records the chosen cases on the chosen builds into `records`.
fn record_catalog(args: &RecordArgs, records: &Path) -> Result<RecordStatus> {
    let mut status = RecordStatus::Clean;
    let installs = args.builds.builds()?;
    for install in &installs {
        eprintln!("recording on {}", install.summary());
    }
    let _lock = lock_catalog()?;
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
        let split = split_of(&groups);
        let mut note = String::new();
        for (applies, why, what) in [
            (split.by_version, &record.versions_differ, "versions differ"),
            (split.by_libc, &record.libcs_differ, "C libraries differ"),
        ] {
            match (applies, why) {
                (false, _) => {}
                (true, Some(_)) => note.push_str(&format!("  {what} (explained): {}", split_label(&groups))),
                (true, None) => {
                    status = RecordStatus::UnexplainedVersionDifference;
                    note.push_str(&format!("  UNEXPLAINED: {what}: {}", split_label(&groups)));
                }
            }
        }
        write_file(&path, record_json(&record))?;
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

/// `--offline`: copies the catalog's prose (case description, `versions_differ`, `libcs_differ`, key comments) into the records
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
        new.libcs_differ.clone_from(&fresh.libcs_differ);
        if new.keys.len() == fresh.keys.len() {
            for (key, want) in new.keys.iter_mut().zip(&fresh.keys) {
                key.comment.clone_from(&want.comment);
            }
        }
        if new != old && (Record { runs: Vec::new(), ..new.clone() }) == fresh {
            write_file(&path, record_json(&new))?;
            eprintln!("refreshed the prose of {}", path.display());
        }
    }
    Ok(())
}

/// Writes a record or a derived file whole (see `nginx_ketama_output`): a reader (a test, `git diff`, a
/// second recorder) sees the old file or the new one, never half of either.
fn write_file(path: &Path, text: impl AsRef<[u8]>) -> Result<()> {
    nginx_ketama_output::write(path, text.as_ref(), &nginx_ketama_output::Options::default())?;
    Ok(())
}

fn split_label(groups: &[VersionGroup<'_>]) -> String {
    groups.iter().map(|g| g.versions_joined("+")).collect::<Vec<_>>().join(" vs ")
}
