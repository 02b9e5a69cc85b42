//! `scripts/record-key-vectors [--out FILE] [--previous FILE]`: records the key vectors
//! (`nginx_ketama_harness::golden::keys`) from every nginx provisioned under `NGINX_KETAMA_NGINX_DIR` (or
//! `.nginx/`) and writes them to FILE (default `vectors/keys/v1/keys.json`). A group whose answers are
//! unchanged keeps the `recorded` day it has in `--previous` (default: the file being replaced), so
//! re-recording unchanged builds rewrites the same bytes.

use anyhow::{Context, Result, bail};
use nginx_ketama_harness::golden::keys::{key_vectors_path, load, record, render};
use nginx_ketama_harness::golden::utc_today;
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::selection::Selection;
use nginx_ketama_harness::repo_root;
use std::path::PathBuf;

fn main() -> Result<()> {
    let mut out = key_vectors_path(&repo_root());
    let mut previous = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = PathBuf::from(args.next().context("--out needs a file")?),
            "--previous" => previous = Some(PathBuf::from(args.next().context("--previous needs a file")?)),
            other => bail!("record-key-vectors: unknown argument {other:?} (expected --out FILE, --previous FILE)"),
        }
    }
    let previous = previous.unwrap_or_else(|| out.clone());
    let old = if previous.exists() { Some(load(&previous)?) } else { None };
    let installs = Selection::default_provisioned().installations()?;
    let file = record(&installs, old.as_ref(), &utc_today())?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&out, render(&file)?)?;
    let builds: Vec<String> = installs.iter().map(Installation::label).collect();
    eprintln!(
        "record-key-vectors: {} tests in {} groups from {} -> {}",
        file.number_of_tests,
        file.test_groups.len(),
        builds.join(", "),
        out.display()
    );
    Ok(())
}
