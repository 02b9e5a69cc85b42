//! How the commands write their answers: [`Format`] (what `--format` names), [`rows`] (the analysis
//! commands' one row model, written as a table, CSV or JSON), [`svg`] (the pictures of `--svg`), [`xml`] (text in XML documents), and the
//! pieces every command uses: [`json`], [`key_text`] and [`escape_field`].

pub(crate) mod rows;
pub(crate) mod svg;
pub(crate) mod xml;

use anyhow::Result;
use std::borrow::Cow;
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

/// JSON to stdout, one document and a newline.
pub(crate) fn json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// A key as JSON shows it: as text (invalid UTF-8 replaced), and in hex too when it is not UTF-8.
pub(crate) fn key_text(key: &[u8]) -> (Cow<'_, str>, Option<String>) {
    let hex = std::str::from_utf8(key).is_err().then(|| key.iter().map(|b| format!("{b:02x}")).collect());
    (String::from_utf8_lossy(key), hex)
}

/// A server string as one tab-separated field on one line: `\\`, `\t`, `\n`, `\r` and `\xNN` for other
/// control characters.
pub(crate) fn escape_field(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || c == '\\') {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.into()
}
