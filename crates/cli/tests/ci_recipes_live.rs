//! The CI recipes of `docs/ci.md` ("CI recipes") cannot rot: both YAML blocks are read out of the file and
//! parsed as YAML, their caches and artefacts checked against what the section promises, and every shell
//! step run as written — GitHub's `run:` steps one by one (`bash --noprofile --norc -eo pipefail`, with
//! `$GITHUB_PATH` honoured between steps), GitLab's `script:` lines in one `bash -eo pipefail` — in a scratch
//! git repository whose base branch and pull request head hold an `nginx.conf`, with this build's binary and
//! the provisioned nginx builds where the two caches restore them. A head that moves 1/7 of the keys passes
//! every step and leaves the JUnit report; one that moves most of them is stopped by the gate (exit 1), the
//! report still written. Skips (loudly) without provisioned nginx or root, unless `NGINX_PARITY=require`.

use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::testkit::{report, skip};
use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/common.rs"]
mod common;

use common::CLI;

/// The first ```sh block after the heading `### {heading}` of docs/ci.md.
fn shell_recipe(heading: &str) -> String {
    let doc = std::fs::read_to_string(nginx_ketama_harness::repo_root().join("docs/ci.md")).unwrap();
    let start = doc.find(&format!("\n### {heading}\n")).unwrap_or_else(|| panic!("no heading {heading:?}"));
    let rest = &doc[start..];
    let open = rest.find("\n```sh\n").unwrap_or_else(|| panic!("no sh block after {heading:?}")) + 7;
    let close = rest[open..].find("\n```\n").unwrap() + open;
    rest[open..close].to_string()
}

/// The first ```yaml block after the heading `### {heading}` of docs/ci.md, parsed.
fn recipe(heading: &str) -> Value {
    let doc = std::fs::read_to_string(nginx_ketama_harness::repo_root().join("docs/ci.md")).unwrap();
    let start = doc.find(&format!("\n### {heading}\n")).unwrap_or_else(|| panic!("no heading {heading:?}"));
    let rest = &doc[start..];
    let open = rest.find("\n```yaml\n").unwrap_or_else(|| panic!("no yaml block after {heading:?}")) + 9;
    let close = rest[open..].find("\n```\n").unwrap() + open;
    serde_yaml::from_str(&rest[open..close]).unwrap_or_else(|e| panic!("{heading}: not YAML: {e}"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// Base branch: six servers; heads: one server added (1/7 moves), or the servers replaced (most move).
fn conf(servers: &[&str]) -> String {
    let lines: String = servers.iter().map(|a| format!("        server {a};\n")).collect();
    format!(
        "events {{}}\nhttp {{\n    upstream app {{\n        hash $request_uri consistent;\n{lines}    }}\n    server {{\n        listen 8080;\n        location / {{ proxy_pass http://app; }}\n    }}\n}}\n"
    )
}

const BASE: [&str; 6] =
    ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.4:8080", "10.0.0.5:8080", "10.0.0.6:8080"];

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A pull request's checkout: `origin` (a bare repository) has `main` with the base config, the checkout
/// is on `change` with `head`; `nginx-ketama/` is the submodule (this repository's scripts and version
/// list, its `.nginx/` the restored cache of provisioned builds) and `.tool/bin/nginx-ketama` the restored
/// tool cache (this build's binary).
struct Scratch {
    _dir: tempfile::TempDir,
    work: PathBuf,
    home: PathBuf,
    temp: PathBuf,
}

fn scratch(head: &str, nginx_dir: &Path) -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let (seed, origin, work) = (dir.path().join("seed"), dir.path().join("origin.git"), dir.path().join("work"));
    std::fs::create_dir(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("nginx.conf"), conf(&BASE)).unwrap();
    git(&seed, &["add", "nginx.conf"]);
    git(&seed, &["commit", "-q", "-m", "base"]);
    git(&seed, &["checkout", "-q", "-b", "change"]);
    std::fs::write(seed.join("nginx.conf"), head).unwrap();
    git(&seed, &["commit", "-q", "-am", "head"]);
    git(dir.path(), &["clone", "-q", "--bare", seed.to_str().unwrap(), origin.to_str().unwrap()]);
    git(dir.path(), &["clone", "-q", "-b", "change", origin.to_str().unwrap(), work.to_str().unwrap()]);
    std::fs::write(work.join(".git/info/exclude"), "nginx-ketama/\n.tool/\nreports/\n").unwrap();
    let tool = work.join("nginx-ketama");
    std::fs::create_dir(&tool).unwrap();
    let root = nginx_ketama_harness::repo_root();
    for entry in ["scripts", "nginx", "engines", "crates", "Cargo.toml", "Cargo.lock"] {
        std::os::unix::fs::symlink(root.join(entry), tool.join(entry)).unwrap();
    }
    std::os::unix::fs::symlink(nginx_dir, tool.join(".nginx")).unwrap();
    std::fs::create_dir_all(work.join(".tool/bin")).unwrap();
    std::os::unix::fs::symlink(CLI, work.join(".tool/bin/nginx-ketama")).unwrap();
    // The engines cache as restored: the provisioned builds (provision-engines finds them stamped and
    // only takes its lock).
    if let Ok(engines) = std::fs::canonicalize(nginx_ketama_harness::engines::install::default_root()) {
        std::os::unix::fs::symlink(engines, tool.join(".engines")).unwrap();
    }
    let (home, temp) = (dir.path().join("home"), dir.path().join("runner-temp"));
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&temp).unwrap();
    Scratch { _dir: dir, work, home, temp }
}

/// `$PATH` without any directory that holds an `nginx-ketama`: the recipe must find the tool itself.
fn clean_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':').filter(|d| !Path::new(d).join("nginx-ketama").exists()).collect::<Vec<_>>().join(":")
}

/// Runs `script` as a step: (exit code, stdout and stderr).
fn step(scratch: &Scratch, path: &str, env: &[(&str, String)], bash: &[&str], script: &str) -> (i32, String) {
    let mut cmd = Command::new("bash");
    cmd.args(bash)
        .arg("-c")
        .arg(script)
        .current_dir(&scratch.work)
        .env("PATH", path)
        .env("HOME", &scratch.home)
        .env("CI", "true")
        // `mktemp` (GitLab's base worktree) makes its directory in the scratch, removed with it.
        .env("TMPDIR", &scratch.temp)
        .env_remove("NGINX_KETAMA_NGINX_DIR")
        .env_remove("NGINX_KETAMA_ENGINES_DIR")
        .env_remove("NGINX_KETAMA_NO_NAMESPACES");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// What the checks need, or a skip: the provisioned builds, root for the namespaces, git.
fn ready() -> Option<PathBuf> {
    nginx_ketama_harness::testkit::provisioned_or_skip()?;
    if !nginx_ketama_harness::nginx::netns::available() {
        skip("not root: no private namespaces for verify --config");
        return None;
    }
    if Command::new("git").arg("--version").output().is_err() {
        skip("no git");
        return None;
    }
    Some(std::fs::canonicalize(Installation::default_root()).unwrap())
}

fn heads() -> [(&'static str, String, bool); 2] {
    let mut grown = BASE.to_vec();
    grown.push("10.0.0.7:8080");
    let replaced = ["10.0.0.1:8080", "10.0.1.2:8080", "10.0.1.3:8080", "10.0.1.4:8080", "10.0.1.5:8080"];
    [("one server added", conf(&grown), true), ("servers replaced", conf(&replaced), false)]
}

/// The JUnit report the proof step wrote: one passing case, `app`, per build.
fn check_report(scratch: &Scratch, builds: usize, log: &str) {
    let xml = std::fs::read_to_string(scratch.work.join("reports/nginx-ketama.xml"))
        .unwrap_or_else(|e| panic!("no JUnit report ({e}):\n{log}"));
    assert_eq!(xml.matches("<testcase name=\"app\"").count(), builds, "{xml}");
    assert!(xml.contains(&format!("tests=\"{builds}\" failures=\"0\" errors=\"0\">")), "{xml}");
}

#[test]
fn the_github_actions_recipe_runs_as_written() {
    let Some(nginx_dir) = ready() else { return };
    let doc = recipe("GitHub Actions");
    assert!(doc["on"].get("pull_request").is_some(), "runs on every pull request");
    let job = &doc["jobs"]["routing"];
    assert!(s(&job["container"]["options"]).contains("--cap-add SYS_ADMIN --cap-add NET_ADMIN"));
    let steps = job["steps"].as_sequence().unwrap();
    let uses = |action: &'static str| {
        steps.iter().filter(move |st| st["uses"].as_str().is_some_and(|u| u.starts_with(action)))
    };
    let caches: Vec<(&str, &str)> =
        uses("actions/cache").map(|st| (s(&st["with"]["path"]), s(&st["with"]["key"]))).collect();
    assert!(
        caches.contains(&("nginx-ketama/.nginx", "nginx-${{ hashFiles('nginx-ketama/nginx/versions') }}")),
        "{caches:?}"
    );
    assert!(caches.contains(&(".tool", "nginx-ketama-${{ hashFiles('nginx-ketama/Cargo.lock') }}")), "{caches:?}");
    let upload = uses("actions/upload-artifact").next().expect("the report is uploaded");
    assert_eq!((s(&upload["if"]), s(&upload["with"]["path"])), ("always()", "reports/"));
    let runs: Vec<(&str, &str)> =
        steps.iter().filter(|st| st.get("run").is_some()).map(|st| (s(&st["name"]), s(&st["run"]))).collect();
    assert!(runs.iter().any(|(_, r)| r.contains("--report junit=reports/")), "{runs:?}");
    assert!(runs.iter().any(|(_, r)| r.contains("diff --from") && r.contains("--fail-moved-above")), "{runs:?}");
    let builds = Installation::discover(&nginx_dir).len();
    for (what, head, passes) in heads() {
        let scratch = scratch(&head, &nginx_dir);
        let github_path = scratch.temp.join("github_path");
        std::fs::write(&github_path, "").unwrap();
        let env = [
            ("GITHUB_BASE_REF", "main".to_string()),
            ("GITHUB_PATH", github_path.display().to_string()),
            ("GITHUB_WORKSPACE", scratch.work.display().to_string()),
            ("RUNNER_TEMP", scratch.temp.display().to_string()),
        ];
        let mut log = String::new();
        let mut failed = None;
        for (name, script) in &runs {
            // GitHub prepends each line of $GITHUB_PATH to the next steps' PATH.
            let added: Vec<String> =
                std::fs::read_to_string(&github_path).unwrap().lines().rev().map(str::to_string).collect();
            let path = added.into_iter().chain([clean_path()]).collect::<Vec<_>>().join(":");
            let (code, out) = step(&scratch, &path, &env, &["--noprofile", "--norc", "-eo", "pipefail"], script);
            log.push_str(&format!("== {name}: exit {code}\n{out}\n"));
            if code != 0 {
                failed = Some((*name, code, out));
                break;
            }
        }
        check_report(&scratch, builds, &log);
        match (passes, failed) {
            (true, None) => {}
            (false, Some((name, 1, out))) if name.starts_with("Gate") => {
                assert!(out.contains("--fail-moved-above"), "the gate says which limit:\n{out}")
            }
            (_, failed) => panic!("{what}: unexpected end {failed:?}\n{log}"),
        }
        report(&format!("docs/ci.md GitHub Actions recipe, {what}: every run step as expected"));
    }
}

#[test]
fn the_gitlab_ci_recipe_runs_as_written() {
    let Some(nginx_dir) = ready() else { return };
    let doc = recipe("GitLab CI");
    let job = &doc["nginx-ketama"];
    assert_eq!(s(&job["rules"][0]["if"]), "$CI_PIPELINE_SOURCE == \"merge_request_event\"");
    let caches: Vec<(&str, &str)> =
        job["cache"].as_sequence().unwrap().iter().map(|c| (s(&c["key"]["files"][0]), s(&c["paths"][0]))).collect();
    assert_eq!(
        caches,
        [("nginx-ketama/nginx/versions", "nginx-ketama/.nginx/"), ("nginx-ketama/Cargo.lock", ".tool/")]
    );
    assert_eq!(s(&job["artifacts"]["when"]), "always");
    assert_eq!(s(&job["artifacts"]["reports"]["junit"]), "reports/nginx-ketama.xml");
    let lines: Vec<&str> = job["script"].as_sequence().unwrap().iter().map(s).collect();
    let script = lines.join("\n");
    let builds = Installation::discover(&nginx_dir).len();
    for (what, head, passes) in heads() {
        let scratch = scratch(&head, &nginx_dir);
        let env = [
            ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "main".to_string()),
            ("CI_PIPELINE_SOURCE", "merge_request_event".to_string()),
            ("CI_PROJECT_DIR", scratch.work.display().to_string()),
        ];
        let (code, out) = step(&scratch, &clean_path(), &env, &["--noprofile", "--norc", "-eo", "pipefail"], &script);
        check_report(&scratch, builds, &out);
        if passes {
            assert_eq!(code, 0, "{what}:\n{out}");
        } else {
            assert_eq!(code, 1, "{what}: the gate stops it:\n{out}");
            assert!(out.contains("--fail-moved-above") && out.contains("0 mismatches"), "{out}");
        }
        report(&format!("docs/ci.md GitLab CI recipe, {what}: exit {code} as expected"));
    }
}

/// docs/ci.md, "Proving the engine you migrate to": the block run as written in a pull request's checkout
/// whose engines cache holds HAProxy 2.6.12; `provision-engines` is a no-op, `verify --engine` proves the
/// model (exit 0) and writes a JUnit report with a passing case per HAProxy kind, `migrate` prints its table.
#[test]
fn the_engine_recipe_runs_as_written() {
    use nginx_ketama_harness::engines::install::{Live, builds, default_root};
    // Stamped, so that provision-engines is the no-op the recipe says (it never downloads here).
    let stamped = default_root().join("haproxy-bookworm/.stamp").is_file();
    if !stamped || !builds(Live::HaProxy, &default_root()).iter().any(|b| b.release == "2.6.12") {
        skip(&format!(
            "ci_recipes_live: no haproxy 2.6.12 under {} — run scripts/provision-engines",
            default_root().display()
        ));
        return;
    }
    let script = shell_recipe("Proving the engine you migrate to");
    assert!(
        script.contains("verify --engine haproxy@2.6.12") && script.contains("--report junit=reports/"),
        "{script}"
    );
    let (_, head, _) = heads().into_iter().next().unwrap();
    let scratch = scratch(&head, &Installation::default_root());
    let (code, out) = step(&scratch, &clean_path(), &[], &["--noprofile", "--norc", "-eo", "pipefail"], &script);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 mismatches: the haproxy model picks the server the real haproxy picks"), "{out}");
    assert!(out.contains("share of keys that keep their server, per setting"), "{out}");
    let xml = std::fs::read_to_string(scratch.work.join("reports/haproxy.xml"))
        .unwrap_or_else(|e| panic!("no JUnit report ({e}):\n{out}"));
    assert!(xml.contains("<testsuite name=\"haproxy 2.6.12\" tests=\"16\" failures=\"0\" errors=\"0\""), "{xml}");
    assert!(xml.contains("<testcase name=\"consistent crc32\" classname=\"verify-engine.haproxy-2_6_12\">"), "{xml}");
    assert!(!scratch.work.join("reports/haproxy-mismatches.jsonl").exists());
    report("docs/ci.md engine recipe: provision no-op, verify --engine haproxy@2.6.12 proven, migrate printed");
}
