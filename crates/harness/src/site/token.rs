//! Strings as tokens of an nginx config, spelled so that nginx's tokenizer reads them back unchanged.

/// `s` for inside a double-quoted token of an nginx config: nginx's tokenizer (`ngx_conf_read_token()`)
/// treats only `"` and `\` specially there (a backslash escapes the next character; `\"` and `\\` unescape
/// to the character, `\t`, `\r`, `\n` to control characters, anything else stays as written), so both are
/// escaped and everything else — blanks, `;`, `{`, `}`, `#`, `$`, `'` — is taken literally.
pub fn escape_in_quotes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `s` as one token of an nginx config, whatever it holds (see [`escape_in_quotes`]).
pub fn quote(s: &str) -> String {
    format!("\"{}\"", escape_in_quotes(s))
}

/// `s` as one token of an nginx config: as written when nginx reads it back unchanged (no blank, no `;`,
/// `{`, `}`, `#`, quote, backslash, `$` or control character: the spellings of every generated topology
/// and recorded case), else [`quote`]d.
pub fn token(s: &str) -> String {
    let special = |c: char| c.is_control() || c.is_whitespace() || ";{}#\"'\\$".contains(c);
    if s.is_empty() || s.chars().any(special) { quote(s) } else { s.to_string() }
}
