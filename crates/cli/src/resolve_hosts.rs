//! `nginx-ketama resolve-hosts` (hidden, used by the harness): names resolved as nginx resolves them at
//! start-up, one line per name: `NAME ADDRESS...`.

use anyhow::{Context, Result};
use std::io::Write;

pub(crate) fn run(names: &[String]) -> Result<()> {
    let mut out = crate::stdout::stdout();
    for name in names {
        let addrs = nginx_ketama::resolve::resolve_host(name).with_context(|| format!("resolving {name}"))?;
        let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        writeln!(out, "{name} {}", addrs.join(" "))?;
    }
    out.flush()?;
    Ok(())
}
