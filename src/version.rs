//! nginx versions, for the few places where routing changed between releases this crate supports.

use std::fmt;
use std::str::FromStr;

/// An nginx release, `major.minor.patch`.
///
/// The simulator models nginx 1.22 and later. Between those releases one routing rule changed: since
/// 1.27.3 plain `hash` goes straight to round-robin when the current list has fewer than two peers (before,
/// only when the upstream had a single peer and no backups), which matters with one primary plus backups.
///
/// # Example
///
/// ```
/// use nginx_ketama::NginxVersion;
///
/// let v: NginxVersion = "1.26.3".parse()?;
/// assert!(v < NginxVersion::new(1, 27, 3));
/// assert_eq!(v.to_string(), "1.26.3");
/// # Ok::<(), nginx_ketama::version::ParseVersionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NginxVersion {
    /// Major number (1).
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Patch number.
    pub patch: u32,
}

impl NginxVersion {
    /// The newest release the project verifies against; the default everywhere.
    pub const LATEST: NginxVersion = NginxVersion::new(1, 30, 6);

    /// A version from its three numbers.
    pub const fn new(major: u32, minor: u32, patch: u32) -> NginxVersion {
        NginxVersion { major, minor, patch }
    }

    /// Plain `hash` bypasses to round-robin on `number < 2` (1.27.3+) rather than on `single`.
    pub(crate) fn plain_hash_guards_on_number(self) -> bool {
        self.rules().plain_hash_guards_on_number
    }

    /// What this release accepts and how it routes, from [`RULES`].
    pub fn rules(self) -> Rules {
        let mut r = Rules::BASE;
        for (since, change) in RULES {
            if self >= *since {
                change(&mut r);
            }
        }
        r.directive_table = PROBED.iter().rposition(|p| *p <= self).unwrap_or(0);
        r
    }
}

/// The version-dependent rules, one flag per difference. Obtain them with [`NginxVersion::rules`].
///
/// # Example
///
/// ```
/// use nginx_ketama::NginxVersion;
///
/// assert!(!NginxVersion::new(1, 26, 3).rules().server_resolve);
/// assert!(NginxVersion::new(1, 30, 6).rules().server_resolve);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rules {
    /// Plain `hash` goes straight to round-robin when the current list has fewer than two peers (before:
    /// only when the upstream has a single peer and no backups).
    pub plain_hash_guards_on_number: bool,
    /// `server … resolve` and `service=` (run-time resolution), and `resolver`/`resolver_timeout` inside
    /// `upstream`.
    pub server_resolve: bool,
    /// `server … resolve` with an IP literal needs no `zone` (the line stays a static peer).
    pub ip_literal_resolve_is_static: bool,
    /// `sticky` in an http `upstream`, and the `route=` and `drain` parameters of its `server` lines.
    pub sticky: bool,
    /// `keepalive 0` (keepalive on by default; 0 turns it off) and `keepalive N local`.
    pub keepalive_zero_and_local: bool,
    /// Which column of the probed directive tables applies (the newest probed release not after this one).
    pub(crate) directive_table: usize,
}

impl Rules {
    const BASE: Rules = Rules {
        plain_hash_guards_on_number: false,
        server_resolve: false,
        ip_literal_resolve_is_static: false,
        sticky: false,
        keepalive_zero_and_local: false,
        directive_table: 0,
    };
}

/// What one release changed in the [`Rules`].
pub type RuleChange = fn(&mut Rules);

/// Each rule change and the release that made it, oldest first (from nginx's CHANGES and checked against
/// the provisioned binaries by the acceptance suite). Add a row to model a new difference.
pub const RULES: &[(NginxVersion, RuleChange)] = &[
    (NginxVersion::new(1, 27, 3), |r| {
        r.plain_hash_guards_on_number = true;
        r.server_resolve = true;
        r.ip_literal_resolve_is_static = true;
    }),
    (NginxVersion::new(1, 29, 6), |r| r.sticky = true),
    (NginxVersion::new(1, 29, 7), |r| r.keepalive_zero_and_local = true),
];

/// A routing rule that changed between releases, under the name the golden vectors give it: each vector
/// group states, in its `rules`, the value every release it was recorded on follows (vectors/README.md).
#[derive(Debug, Clone, Copy)]
pub struct RoutingRule {
    /// The rule's name in the vectors (camelCase).
    pub name: &'static str,
    /// Its value under some [`Rules`] (a camelCase word).
    pub value: fn(&Rules) -> &'static str,
}

/// Every rule of [`RULES`] that changes routing (rather than what the config reader accepts), with its
/// vector name. Add an entry with each new routing difference.
pub const ROUTING_RULES: &[RoutingRule] = &[RoutingRule {
    name: "plainHashBypass",
    value: |r| if r.plain_hash_guards_on_number { "listUnderTwoPeers" } else { "singlePeerNoBackup" },
}];

impl Rules {
    /// The value of every [`ROUTING_RULES`] entry under these rules, as `(name, value)`.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::NginxVersion;
    ///
    /// let old = NginxVersion::new(1, 26, 3).rules().routing();
    /// assert_eq!(old, [("plainHashBypass", "singlePeerNoBackup")]);
    /// let new = NginxVersion::new(1, 30, 6).rules().routing();
    /// assert_eq!(new, [("plainHashBypass", "listUnderTwoPeers")]);
    /// ```
    pub fn routing(&self) -> Vec<(&'static str, &'static str)> {
        ROUTING_RULES.iter().map(|r| (r.name, (r.value)(self))).collect()
    }
}

/// The releases whose directive and variable sets were probed from the binaries (`scripts/probe-directives`,
/// `scripts/probe-variables`); a release in between uses the newest probed one before it, an older one the
/// oldest. To add a release: provision it, re-run both probes and table generators (one column per release,
/// oldest first; the variable table holds at most 8), list it here, and add any rule change to [`RULES`].
pub const PROBED: [NginxVersion; 3] =
    [NginxVersion::new(1, 22, 1), NginxVersion::new(1, 26, 3), NginxVersion::new(1, 30, 6)];

/// The releases whose routing this crate models: 1.22.0 through every 1.30 release. Outside them routing
/// rules differ or are not yet known (docs/nginx-algorithm.md §8); [`NginxVersion::modelled`] refuses them.
pub const MODELLED: std::ops::RangeInclusive<NginxVersion> =
    NginxVersion::new(1, 22, 0)..=NginxVersion::new(1, 30, u32::MAX);

/// A release outside [`MODELLED`].
///
/// # Example
///
/// ```
/// use nginx_ketama::NginxVersion;
///
/// let err = NginxVersion::new(1, 18, 0).modelled().unwrap_err();
/// assert_eq!(err.to_string(), "nginx 1.18.0 is not modelled: this build models nginx 1.22.0 to 1.30.x");
/// assert!(NginxVersion::new(1, 26, 3).modelled().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "nginx {version} is not modelled: this build models nginx {} to {}.{}.x",
    MODELLED.start(),
    MODELLED.end().major,
    MODELLED.end().minor
)]
pub struct UnmodelledVersion {
    /// The release asked for.
    pub version: NginxVersion,
}

impl NginxVersion {
    /// `self` if its routing is modelled ([`MODELLED`]).
    ///
    /// # Errors
    ///
    /// [`UnmodelledVersion`] naming the modelled range.
    pub fn modelled(self) -> Result<NginxVersion, UnmodelledVersion> {
        if MODELLED.contains(&self) { Ok(self) } else { Err(UnmodelledVersion { version: self }) }
    }
}

impl Default for NginxVersion {
    fn default() -> Self {
        NginxVersion::LATEST
    }
}

impl fmt::Display for NginxVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A version string that is not `N.N.N`.
///
/// # Example
///
/// ```
/// let err = "1.26".parse::<nginx_ketama::NginxVersion>().unwrap_err();
/// assert!(err.to_string().starts_with("invalid nginx version \"1.26\""));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid nginx version \"{0}\" (expected MAJOR.MINOR.PATCH, e.g. 1.26.3)")]
pub struct ParseVersionError(String);

impl FromStr for NginxVersion {
    type Err = ParseVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseVersionError(s.to_string());
        let mut it = s.trim().split('.').map(|p| p.parse::<u32>().map_err(|_| err()));
        let v =
            NginxVersion::new(it.next().ok_or_else(err)??, it.next().ok_or_else(err)??, it.next().ok_or_else(err)??);
        if it.next().is_some() {
            return Err(err());
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_order() {
        assert_eq!("1.22.1".parse::<NginxVersion>().unwrap(), NginxVersion::new(1, 22, 1));
        assert!("1.22".parse::<NginxVersion>().is_err());
        assert!("1.22.1.4".parse::<NginxVersion>().is_err());
        assert!("x.1.1".parse::<NginxVersion>().is_err());
        assert!(!NginxVersion::new(1, 27, 2).plain_hash_guards_on_number());
        assert!(NginxVersion::new(1, 27, 3).plain_hash_guards_on_number());
    }
}
