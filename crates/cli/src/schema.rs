//! The names of the versioned JSON Schemas the command's JSON outputs follow, one place for each: every
//! JSON document or line the command writes carries `"schema": "nginx-ketama/<output>/v<N>"`, described by
//! `docs/schemas/<output>.v<N>.json` (docs/ci.md, "Schemas", says when `N` moves).

/// The name of one output's schema, the `schema` field of what it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub(crate) struct Schema(&'static str);

/// Each line of `route`.
pub(crate) const ROUTE: Schema = Schema("nginx-ketama/route/v1");
/// Each line of `route --requests`/`--log`.
pub(crate) const ROUTE_REQUEST: Schema = Schema("nginx-ketama/route-request/v1");
/// `explain --format json`.
pub(crate) const EXPLAIN: Schema = Schema("nginx-ketama/explain/v1");
/// `share --format json`.
pub(crate) const SHARE: Schema = Schema("nginx-ketama/share/v1");
/// `diff --format json`.
pub(crate) const DIFF: Schema = Schema("nginx-ketama/diff/v1");
/// `diff --engine ENGINE --format json`.
pub(crate) const ENGINE_DIFF: Schema = Schema("nginx-ketama/engine-diff/v1");
/// `migrate --format json`.
pub(crate) const MIGRATE: Schema = Schema("nginx-ketama/migrate/v1");
/// `forge --format json`.
pub(crate) const FORGE: Schema = Schema("nginx-ketama/forge/v1");
/// `compare --format json`.
pub(crate) const COMPARE: Schema = Schema("nginx-ketama/compare/v1");
/// Each line of `verify`'s mismatch file (`--mismatches`).
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) const MISMATCH: Schema = Schema("nginx-ketama/mismatch/v1");
/// `verify --report json=FILE`.
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) const VERIFY: Schema = Schema("nginx-ketama/verify/v1");
