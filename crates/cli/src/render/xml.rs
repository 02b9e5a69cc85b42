//! Text for XML documents (the JUnit report of `verify --report`, the SVG pictures): one escaping for
//! every document the CLI writes, so that any key or server name (keys are bytes) makes a well-formed
//! document.

use std::fmt::Write as _;

/// `s` as an XML 1.0 attribute value: [`text`], with tab, newline and carriage return as character
/// references (a parser turns a literal one into a space) and quotes escaped.
#[cfg_attr(not(feature = "live"), allow(dead_code))]
pub(crate) fn attr(s: &str) -> String {
    escape(s, true)
}

/// `s` as XML 1.0 character data: `&`, `<` and `>` escaped, and every character XML 1.0 cannot hold
/// (control characters other than tab, newline and carriage return, U+FFFE, U+FFFF) written as `\u{…}`,
/// so any key (keys are bytes) makes a well-formed document.
pub(crate) fn text(s: &str) -> String {
    escape(s, false)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_what_xml_cannot_hold() {
        assert_eq!(attr("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c'");
        assert_eq!(attr("x\u{1}y\u{ffff}\tz\n"), "x\\u{1}y\\u{ffff}&#9;z&#10;");
        assert_eq!(text("x\u{1}y\"\tz\n\r"), "x\\u{1}y\"\tz\n&#13;");
        assert_eq!(text("é → ok"), "é → ok");
    }
}
