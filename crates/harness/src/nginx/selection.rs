//! Which nginx builds a run uses. The one place `verify`, `verify --config`, `record-vectors`, the
//! key-vector recorder and every live test choose them: the provisioned builds (by version and C library, as
//! local processes or through their images) or builds named by the user (binaries, local images), each read
//! from the build itself.

use crate::nginx::build::Build;
use crate::nginx::docker::{self, Image, ImageOrigin};
use crate::nginx::install::Installation;
use nginx_ketama::Libc;
use nginx_ketama::version::NginxVersion;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where provisioned builds run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Through their images when a Docker engine answers and every image exists, else as local processes.
    Auto,
    /// As local processes (each in a network namespace of its own as root).
    Local,
    /// Through their images (`scripts/build-images`), in containers.
    Docker,
}

/// The C libraries asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Libcs {
    /// Of each version, every provisioned build (glibc for a version with none provisioned); a named build
    /// whatever its C library.
    Provisioned,
    /// Of each version, its builds against these only; a named build against another is refused.
    Only(Vec<Libc>),
}

/// Where the builds come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The trees `scripts/provision-nginx` and `scripts/provision-nginx-musl` unpacked under `root`.
    Provisioned {
        /// The directory of provisioned builds.
        root: PathBuf,
        /// These versions (every provisioned one when empty), each of which must be provisioned.
        versions: Vec<NginxVersion>,
        /// Where they run.
        place: Place,
    },
    /// Builds the user names: binaries run as local processes, local images (never pulled) in containers.
    Named {
        /// `--nginx PATH`.
        binaries: Vec<PathBuf>,
        /// `--image REF`.
        images: Vec<String>,
    },
}

/// What to do with a named build whose version this library does not model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmodelled {
    /// Refuse it: a proof needs the model of the build's version.
    Refuse,
    /// Use it: recording on a new nginx is how its differences are found.
    Allow,
}

/// A choice of nginx builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Where the builds come from.
    pub source: Source,
    /// Their C libraries.
    pub libcs: Libcs,
    /// Named builds of versions outside the modelled range.
    pub unmodelled: Unmodelled,
}

/// Why a [`Selection`] gives no builds.
#[derive(Debug)]
pub enum SelectionError {
    /// A named build of a version this library does not model (with [`Unmodelled::Refuse`]).
    Unmodelled {
        /// The build ([`Build::summary`]).
        build: String,
        /// Why its version is not modelled.
        why: String,
    },
    /// A named build against a C library not in [`Libcs::Only`].
    OtherLibc {
        /// The build ([`Build::summary`]).
        build: String,
        /// The C libraries asked for.
        wanted: Vec<Libc>,
    },
    /// An image where [`Selection::installations`] takes local processes only.
    NotLocal {
        /// The image reference.
        image: String,
    },
    /// No build to run: nothing provisioned, a version not provisioned, a binary that does not run or is
    /// not nginx, an image not present, no Docker engine.
    Unavailable(anyhow::Error),
}

impl SelectionError {
    /// Whether what was asked for is impossible (a usage error), rather than unavailable here.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, SelectionError::Unavailable(_))
    }
}

impl fmt::Display for SelectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectionError::Unmodelled { build, why } => write!(f, "{build}: {why}"),
            SelectionError::OtherLibc { build, wanted } => {
                let wanted: Vec<String> = wanted.iter().map(ToString::to_string).collect();
                write!(f, "{build}: this run takes {} builds only", wanted.join(" and "))
            }
            SelectionError::NotLocal { image } => write!(f, "{image}: this run takes local processes only"),
            SelectionError::Unavailable(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for SelectionError {}

impl From<anyhow::Error> for SelectionError {
    fn from(e: anyhow::Error) -> SelectionError {
        SelectionError::Unavailable(e)
    }
}

impl Selection {
    /// Every build provisioned under `root`, as local processes.
    pub fn provisioned(root: PathBuf) -> Selection {
        Selection {
            source: Source::Provisioned { root, versions: Vec::new(), place: Place::Local },
            libcs: Libcs::Provisioned,
            unmodelled: Unmodelled::Refuse,
        }
    }

    /// The builds of `source` to record the golden vectors on: every C library, and versions outside the
    /// modelled range too (recording on a new nginx is how its differences are found).
    pub fn to_record(source: Source) -> Selection {
        Selection { source, libcs: Libcs::Provisioned, unmodelled: Unmodelled::Allow }
    }

    /// Every build provisioned where `scripts/provision-nginx` puts them ([`Installation::default_root`]).
    pub fn default_provisioned() -> Selection {
        Selection::provisioned(Installation::default_root())
    }

    /// The builds, oldest first for provisioned ones, in the order named for named ones.
    ///
    /// # Errors
    ///
    /// [`SelectionError::Unmodelled`] for a named build of an unmodelled version (with
    /// [`Unmodelled::Refuse`]), [`SelectionError::OtherLibc`] for one against a C library not in
    /// [`Libcs::Only`]; [`SelectionError::Unavailable`] when nothing is provisioned, a version asked for is not, a binary
    /// does not run or is not nginx, an image is not present locally, or Docker is asked for and absent.
    pub fn builds(&self) -> Result<Vec<Build>, SelectionError> {
        let builds = match &self.source {
            Source::Named { binaries, images } => {
                let mut out = Vec::new();
                for path in binaries {
                    out.push(Build::Local(Installation::named(path)?));
                }
                for reference in images {
                    out.push(Build::Docker(Image::probe(reference, ImageOrigin::Named)?));
                }
                out
            }
            Source::Provisioned { root, versions, place } => self.provisioned_builds(root, versions, *place)?,
        };
        for build in &builds {
            if self.unmodelled == Unmodelled::Refuse
                && let Err(e) = build.version().modelled()
            {
                return Err(SelectionError::Unmodelled { build: build.summary(), why: e.to_string() });
            }
            if let Libcs::Only(libcs) = &self.libcs
                && !libcs.contains(&build.libc())
            {
                return Err(SelectionError::OtherLibc { build: build.summary(), wanted: libcs.clone() });
            }
        }
        Ok(builds)
    }

    /// The builds, each of which must run as a local process.
    ///
    /// # Errors
    ///
    /// As [`Selection::builds`]; and [`SelectionError::NotLocal`] for an image.
    pub fn installations(&self) -> Result<Vec<Installation>, SelectionError> {
        self.builds()?
            .into_iter()
            .map(|b| match b {
                Build::Local(install) => Ok(install),
                Build::Docker(image) => Err(SelectionError::NotLocal { image: image.reference }),
            })
            .collect()
    }

    /// The provisioned builds of `versions` (every provisioned one when empty), against the C libraries
    /// asked for, placed as asked.
    fn provisioned_builds(
        &self,
        root: &Path,
        versions: &[NginxVersion],
        place: Place,
    ) -> Result<Vec<Build>, SelectionError> {
        let installs = Installation::discover(root);
        let wanted = self.wanted(versions, &installs);
        if wanted.is_empty() && place != Place::Docker {
            return Err(anyhow::anyhow!("no nginx under {} — run scripts/provision-nginx first", root.display()).into());
        }
        let images = || {
            wanted
                .iter()
                .map(|&(v, libc)| docker::image_for(v, libc).map(Build::Docker))
                .collect::<anyhow::Result<Vec<_>>>()
        };
        match place {
            Place::Docker => return Ok(images()?),
            Place::Auto if docker::available() => {
                if let Ok(builds) = images() {
                    return Ok(builds);
                }
            }
            Place::Auto | Place::Local => {}
        }
        wanted
            .iter()
            .map(|&(v, libc)| {
                let found = installs.iter().find(|i| i.version == v && i.libc == libc).cloned().map(Build::Local);
                found.ok_or_else(|| {
                    let script = match libc {
                        Libc::Glibc => "scripts/provision-nginx",
                        Libc::Musl => "scripts/provision-nginx-musl",
                    };
                    SelectionError::Unavailable(anyhow::anyhow!(
                        "nginx {v} built with {libc} is not provisioned under {} ({script} {v})",
                        root.display()
                    ))
                })
            })
            .collect()
    }

    /// The builds (version, C library) asked for: of the given versions (default: every provisioned one),
    /// the builds against the C libraries asked for (by default every provisioned build; glibc when a
    /// version has none provisioned).
    fn wanted(&self, versions: &[NginxVersion], installs: &[Installation]) -> Vec<(NginxVersion, Libc)> {
        let mut versions: Vec<NginxVersion> =
            if versions.is_empty() { installs.iter().map(|i| i.version).collect() } else { versions.to_vec() };
        versions.dedup();
        let mut out = Vec::new();
        for v in versions {
            let provisioned: Vec<Libc> = installs.iter().filter(|i| i.version == v).map(|i| i.libc).collect();
            let libcs: Vec<Libc> = match &self.libcs {
                Libcs::Only(libcs) => libcs.clone(),
                Libcs::Provisioned if provisioned.is_empty() => vec![Libc::Glibc],
                Libcs::Provisioned => provisioned,
            };
            out.extend(libcs.into_iter().map(|l| (v, l)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(libcs: Libcs) -> Selection {
        Selection { libcs, ..Selection::provisioned(PathBuf::from("/nonexistent")) }
    }

    #[test]
    fn nothing_provisioned_is_unavailable_and_says_how_to_provision() {
        let e = selection(Libcs::Provisioned).builds().unwrap_err();
        assert!(matches!(e, SelectionError::Unavailable(_)), "{e:?}");
        assert!(e.to_string().contains("run scripts/provision-nginx first"), "{e}");
    }

    #[test]
    fn a_version_asked_for_but_not_provisioned_names_the_script() {
        let v: NginxVersion = "1.26.3".parse().unwrap();
        let s = Selection {
            source: Source::Provisioned { root: "/nonexistent".into(), versions: vec![v], place: Place::Local },
            libcs: Libcs::Only(vec![Libc::Musl]),
            unmodelled: Unmodelled::Refuse,
        };
        let e = s.builds().unwrap_err();
        assert!(e.to_string().contains("nginx 1.26.3 built with musl is not provisioned"), "{e}");
        assert!(e.to_string().contains("scripts/provision-nginx-musl 1.26.3"), "{e}");
    }

    #[test]
    fn the_c_libraries_of_each_version_follow_what_was_asked() {
        let v: NginxVersion = "1.26.3".parse().unwrap();
        // No install: a version with nothing provisioned is glibc by default, and exactly what --libc says.
        assert_eq!(selection(Libcs::Provisioned).wanted(&[v], &[]), vec![(v, Libc::Glibc)]);
        assert_eq!(
            selection(Libcs::Only(vec![Libc::Musl, Libc::Glibc])).wanted(&[v, v], &[]),
            vec![(v, Libc::Musl), (v, Libc::Glibc)]
        );
    }
}
