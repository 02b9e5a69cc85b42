//! The folders show the architecture, and this file holds them to what `docs/architecture.md` says: no
//! module of the core, the harness or the CLI imports, through any chain, a module that imports it back
//! (no import circle), and each layer of the harness imports only from the layers above it.
//!
//! Imports are read as text: every `crate::…` and `super::…` path in a module's code (not its comments,
//! not its `#[cfg(test)]` part, not its `pub use` re-exports), resolved to the longest module path that
//! exists. A module's own submodules and its parent face file are modules like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's modules: `a::b` → the module paths it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/config/maps.rs` → `config::maps`; the crate root (`lib.rs`, `main.rs`) → ``.
fn module_of(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts == ["lib"] || parts == ["main"] { String::new() } else { parts.join("::") }
}

/// The code of a module file that counts: before its `#[cfg(test)]` part, without comments and `pub use`
/// re-exports.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = String::new();
    let mut reexport = false;
    for line in body.lines() {
        let l = line.trim_start();
        if l.starts_with("//") {
            continue;
        }
        if l.starts_with("pub use ") || l.starts_with("pub(crate) use ") {
            reexport = !l.contains(';');
            continue;
        }
        if reexport {
            reexport = !l.contains(';');
            continue;
        }
        let l = match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        };
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Each path an import names, as segments: `crate::a::b::C` → `[a, b, C]` from the root; `super::x` →
/// from the parent (`super::super::` from its parent), `self::x` from the module itself; a brace group `super::{a::B, c}` gives one path per item.
fn paths(code: &str, module: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let parent: Vec<String> = {
        let mut p: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
        p.pop();
        p
    };
    let own: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
    for (prefix, from) in [("crate::", Vec::new()), ("super::", parent), ("self::", own)] {
        let mut at = 0;
        while let Some(i) = code[at..].find(prefix) {
            let start = at + i;
            at = start + prefix.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // `super::super::…` climbs once more per `super`.
            let mut base = from.clone();
            let mut tail_text = &code[at..];
            while let Some(more) = tail_text.strip_prefix("super::") {
                base.pop();
                tail_text = more;
            }
            for tail in expand(tail_text) {
                let mut path = base.clone();
                path.extend(tail);
                out.push(path);
            }
        }
    }
    out
}

/// The paths at the start of `text`: `a::b::C…` or `{a::B, c::{D, E}}`.
fn expand(text: &str) -> Vec<Vec<String>> {
    let ident: String = text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    if ident.is_empty() {
        if let Some(inner) = text.strip_prefix('{') {
            let mut depth = 0;
            let mut items = Vec::new();
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        items.push(&inner[start..i]);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&inner[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return items.into_iter().flat_map(|item| expand(item.trim())).collect();
        }
        return Vec::new();
    }
    let after = &text[ident.len()..];
    match after.strip_prefix("::") {
        Some(more) => {
            let tails = expand(more);
            if tails.is_empty() {
                vec![vec![ident]]
            } else {
                tails
                    .into_iter()
                    .map(|t| {
                        let mut p = vec![ident.clone()];
                        p.extend(t);
                        p
                    })
                    .collect()
            }
        }
        None => vec![vec![ident]],
    }
}

/// The import graph of the crate whose sources are under `root`.
fn graph(root: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(root, f)).collect();
    let mut graph = Graph::new();
    for file in &files {
        let module = module_of(root, file);
        let text = std::fs::read_to_string(file).unwrap();
        let mut targets = BTreeSet::new();
        for path in paths(&code(&text), &module) {
            // The longest prefix of the path that is a module of this crate.
            let target = (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|p| modules.contains(p));
            if let Some(target) = target
                && target != module
            {
                targets.insert(target);
            }
        }
        graph.insert(module, targets);
    }
    graph
}

/// A circle of imports in `graph`, if there is one.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, bool>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(true) => return None,
            Some(false) => {
                let from = stack.iter().position(|n| n == node).unwrap_or(0);
                let mut found = stack[from..].to_vec();
                found.push(node.to_string());
                return Some(found);
            }
            None => {}
        }
        state.insert(node.to_string(), false);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, state, stack) {
                return Some(found);
            }
        }
        stack.pop();
        state.insert(node.to_string(), true);
        None
    }
    let mut state = BTreeMap::new();
    graph.keys().find_map(|n| visit(n, graph, &mut state, &mut Vec::new()))
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_crate_has_an_import_circle() {
    for dir in ["src", "crates/harness/src", "crates/cli/src", "crates/output/src"] {
        let graph = graph(&workspace().join(dir));
        assert!(!graph.is_empty(), "{dir}: no modules read");
        if let Some(found) = circle(&graph) {
            panic!("{dir}: an import circle: {}", found.join(" → "));
        }
    }
}

/// The harness's layers, in the order of `docs/architecture.md` ("The harness in layers"): each imports
/// only from those before it.
const LAYERS: [&str; 8] = ["site", "nginx", "run", "catalog", "golden", "proofs", "engines", "testkit"];

#[test]
fn each_harness_layer_imports_only_from_the_layers_above_it() {
    let graph = graph(&workspace().join("crates/harness/src"));
    let layer = |module: &str| LAYERS.iter().position(|l| module == *l || module.starts_with(&format!("{l}::")));
    let mut wrong = Vec::new();
    for (from, targets) in &graph {
        let Some(a) = layer(from) else { continue };
        for to in targets {
            if let Some(b) = layer(to)
                && b > a
            {
                wrong.push(format!("{from} → {to}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports from a layer below: {wrong:?}");
    let text = std::fs::read_to_string(workspace().join("docs/architecture.md")).unwrap();
    let section = &text[text.find("## The harness in layers").expect("the section")..];
    let order: Vec<usize> = LAYERS[..7].iter().map(|l| section.find(&format!("| `{l}/` |")).expect(l)).collect();
    assert!(order.is_sorted(), "docs/architecture.md lists the layers in another order than {LAYERS:?}");
}

/// The reader itself: a circle made of text is found, through `super::` and brace groups, and comments,
/// tests and re-exports do not count.
#[test]
fn the_reader_finds_a_circle_and_ignores_what_does_not_import() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\npub use a::X;\n");
    write("a.rs", "mod inner;\n// crate::b::Y in a comment\nfn f() {}\n");
    write("a/inner.rs", "use super::super::{c::Z, d};\n");
    write("b.rs", "pub use crate::a::X;\n#[cfg(test)]\nmod tests { use crate::a::X; }\n");
    write("c.rs", "use crate::{a::inner::W, b};\n");
    write("d.rs", "\n");
    let g = graph(dir.path());
    assert_eq!(g["a::inner"], BTreeSet::from(["c".to_string(), "d".to_string()]));
    assert_eq!(g["c"], BTreeSet::from(["a::inner".to_string(), "b".to_string()]));
    assert!(g["b"].is_empty() && g["a"].is_empty() && g[""].is_empty(), "{g:?}");
    let found = circle(&g).expect("a::inner → c → a::inner");
    assert!(found.contains(&"c".to_string()) && found.contains(&"a::inner".to_string()), "{found:?}");
    write("c.rs", "use crate::b;\n");
    assert_eq!(circle(&graph(dir.path())), None);
}
