//! The names of the versioned JSON Schemas the command's JSON outputs follow, one place for each: every
//! JSON document or line the command writes carries `"schema": "nginx-ketama/<output>/v<N>"`, described by
//! `docs/schemas/<output>.v<N>.json` (docs/ci.md, "Schemas", says when `N` moves). The names of `route`'s
//! and `verify`'s outputs are here; each analysis command names its own beside its JSON document
//! (`analysis/<command>.rs`, `SCHEMA`), so a new command is one file. `crates/cli/tests/schemas.rs` holds
//! every schema name given anywhere in `src/` to its file.

/// The name of one output's schema, the `schema` field of what it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub(crate) struct Schema(pub(crate) &'static str);

/// Each line of `route`.
pub(crate) const ROUTE: Schema = Schema("nginx-ketama/route/v1");
/// Each line of `route --requests`/`--log`.
pub(crate) const ROUTE_REQUEST: Schema = Schema("nginx-ketama/route-request/v1");
/// Each line of `verify`'s mismatch file (`--mismatches`).
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) const MISMATCH: Schema = Schema("nginx-ketama/mismatch/v1");
/// Each line of `verify --engine`'s mismatch file (`--mismatches`).
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) const ENGINE_MISMATCH: Schema = Schema("nginx-ketama/engine-mismatch/v1");
/// `verify --report json=FILE`.
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) const VERIFY: Schema = Schema("nginx-ketama/verify/v1");
