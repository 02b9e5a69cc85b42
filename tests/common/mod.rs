//! Shared by the live test binaries: the summary file `scripts/test` prints at the end of a run.

use std::io::Write;
use std::path::PathBuf;

/// `target/nginx-ketama/live-report.txt` (or under `$CARGO_TARGET_DIR`).
pub(crate) fn report_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target")));
    target.join("nginx-ketama/live-report.txt")
}

/// Prints `text` and appends it to the live report, so a passing run still shows what it verified.
pub(crate) fn report(text: &str) {
    eprintln!("{text}");
    let path = report_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = writeln!(f, "{}", text.trim_end());
    }
}
