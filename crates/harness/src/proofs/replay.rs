//! The command that runs a check again: one builder for every driver's `replay:` line, so that a finding
//! of `verify`, of `verify --config` and of a shim names its build and options the same way.

use crate::nginx::build::Build;
use crate::nginx::docker::{Image, ImageOrigin};
use crate::nginx::install::{Installation, Origin};
use nginx_ketama::Libc;
use std::fmt;

/// Whether a replay of a provisioned build names where it runs (`--backend local|docker`): `verify` runs
/// provisioned builds either way; `verify --config` only as local processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `--backend KIND --versions V`.
    Named,
    /// `--versions V`.
    Implied,
}

/// An `nginx-ketama verify` command line, built flag by flag; every value is quoted for the shell when it
/// needs to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay(String);

impl Replay {
    /// `nginx-ketama verify`.
    pub fn verify() -> Replay {
        Replay("nginx-ketama verify".to_string())
    }

    /// Adds `FLAG VALUE`.
    pub fn option(mut self, flag: &str, value: impl fmt::Display) -> Replay {
        self.0.push(' ');
        self.0.push_str(flag);
        self.0.push(' ');
        self.0.push_str(&shell_quote(&value.to_string()));
        self
    }

    /// Adds `FLAG` when `on`.
    pub fn switch(mut self, flag: &str, on: bool) -> Replay {
        if on {
            self.0.push(' ');
            self.0.push_str(flag);
        }
        self
    }

    /// Names `build`: a named binary by `--nginx PATH`, a named image by `--image REF`, a provisioned build
    /// by `--versions V` (and `--libc` for a build against another C library than glibc), after
    /// `--backend KIND` when `backend` says so.
    pub fn build(self, build: &Build, backend: Backend) -> Replay {
        match build {
            Build::Local(Installation { origin: Origin::Named { path, .. }, .. }) => {
                self.option("--nginx", path.display())
            }
            Build::Docker(Image { origin: ImageOrigin::Named, reference, .. }) => self.option("--image", reference),
            _ => {
                let replay = match backend {
                    Backend::Named => self.option("--backend", build.kind()),
                    Backend::Implied => self,
                };
                let replay = replay.option("--versions", build.version());
                match build.libc() {
                    Libc::Glibc => replay,
                    libc => replay.option("--libc", libc),
                }
            }
        }
    }
}

impl fmt::Display for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Replay> for String {
    fn from(r: Replay) -> String {
        r.0
    }
}

/// `text` as one shell word: as it is when it needs no quoting, else in single quotes.
pub fn shell_quote(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-:+@=,".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_for_the_shell_only_when_they_need_it() {
        let r = Replay::verify()
            .option("--config", "my conf/it's.conf")
            .option("--seed", 7)
            .switch("--no-ring-proof", true);
        assert_eq!(r.to_string(), r"nginx-ketama verify --config 'my conf/it'\''s.conf' --seed 7 --no-ring-proof");
        assert_eq!(Replay::verify().switch("--x", false).to_string(), "nginx-ketama verify");
        assert_eq!(shell_quote(""), "''");
    }
}
