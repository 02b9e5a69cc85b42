//! The README's console examples are run and their output compared, so they cannot drift. Each `$ ` line of
//! a ```` ```console ```` block runs in `sh` from `crates/cli/tests/data/readme/` with the built `nginx-ketama` first on
//! `PATH`; the lines up to the next `$ ` are its expected output (stdout and stderr together). Commands that
//! start with `cargo` need nginx (their output comes from a real run) and are not run here.

use std::path::Path;
use std::process::Command;

const CLI: &str = env!("CARGO_BIN_EXE_nginx-ketama");

#[test]
fn readme_console_examples_print_what_the_readme_shows() {
    let readme = std::fs::read_to_string(nginx_ketama_harness::repo_root().join("README.md")).unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/readme");
    let bin_dir = Path::new(CLI).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    let mut in_block = false;
    let mut examples: Vec<(String, String)> = Vec::new();
    for line in readme.lines() {
        match (in_block, line) {
            (false, "```console") => in_block = true,
            (true, "```") => in_block = false,
            (true, l) if l.starts_with("$ ") => examples.push((l[2..].to_string(), String::new())),
            (true, l) => {
                let (_, out) = examples.last_mut().expect("output before any command");
                out.push_str(l);
                out.push('\n');
            }
            _ => {}
        }
    }
    for (command, expected) in &examples {
        if command.starts_with("cargo ") {
            continue;
        }
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{command} 2>&1"))
            .current_dir(&data)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), *expected, "README example: $ {command}");
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} README examples ran");
}
