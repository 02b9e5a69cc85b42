//! nginx versions, for the few places where routing changed between releases this crate supports, and
//! the C library nginx was built with ([`Libc`]), the one build property that changes routing.

use std::fmt;
use std::str::FromStr;

/// An nginx release, `major.minor.patch`.
///
/// The simulator models nginx 1.18.0 and later. Between those releases two routing rules changed
/// ([`ROUTING_RULES`]): since 1.19.6 the retry budget counts only servers not marked `down` (before, every
/// server), and since 1.27.3 plain `hash` goes straight to round-robin when the current list has fewer than
/// two peers (before, only when the upstream had a single peer and no backups), which matters with one
/// primary plus backups.
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
    /// The newest release the project verifies against (the last of [`PROBED`]); the default everywhere.
    pub const LATEST: NginxVersion = PROBED[PROBED.len() - 1];

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
    /// The retry budget (`pc->tries`) counts only the addresses not marked `down`, primary and backup
    /// (before: every address, `down` ones included, so a request could stop with "no live upstreams"
    /// while a live server was still untried).
    pub retry_budget_skips_down: bool,
    /// nginx has the `-e` command-line switch (the error log used while starting); without it the compiled
    /// path (Debian: `/var/log/nginx/error.log`) is opened first and the configuration's `error_log`
    /// takes over once read.
    pub error_log_switch: bool,
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
    /// Every explicit http upstream caches 32 keepalive connections unless `keepalive 0` (and `proxy_pass`
    /// speaks HTTP/1.1 by default), and `keepalive` no longer takes the balancer's slot: before, a
    /// balancing method after `keepalive` warned `load balancing method redefined` and dropped it
    /// (algorithm §2.3, §5.1).
    pub keepalive_by_default: bool,
    /// Which column of the probed directive tables applies (the newest probed release not after this one).
    pub(crate) directive_table: usize,
}

impl Rules {
    const BASE: Rules = Rules {
        retry_budget_skips_down: false,
        error_log_switch: false,
        plain_hash_guards_on_number: false,
        server_resolve: false,
        ip_literal_resolve_is_static: false,
        sticky: false,
        keepalive_zero_and_local: false,
        keepalive_by_default: false,
        directive_table: 0,
    };
}

/// What one release changed in the [`Rules`].
pub type RuleChange = fn(&mut Rules);

/// Each rule change and the release that made it, oldest first (from nginx's CHANGES and checked against
/// the provisioned binaries by the acceptance suite). Add a row to model a new difference.
pub const RULES: &[(NginxVersion, RuleChange)] = &[
    (NginxVersion::new(1, 19, 5), |r| r.error_log_switch = true),
    (NginxVersion::new(1, 19, 6), |r| r.retry_budget_skips_down = true),
    (NginxVersion::new(1, 27, 3), |r| {
        r.plain_hash_guards_on_number = true;
        r.server_resolve = true;
        r.ip_literal_resolve_is_static = true;
    }),
    (NginxVersion::new(1, 29, 6), |r| r.sticky = true),
    (NginxVersion::new(1, 29, 7), |r| {
        r.keepalive_zero_and_local = true;
        r.keepalive_by_default = true;
    }),
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
pub const ROUTING_RULES: &[RoutingRule] = &[
    RoutingRule { name: "retryBudget", value: |r| if r.retry_budget_skips_down { "skipsDown" } else { "countsDown" } },
    RoutingRule {
        name: "plainHashBypass",
        value: |r| if r.plain_hash_guards_on_number { "listUnderTwoPeers" } else { "singlePeerNoBackup" },
    },
];

impl Rules {
    /// The value of every [`ROUTING_RULES`] entry under these rules, as `(name, value)`.
    ///
    /// # Example
    ///
    /// ```
    /// use nginx_ketama::NginxVersion;
    ///
    /// let oldest = NginxVersion::new(1, 18, 0).rules().routing();
    /// assert_eq!(oldest, [("retryBudget", "countsDown"), ("plainHashBypass", "singlePeerNoBackup")]);
    /// let old = NginxVersion::new(1, 26, 3).rules().routing();
    /// assert_eq!(old, [("retryBudget", "skipsDown"), ("plainHashBypass", "singlePeerNoBackup")]);
    /// let new = NginxVersion::new(1, 30, 6).rules().routing();
    /// assert_eq!(new, [("retryBudget", "skipsDown"), ("plainHashBypass", "listUnderTwoPeers")]);
    /// ```
    pub fn routing(&self) -> Vec<(&'static str, &'static str)> {
        ROUTING_RULES.iter().map(|r| (r.name, (r.value)(self))).collect()
    }
}

/// How a release builds keys from requests: the rules of request parsing and variable evaluation that
/// changed between the releases this crate models (docs/nginx-algorithm.md §12). Obtain them with
/// [`NginxVersion::key_rules`]; every change is one row of [`KEY_RULES`].
///
/// # Example
///
/// ```
/// use nginx_ketama::NginxVersion;
///
/// assert!(!NginxVersion::new(1, 22, 1).key_rules().headers_joined);
/// assert!(NginxVersion::new(1, 26, 3).key_rules().headers_joined);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyRules {
    /// A space or a control character in the request target is a 400 (before: a space became part of the
    /// URI and only NUL was refused); control characters and spaces in `Host` are refused too.
    pub strict_request_line: bool,
    /// An absolute target with an empty path and a query (`http://h?a`) is accepted (its path is `/`).
    pub empty_path_query: bool,
    /// Repeated request headers are all kept: `$http_NAME` (and `$content_type`, `$http_user_agent`, …)
    /// joins them with `", "`, `$http_cookie` with `"; "` (before: the first header only, except
    /// `$http_x_forwarded_for` and `$http_cookie`, which were joined).
    pub headers_joined: bool,
    /// `Host` is checked against RFC 3986's host grammar (before: anything but `/`, NUL and, since 1.21.1,
    /// spaces and control characters).
    pub strict_host: bool,
    /// `$cookie_NAME` splits the `Cookie` header at `;` only (before: at `;` and `,`).
    pub cookie_semicolon_only: bool,
}

impl KeyRules {
    const BASE: KeyRules = KeyRules {
        strict_request_line: false,
        empty_path_query: false,
        headers_joined: false,
        strict_host: false,
        cookie_semicolon_only: false,
    };
}

/// What one release changed in the [`KeyRules`].
pub type KeyRuleChange = fn(&mut KeyRules);

/// One row of [`KEY_RULES`]: the release, what changed, where in nginx, and the change.
#[derive(Debug, Clone, Copy)]
pub struct KeyRuleRow {
    /// The first release with the change.
    pub since: NginxVersion,
    /// The [`KeyRules`] field it sets.
    pub rule: &'static str,
    /// nginx's source file and function where the change is.
    pub cited: &'static str,
    /// The change.
    pub change: KeyRuleChange,
}

/// Every change of [`KeyRules`], oldest first, each read in nginx's source at the release named
/// (docs/nginx-algorithm.md §12.6). The one place these facts live.
pub const KEY_RULES: &[KeyRuleRow] = &[
    KeyRuleRow {
        since: NginxVersion::new(1, 19, 6),
        rule: "empty_path_query",
        cited: "src/http/ngx_http_parse.c ngx_http_parse_request_line (empty_path_in_uri)",
        change: |r| r.empty_path_query = true,
    },
    KeyRuleRow {
        since: NginxVersion::new(1, 21, 1),
        rule: "strict_request_line",
        cited: "src/http/ngx_http_parse.c ngx_http_parse_request_line; src/http/ngx_http_request.c \
                ngx_http_validate_host",
        change: |r| r.strict_request_line = true,
    },
    KeyRuleRow {
        since: NginxVersion::new(1, 23, 0),
        rule: "headers_joined",
        cited: "src/http/ngx_http_variables.c ngx_http_variable_headers_internal, \
                ngx_http_variable_unknown_header; src/http/ngx_http_request.c ngx_http_process_header_line",
        change: |r| r.headers_joined = true,
    },
    KeyRuleRow {
        since: NginxVersion::new(1, 29, 4),
        rule: "strict_host",
        cited: "src/http/ngx_http_request.c ngx_http_validate_host",
        change: |r| r.strict_host = true,
    },
    KeyRuleRow {
        since: NginxVersion::new(1, 29, 6),
        rule: "cookie_semicolon_only",
        cited: "src/http/ngx_http_parse.c ngx_http_parse_cookie_lines",
        change: |r| r.cookie_semicolon_only = true,
    },
];

impl NginxVersion {
    /// How this release builds keys from requests, from [`KEY_RULES`].
    pub fn key_rules(self) -> KeyRules {
        let mut r = KeyRules::BASE;
        for row in KEY_RULES {
            if self >= row.since {
                (row.change)(&mut r);
            }
        }
        r
    }
}

/// The releases whose directive and variable sets were probed from the binaries (`scripts/probe-directives`,
/// `scripts/probe-variables`); a release in between uses the newest probed one before it, an older one the
/// oldest. To add a release: provision it, re-run both probes and table generators (one column per release,
/// oldest first; the variable table holds at most 8), list it here, and add any rule change to [`RULES`].
/// The modelled range ([`MODELLED`]) and the default release ([`NginxVersion::LATEST`]) follow from this list.
pub const PROBED: [NginxVersion; 4] = [
    NginxVersion::new(1, 18, 0),
    NginxVersion::new(1, 22, 1),
    NginxVersion::new(1, 26, 3),
    NginxVersion::new(1, 30, 6),
];

/// The releases whose routing this crate models, from the probed releases ([`PROBED`]): the first of them
/// through every patch release of the last one's series (today 1.18.0 through every 1.30 release). Outside
/// them routing rules differ or are not yet known (docs/nginx-algorithm.md §8); [`NginxVersion::modelled`]
/// refuses them.
pub const MODELLED: std::ops::RangeInclusive<NginxVersion> =
    PROBED[0]..=NginxVersion::new(NginxVersion::LATEST.major, NginxVersion::LATEST.minor, u32::MAX);

/// A release outside [`MODELLED`].
///
/// # Example
///
/// ```
/// use nginx_ketama::NginxVersion;
///
/// let err = NginxVersion::new(1, 16, 1).modelled().unwrap_err();
/// assert_eq!(err.to_string(), "nginx 1.16.1 is not modelled: this build models nginx 1.18.0 to 1.30.x");
/// assert!(NginxVersion::new(1, 18, 0).modelled().is_ok());
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

/// The C library nginx was built against: a build property, not a release one. It decides which of two
/// ring points with the same hash survives, because nginx sorts the ring with the C library's `qsort` and
/// keeps the first of equal hashes (algorithm §3.2).
///
/// # Example
///
/// ```
/// use nginx_ketama::{Libc, Method, Peer, Upstream};
///
/// let libc: Libc = "musl".parse()?;
/// let up = Upstream::builder(Method::Consistent)
///     .libc(libc)
///     .peers(["127.0.0.1:20195", "127.0.0.1:20412"].map(Peer::new))
///     .build()?;
/// assert_eq!((up.libc(), libc.to_string()), (Libc::Musl, "musl".to_string()));
/// assert_eq!(Libc::default(), Libc::Glibc);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Libc {
    /// GNU libc (Debian, Ubuntu, RHEL, nginx.org's packages, the official images except `-alpine`): `qsort`
    /// is a stable merge sort, so of equal hashes the point generated first survives.
    #[default]
    Glibc,
    /// musl (Alpine Linux, the `nginx:*-alpine` images): `qsort` is a smoothsort, not stable; the survivor
    /// is computed by a step-by-step model of musl's sort.
    Musl,
}

impl Libc {
    /// Every C library modelled, default first.
    pub const ALL: [Libc; 2] = [Libc::Glibc, Libc::Musl];

    /// The name used on the command line and in the golden vectors: `glibc` or `musl`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Libc::Glibc => "glibc",
            Libc::Musl => "musl",
        }
    }
}

impl fmt::Display for Libc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A C library name other than `glibc` or `musl`.
///
/// # Example
///
/// ```
/// let err = "uclibc".parse::<nginx_ketama::Libc>().unwrap_err();
/// assert_eq!(err.to_string(), "unknown C library \"uclibc\" (expected glibc or musl)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown C library \"{0}\" (expected glibc or musl)")]
pub struct ParseLibcError(String);

impl FromStr for Libc {
    type Err = ParseLibcError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Libc::ALL.into_iter().find(|l| l.as_str() == s).ok_or_else(|| ParseLibcError(s.to_string()))
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

    /// The retry budget counts `down` servers before 1.19.6 (nginx commit cfa669151e60, "Upstream: excluded
    /// down servers from the next_upstream tries"), and `-e` exists from 1.19.5 on (7e1637a31631).
    #[test]
    fn retry_budget_and_error_log_switch_by_release() {
        let rules = |v: &str| v.parse::<NginxVersion>().unwrap().rules();
        for (v, skips, switch) in [
            ("1.18.0", false, false),
            ("1.19.4", false, false),
            ("1.19.5", false, true),
            ("1.19.6", true, true),
            ("1.22.1", true, true),
            ("1.30.6", true, true),
        ] {
            assert_eq!(rules(v).retry_budget_skips_down, skips, "{v}");
            assert_eq!(rules(v).error_log_switch, switch, "{v}");
        }
        assert_eq!(rules("1.18.0").routing()[0], ("retryBudget", "countsDown"));
        assert_eq!(rules("1.19.6").routing()[0], ("retryBudget", "skipsDown"));
        assert_eq!(rules("1.18.0").directive_table, 0);
        assert_eq!(rules("1.21.6").directive_table, 0);
        assert_eq!(rules("1.22.1").directive_table, 1);
        assert!(NginxVersion::new(1, 18, 0).modelled().is_ok());
        assert!(NginxVersion::new(1, 17, 10).modelled().is_err());
    }

    #[test]
    fn libc_names_round_trip() {
        for libc in Libc::ALL {
            assert_eq!(libc.to_string().parse::<Libc>().unwrap(), libc);
        }
        assert!("Musl".parse::<Libc>().is_err());
        assert!("".parse::<Libc>().is_err());
    }
}
