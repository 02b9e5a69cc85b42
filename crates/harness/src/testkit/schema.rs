//! A small JSON Schema (draft-07 subset) validator for the fixtures' schemas (`vectors/v1/schema.json`,
//! `vectors/keys/v1/keys.schema.json`), shared by the lints. Test support: it panics on a keyword or pattern
//! it does not know, so a schema cannot silently grow beyond what is checked.

use serde_json::Value;

/// A small JSON Schema (draft-07 subset) validator: `$ref` to `#/definitions/*`, `type`, `const`, `enum`,
/// `properties`, `required`, `additionalProperties` (false or a schema), `items`, `minItems`, `minimum`, `maximum`
/// and `pattern` for the few anchored patterns the schema uses. Unknown keywords fail, so the schema cannot
/// silently grow beyond what is checked.
pub fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        errors.push(format!("{path}: schema is not an object"));
        return;
    };
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/definitions/").expect("local refs only");
        validate(root, &root["definitions"][name], v, path, errors);
        return;
    }
    for (k, s) in obj {
        match k.as_str() {
            "$schema" | "$id" | "title" | "description" | "definitions" => {}
            "type" => {
                let types: Vec<&str> = match s {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type keyword"),
                };
                let ok = types.iter().any(|t| match *t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "boolean" => v.is_boolean(),
                    "null" => v.is_null(),
                    other => panic!("unsupported type {other}"),
                });
                if !ok {
                    errors.push(format!("{path}: expected {types:?}, got {v}"));
                }
            }
            "const" => {
                if v != s {
                    errors.push(format!("{path}: expected {s}, got {v}"));
                }
            }
            "enum" => {
                if !s.as_array().unwrap().contains(v) {
                    errors.push(format!("{path}: {v} not in {s}"));
                }
            }
            "minimum" => {
                if v.as_i64().is_some_and(|n| n < s.as_i64().unwrap()) {
                    errors.push(format!("{path}: {v} < {s}"));
                }
            }
            "maximum" => {
                if v.as_i64().is_some_and(|n| n > s.as_i64().unwrap()) {
                    errors.push(format!("{path}: {v} > {s}"));
                }
            }
            "minItems" => {
                if v.as_array().is_some_and(|a| (a.len() as u64) < s.as_u64().unwrap()) {
                    errors.push(format!("{path}: fewer than {s} items"));
                }
            }
            "uniqueItems" => {
                if s.as_bool() == Some(true)
                    && let Some(a) = v.as_array()
                    && a.iter().enumerate().any(|(i, x)| a[..i].contains(x))
                {
                    errors.push(format!("{path}: items are not unique"));
                }
            }
            "pattern" => {
                if let Some(text) = v.as_str()
                    && !matches_pattern(s.as_str().unwrap(), text)
                {
                    errors.push(format!("{path}: {text:?} does not match {s}"));
                }
            }
            "items" => {
                for (i, item) in v.as_array().into_iter().flatten().enumerate() {
                    validate(root, s, item, &format!("{path}[{i}]"), errors);
                }
            }
            "required" => {
                if let Some(o) = v.as_object() {
                    for r in s.as_array().unwrap() {
                        if !o.contains_key(r.as_str().unwrap()) {
                            errors.push(format!("{path}: missing {r}"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (name, sub) in s.as_object().unwrap() {
                        if let Some(x) = o.get(name) {
                            validate(root, sub, x, &format!("{path}.{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                let props = obj.get("properties").and_then(Value::as_object);
                if let Some(o) = v.as_object() {
                    for (name, x) in o {
                        if props.is_some_and(|p| p.contains_key(name)) {
                            continue;
                        }
                        match s {
                            Value::Bool(false) => errors.push(format!("{path}: unexpected property {name}")),
                            Value::Bool(true) => {}
                            sub => validate(root, sub, x, &format!("{path}.{name}"), errors),
                        }
                    }
                }
            }
            other => panic!("schema keyword {other} is not supported by this validator"),
        }
    }
}

/// The anchored patterns schema.json uses.
pub fn matches_pattern(pattern: &str, s: &str) -> bool {
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    let digits = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_digit());
    match pattern {
        "^[0-9a-f]{8}$" => s.len() == 8 && s.chars().all(hex),
        "^([0-9a-f]{2})*$" => s.len().is_multiple_of(2) && s.chars().all(hex),
        "^[0-9]+\\.[0-9]+\\.[0-9]+$" => {
            let parts: Vec<&str> = s.split('.').collect();
            parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        }
        "^[0-9]+\\.[0-9]+\\.[0-9]+(-musl)?$" => {
            let version = s.strip_suffix("-musl").unwrap_or(s);
            let parts: Vec<&str> = version.split('.').collect();
            parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        }
        "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" => {
            let parts: Vec<&str> = s.split('-').collect();
            parts.len() == 3 && digits(parts[0], 4) && digits(parts[1], 2) && digits(parts[2], 2)
        }
        other => panic!("pattern {other} is not supported by this validator"),
    }
}
