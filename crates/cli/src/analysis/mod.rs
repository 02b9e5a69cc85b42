//! The analysis commands (`explain`, `share`, `diff`, `forge`, `compare`): a thin layer over
//! `nginx_ketama::analysis` that loads the configuration, calls the library and prints a table, JSON or
//! CSV. Each command's JSON has one schema, the `Serialize` structs of its module (documented in
//! docs/commands.md).

pub(crate) mod compare;
pub(crate) mod diff;
pub(crate) mod explain;
pub(crate) mod forge;
pub(crate) mod share;

use anyhow::Result;
use nginx_ketama::analysis::share::Unit;
use nginx_ketama::analysis::{Basis, ServerHealth};
use std::io::Write;

/// How a command prints.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for people.
    Table,
    /// One JSON document.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

/// `n / total` as a percentage with three decimals.
pub(crate) fn percent(n: u64, total: u64) -> String {
    if total == 0 { "-".to_string() } else { format!("{:.3}%", n as f64 * 100.0 / total as f64) }
}

/// `n / total` (0 for an empty total).
pub(crate) fn fraction(n: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { n as f64 / total as f64 }
}

/// What a count counts, in words for a heading.
pub(crate) fn unit_words(unit: Unit) -> String {
    match unit {
        Unit::HashSpace(Basis::Ring) => "exact over all 2^32 CRC32 values".into(),
        Unit::HashSpace(Basis::PlainFirstStep) => {
            "exact over the 32,768 values of the first step (2^17 CRC32 values each)".into()
        }
        Unit::HashSpace(Basis::PlainRehash { key_len }) => format!(
            "exact over the 32,768 values of the first step, rehash steps for keys of {key_len} bytes (--key-length)"
        ),
        Unit::Keys => "over the listed keys".into(),
    }
}

/// The JSON spelling of a basis.
pub(crate) fn basis_name(unit: Unit) -> String {
    match unit {
        Unit::HashSpace(Basis::Ring) => "ring".into(),
        Unit::HashSpace(Basis::PlainFirstStep) => "plain-first-step".into(),
        Unit::HashSpace(Basis::PlainRehash { key_len }) => format!("plain-rehash-{key_len}-byte-keys"),
        Unit::Keys => "keys".into(),
    }
}

/// The spelling of a server's health.
pub(crate) fn health_name(h: ServerHealth) -> &'static str {
    match h {
        ServerHealth::Up => "up",
        ServerHealth::Partial => "partly-failing",
        ServerHealth::Down => "down",
        ServerHealth::Failing => "failing",
    }
}

/// Rows as aligned columns: text left-aligned, numbers right-aligned (`right[i]`), two spaces apart. Cells
/// are escaped as `ring` escapes server strings (`\\`, `\t`, `\n`, `\xNN`), so a row stays one line.
pub(crate) fn table(out: &mut impl Write, header: &[&str], right: &[bool], rows: &[Vec<String>]) -> Result<()> {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|r| r.iter().map(|c| crate::escape_field(c).into_owned()).collect()).collect();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = width[i] - cell.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            if right[i] {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in &rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}

/// One CSV field: quoted when it holds a comma, quote or line break.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// One CSV line.
pub(crate) fn csv_line(out: &mut impl Write, fields: &[String]) -> Result<()> {
    let fields: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    writeln!(out, "{}", fields.join(","))?;
    Ok(())
}

/// JSON to stdout, one document and a newline.
pub(crate) fn json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_escapes_cells() {
        let mut out = Vec::new();
        let rows = vec![vec!["a\tb".to_string(), "1".to_string()], vec!["long name".to_string(), "100".to_string()]];
        table(&mut out, &["server", "n"], &[false, true], &rows).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "server       n\na\\tb         1\nlong name  100\n");
    }

    #[test]
    fn csv_quotes_only_when_needed() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("[::1]:80"), "[::1]:80");
    }
}
