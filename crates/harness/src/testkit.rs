//! What the workspace's integration tests share: the live report `scripts/test` prints at the end of a
//! run, the `NGINX_PARITY=require` switch, insta settings for `snapshots/`, running a command with bytes
//! on its stdin, and the binomial intervals the statistical tests judge samples with. Test support, not
//! stable API.

pub mod schema;

use crate::nginx::install::Installation;
use crate::nginx::selection::{Libcs, Selection};
use nginx_ketama::Libc;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// `target/nginx-ketama/live-report.txt` (or under `$CARGO_TARGET_DIR`).
pub fn report_path() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| crate::repo_root().join("target"));
    target.join("nginx-ketama/live-report.txt")
}

/// Prints `text` and appends it to the live report, so a passing run still shows what it verified.
pub fn report(text: &str) {
    eprintln!("{text}");
    let path = report_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = writeln!(f, "{}", text.trim_end());
    }
}

/// `NGINX_PARITY=require` (set by `.ci/run`): a live test that cannot run fails instead of skipping.
pub fn parity_required() -> bool {
    std::env::var("NGINX_PARITY").is_ok_and(|v| v == "require")
}

/// Skips a live test with a loud `SKIP:` line in the report, or fails under `NGINX_PARITY=require`.
pub fn skip(why: &str) {
    assert!(!parity_required(), "NGINX_PARITY=require but {why}");
    report(&format!("SKIP: {why} (set NGINX_PARITY=require to make this a failure)"));
}

/// Every provisioned nginx build (`scripts/provision-nginx`, `scripts/provision-nginx-musl`), oldest first,
/// chosen as every driver chooses them ([`Selection`]); with none, the one skip every live test takes
/// ([`skip`]: a failure under `NGINX_PARITY=require`).
pub fn provisioned_or_skip() -> Option<Vec<Installation>> {
    match Selection::default_provisioned().installations() {
        Ok(found) => Some(found),
        Err(e) => {
            skip(&e.to_string());
            None
        }
    }
}

/// The newest provisioned glibc build of a modelled release, or the same skip.
pub fn newest_glibc_or_skip() -> Option<Installation> {
    let selection = Selection { libcs: Libcs::Only(vec![Libc::Glibc]), ..Selection::default_provisioned() };
    match selection.installations() {
        Ok(found) => {
            let newest = found.into_iter().rfind(|i| i.version.modelled().is_ok());
            if newest.is_none() {
                skip("no provisioned glibc nginx of a modelled release — run scripts/provision-nginx");
            }
            newest
        }
        Err(e) => {
            skip(&e.to_string());
            None
        }
    }
}

/// Asserts that a sweep's reports hold no harness fault and no mismatch; before failing, prints each fault
/// and the first ten mismatches of each build with everything needed to replay them (key, both answers,
/// the upstream block, the replay command).
pub fn assert_sweep_clean(reports: &[crate::proofs::sweep::VersionReport]) {
    for r in reports {
        for f in &r.faults {
            eprintln!(
                "{} nginx {} ({}) topology {:?}: {}\nreplay: {}",
                f.kind.name(),
                f.version,
                f.backend,
                f.topology,
                f.cause,
                f.replay
            );
        }
        for f in r.findings.iter().take(10) {
            eprintln!(
                "MISMATCH nginx {} topology {} (seed {}): key {} expected {:?}, nginx {:?}\n{}\nreplay: {}",
                f.version,
                f.topology,
                f.topology_seed,
                crate::run::parity::show_key(&f.mismatch.key),
                f.mismatch.expected,
                f.mismatch.actual,
                f.upstream_block,
                f.replay
            );
        }
        assert!(r.faults.is_empty(), "nginx {}: {} faults", r.version, r.faults.len());
        assert!(r.findings.is_empty(), "nginx {}: {} mismatches", r.version, r.findings.len());
    }
}

/// insta settings for the committed snapshots in `snapshots/` (no module prefix, no expression).
pub fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(crate::golden::snapshots_dir());
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

/// Runs `cmd` with `input` on its stdin (written from a thread, so a large input cannot deadlock against
/// a full stdout pipe) and collects its status, stdout and stderr. A failed write (the command exited
/// without reading everything) is left to the caller to see in the status and stderr.
pub fn run_with_stdin(mut cmd: Command, input: &[u8]) -> std::io::Result<Output> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output()?;
    writer.join().expect("the stdin writer does not panic");
    Ok(out)
}

/// A file alone in a fresh temporary directory; both are removed when it is dropped. Dereferences to the
/// file's path.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempFile {
    /// Writes `contents` to a file called `name` in a new temporary directory.
    ///
    /// # Panics
    ///
    /// The directory or the file cannot be made (a test setup failure).
    pub fn new(name: &str, contents: impl AsRef<[u8]>) -> TempFile {
        let dir = tempfile::Builder::new().prefix("nk-test-").tempdir().expect("a temporary directory");
        let path = dir.path().join(name);
        std::fs::write(&path, contents).expect("writing a temporary file");
        TempFile { path, _dir: dir }
    }
}

impl std::ops::Deref for TempFile {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::path::Path> for TempFile {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

/// The releases `nginx/versions` lists (the Debian builds `scripts/provision-nginx` provisions), oldest
/// first: `N.N.N`, or `N.N.x` for whatever patch release the suite serves.
pub fn provisioned_releases() -> Vec<String> {
    let path = crate::repo_root().join("nginx/versions");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter_map(|l| l.split('#').next()?.split_whitespace().next()).map(str::to_string).collect()
}

/// Whether `version` (`1.30.6`) is the release `release` (`1.30.6`, or `1.30.x`) of `nginx/versions`.
pub fn release_matches(release: &str, version: &str) -> bool {
    match release.strip_suffix(".x") {
        Some(series) => version.strip_prefix(series).is_some_and(|p| p.starts_with('.')),
        None => release == version,
    }
}

/// The Wilson score interval for `k` successes out of `n` trials with the normal quantile `z` (3.89 for
/// 99.99%), `(0, 1)` for `n = 0`: the interval a sample's fraction is judged against. At `z = 1.96` it is the
/// library's `analysis::compare::wilson`.
pub fn wilson_z(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    // At k = 0 (k = n) the bound is exactly 0 (1); rounding would leave it a hair off.
    let lo = if k == 0.0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if k == n { 1.0 } else { (center + half).min(1.0) };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::wilson_z;
    use nginx_ketama::analysis::compare::wilson;

    #[test]
    fn wilson_z_at_95_percent_is_the_librarys_interval() {
        for n in [0u64, 1, 2, 10, 100, 12_345, 1 << 32] {
            for k in [0, 1, n / 3, n / 2, n.saturating_sub(1), n] {
                let k = k.min(n);
                assert_eq!(wilson_z(k, n, 1.959_963_984_540_054), wilson(k, n), "{k}/{n}");
            }
        }
        // Wider at 99.99%, and exact at the ends.
        let (lo, hi) = wilson_z(50, 100, 3.89);
        let (lo95, hi95) = wilson(50, 100);
        assert!(lo < lo95 && hi95 < hi);
        assert_eq!(wilson_z(0, 10, 3.89).0, 0.0);
        assert_eq!(wilson_z(10, 10, 3.89).1, 1.0);
    }
}
