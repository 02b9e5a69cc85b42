//! Golden vectors (imports [`crate::site`], [`crate::nginx`], [`crate::run`] and [`crate::catalog`]): recording the [`crate::catalog`] from real nginx, the records that are the single source
//! of truth (`vectors/records/<case>.json`), and everything derived from them.
//!
//! One job per module:
//!
//! * [`vocab`]: the serde spellings of the library's `Method` and `NginxVersion` (the flags are
//!   [`crate::catalog::flag`]'s, the one observation type [`crate::run::observation`]'s);
//! * [`record_file`]: the on-disk record format, what a case alone determines ([`skeleton`]) and merging a new
//!   recording into an old one;
//! * [`capture`]: running a case on one nginx (twice, to prove it stateless or deterministic);
//! * [`groups`]: runs of a record grouped by the nginx versions that agree;
//! * [`snapshots`]: the readable insta tables (`snapshots/catalog__<case>.snap`);
//! * [`fixtures`]: the language-neutral fixtures (`vectors/v1/*.json`);
//! * [`intermediate`]: values a port computes on the way (chains, the deduplicated ring, lookups, rehash
//!   steps) for a few recorded groups, derived by the reference ring and anchored to nginx's answers;
//! * [`replay`](mod@replay): the offline replay against a `Model` (the library's `Worker`, or a deliberately broken one
//!   in tests);
//! * [`keys`]: the key vectors (`vectors/keys/v1/keys.json`): key bytes per request and release;
//! * [`update`]: `nginx-ketama record-vectors`, the one command that writes records and fixtures.
//!
//! Only `scripts/record-vectors` writes records; the fixtures are regenerated from records by the same
//! command (`--offline` skips nginx). No expected result is derived from this library: the intermediate values are
//! debugging aids, each lookup checked against nginx's recorded first attempt.

pub mod capture;
pub mod fixtures;
pub mod groups;
pub mod intermediate;
pub mod keys;
pub mod record_file;
pub mod replay;
pub mod snapshots;
pub mod update;
pub mod vocab;

pub use capture::{
    CatalogLock, failing_peers_of, lock_catalog, peers_of, record_case, record_run, utc_time, utc_today,
};
pub use fixtures::{HEADER, generate_vectors};
pub use groups::{VersionGroup, version_groups};
pub use record_file::{
    PeerRecord, Record, RecordKey, Run, load_records, merge, record_json, skeleton, to_hex, upstream_of_peers,
};
pub use replay::{LibraryReplayer, PeerAnswers, ReplayFailure, Replayer, replay};
pub use snapshots::{SNAPSHOT_HEADER, pending_snapshot, render_snapshot, snapshot_name};
pub use update::{RecordArgs, RecordStatus, record_vectors};
pub use vocab::method_name;

use std::path::{Path, PathBuf};

/// Where the records and everything derived from them live, under one root: this repository by default,
/// another directory with `record-vectors --root DIR` (a test records into a copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// This repository's `vectors/` and `snapshots/`.
    pub fn repo() -> Layout {
        Layout { root: crate::repo_root() }
    }

    /// `root/vectors/` and `root/snapshots/`.
    pub fn at(root: &Path) -> Layout {
        Layout { root: root.to_path_buf() }
    }

    /// The records: `vectors/records/`.
    pub fn records(&self) -> PathBuf {
        self.root.join("vectors/records")
    }

    /// The generated fixtures: `vectors/v1/`.
    pub fn vectors(&self) -> PathBuf {
        self.root.join("vectors/v1")
    }

    /// The derived intermediate values for port authors: `vectors/intermediate.json` (outside `v1/`, whose
    /// every file is a fixture of recorded tests).
    pub fn intermediate(&self) -> PathBuf {
        self.root.join("vectors/intermediate.json")
    }

    /// The readable snapshots: `snapshots/`.
    pub fn snapshots(&self) -> PathBuf {
        self.root.join("snapshots")
    }
}

/// Where the records live: `vectors/records/` in this repository.
pub fn records_dir() -> PathBuf {
    Layout::repo().records()
}

/// Where the generated fixtures live: `vectors/v1/`.
pub fn vectors_dir() -> PathBuf {
    Layout::repo().vectors()
}

/// Where the derived intermediate values for port authors live: `vectors/intermediate.json`.
pub fn intermediate_path() -> PathBuf {
    Layout::repo().intermediate()
}

/// Where the readable snapshots live: `snapshots/`.
pub fn snapshots_dir() -> PathBuf {
    Layout::repo().snapshots()
}
