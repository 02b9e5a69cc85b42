//! What is generated from the command's definition (the `Cli` parser of `main.rs`, as `--help` is): the
//! shell completions (`completions`) and the manual page (`man`).

use anyhow::Result;
use std::io::Write;

/// Writes the completion script for `shell`.
pub(crate) fn completions(mut command: clap::Command, shell: clap_complete::Shell) -> Result<()> {
    // Into memory first: clap_complete panics on a write error (a closed pipe is not one for us).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "nginx-ketama", &mut script);
    write_all(&script)
}

/// Writes the manual page (roff).
pub(crate) fn man(command: clap::Command) -> Result<()> {
    // Into memory first, as for the completions.
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    write_all(&page)
}

fn write_all(bytes: &[u8]) -> Result<()> {
    let mut out = crate::stdout::stdout();
    out.write_all(bytes)?;
    out.flush()?;
    Ok(())
}
