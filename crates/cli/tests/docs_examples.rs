//! The console examples of `README.md` and of every `docs/*.md` are run and their output compared, so they
//! cannot drift. Each `$ ` line of a ```` ```console ```` block runs in `sh` from `crates/cli/tests/data/examples/`
//! with the built `nginx-ketama` first on `PATH`; the lines up to the next `$ ` are its expected output
//! (stdout and stderr together). Commands that start with `cargo` need nginx (their output comes from a
//! real run) and are not run here; each file's count of run and not-run examples goes to the test report
//! (`scripts/test` prints it at the end), so a file whose examples all need nginx shows as such.
//!
//! `DOCS_EXAMPLES=overwrite` writes what the commands print into the documents instead of failing (as
//! `TRYBUILD=overwrite` does): after a change that is meant to change outputs (a new default nginx release),
//! the documents are regenerated, then reviewed with `git diff`.

use nginx_ketama_harness::testkit::report;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/common.rs"]
mod common;

use common::CLI;

/// One `$ ` line of a console block and the output the document shows under it.
#[derive(Debug, PartialEq)]
struct Example {
    /// 1-based line of the `$ ` line in its file.
    line: usize,
    command: String,
    output: String,
}

impl Example {
    /// Whether the example needs nginx (a `cargo` command: `cargo run --release -- verify ...`).
    fn needs_nginx(&self) -> bool {
        self.command.starts_with("cargo ")
    }
}

/// The examples of every ```` ```console ```` block of a Markdown text, in order.
fn examples(markdown: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut in_block = false;
    for (i, line) in markdown.lines().enumerate() {
        match (in_block, line) {
            (false, "```console") => in_block = true,
            (true, "```") => in_block = false,
            (true, l) if l.starts_with("$ ") => {
                out.push(Example { line: i + 1, command: l[2..].to_string(), output: String::new() })
            }
            (true, l) => {
                let example =
                    out.last_mut().unwrap_or_else(|| panic!("line {}: output before any `$ ` command", i + 1));
                example.output.push_str(l);
                example.output.push('\n');
            }
            _ => {}
        }
    }
    assert!(!in_block, "a ```console block is not closed");
    out
}

/// `markdown` with the output shown under each example replaced: `(line of its `$ ` line, new output)`.
fn overwrite(markdown: &str, outputs: &[(&Example, String)]) -> String {
    let mut lines: Vec<String> = markdown.lines().map(str::to_string).collect();
    let mut outputs: Vec<_> = outputs.iter().collect();
    outputs.sort_by_key(|(e, _)| std::cmp::Reverse(e.line));
    for (example, got) in outputs {
        let shown = example.output.lines().count();
        let new = got.lines().map(str::to_string);
        lines.splice(example.line..example.line + shown, new);
    }
    let mut text = lines.join("\n");
    if markdown.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `README.md` and `docs/*.md`, as paths relative to the repository root, sorted.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root).unwrap().to_path_buf())
        .collect();
    docs.sort();
    docs.insert(0, PathBuf::from("README.md"));
    docs
}

#[test]
fn console_examples_print_what_the_documents_show() {
    let root = nginx_ketama_harness::repo_root();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/examples");
    let bin_dir = Path::new(CLI).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let rewrite = std::env::var("DOCS_EXAMPLES").is_ok_and(|v| v == "overwrite");
    let (mut ran, mut wrong) = (0, Vec::new());
    for doc in documents(&root) {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        let examples = examples(&text);
        if examples.is_empty() {
            continue;
        }
        let (offline, live): (Vec<_>, Vec<_>) = examples.iter().partition(|e| !e.needs_nginx());
        let mut changed = Vec::new();
        for &example in &offline {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("{} 2>&1", example.command))
                .current_dir(&data)
                .env("PATH", &path)
                .output()
                .unwrap();
            let got = String::from_utf8_lossy(&out.stdout);
            if got != example.output && rewrite && (got.is_empty() || got.ends_with('\n')) {
                changed.push((example, got.into_owned()));
            } else if got != example.output {
                wrong.push(format!(
                    "{}:{}: $ {}\n--- the document shows:\n{}--- it prints:\n{got}",
                    doc.display(),
                    example.line,
                    example.command,
                    example.output
                ));
            }
        }
        if !changed.is_empty() {
            std::fs::write(root.join(&doc), overwrite(&text, &changed)).unwrap();
            report(&format!(
                "console examples: {}: {} rewritten (DOCS_EXAMPLES=overwrite)",
                doc.display(),
                changed.len()
            ));
        }
        ran += offline.len();
        let note = match (offline.len(), live.len()) {
            (_, 0) => String::new(),
            (0, n) => format!(", {n} not run: all need nginx (cargo run ... verify)"),
            (_, n) => format!(", {n} not run: need nginx (cargo run ... verify)"),
        };
        report(&format!("console examples: {}: {} run{note}", doc.display(), offline.len()));
    }
    assert!(wrong.is_empty(), "{} console examples print something else:\n\n{}", wrong.len(), wrong.join("\n"));
    // The README alone has about 10; far fewer means blocks were missed.
    assert!(ran >= 20, "only {ran} console examples ran");
}

#[test]
fn console_blocks_are_split_into_commands_and_their_output() {
    let doc = "text\n```console\n$ cat a\none\ntwo\n$ true\n```\n```sh\n$ not this\n```\n\
               ```console\n$ cargo run -- verify\ntable\n```\n";
    let got = examples(doc);
    let want = [
        Example { line: 3, command: "cat a".into(), output: "one\ntwo\n".into() },
        Example { line: 6, command: "true".into(), output: String::new() },
        Example { line: 12, command: "cargo run -- verify".into(), output: "table\n".into() },
    ];
    assert_eq!(got, want);
    assert_eq!(got.iter().map(Example::needs_nginx).collect::<Vec<_>>(), [false, false, true]);
}

/// Overwriting replaces exactly the output lines of the examples named, whatever their new length.
#[test]
fn overwrite_replaces_the_shown_output_only() {
    let doc = "text\n```console\n$ cat a\none\ntwo\n$ true\n```\nafter\n";
    let got = examples(doc);
    let text = overwrite(doc, &[(&got[0], "three\n".into()), (&got[1], "x\ny\n".into())]);
    assert_eq!(text, "text\n```console\n$ cat a\nthree\n$ true\nx\ny\n```\nafter\n");
    assert_eq!(overwrite(doc, &[]), doc);
}
