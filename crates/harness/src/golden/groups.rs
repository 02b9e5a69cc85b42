//! Grouping a record's runs by the builds that agree: builds (nginx version and C library) that agree
//! exactly share one group in the snapshots and the fixtures; a split is explained by the case's
//! `versions_differ` (versions disagree) or `libcs_differ` (one version's builds against glibc and musl
//! disagree).

use super::record_file::{Record, Run};
use nginx_ketama::version::{Libc, NginxVersion};

/// Runs of one record that agree exactly (same peers, same results), in build order.
#[derive(Debug, Clone)]
pub struct VersionGroup<'a> {
    /// The runs.
    pub runs: Vec<&'a Run>,
}

impl VersionGroup<'_> {
    /// The nginx versions (a version appears once per C library it was recorded with).
    pub fn versions(&self) -> Vec<NginxVersion> {
        self.runs.iter().map(|r| r.nginx).collect()
    }

    /// The builds' labels joined by `sep` (`1.22.1, 1.26.3, 1.26.3-musl`).
    pub fn versions_joined(&self, sep: &str) -> String {
        join(&self.runs, sep)
    }

    /// The C libraries of the group's runs, each once, glibc first: the tie rules under which every result
    /// of the group holds (together with the group's versions' rules).
    pub fn libcs(&self) -> Vec<Libc> {
        let mut out: Vec<Libc> = self.runs.iter().map(|r| r.c_library()).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Labels of runs joined by `sep`.
pub(crate) fn join(runs: &[&Run], sep: &str) -> String {
    runs.iter().map(|r| r.label()).collect::<Vec<_>>().join(sep)
}

/// Partitions a record's runs into groups of builds that agree.
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

/// How a record's groups split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Split {
    /// Builds against the same C library disagree between nginx versions.
    pub by_version: bool,
    /// One nginx version's builds against different C libraries disagree.
    pub by_libc: bool,
}

impl Split {
    /// Whether the record has more than one group.
    pub fn any(self) -> bool {
        self.by_version || self.by_libc
    }
}

/// Why `groups` (of one record) are more than one.
pub fn split_of(groups: &[VersionGroup<'_>]) -> Split {
    let group_of = |run: &Run| groups.iter().position(|g| g.runs.iter().any(|r| std::ptr::eq(*r, run)));
    let runs: Vec<&Run> = groups.iter().flat_map(|g| g.runs.iter().copied()).collect();
    let mut split = Split::default();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if group_of(a) == group_of(b) {
                continue;
            }
            split.by_version |= a.c_library() == b.c_library() && a.nginx != b.nginx;
            split.by_libc |= a.nginx == b.nginx && a.c_library() != b.c_library();
        }
    }
    split
}

/// The name of `group` in the fixtures: the case, plus `@` and its builds' labels when the record splits
/// (`plain-one-primary-backups@1.30.6`, `collision-order-ab@1.26.3-musl`).
pub fn group_name(record: &Record, group: &VersionGroup<'_>, split: Split) -> String {
    if split.any() { format!("{}@{}", record.case, group.versions_joined("+")) } else { record.case.clone() }
}

/// The group holding `record`'s first run recorded with glibc, and its fixture name (`None` without one).
pub fn glibc_group(record: &Record) -> Option<(String, &Run)> {
    let groups = version_groups(record);
    let split = split_of(&groups);
    let group = groups.iter().find(|g| g.libcs().contains(&Libc::Glibc))?;
    let run = *group.runs.iter().find(|r| r.c_library() == Libc::Glibc)?;
    Some((group_name(record, group, split), run))
}

/// A group's description: the case's, plus the explanation of each way the builds disagree.
pub(crate) fn group_description(record: &Record, group: &VersionGroup<'_>, split: Split) -> String {
    if !split.any() {
        return record.description.clone();
    }
    let others: Vec<&Run> = record.runs.iter().filter(|r| !group.runs.iter().any(|g| std::ptr::eq(*g, *r))).collect();
    let mut out = format!(
        "{} Recorded on nginx {}; nginx {} differs:",
        record.description,
        group.versions_joined(", "),
        join(&others, ", ")
    );
    for (applies, why, what) in
        [(split.by_version, &record.versions_differ, "versions"), (split.by_libc, &record.libcs_differ, "C libraries")]
    {
        if !applies {
            continue;
        }
        match why {
            Some(why) => out.push_str(&format!(" {why}")),
            None => out
                .push_str(&format!(" UNEXPLAINED: the {what} disagree on this case and the catalog gives no reason.")),
        }
    }
    out
}
