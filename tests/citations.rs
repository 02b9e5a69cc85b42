//! Every section of `docs/nginx-algorithm.md` that the project cites exists in it. The code and the
//! documents cite that document as "algorithm §N" (or "nginx-algorithm.md §N", with or without backticks;
//! "§3.4 and §4" cites both), link to its headings as `nginx-algorithm.md#<anchor>`, and the document itself
//! and the ports (`ports/README.md`: "§N" there means a section of that document) write a bare "§N".
//!
//! The same file checks that every relative link between the Markdown documents (the README's links into
//! `docs/` included) leads to a file and heading that exist.
//!
//! A section is a heading `## N.` / `### N.M`, or, inside section N, a numbered list item `M.` (cited as
//! §N.M: §9.3 is edge case 3). Text after the number (`§11 C`) is not checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const DOC: &str = "docs/nginx-algorithm.md";

/// The section numbers the document has: headings `## N.` or `### N.M` (levels 2 to 4) and the numbered
/// list items `M.` of section N as N.M.
fn sections(doc: &str) -> BTreeSet<String> {
    let mut have = BTreeSet::new();
    let mut section: Option<String> = None;
    for line in doc.lines() {
        let hashes = line.bytes().take_while(|&b| b == b'#').count();
        if (2..=4).contains(&hashes) && line[hashes..].starts_with(' ') {
            let rest = &line[hashes + 1..];
            let number = section_number(rest);
            let after = &rest[number.len()..];
            if !number.is_empty() && (after.starts_with(". ") || after.starts_with(' ')) {
                section = number.split('.').next().map(str::to_string);
                have.insert(number.to_string());
            }
            continue;
        }
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && line[digits..].starts_with(". ")
            && let Some(s) = &section
        {
            have.insert(format!("{s}.{}", &line[..digits]));
        }
    }
    have
}

/// The lines of a Markdown text outside its ```` ``` ```` fences.
fn prose(markdown: &str) -> impl Iterator<Item = &str> {
    let mut fenced = false;
    markdown.lines().filter(move |l| {
        if l.starts_with("```") {
            fenced = !fenced;
            return false;
        }
        !fenced
    })
}

/// GitHub's anchors for a Markdown text's headings: lower case, punctuation dropped, spaces as `-`.
fn anchors(doc: &str) -> BTreeSet<String> {
    prose(doc)
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    '-' | '_' => Some(c),
                    c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// The section number at the start of `s`: digits, then `.digits` as long as they go on ("3.2" of "3.2.",
/// "11" of "11 C"); empty if `s` starts with no digit.
fn section_number(s: &str) -> &str {
    let b = s.as_bytes();
    let mut end = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if end == 0 {
        return "";
    }
    while end + 1 < b.len() && b[end] == b'.' && b[end + 1].is_ascii_digit() {
        end += 1 + b[end + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
    }
    &s[..end]
}

/// One citation: the 1-based line and what it cites (`§3.2`, or `#8-version-history`).
#[derive(Debug, PartialEq)]
struct Citation {
    line: usize,
    cited: String,
}

/// Every "§N" in `text` that cites the algorithm document: all of them when `bare`, else those after
/// "algorithm" or "nginx-algorithm.md" (whitespace, a closing backtick and comment markers such as `///`
/// between them allowed, so a citation broken across comment lines counts) and those joined to such a
/// citation by `,`, `and`, `or`, `–` or `/`. Also every `nginx-algorithm.md#<anchor>`.
fn citations(text: &str, bare: bool) -> Vec<Citation> {
    let line_of = |i: usize| text[..i].bytes().filter(|&b| b == b'\n').count() + 1;
    let mut out = Vec::new();
    let mut last_end: Option<usize> = None;
    for (i, _) in text.match_indices('§') {
        let number = section_number(&text[i + '§'.len_utf8()..]);
        if number.is_empty() {
            continue;
        }
        let before = text[..i].trim_end_matches(|c: char| c.is_whitespace() || "`/!#*".contains(c));
        let before = before.to_ascii_lowercase();
        let named = before.ends_with("algorithm") || before.ends_with("nginx-algorithm.md");
        let joined = last_end
            .is_some_and(|end| end <= i && [",", "and", ", and", "or", "–", "/"].contains(&text[end..i].trim()));
        if bare || named || joined {
            out.push(Citation { line: line_of(i), cited: format!("§{number}") });
            last_end = Some(i + '§'.len_utf8() + number.len());
        }
    }
    for (i, m) in text.match_indices("nginx-algorithm.md#") {
        let slug: String =
            text[i + m.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '-' || *c == '_').collect();
        if slug.is_empty() {
            continue;
        }
        out.push(Citation { line: line_of(i), cited: format!("#{slug}") });
    }
    out
}

/// Every file of the repository to read: not under a hidden folder, `target`, `node_modules` or
/// `__pycache__`; symbolic links are not followed.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            if !name.starts_with('.') && !["target", "node_modules", "__pycache__"].contains(&name.as_str()) {
                files(&entry.path(), out);
            }
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
}

#[test]
fn every_cited_algorithm_section_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join(DOC)).unwrap();
    let (have, anchors) = (sections(&doc), anchors(&doc));
    let mut all = Vec::new();
    files(root, &mut all);
    all.sort();
    let (mut checked, mut dangling) = (0, Vec::new());
    for path in &all {
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let Ok(text) = std::fs::read_to_string(path) else { continue }; // not text
        let bare = rel == DOC || rel.starts_with("ports/");
        for c in citations(&text, bare) {
            checked += 1;
            let known = match c.cited.strip_prefix('§') {
                Some(n) => have.contains(n),
                None => anchors.contains(&c.cited[1..]),
            };
            if !known {
                dangling.push(format!("{rel}:{}: {}", c.line, c.cited));
            }
        }
    }
    eprintln!("algorithm citations: {checked} checked in {} files, {} dangling", all.len(), dangling.len());
    assert!(dangling.is_empty(), "citations of {DOC} that it does not have:\n{}", dangling.join("\n"));
    // The project cites the document about 200 times: far fewer means the scan missed them.
    assert!(checked >= 150, "only {checked} citations found");
}

/// The relative link targets of a Markdown text outside code fences (`](target)` and `src="target"`), with
/// their 1-based lines; web and mail addresses are left out.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in markdown.lines().enumerate() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced {
            continue;
        }
        for (open, close) in [("](", ')'), ("src=\"", '"')] {
            for (j, _) in line.match_indices(open) {
                let rest = &line[j + open.len()..];
                let Some(end) = rest.find(close) else { continue };
                let target = &rest[..end];
                if !target.contains("://") && !target.starts_with("mailto:") && !target.contains(' ') {
                    out.push((i + 1, target.to_string()));
                }
            }
        }
    }
    out
}

/// Every relative link of every Markdown file leads to a file that exists and, when it names an anchor in
/// a Markdown file, to one of its headings (as GitHub makes anchors): the README's links into `docs/`, and
/// the documents' links to each other and to the code.
#[test]
fn links_between_documents_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    all.retain(|p| p.extension().is_some_and(|e| e == "md"));
    let (mut checked, mut broken) = (0, Vec::new());
    for path in &all {
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if file.is_empty() { path.clone() } else { path.parent().unwrap().join(file) };
            if !dest.exists() {
                broken.push(format!("{rel}:{line}: {target}: no such file"));
            } else if !anchor.is_empty() && dest.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&std::fs::read_to_string(&dest).unwrap());
                if !headings.contains(anchor) {
                    broken.push(format!("{rel}:{line}: {target}: no such heading"));
                }
            }
        }
    }
    eprintln!("links: {checked} checked in {} Markdown files, {} broken", all.len(), broken.len());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 80, "only {checked} links found");
}

#[test]
fn the_document_has_headings_and_numbered_items_as_sections() {
    let doc = "## 3. Ring\n### 3.2 Ties (sort)\n1. not in a section? it is: \u{a7}3.1\n## 9. Edge cases\n\
               1. first\n2. second\n### Worked example 1 (\u{a7}3.1)\n## 10. Pitfalls\n";
    let have: Vec<_> = sections(doc).into_iter().collect();
    assert_eq!(have, ["10", "3", "3.1", "3.2", "9", "9.1", "9.2"]);
    assert!(
        anchors("## 8. Version history\n### 3.2 Ties (sort; the `libc` rule)\n").contains("32-ties-sort-the-libc-rule")
    );
    assert!(anchors("## 8. Version history\n").contains("8-version-history"));
}

#[test]
fn citations_are_found_in_every_spelling() {
    let cited = |text: &str, bare: bool| -> Vec<String> {
        citations(text, bare).into_iter().map(|c| format!("{}:{}", c.line, c.cited)).collect()
    };
    assert_eq!(cited("x (algorithm \u{a7}6.1).", false), ["1:\u{a7}6.1"]);
    assert_eq!(cited("see `docs/nginx-algorithm.md` \u{a7}3.2.", false), ["1:\u{a7}3.2"]);
    assert_eq!(cited("// ... collide (algorithm\n    /// \u{a7}3.2), so", false), ["2:\u{a7}3.2"]);
    assert_eq!(cited("Algorithm \u{a7}11 C: chains", false), ["1:\u{a7}11"]);
    assert_eq!(cited("(docs/nginx-algorithm.md \u{a7}3.4 and \u{a7}4)", false), ["1:\u{a7}3.4", "1:\u{a7}4"]);
    assert_eq!(cited("algorithm \u{a7}1–\u{a7}5, \u{a7}8", false), ["1:\u{a7}1", "1:\u{a7}5", "1:\u{a7}8"]);
    assert_eq!(cited("[\u{a7}8](docs/nginx-algorithm.md#8-version-history)", false), ["1:#8-version-history"]);
    // A bare § is another document's unless the file is the algorithm document or a port.
    assert_eq!(cited("RFC 9110 \u{a7}15.6.3; the rule (\u{a7}3.4)", false), Vec::<String>::new());
    assert_eq!(cited("the rule (\u{a7}3.4); \u{a7}", true), ["1:\u{a7}3.4"]);
}

#[test]
fn links_are_read_outside_code_fences() {
    let text = "[a](b.md#c) <img src=\"x.svg\"> [w](https://x.org) [m](mailto:a@b)\n```\n[no](n.md)\n```\n[s](#here)\n";
    let got = links(text);
    assert_eq!(got, [(1, "b.md#c".to_string()), (1, "x.svg".to_string()), (5, "#here".to_string())]);
    assert!(anchors("```sh\n# a comment\n```\n## Real\n").iter().eq(["real"]));
}
