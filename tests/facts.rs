//! Each fact once: the nginx releases the project provisions, probes and models are written as data in two
//! places, `nginx/versions` (the builds) and `src/version.rs` (`PROBED`; `MODELLED` and `LATEST` follow from
//! it), and everything else derives them. These tests fail when the two lists disagree, and when prose that
//! still has to name releases (the algorithm document's range, the first build the README and
//! docs/upgrading.md name) disagrees with them, so forgetting to edit it is caught. Console examples that
//! print releases are run by `crates/cli/tests/docs_examples.rs` (and regenerated with
//! `DOCS_EXAMPLES=overwrite`).

use nginx_ketama::NginxVersion;
use nginx_ketama::version::{MODELLED, PROBED};
use nginx_ketama_harness::testkit::{provisioned_releases, release_matches};

fn read(path: &str) -> String {
    let path = nginx_ketama_harness::repo_root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of `nginx/versions` without comments: `[RELEASE, SUITE, PACKAGE]`.
fn version_lines() -> Vec<Vec<String>> {
    read("nginx/versions")
        .lines()
        .map(|l| l.split('#').next().unwrap().split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|cols| !cols.is_empty())
        .collect()
}

/// `1.18.0 to 1.30.x`: the modelled range as the library's error and `--version` word it.
fn modelled_text() -> String {
    format!("{} to {}.{}.x", MODELLED.start(), MODELLED.end().major, MODELLED.end().minor)
}

/// The probed releases are the releases of `nginx/versions`, one each, in the same order: a line added to
/// either list and not the other fails here.
#[test]
fn probed_releases_are_the_lines_of_nginx_versions() {
    let releases = provisioned_releases();
    let probed: Vec<String> = PROBED.iter().map(NginxVersion::to_string).collect();
    assert_eq!(releases.len(), probed.len(), "nginx/versions {releases:?} against PROBED {probed:?}");
    for (release, version) in releases.iter().zip(&probed) {
        assert!(release_matches(release, version), "nginx/versions {release} against PROBED {version}");
    }
}

/// The modelled range and the default release follow from `PROBED`: the first probed release through every
/// patch release of the newest one's series, which is the default.
#[test]
fn modelled_range_and_default_follow_from_the_probed_releases() {
    let (first, last) = (PROBED[0], PROBED[PROBED.len() - 1]);
    assert_eq!(NginxVersion::LATEST, last);
    assert_eq!(*MODELLED.start(), first);
    assert!(MODELLED.contains(&NginxVersion::new(last.major, last.minor, u32::MAX)));
    assert!(!MODELLED.contains(&NginxVersion::new(last.major, last.minor + 1, 0)));
    let refused = NginxVersion::new(0, 1, 0).modelled().unwrap_err().to_string();
    assert!(refused.ends_with(&format!("this build models nginx {}", modelled_text())), "{refused}");
}

/// The algorithm document states the range its rules were read for; it is the modelled range, so a release
/// added to the model without the document re-read for it fails here.
#[test]
fn the_algorithm_document_covers_the_modelled_range() {
    let doc = read("docs/nginx-algorithm.md");
    let stated = doc
        .split_once("The document covers nginx **")
        .and_then(|(_, rest)| rest.split_once("**"))
        .map(|(range, _)| range.replace(" through ", " to "))
        .expect("docs/nginx-algorithm.md: \"The document covers nginx **A through B**\"");
    assert_eq!(stated, modelled_text(), "docs/nginx-algorithm.md, **Versions.**");
}

/// The README and docs/upgrading.md name the oldest build by suite and release (which adding a release does
/// not change): they must be the first line of `nginx/versions`.
#[test]
fn the_documents_name_the_oldest_build_as_nginx_versions_does() {
    let first = &version_lines()[0];
    let (release, suite) = (&first[0], &first[1]);
    let readme = read("README.md").split_whitespace().collect::<Vec<_>>().join(" ");
    let want = format!("from {suite}'s {release} to sid's");
    assert!(readme.contains(&want), "README.md does not say {want:?}");
    let upgrading = read("docs/upgrading.md");
    let want = format!("from {suite} ({release},");
    assert!(upgrading.contains(&want), "docs/upgrading.md does not say {want:?}");
    let last = version_lines().last().unwrap()[1].clone();
    assert_eq!(last, "sid", "the README and docs/upgrading.md say the newest build is sid's");
}

/// No document outside the algorithm document writes the modelled range's end (`1.30.x`) in prose: where
/// it appears, it is the output of a console example (regenerated from the binary). Adding a release then
/// leaves no prose stale.
#[test]
fn only_console_output_and_the_algorithm_document_write_the_range_end() {
    let end = format!("{}.{}.x", MODELLED.end().major, MODELLED.end().minor);
    let root = nginx_ketama_harness::repo_root();
    let mut docs: Vec<String> = vec!["README.md".into(), "nginx/README.md".into(), "vectors/README.md".into()];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") && name != "nginx-algorithm.md" {
            docs.push(format!("docs/{name}"));
        }
    }
    let mut found = Vec::new();
    for doc in &docs {
        let Ok(text) = std::fs::read_to_string(root.join(doc)) else { continue };
        let mut console = false;
        for (i, line) in text.lines().enumerate() {
            match line {
                "```console" => console = true,
                "```" => console = false,
                _ if !console && line.contains(&end) => found.push(format!("{doc}:{}: {line}", i + 1)),
                _ => {}
            }
        }
    }
    assert!(found.is_empty(), "prose that names the modelled range's end ({end}):\n{}", found.join("\n"));
}
