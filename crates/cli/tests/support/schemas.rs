//! The versioned JSON Schemas of `docs/schemas/`, for the tests that check real outputs against them
//! (included with `#[path]` by `schemas.rs` and the live tests, each of which uses part of it).
#![allow(dead_code)]

use serde_json::Value;
use std::path::PathBuf;

/// `docs/schemas/` of this checkout.
pub(crate) fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schemas")
}

/// The schema file an output's `schema` field names: `nginx-ketama/share/v1` is `docs/schemas/share.v1.json`.
pub(crate) fn file_of(name: &str) -> PathBuf {
    let rest = name.strip_prefix("nginx-ketama/").unwrap_or_else(|| panic!("{name:?} is not an nginx-ketama schema"));
    let (output, version) = rest.rsplit_once('/').unwrap_or_else(|| panic!("{name:?} has no version"));
    dir().join(format!("{output}.{version}.json"))
}

/// The schema `name` names, read from its file.
pub(crate) fn load(name: &str) -> Value {
    let path = file_of(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Why `doc` does not follow `schema` (empty if it does).
pub(crate) fn errors(schema: &Value, doc: &Value) -> Vec<String> {
    let validator = jsonschema::draft202012::new(schema).unwrap_or_else(|e| panic!("not a JSON Schema: {e}"));
    validator.iter_errors(doc).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

/// Asserts that `doc` names a schema in its `schema` field and follows it; returns the name.
pub(crate) fn check(doc: &Value) -> String {
    let name = doc["schema"].as_str().unwrap_or_else(|| panic!("no schema field: {doc}")).to_string();
    let errors = errors(&load(&name), doc);
    assert!(errors.is_empty(), "{name}: {errors:#?}\n{doc:#}");
    name
}
