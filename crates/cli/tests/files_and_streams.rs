//! What the command writes and reads when the files and streams around it are hostile but fair: a
//! `--mismatches` or `--svg` path that is a device, a FIFO, a symbolic link or stdout; runs that share a
//! mismatch file; a stdout that is full or whose reader goes away; a key that never ends.
//!
//! Offline: the runs of `verify` on a provisioned nginx are in `files_and_streams_live.rs`.
//!
//! Device nodes are made by the test in its own directory (with /dev/full's numbers), so even a regression
//! that replaced its target could never replace the machine's /dev/full.

#[path = "support/common.rs"]
mod common;
#[path = "support/files.rs"]
mod files;
#[path = "support/processes.rs"]
mod processes;

use common::CLI;
use files::{dev_full, is_fifo, is_full_device, mkfifo, mknod_full, names, read_fifo, scratch};
use nginx_ketama_harness::testkit::{TempFile, skip};
use processes::run_bounded;
use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Before anything runs, `--mismatches` onto a file `verify` reads (the `--config` file or a file it
/// includes) or onto a directory is a usage error.
#[test]
fn mismatches_onto_an_input_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("up.inc"), "hash $arg_k consistent;\nserver 127.0.0.1:9001;\n").unwrap();
    std::fs::write(d.join("nginx.conf"), "events {}\nhttp {\n upstream app {\n  include up.inc;\n }\n}\n").unwrap();
    let before = std::fs::read(d.join("up.inc")).unwrap();
    let conf = d.join("nginx.conf");
    for (target, why) in [
        (conf.clone(), "it is an input of this command".to_string()),
        (d.join("up.inc"), "it is an input of this command".to_string()),
        (d.to_path_buf(), "it is a directory".to_string()),
    ] {
        let out = Command::new(CLI)
            .args(["verify", "--config"])
            .arg(&conf)
            .arg("--mismatches")
            .arg(&target)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("nginx-ketama: --mismatches: not writing {}: {why}\n", target.display())
        );
        assert!(out.stdout.is_empty(), "nothing ran");
    }
    assert_eq!(std::fs::read(d.join("up.inc")).unwrap(), before);
}

/// Issue 18, item 1 (the same class): `--svg` onto a device, a FIFO or a link writes through it, never
/// replacing it.
#[test]
fn svg_goes_through_what_is_not_a_regular_file() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let dir = scratch();
    let d = dir.path();
    let share = |svg: &Path| {
        let mut cmd = Command::new(CLI);
        cmd.args(["share", "--config"]).arg(&*conf).arg("--svg").arg(svg).stdin(Stdio::null());
        run_bounded(cmd, Duration::from_secs(60))
    };
    let full = d.join("full");
    if !mknod_full(&full) {
        skip("making a device node needs root");
        return;
    }
    let out = share(&full);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("nginx-ketama: writing {}: No space left on device (os error 28)\n", full.display())
    );
    assert!(is_full_device(&full));

    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    let out = share(&fifo);
    assert!(out.status.success(), "share --svg FIFO: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(reader.join().unwrap().starts_with("<svg"));
    assert!(is_fifo(&fifo));

    let lonely = d.join("lonely");
    mkfifo(&lonely);
    let out = share(&lonely);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("it is a FIFO that no process is reading"));
    assert!(is_fifo(&lonely));

    std::os::unix::fs::symlink("ring.svg", d.join("link.svg")).unwrap();
    std::fs::write(d.join("ring.svg"), "old").unwrap();
    assert!(share(&d.join("link.svg")).status.success());
    assert!(std::fs::symlink_metadata(d.join("link.svg")).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(d.join("ring.svg")).unwrap().starts_with("<svg"));

    std::os::unix::fs::symlink("gone.svg", d.join("dangling.svg")).unwrap();
    let out = share(&d.join("dangling.svg"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a symbolic link to gone.svg, which does not exist"));

    let want: BTreeSet<String> =
        ["full", "fifo", "lonely", "link.svg", "ring.svg", "dangling.svg"].map(String::from).into();
    assert_eq!(names(d), want);
}

/// A child's stdout on /dev/full: the child holds only a descriptor, so nothing can replace the device.
/// Issue 18, item 13: an error writing stdout names stdout, for every command that writes it (exit 2;
/// 3 for `replay-vectors`, whose codes 0 to 2 are verdicts), never a panic (`verify`'s, which needs nginx:
/// `files_and_streams_live.rs`).
#[test]
fn errors_writing_stdout_name_stdout() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let c = conf.to_str().unwrap();
    let shim = format!("{CLI} shim");
    let commands: Vec<(Vec<&str>, i32)> = vec![
        (vec!["route", "--config", c], 2),
        (vec!["ring", "--config", c], 2),
        (vec!["explain", "--config", c, "k"], 2),
        (vec!["share", "--config", c], 2),
        (vec!["diff", "--from", c], 2),
        (vec!["forge", "--config", c, "--server", "127.0.0.1:9001"], 2),
        (vec!["compare", "--config", c, "--against", "pingora-ketama"], 2),
        (vec!["completions", "bash"], 2),
        (vec!["man"], 2),
        (vec!["resolve-hosts", "localhost"], 2),
        (vec!["replay-vectors", "--shim", &shim], 3),
    ];
    for (args, code) in commands {
        let mut cmd = Command::new(CLI);
        cmd.args(&args).stdin(std::fs::File::open(conf.parent().unwrap().join("nginx.conf")).unwrap());
        let out = cmd.stdout(dev_full()).stderr(Stdio::piped()).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "nginx-ketama: writing stdout: No space left on device\n",
            "{args:?}"
        );
    }
}

/// With an address-space limit of 1 GiB: an endless line cannot grow past it unnoticed.
fn limited(mut cmd: Command) -> Command {
    // SAFETY: setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 1 << 30, rlim_max: 1 << 30 };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Issue 18, item 10: one endless key (`/dev/zero`) on stdin or in `--keys` is an error naming its line,
/// within an address space of 1 GiB and a minute; a key of exactly the limit (16 MiB) is still read.
#[test]
fn an_endless_key_is_an_error_naming_its_line() {
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let c = conf.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.txt");
    let mut text = b"a\nb\n".to_vec();
    text.extend(std::iter::repeat_n(b'x', (16 << 20) + 1));
    text.push(b'\n');
    std::fs::write(&long, &text).unwrap();
    let limit = dir.path().join("limit.txt");
    std::fs::write(&limit, vec![b'y'; 16 << 20]).unwrap();
    let l = long.to_str().unwrap();
    let too_long = "a key longer than 16 MiB (16777216 bytes)";
    let cases: Vec<(Vec<&str>, Option<&str>, String)> = vec![
        (vec!["route", "--config", c], Some("/dev/zero"), format!("stdin:1: {too_long}")),
        (vec!["share", "--config", c, "--keys", "/dev/zero"], None, format!("/dev/zero:1: {too_long}")),
        (vec!["diff", "--from", c, "--keys", "/dev/zero"], None, format!("/dev/zero:1: {too_long}")),
        (
            vec!["compare", "--config", c, "--against", "pingora-ketama", "--keys", "/dev/zero"],
            None,
            format!("/dev/zero:1: {too_long}"),
        ),
        (vec!["share", "--config", c, "--keys", l], None, format!("{l}:3: {too_long}")),
        (vec!["route", "--config", c], Some(l), format!("stdin:3: {too_long}")),
        (vec!["shim"], Some("/dev/zero"), "stdin:1: a shim message longer than 64 MiB (67108864 bytes)".into()),
    ];
    for (args, stdin, message) in cases {
        let mut cmd = Command::new(CLI);
        cmd.args(&args);
        cmd.stdin(stdin.map_or_else(Stdio::null, |f| Stdio::from(std::fs::File::open(f).unwrap())));
        let out = run_bounded(limited(cmd), Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("nginx-ketama: {message}\n"), "{args:?}");
    }
    let mut cmd = Command::new(CLI);
    cmd.args(["share", "--config", c, "--format", "json", "--keys"]).arg(&limit).stdin(Stdio::null());
    let out = run_bounded(limited(cmd), Duration::from_secs(60));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["keys"]["total"], 1, "a key of exactly 16 MiB is read");
}

/// The peak resident set (VmHWM, KiB) of process `pid`.
fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
    line.trim().trim_end_matches(" kB").parse().unwrap()
}

/// Issue 18, item 10: `--keys` is streamed through the count, so memory does not grow with the file: three
/// million keys fit in the same few MiB as a thousand (held in memory, they took about 160 MiB more). The
/// keys come through a FIFO, so the peak is read while `share` still waits for the end of its input.
#[test]
fn keys_files_are_streamed() {
    use std::io::Write;
    let conf = TempFile::new(
        "nginx.conf",
        "events {}\nhttp { upstream a { hash $arg_k consistent; server 127.0.0.1:9001; server 127.0.0.1:9002; } }\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("keys");
    mkfifo(&fifo);
    let peak = |n: usize| {
        let mut cmd = Command::new(CLI);
        cmd.args(["share", "--config"]).arg(&*conf).args(["--format", "json", "--keys"]).arg(&fifo);
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut keys = std::io::BufWriter::new(std::fs::File::options().write(true).open(&fifo).unwrap());
        for i in 0..n {
            writeln!(keys, "/item/{i}").unwrap();
        }
        keys.flush().unwrap();
        let kib = vm_hwm_kib(child.id());
        drop(keys);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["keys"]["total"], n, "every key counted");
        kib
    };
    let small = peak(1_000);
    let large = peak(3_000_000);
    assert!(large < small + 8 * 1024, "peak RSS {small} KiB for 1e3 keys, {large} KiB for 3e6 keys");
}
