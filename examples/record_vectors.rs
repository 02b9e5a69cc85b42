//! Records the golden-vector catalog from every provisioned nginx and regenerates everything derived from
//! the records. Run it through `scripts/record-vectors`.
//!
//! ```text
//! record_vectors [--offline] [--case NAME]... [--versions 1.22.1,1.26.3,...]
//! ```
//!
//! * without `--offline`: runs every catalog case (or the named ones) on each provisioned nginx, writes
//!   `vectors/records/<case>.json` (keeping a run's `recorded` date when its results did not change) and
//!   removes records of cases that left the catalog (full runs only);
//! * with `--offline`: records nothing, but copies edited prose (descriptions, version notes, key comments)
//!   from the catalog into records whose recorded inputs did not change;
//! * always: regenerates `vectors/v1/consistent.json` and `vectors/v1/plain.json` from the records.

use anyhow::{Context, Result, bail};
use nginx_ketama::NginxVersion;
use nginx_ketama::harness::catalog::catalog;
use nginx_ketama::harness::golden::{
    self, generate_vectors, load_records, lock_catalog, merge, record_case, record_json, records_dir, vectors_dir,
    version_groups,
};
use nginx_ketama::harness::install::Installation;
use std::time::Instant;

fn main() {
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("record_vectors: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run() -> Result<i32> {
    let mut offline = false;
    let mut only: Vec<String> = Vec::new();
    let mut versions: Vec<NginxVersion> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--offline" => offline = true,
            "--case" => only.push(args.next().context("--case needs a name")?),
            "--versions" => {
                for v in args.next().context("--versions needs a list")?.split(',') {
                    versions.push(v.parse()?);
                }
            }
            "-h" | "--help" => {
                println!("usage: record_vectors [--offline] [--case NAME]... [--versions V1,V2,...]");
                return Ok(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let records = records_dir();
    std::fs::create_dir_all(&records)?;
    let mut code = 0;
    if !offline {
        let _lock = lock_catalog()?;
        let root = Installation::default_root();
        let mut installs = Installation::discover(&root);
        if !versions.is_empty() {
            installs.retain(|i| versions.contains(&i.version));
        }
        if installs.is_empty() {
            bail!("no nginx under {} — run scripts/provision-nginx first", root.display());
        }
        let cases = catalog();
        for name in &only {
            if !cases.iter().any(|c| c.name == name) {
                bail!("no case named {name:?} in the catalog");
            }
        }
        let date = golden::utc_today();
        let started = Instant::now();
        for case in cases.iter().filter(|c| only.is_empty() || only.iter().any(|n| n == c.name)) {
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
                    code = 1;
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
        if only.is_empty() {
            for e in std::fs::read_dir(&records)? {
                let path = e?.path();
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("").to_string();
                if path.extension().is_some_and(|x| x == "json") && !cases.iter().any(|c| c.name == stem) {
                    eprintln!("removing {} (no longer in the catalog)", path.display());
                    std::fs::remove_file(&path)?;
                }
            }
        }
        eprintln!("recording took {:.1}s", started.elapsed().as_secs_f64());
    } else {
        refresh_prose(&records)?;
    }
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
    // Snapshots are derived too: drop those of cases that have no record any more.
    let snapshots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    if let Ok(entries) = std::fs::read_dir(&snapshots) {
        for e in entries {
            let path = e?.path();
            let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string();
            if name.starts_with("catalog__")
                && !all.iter().any(|r| format!("{}.snap", golden::snapshot_name(&r.case)) == name)
            {
                eprintln!("removing stale snapshot {}", path.display());
                std::fs::remove_file(&path)?;
            }
        }
    }
    let tests: usize = all.iter().map(|r| r.keys.len() * version_groups(r).len()).sum();
    eprintln!("wrote {} fixture files ({tests} tests from {} records) to {}", files.len(), all.len(), dir.display());
    Ok(code)
}

/// `--offline`: copies the catalog's prose (case description, `versions_differ`, key comments) into the records
/// of cases whose recorded inputs (upstream, hosts, keys, flags, method) are unchanged. Prose does not change
/// what nginx does, so it needs no new recording; any other catalog change still fails the offline checks
/// until the case is re-recorded.
fn refresh_prose(records: &std::path::Path) -> Result<()> {
    for case in catalog() {
        let path = records.join(format!("{}.json", case.name));
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let old: golden::Record = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let fresh = golden::skeleton(&case);
        let mut new = old.clone();
        new.description.clone_from(&fresh.description);
        new.versions_differ.clone_from(&fresh.versions_differ);
        if new.keys.len() == fresh.keys.len() {
            for (key, want) in new.keys.iter_mut().zip(&fresh.keys) {
                key.comment.clone_from(&want.comment);
            }
        }
        if new != old && (golden::Record { runs: Vec::new(), ..new.clone() }) == fresh {
            std::fs::write(&path, record_json(&new))?;
            eprintln!("refreshed the prose of {}", path.display());
        }
    }
    Ok(())
}

fn split_label(groups: &[golden::VersionGroup<'_>]) -> String {
    groups.iter().map(|g| g.versions().join("+")).collect::<Vec<_>>().join(" vs ")
}
