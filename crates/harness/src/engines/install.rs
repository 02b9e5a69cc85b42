//! The provisioned engine builds: `scripts/provision-engines` unpacks each line of `engines/versions` into
//! `.engines/<engine>-<release>/` (or `$NGINX_KETAMA_ENGINES_DIR`) with a `run` wrapper; the suite links
//! (`haproxy-trixie`) point at them. A command line names a release as `engines/versions` does.

use std::fmt;
use std::path::{Path, PathBuf};

/// The engines that run here (the others are modelled from source only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Live {
    /// HAProxy.
    HaProxy,
    /// Caddy.
    Caddy,
}

impl Live {
    /// Both, in `engines/versions` order.
    pub const ALL: [Live; 2] = [Live::HaProxy, Live::Caddy];

    /// The engine's name, as `engines/versions` and the directories write it.
    pub fn name(self) -> &'static str {
        match self {
            Live::HaProxy => "haproxy",
            Live::Caddy => "caddy",
        }
    }

    /// The engine named `name`, if it runs here.
    pub fn named(name: &str) -> Option<Live> {
        Live::ALL.into_iter().find(|l| l.name() == name)
    }
}

impl fmt::Display for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One provisioned build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// The engine.
    pub engine: Live,
    /// Its upstream release (`3.0.11`), from the directory's name.
    pub release: String,
    /// The build's directory (its `run` wrapper inside).
    pub dir: PathBuf,
}

/// Where `scripts/provision-engines` puts its trees: `$NGINX_KETAMA_ENGINES_DIR`, else `.engines/` in this
/// repository.
///
/// A relative `$NGINX_KETAMA_ENGINES_DIR` is taken from the current directory and made absolute here: the
/// engines run in scratch directories of their own, where a relative `run` would not be found (docs/ci.md's
/// engine recipe sets `NGINX_KETAMA_ENGINES_DIR=nginx-ketama/.engines`).
pub fn default_root() -> PathBuf {
    let root = std::env::var_os("NGINX_KETAMA_ENGINES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join(".engines"));
    if root.is_relative()
        && let Ok(cwd) = std::env::current_dir()
    {
        return cwd.join(root);
    }
    root
}

/// Why the builds asked for cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotProvisioned {
    /// No build of the engine at all.
    #[error("no {engine} is provisioned under {} — run scripts/provision-engines {engine}", root.display())]
    Engine {
        /// The engine.
        engine: Live,
        /// Where builds were looked for.
        root: PathBuf,
    },
    /// Builds of the engine, none of the release asked for.
    #[error(
        "{engine} {release} is not provisioned under {} (provisioned: {}) — run scripts/provision-engines {engine}:{release}",
        root.display(),
        provisioned.join(", ")
    )]
    Release {
        /// The engine.
        engine: Live,
        /// The release asked for.
        release: String,
        /// Where builds were looked for.
        root: PathBuf,
        /// The releases that are there.
        provisioned: Vec<String>,
    },
}

/// The provisioned builds of `engine` under `root` (`<engine>-<release>` directories with a `run` wrapper),
/// oldest release first.
pub fn builds(engine: Live, root: &Path) -> Vec<Build> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(root) else { return out };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(release) = name.strip_prefix(&format!("{}-", engine.name())) else { continue };
        // Release directories only (`haproxy-3.0.11`), not the suite links (`haproxy-trixie`).
        if !release.starts_with(|c: char| c.is_ascii_digit()) || entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        if entry.path().join("run").is_file() {
            out.push(Build { engine, release: release.to_string(), dir: entry.path() });
        }
    }
    out.sort_by_key(|b| release_order(&b.release));
    out
}

/// `3.0.11` → `[3, 0, 11]`, for ordering releases as numbers.
fn release_order(release: &str) -> Vec<u64> {
    release.split('.').map(|p| p.parse().unwrap_or(u64::MAX)).collect()
}

/// Whether the provisioned `release` (`3.2.26`) is the one a command line or `engines/versions` names:
/// `3.2.26` exactly, or the series `3.2.x` or `3.2`.
pub fn release_matches(asked: &str, release: &str) -> bool {
    let series = asked.strip_suffix(".x").or_else(|| (asked.matches('.').count() == 1).then_some(asked));
    match series {
        Some(series) => release.strip_prefix(series).is_some_and(|p| p.starts_with('.')),
        None => asked == release,
    }
}

/// The builds of `engine` under `root` a command line asks for: every one, or those of `release`.
///
/// # Errors
///
/// [`NotProvisioned`] when there is none.
pub fn select(engine: Live, release: Option<&str>, root: &Path) -> Result<Vec<Build>, NotProvisioned> {
    let all = builds(engine, root);
    if all.is_empty() {
        return Err(NotProvisioned::Engine { engine, root: root.to_path_buf() });
    }
    let Some(asked) = release else { return Ok(all) };
    let provisioned: Vec<String> = all.iter().map(|b| b.release.clone()).collect();
    let chosen: Vec<Build> = all.into_iter().filter(|b| release_matches(asked, &b.release)).collect();
    if chosen.is_empty() {
        return Err(NotProvisioned::Release {
            engine,
            release: asked.to_string(),
            root: root.to_path_buf(),
            provisioned,
        });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_match_as_engines_versions_writes_them() {
        assert!(release_matches("3.2.x", "3.2.26"));
        assert!(release_matches("3.2", "3.2.26"));
        assert!(release_matches("2.6.12", "2.6.12"));
        assert!(!release_matches("2.6", "2.6"));
        assert!(!release_matches("3.2.x", "3.20.1"));
        assert!(!release_matches("2.6.1", "2.6.12"));
    }

    #[test]
    fn builds_are_release_directories_with_a_wrapper_ordered_as_numbers() {
        let root = tempfile::tempdir().unwrap();
        for name in ["haproxy-2.10.1", "haproxy-2.2.9", "haproxy-nowrapper", "caddy-2.6.2"] {
            std::fs::create_dir(root.path().join(name)).unwrap();
            if name != "haproxy-nowrapper" {
                std::fs::write(root.path().join(name).join("run"), "#!/bin/sh\n").unwrap();
            }
        }
        std::os::unix::fs::symlink(root.path().join("haproxy-2.2.9"), root.path().join("haproxy-bullseye")).unwrap();
        let releases = |b: Vec<Build>| b.into_iter().map(|b| b.release).collect::<Vec<_>>();
        assert_eq!(releases(builds(Live::HaProxy, root.path())), ["2.2.9", "2.10.1"]);
        assert_eq!(releases(select(Live::HaProxy, Some("2.2"), root.path()).unwrap()), ["2.2.9"]);
        let err = select(Live::HaProxy, Some("3.0.11"), root.path()).unwrap_err().to_string();
        assert!(
            err.contains("provisioned: 2.2.9, 2.10.1") && err.contains("scripts/provision-engines haproxy:3.0.11"),
            "{err}"
        );
        let empty = tempfile::tempdir().unwrap();
        let err = select(Live::Caddy, None, empty.path()).unwrap_err().to_string();
        assert!(err.starts_with("no caddy is provisioned") && err.contains("scripts/provision-engines"), "{err}");
    }
}
