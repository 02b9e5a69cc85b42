//! Grouping a record's runs by nginx version: versions that agree exactly share one group in the snapshots
//! and the fixtures; a split is explained by the case's `versions_differ`.

use super::records::{Record, Run};
use nginx_ketama::version::NginxVersion;

/// Runs of one record that agree exactly (same peers, same results), in version order.
#[derive(Debug, Clone)]
pub struct VersionGroup<'a> {
    /// The runs.
    pub runs: Vec<&'a Run>,
}

impl VersionGroup<'_> {
    /// The nginx versions.
    pub fn versions(&self) -> Vec<NginxVersion> {
        self.runs.iter().map(|r| r.nginx).collect()
    }

    /// The nginx versions joined by `sep` (`1.22.1, 1.26.3`).
    pub fn versions_joined(&self, sep: &str) -> String {
        join(&self.versions(), sep)
    }
}

/// Versions joined by `sep`.
pub(crate) fn join(versions: &[NginxVersion], sep: &str) -> String {
    versions.iter().map(ToString::to_string).collect::<Vec<_>>().join(sep)
}

/// Partitions a record's runs into groups of versions that agree.
pub fn version_groups(record: &Record) -> Vec<VersionGroup<'_>> {
    let mut groups: Vec<VersionGroup<'_>> = Vec::new();
    for run in &record.runs {
        match groups.iter_mut().find(|g| g.runs[0].peers == run.peers && g.runs[0].results == run.results) {
            Some(g) => g.runs.push(run),
            None => groups.push(VersionGroup { runs: vec![run] }),
        }
    }
    groups
}

/// A group's description: the case's, plus the explanation when versions disagree.
pub(crate) fn group_description(record: &Record, group: &VersionGroup<'_>, split: bool) -> String {
    if !split {
        return record.description.clone();
    }
    let mine = group.versions();
    let others: Vec<NginxVersion> = record.runs.iter().map(|r| r.nginx).filter(|v| !mine.contains(v)).collect();
    match &record.versions_differ {
        Some(why) => format!(
            "{} Recorded on nginx {}; nginx {} differs: {why}",
            record.description,
            join(&mine, ", "),
            join(&others, ", ")
        ),
        None => format!(
            "{} UNEXPLAINED: nginx {} and {} disagree on this case and the catalog gives no reason.",
            record.description,
            join(&mine, ", "),
            join(&others, ", ")
        ),
    }
}
