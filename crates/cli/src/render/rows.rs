//! The analysis commands' row model: a command builds its answer once, as [`Rows`] (columns, and rows of
//! typed [`Cell`]s), and the format asked for writes it: an aligned table for people, CSV with a header
//! line, or JSON objects inside the command's document.
//!
//! A cell's type says how each format shows it (a part of a whole is a percentage in the table and a
//! fraction in CSV and JSON; round-robin is `(round-robin)` in text and `null` in JSON); a [`Column`]'s
//! names say in which formats it appears; a row is in every format, or only in the table and CSV (a
//! summary the JSON document carries in fields of its own), or only in the table (a total).

use super::{Format, escape_field};
use anyhow::Result;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, SerializeTuple, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::io::Write;

/// `n / total` as a percentage with three decimals (`-` of nothing).
pub(crate) fn percent(n: u64, total: u64) -> String {
    if total == 0 { "-".to_string() } else { format!("{:.3}%", n as f64 * 100.0 / total as f64) }
}

/// `n / total` (0 of nothing).
pub(crate) fn fraction(n: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { n as f64 / total as f64 }
}

/// A fraction as a percentage with three decimals.
fn percent_of_one(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    /// Text.
    Text(String),
    /// What a hash value goes to: a server, or round-robin (`None`), which is `(round-robin)` in the table
    /// and CSV and `null` in JSON.
    Pick(Option<String>),
    /// A count.
    Count(u64),
    /// `n` of `total` as a share: a percentage in the table, the fraction in CSV and JSON.
    Fraction { n: u64, total: u64 },
    /// `n` of `total` as a count: a percentage in the table, `n` in CSV and JSON.
    CountOf { n: u64, total: u64 },
    /// A signed change: `+3`, `-3`.
    Net(i128),
    /// A 95% interval of a fraction: `lo%–hi%` in the table and CSV, `[lo, hi]` in JSON.
    Interval(f64, f64),
    /// Nothing: empty in the table and CSV, `null` in JSON.
    Empty,
}

/// How the table shows a cell (before escaping).
impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Fraction { n, total } | Cell::CountOf { n, total } => f.write_str(&percent(*n, *total)),
            Cell::Net(n) => write!(f, "{n:+}"),
            Cell::Interval(lo, hi) => write!(f, "{}–{}", percent_of_one(*lo), percent_of_one(*hi)),
            other => f.write_str(&other.csv()),
        }
    }
}

impl Cell {
    /// How CSV shows it (before quoting).
    fn csv(&self) -> String {
        match self {
            Cell::Text(s) | Cell::Pick(Some(s)) => s.clone(),
            Cell::Pick(None) => "(round-robin)".to_string(),
            Cell::Count(n) | Cell::CountOf { n, .. } => n.to_string(),
            Cell::Fraction { n, total } => fraction(*n, *total).to_string(),
            Cell::Net(_) | Cell::Interval(..) => self.to_string(),
            Cell::Empty => String::new(),
        }
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Text(s) | Cell::Pick(Some(s)) => serializer.serialize_str(s),
            Cell::Pick(None) | Cell::Empty => serializer.serialize_none(),
            Cell::Count(n) | Cell::CountOf { n, .. } => serializer.serialize_u64(*n),
            Cell::Fraction { n, total } => serializer.serialize_f64(fraction(*n, *total)),
            Cell::Net(n) => serializer.serialize_i128(*n),
            Cell::Interval(lo, hi) => {
                let mut pair = serializer.serialize_tuple(2)?;
                pair.serialize_element(lo)?;
                pair.serialize_element(hi)?;
                pair.end()
            }
        }
    }
}

/// One column: its name in each format (`None`: not shown there) and its alignment in the table.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    /// The heading in the table.
    heading: Option<Cow<'static, str>>,
    /// The name in the CSV header line.
    csv: Option<&'static str>,
    /// The field of each JSON object.
    json: Option<&'static str>,
    /// Right-aligned in the table (numbers).
    right: bool,
}

impl Column {
    /// Text, left-aligned, called `name` in every format.
    pub(crate) fn text(name: &'static str) -> Column {
        Column { heading: Some(name.into()), csv: Some(name), json: Some(name), right: false }
    }

    /// Numbers, right-aligned, called `name` in every format.
    pub(crate) fn number(name: &'static str) -> Column {
        Column { right: true, ..Column::text(name) }
    }

    /// Headed `heading` in the table (its CSV and JSON name stays).
    pub(crate) fn headed(self, heading: impl Into<Cow<'static, str>>) -> Column {
        Column { heading: Some(heading.into()), ..self }
    }

    /// Called `name` in JSON objects (its heading and CSV name stay).
    pub(crate) fn json_named(self, name: &'static str) -> Column {
        Column { json: Some(name), ..self }
    }

    /// Not in the table.
    pub(crate) fn not_in_table(self) -> Column {
        Column { heading: None, ..self }
    }

    /// Not in CSV.
    pub(crate) fn not_in_csv(self) -> Column {
        Column { csv: None, ..self }
    }

    /// Not in JSON (the document says it elsewhere).
    pub(crate) fn not_in_json(self) -> Column {
        Column { json: None, ..self }
    }
}

/// In which formats a row appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// The table, CSV and JSON.
    Everywhere,
    /// The table and CSV: a summary (round-robin) that the JSON document carries in fields of its own.
    NotInJson,
    /// The table: a total.
    TableOnly,
}

/// A command's answer as rows of cells under columns.
#[derive(Debug, Clone)]
pub(crate) struct Rows {
    columns: Vec<Column>,
    rows: Vec<(Shown, Vec<Cell>)>,
}

impl Rows {
    /// No rows yet.
    pub(crate) fn new(columns: Vec<Column>) -> Rows {
        Rows { columns, rows: Vec::new() }
    }

    fn push_shown(&mut self, shown: Shown, cells: Vec<Cell>) {
        assert_eq!(cells.len(), self.columns.len(), "one cell per column");
        self.rows.push((shown, cells));
    }

    /// A row shown in every format.
    pub(crate) fn push(&mut self, cells: Vec<Cell>) {
        self.push_shown(Shown::Everywhere, cells);
    }

    /// A summary row, in the table and CSV (the JSON document carries it in fields of its own).
    pub(crate) fn push_summary(&mut self, cells: Vec<Cell>) {
        self.push_shown(Shown::NotInJson, cells);
    }

    /// A total, in the table only.
    pub(crate) fn push_total(&mut self, cells: Vec<Cell>) {
        self.push_shown(Shown::TableOnly, cells);
    }

    /// These rows with the columns of `other` on their right, row by row (the same rows: a second measure
    /// of the same servers).
    pub(crate) fn beside(mut self, other: Rows) -> Rows {
        assert_eq!(
            self.rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            other.rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            "the same rows"
        );
        self.columns.extend(other.columns);
        for (row, (_, more)) in self.rows.iter_mut().zip(other.rows) {
            row.1.extend(more);
        }
        self
    }

    /// The rows in `format`: a table, CSV, or JSON as a document of its own (an array of objects).
    pub(crate) fn write(&self, format: Format, out: &mut impl Write) -> Result<()> {
        match format {
            Format::Table => self.write_table(out),
            Format::Csv => self.write_csv(out),
            Format::Json => super::json(out, &self.json()),
        }
    }

    /// The rows as aligned columns: text left-aligned, numbers right-aligned, two spaces apart. Cells are
    /// escaped as `ring` escapes server strings (`\\`, `\t`, `\n`, `\xNN`), so a row stays one line.
    pub(crate) fn write_table(&self, out: &mut impl Write) -> Result<()> {
        let shown: Vec<usize> = (0..self.columns.len()).filter(|&i| self.columns[i].heading.is_some()).collect();
        let header: Vec<&str> = shown.iter().map(|&i| self.columns[i].heading.as_deref().unwrap_or("")).collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|(_, cells)| shown.iter().map(|&i| escape_field(&cells[i].to_string()).into_owned()).collect())
            .collect();
        let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            let mut s = String::new();
            for (n, (&i, cell)) in shown.iter().zip(cells).enumerate() {
                let pad = " ".repeat(width[n] - cell.chars().count());
                if n > 0 {
                    s.push_str("  ");
                }
                if self.columns[i].right {
                    s.push_str(&pad);
                    s.push_str(cell);
                } else {
                    s.push_str(cell);
                    if n + 1 < cells.len() {
                        s.push_str(&pad);
                    }
                }
            }
            s
        };
        writeln!(out, "{}", line(&header))?;
        for row in &rows {
            writeln!(out, "{}", line(&row.iter().map(String::as_str).collect::<Vec<_>>()))?;
        }
        Ok(())
    }

    /// The rows as CSV, after a header line: the columns and rows that CSV shows.
    pub(crate) fn write_csv(&self, out: &mut impl Write) -> Result<()> {
        write_csv(out, [self])
    }

    /// The columns CSV shows, by position.
    fn csv_columns(&self) -> Vec<usize> {
        (0..self.columns.len()).filter(|&i| self.columns[i].csv.is_some()).collect()
    }

    /// The rows JSON shows, as an array of objects whose fields are the columns JSON shows, in order.
    pub(crate) fn json(&self) -> Json<'_> {
        Json(self)
    }
}

/// Several [`Rows`] with the same CSV columns (one measure each, named in a column of their own) as one
/// CSV: one header line, then the rows of each.
pub(crate) fn write_csv<'a>(out: &mut impl Write, all: impl IntoIterator<Item = &'a Rows>) -> Result<()> {
    let mut header: Option<Vec<&str>> = None;
    for rows in all {
        let shown = rows.csv_columns();
        let names: Vec<&str> = shown.iter().map(|&i| rows.columns[i].csv.unwrap_or_default()).collect();
        match &header {
            Some(header) => assert_eq!(header, &names, "the same CSV columns"),
            None => {
                csv_line(out, names.iter().map(|name| name.to_string()))?;
                header = Some(names);
            }
        }
        for (_, cells) in rows.rows.iter().filter(|r| r.0 != Shown::TableOnly) {
            csv_line(out, shown.iter().map(|&i| cells[i].csv()))?;
        }
    }
    Ok(())
}

/// One CSV field: quoted when it holds a comma, quote or line break.
fn csv_field(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")).into() } else { s.into() }
}

/// One CSV line.
fn csv_line(out: &mut impl Write, fields: impl Iterator<Item = String>) -> Result<()> {
    let fields: Vec<String> = fields.map(|f| csv_field(&f).into_owned()).collect();
    writeln!(out, "{}", fields.join(","))?;
    Ok(())
}

/// [`Rows`] as JSON (see [`Rows::json`]).
#[derive(Debug)]
pub(crate) struct Json<'a>(&'a Rows);

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let rows = &self.0;
        let fields: Vec<(&str, usize)> =
            rows.columns.iter().enumerate().filter_map(|(i, c)| Some((c.json?, i))).collect();
        let shown: Vec<&Vec<Cell>> =
            rows.rows.iter().filter(|r| r.0 == Shown::Everywhere).map(|(_, cells)| cells).collect();
        let mut seq = serializer.serialize_seq(Some(shown.len()))?;
        for cells in shown {
            seq.serialize_element(&JsonRow { fields: &fields, cells })?;
        }
        seq.end()
    }
}

/// One row as a JSON object.
struct JsonRow<'a> {
    fields: &'a [(&'a str, usize)],
    cells: &'a [Cell],
}

impl Serialize for JsonRow<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.fields.len()))?;
        for &(name, i) in self.fields {
            map.serialize_entry(name, &self.cells[i])?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Cell {
        Cell::Text(s.to_string())
    }

    fn written(rows: &Rows, write: fn(&Rows, &mut Vec<u8>) -> Result<()>) -> String {
        let mut out = Vec::new();
        write(rows, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A share-like answer: servers, a round-robin summary and a total.
    fn servers() -> Rows {
        let mut rows = Rows::new(vec![
            Column::text("server"),
            Column::number("points").headed("slots"),
            Column::number("fraction").headed("percent"),
            Column::text("note").not_in_csv().not_in_json(),
        ]);
        rows.push(vec![text("a\tb"), Cell::Count(1), Cell::Fraction { n: 1, total: 4 }, text("x")]);
        rows.push(vec![text("long, name"), Cell::Count(100), Cell::Fraction { n: 3, total: 4 }, Cell::Empty]);
        rows.push_summary(vec![Cell::Pick(None), Cell::Empty, Cell::Fraction { n: 0, total: 4 }, Cell::Empty]);
        rows.push_total(vec![text("total"), Cell::Empty, Cell::Fraction { n: 4, total: 4 }, Cell::Empty]);
        rows
    }

    #[test]
    fn the_table_aligns_and_escapes_cells_and_shows_every_row() {
        let lines = [
            "server         slots   percent  note",
            "a\\tb               1   25.000%  x",
            // An empty last cell of text still has its two spaces before it.
            "long, name       100   75.000%  ",
            "(round-robin)           0.000%  ",
            "total                 100.000%  ",
        ];
        assert_eq!(written(&servers(), |r, o| r.write_table(o)), lines.map(|l| format!("{l}\n")).concat());
    }

    #[test]
    fn csv_quotes_only_when_needed_and_leaves_out_totals() {
        assert_eq!(
            written(&servers(), |r, o| r.write_csv(o)),
            "server,points,fraction\na\tb,1,0.25\n\"long, name\",100,0.75\n(round-robin),,0\n"
        );
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("[::1]:80"), "[::1]:80");
    }

    #[test]
    fn json_has_the_rows_shown_everywhere_with_typed_fields_in_column_order() {
        let json = serde_json::to_string(&servers().json()).unwrap();
        assert_eq!(
            json,
            r#"[{"server":"a\tb","points":1,"fraction":0.25},{"server":"long, name","points":100,"fraction":0.75}]"#
        );
        let cells = [Cell::Pick(None), Cell::CountOf { n: 3, total: 4 }, Cell::Net(-2), Cell::Interval(0.5, 0.75)];
        assert_eq!(serde_json::to_string(&cells).unwrap(), "[null,3,-2,[0.5,0.75]]");
        assert_eq!(cells.map(|c| c.to_string()), ["(round-robin)", "75.000%", "-2", "50.000%–75.000%"]);
    }

    #[test]
    fn rows_beside_and_after_in_one_csv() {
        let mut keys = Rows::new(vec![Column::number("keys")]);
        for n in [7, 8, 9] {
            keys.push(vec![Cell::Count(n)]);
        }
        keys.push_total(vec![Cell::Count(24)]);
        keys.rows[2].0 = Shown::NotInJson;
        let both = servers().beside(keys);
        assert_eq!(written(&both, |r, o| r.write_csv(o)).lines().nth(1), Some("a\tb,1,0.25,7"));
        let mut out = Vec::new();
        write_csv(&mut out, [&both, &both]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1 + 2 * 3, "one header");
    }
}
