//! `verify --report junit=FILE` and `--report json=FILE` on real runs: the JUnit file is valid against the
//! xunit plugin's `junit-10.xsd` (both revisions, with `xmlschema`) and read back by a real consumer
//! (`junitparser`), both installed by `scripts/junit-tools` (a loud SKIP without them, a failure under
//! `NGINX_PARITY=require`); the JSON follows `nginx-ketama/verify/v1`; two runs of one seed write the same
//! bytes; a mismatch is a failure with the key, both answers and the replay command, a harness fault an
//! error, what was not run or not proven a skipped case; and a report path that cannot be written is a usage
//! error before any work starts.

#[path = "support/schemas.rs"]
mod schemas;

use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::testkit::{TempFile, report, skip};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/common.rs"]
mod common;

use common::CLI;

/// The venv of `scripts/junit-tools` and its XSDs, or a skip.
fn junit_tools() -> Option<(PathBuf, Vec<PathBuf>)> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| nginx_ketama_harness::repo_root().join("target"));
    let venv = target.join("junit-venv");
    let python = venv.join("bin/python");
    let xsds: Vec<PathBuf> = std::fs::read_dir(venv.join("xsd"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.path().join("junit-10.xsd")).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    if !python.is_file() || xsds.len() < 2 {
        skip(&format!("no JUnit tools in {} (scripts/junit-tools installs them)", venv.display()));
        return None;
    }
    Some((python, xsds))
}

/// What `junitparser` reads from `file` after `xmlschema` found it valid against every XSD; `Err` with the
/// validator's complaint for an invalid file.
fn consume(tools: &(PathBuf, Vec<PathBuf>), file: &Path) -> Result<Value, Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/junit_check.py");
    let out = Command::new(&tools.0).arg(script).arg(file).args(&tools.1).output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    if out.status.success() { Ok(doc) } else { Err(doc) }
}

/// The newest provisioned glibc build, or a skip.
fn glibc_build() -> Option<Installation> {
    nginx_ketama_harness::testkit::newest_glibc_or_skip()
}

/// Runs `verify args` with its mismatch file in `dir`. A shim that answers gets the default answer timeout:
/// a one-second timeout (what the test of a shim that never answers uses) includes the interpreter's start
/// and fails a slow but correct shim on a loaded machine.
fn verify(args: &[&str], dir: &Path) -> Output {
    verify_with_timeout(args, dir, None)
}

/// [`verify`], with `$NGINX_KETAMA_SHIM_TIMEOUT` set to `timeout` seconds when given.
fn verify_with_timeout(args: &[&str], dir: &Path, timeout: Option<&str>) -> Output {
    let mut cmd = Command::new(CLI);
    cmd.arg("verify").args(args).arg("--mismatches").arg(dir.join("m.jsonl"));
    if let Some(seconds) = timeout {
        cmd.env("NGINX_KETAMA_SHIM_TIMEOUT", seconds);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs `verify args --report junit=… --report json=…` in `dir`; (exit code, JUnit bytes, JSON document).
fn reported(args: &[&str], dir: &Path, name: &str) -> (Option<i32>, String, Value, String) {
    reported_with_timeout(args, dir, name, None)
}

/// [`reported`], with the shim's answer timeout set (see [`verify_with_timeout`]).
fn reported_with_timeout(
    args: &[&str],
    dir: &Path,
    name: &str,
    timeout: Option<&str>,
) -> (Option<i32>, String, Value, String) {
    let (xml, json) = (dir.join(format!("{name}.xml")), dir.join(format!("{name}.json")));
    let mut all = args.to_vec();
    let (x, j) = (format!("junit={}", xml.display()), format!("json={}", json.display()));
    all.extend(["--report", &x, "--report", &j]);
    let out = verify_with_timeout(&all, dir, timeout);
    let xml = std::fs::read_to_string(&xml).unwrap_or_else(|e| panic!("no JUnit report ({e}):\n{}", text(&out)));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(schemas::check(&doc), "nginx-ketama/verify/v1");
    assert_eq!(doc["exit_code"], out.status.code().unwrap(), "the report's verdict is the exit code's");
    (out.status.code(), xml, doc, text(&out))
}

/// Every case junitparser read, flattened: (suite, case name, result kind or "passed", message).
fn cases(read: &Value) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for s in read["suites"].as_array().unwrap() {
        for c in s["cases"].as_array().unwrap() {
            let (kind, message) = match c["results"].as_array().unwrap().first() {
                Some(r) => (r["kind"].as_str().unwrap().to_string(), r["message"].as_str().unwrap_or("").to_string()),
                None => ("passed".to_string(), String::new()),
            };
            out.push((s["name"].as_str().unwrap().to_string(), c["name"].as_str().unwrap().to_string(), kind, message));
        }
    }
    out
}

/// A path that cannot be written is refused before anything runs (exit 2, naming the flag): a missing
/// directory, a directory, a directory that takes no file, a command input, the mismatch file, the same
/// file twice, a format that does not exist.
#[test]
fn report_paths_are_checked_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    // No nginx here: a run that got past the checks would end with exit 3, not 2.
    let empty = tmp.path().join("no-nginx");
    std::fs::create_dir(&empty).unwrap();
    let conf = TempFile::new("nginx.conf", "events {}\nhttp { upstream a { hash $uri; server 127.0.0.1:1; } }\n");
    let m = tmp.path().join("m.jsonl").display().to_string();
    let missing = tmp.path().join("missing/dir/v.xml").display().to_string();
    let dir = tmp.path().display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![format!("junit={missing}")], "does not exist (reports do not create directories)"),
        (vec![format!("json={dir}")], "it is a directory"),
        (vec!["junit=/sys/nginx-ketama-report.xml".into()], "cannot make a file in the directory /sys"),
        (vec![format!("junit={}", conf.display())], "an input of this command"),
        (vec![format!("json={m}")], "it is the mismatch file"),
        (vec![format!("junit={dir}/a.xml"), format!("json={dir}/./a.xml")], "another --report names the same file"),
        (vec!["xml=a.xml".into()], "unknown report format \"xml\": expected junit=FILE or json=FILE"),
    ];
    for (reports, wanted) in cases {
        let mut cmd = Command::new(CLI);
        cmd.args(["verify", "--backend", "local", "--nginx-dir"]).arg(&empty).args(["--mismatches", &m]);
        if reports.iter().any(|r| r.contains("nginx.conf")) {
            cmd.arg("--config").arg(&*conf);
        }
        for r in &reports {
            cmd.args(["--report", r]);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{reports:?}: {}", text(&out));
        assert!(text(&out).contains(wanted), "{reports:?}: {}", text(&out));
        assert!(!text(&out).contains("provision"), "refused before looking for nginx: {}", text(&out));
    }
    assert!(!tmp.path().join("a.xml").exists() && !tmp.path().join("m.jsonl").exists());
}

/// An nginx that cannot start: every topology is an `<error>` with the cause and the replay command (exit
/// 3), valid and read as errors by junitparser; the JSON says `harness_fault`. No nginx runs at all.
#[test]
fn a_harness_fault_is_an_error_case() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("fake/1.30.6");
    std::fs::create_dir_all(tree.join("root/usr/sbin")).unwrap();
    std::fs::write(tree.join("version.txt"), "1.30.6-fake\n").unwrap();
    std::fs::write(tree.join("nginx-V.txt"), "nginx version: nginx/1.30.6\nconfigure arguments: --with-stream\n")
        .unwrap();
    std::fs::write(tree.join("root/usr/sbin/nginx"), "not ELF, but names memcpy@GLIBC_2.14\n").unwrap();
    let nginx = tree.join("nginx");
    std::fs::write(&nginx, "#!/bin/sh\necho 'nginx: [emerg] broken <&> line' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&nginx, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let fake = tmp.path().join("fake").display().to_string();
    let args = ["--backend", "local", "--nginx-dir", &fake, "--topologies", "2", "--stream-sessions", "0"];
    let (code, xml, doc, out) = reported(&args, tmp.path(), "fault");
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(doc["verdict"], "harness_fault");
    assert_eq!(doc["totals"]["errors"], 2, "{doc:#}");
    assert!(xml.contains("broken &lt;&amp;&gt; line"), "{xml}");
    assert!(
        xml.contains("replay: nginx-ketama verify --backend local --versions 1.30.6 --seed 2026 --keys 3000 --only 1")
    );
    let Some(tools) = junit_tools() else { return };
    let read = consume(&tools, &tmp.path().join("fault.xml")).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let got = cases(&read);
    assert_eq!(got.len(), 2, "{read}");
    for (_, _, kind, message) in &got {
        assert_eq!(kind, "error", "{read}");
        assert!(message.contains("nginx exited during startup"), "{message}");
    }
    assert_eq!(read["suites"][0]["errors"], 2);
    assert_eq!(read["suites"][0]["properties"]["verdict"], "harness fault");
}

/// Two runs of one seed write the same bytes, in both formats; the JUnit file is valid and read back with
/// a case per topology and the stream check, per build, all passing.
#[test]
fn two_runs_of_one_seed_write_the_same_bytes() {
    let Some(install) = glibc_build() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let v = install.version.to_string();
    let args = ["--backend", "local", "--versions", &v, "--libc", "glibc", "--topologies", "3", "--keys", "150"];
    let mut args = args.to_vec();
    args.extend(["--stream-sessions", "20"]);
    let (code, xml, doc, out) = reported(&args, tmp.path(), "a");
    assert_eq!(code, Some(0), "{out}");
    let (code, xml2, doc2, out2) = reported(&args, tmp.path(), "b");
    assert_eq!(code, Some(0), "{out2}");
    assert_eq!(xml, xml2, "JUnit: same seed, same bytes");
    assert_eq!(
        std::fs::read(tmp.path().join("a.json")).unwrap(),
        std::fs::read(tmp.path().join("b.json")).unwrap(),
        "JSON: same seed, same bytes"
    );
    assert_eq!(doc, doc2);
    assert_eq!(doc["verdict"], "proven");
    assert_eq!(doc["totals"]["passed"], 4, "{doc:#}");
    // Another seed is another report: the files do say what ran.
    let mut other = args.clone();
    other.extend(["--seed", "7"]);
    let (_, xml3, _, _) = reported(&other, tmp.path(), "c");
    assert_ne!(xml, xml3);
    let Some(tools) = junit_tools() else { return };
    let read = consume(&tools, &tmp.path().join("a.xml")).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let names: Vec<String> = cases(&read).into_iter().map(|(s, c, k, _)| format!("{s}/{c}/{k}")).collect();
    assert_eq!(
        names,
        ["topology 0", "topology 1", "topology 2", "stream check"].map(|c| format!("nginx {v}/{c}/passed"))
    );
    // The validator does reject what the stricter revision forbids: a suite without its error count.
    let broken = tmp.path().join("broken.xml");
    std::fs::write(&broken, xml.replacen(" errors=\"0\" skipped=", " skipped=", 1)).unwrap();
    let e = consume(&tools, &broken).expect_err("a testsuite without errors= is invalid");
    assert!(e.to_string().contains("errors"), "{e}");
    report(&format!("verify --report: JUnit valid against both junit-10.xsd, read by junitparser: {names:?}"));
}

/// A shim that answers wrong: its topology is a `<failure>` naming the key, the shim's and nginx's answers
/// and the replay command. A shim that never answers: a protocol fault (a failure), then the rest of the
/// sweep is skipped, with why.
#[test]
fn mismatches_fail_and_what_did_not_run_is_skipped() {
    let Some(install) = glibc_build() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let shim = TempFile::new(
        "wrong.py",
        "import sys, json\npeers = []\nfor line in sys.stdin:\n    m = json.loads(line)\n    if m['op'] == 'upstream':\n        peers = m['peers']; out = {'ok': True}\n    elif m['op'] == 'reset':\n        out = {'ok': True}\n    else:\n        out = {'attempts': [peers[0]['address']], 'outcome': 'answered'}\n    print(json.dumps(out), flush=True)\n",
    );
    let wrong = format!("python3 {}", shim.display());
    let v = install.version.to_string();
    let base = ["--backend", "local", "--versions", &v, "--keys", "100", "--stream-sessions", "0"];
    let mut args = base.to_vec();
    args.extend(["--topologies", "1", "--shim", &wrong]);
    let (code, xml, doc, out) = reported(&args, tmp.path(), "wrong");
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(doc["verdict"], "mismatches");
    assert_eq!(doc["implementation"]["command"], wrong.as_str());
    let result = &doc["suites"][0]["cases"][0]["result"];
    assert_eq!(result["outcome"], "failed", "{doc:#}");
    let mismatch_lines = std::fs::read_to_string(tmp.path().join("m.jsonl")).unwrap().lines().count();
    assert_eq!(result["mismatches"], mismatch_lines, "as many as the mismatch file holds");
    assert_eq!(doc["mismatch_file"], tmp.path().join("m.jsonl").display().to_string());
    assert!(
        xml.contains(": shim 200 \"") && xml.contains(", nginx 200 \"") && xml.contains("replay: nginx-ketama verify")
    );
    let mut args = base.to_vec();
    args.extend(["--topologies", "3", "--shim", "cat > /dev/null"]);
    // This shim never answers: one second is all it gets.
    let (code, stopped_xml, doc, out) = reported_with_timeout(&args, tmp.path(), "stopped", Some("1"));
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(doc["verdict"], "protocol_fault");
    let outcomes: Vec<&str> = doc["suites"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["result"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["protocol_fault", "skipped", "skipped"], "{doc:#}");
    let Some(tools) = junit_tools() else { return };
    let read = consume(&tools, &tmp.path().join("wrong.xml")).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let got = cases(&read);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].2, "failure");
    assert!(got[0].3.ends_with("requests routed differently from nginx"), "{got:?}");
    let read = consume(&tools, &tmp.path().join("stopped.xml")).unwrap_or_else(|e| panic!("{e}\n{stopped_xml}"));
    let kinds: Vec<String> = cases(&read).into_iter().map(|(_, _, k, _)| k).collect();
    assert_eq!(kinds, ["failure", "skipped", "skipped"], "{read}");
    assert_eq!(
        cases(&read)[1].3,
        "not run: the sweep stopped at the first protocol fault (--keep-going runs the rest)"
    );
}

/// `verify --config` on the example config: a case per upstream, the round-robin one skipped with why.
#[test]
fn a_config_report_has_a_case_per_upstream() {
    let Some(install) = glibc_build() else { return };
    if !nginx_ketama_harness::nginx::netns::available() {
        skip("not root: no private namespaces");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let conf = nginx_ketama_harness::repo_root().join("tests/data/own-config/nginx.conf");
    let conf = conf.display().to_string();
    let v = install.version.to_string();
    let args = ["--config", &conf, "--versions", &v, "--libc", "glibc", "--keys", "100", "--failure-runs", "1"];
    let (code, xml, doc, out) = reported(&args, tmp.path(), "config");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(doc["proof"]["file"], conf.as_str());
    let cases_json = doc["suites"][0]["cases"].as_array().unwrap();
    let summary: Vec<(String, String)> = cases_json
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["result"]["outcome"].as_str().unwrap().to_string()))
        .collect();
    let want = [
        ("app", "passed"),
        ("sessions", "passed"),
        ("images", "passed"),
        ("local_cache", "passed"),
        ("static", "skipped"),
    ];
    assert_eq!(summary, want.map(|(a, b)| (a.to_string(), b.to_string())));
    assert!(cases_json[4]["result"]["reason"].as_str().unwrap().contains("round-robin, not hash"), "{doc:#}");
    assert!(xml.contains("replay: nginx-ketama verify --config"), "{xml}");
    let Some(tools) = junit_tools() else { return };
    consume(&tools, &tmp.path().join("config.xml")).unwrap_or_else(|e| panic!("{e}\n{xml}"));
}

/// A report that cannot be written at the end (a device with /dev/full's numbers, made here: no space)
/// turns a proof into a harness fault (exit 3): a pipeline that reads the report must not pass without it.
/// The node is written through, never replaced.
#[test]
fn a_lost_report_is_no_pass() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Some(install) = glibc_build() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let full = tmp.path().join("full");
    let c = std::ffi::CString::new(full.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mknod with a valid C string.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) } != 0 {
        skip("making a device node needs root");
        return;
    }
    let v = install.version.to_string();
    let junit = format!("junit={}", full.display());
    let args = ["--backend", "local", "--versions", &v, "--libc", "glibc", "--topologies", "1", "--keys", "50"];
    let mut args = args.to_vec();
    args.extend(["--stream-sessions", "0", "--report", &junit]);
    let out = verify(&args, tmp.path());
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = format!("nginx-ketama: --report junit: writing {}: No space left on device", full.display());
    assert!(text(&out).contains("0 mismatches") && text(&out).contains(&said), "{}", text(&out));
    let meta = std::fs::symlink_metadata(&full).unwrap();
    assert!(meta.file_type().is_char_device() && meta.rdev() == libc::makedev(1, 7), "the node is intact");
}
