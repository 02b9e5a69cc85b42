//! The tokenizer: bytes in, directives out, one at a time, with the rules of nginx's configuration reader.
//!
//! * Tokens end at a space, tab, CR, LF, `;` or `{`; a `}` ends a token only after a space (so `${var}` and
//!   `a}` are single tokens). Quoted tokens (`"…"`, `'…'`) end at their quote, which must be followed by a
//!   space, `;`, `{` or `)`.
//! * A backslash protects the next byte (even a newline); when the token is copied, `\"`, `\'` and `\\` lose
//!   the backslash and `\t`, `\r`, `\n` become control characters; any other backslash stays.
//! * `$` followed by `{` does not end the token at the `{`.
//! * `#` outside a token starts a comment to the end of the line.
//! * nginx reads in 4 KiB buffers; a token (or comment) that fills a whole buffer is an error. The exact
//!   buffer boundaries are simulated, so the same inputs fail.
//!
//! Bytes are bytes: nothing here needs UTF-8.

use super::error::{ConfigError, ErrorKind, Location, Text};
use std::path::PathBuf;
use std::sync::Arc;

/// nginx's configuration read buffer.
pub(crate) const BUFFER: usize = 4096;

/// What the tokenizer hands the walk.
#[derive(Debug)]
pub(crate) enum Token {
    /// A directive ended by `;` (`block == false`) or `{`.
    Directive { args: Vec<Vec<u8>>, block: bool, location: Location },
    /// A `}`.
    BlockEnd { location: Location },
    /// The end of the file.
    Eof { location: Location },
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// A tokenizer over one file's bytes.
#[derive(Debug)]
pub(crate) struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
    file: Arc<PathBuf>,
    /// Start (in `src`) and end of the simulated read buffer.
    buf_start: usize,
    buf_end: usize,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a [u8], file: Arc<PathBuf>) -> Lexer<'a> {
        Lexer { src, pos: 0, line: 1, file, buf_start: 0, buf_end: src.len().min(BUFFER) }
    }

    fn here(&self) -> Location {
        Location { file: self.file.clone(), line: self.line }
    }

    fn err(&self, kind: ErrorKind) -> ConfigError {
        ConfigError::invalid(kind, self.here())
    }

    /// The next directive, `}` or end of file.
    pub(crate) fn next_token(&mut self) -> Result<Token, ConfigError> {
        let mut args: Vec<Vec<u8>> = Vec::new();
        let mut start = self.pos;
        let mut start_line = self.line;
        let mut last_space = true;
        let mut need_space = false;
        let mut comment = false;
        let mut escaped = false;
        let mut dquoted = false;
        let mut squoted = false;
        let mut variable = false;
        loop {
            if self.pos >= self.src.len() {
                if !args.is_empty() || !last_space {
                    return Err(self.err(ErrorKind::EofInDirective));
                }
                return Ok(Token::Eof { location: self.here() });
            }
            if self.pos >= self.buf_end {
                // nginx refills its buffer, keeping the current token; a token filling the buffer is an error.
                if start == self.buf_start {
                    self.line = start_line;
                    return Err(self.err(if dquoted {
                        ErrorKind::TooLongQuoted(b'"')
                    } else if squoted {
                        ErrorKind::TooLongQuoted(b'\'')
                    } else {
                        ErrorKind::TooLongToken(Text::new(&self.src[start..start + 10]))
                    }));
                }
                self.buf_start = start;
                self.buf_end = (start + BUFFER).min(self.src.len());
            }
            let c = self.src[self.pos];
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
                comment = false;
            }
            if comment {
                continue;
            }
            if escaped {
                escaped = false;
                continue;
            }
            if need_space {
                if is_space(c) {
                    last_space = true;
                    need_space = false;
                    continue;
                }
                match c {
                    b';' => return Ok(self.directive(args, false)),
                    b'{' => return Ok(self.directive(args, true)),
                    b')' => {
                        last_space = true;
                        need_space = false;
                    }
                    _ => return Err(self.err(ErrorKind::Unexpected(c))),
                }
            }
            if last_space {
                start = self.pos - 1;
                start_line = self.line;
                if is_space(c) {
                    continue;
                }
                match c {
                    b';' | b'{' => {
                        if args.is_empty() {
                            return Err(self.err(ErrorKind::Unexpected(c)));
                        }
                        return Ok(self.directive(args, c == b'{'));
                    }
                    b'}' => {
                        if !args.is_empty() {
                            return Err(self.err(ErrorKind::Unexpected(c)));
                        }
                        return Ok(Token::BlockEnd { location: self.here() });
                    }
                    b'#' => comment = true,
                    b'\\' => {
                        escaped = true;
                        last_space = false;
                    }
                    b'"' => {
                        start += 1;
                        dquoted = true;
                        last_space = false;
                    }
                    b'\'' => {
                        start += 1;
                        squoted = true;
                        last_space = false;
                    }
                    b'$' => {
                        variable = true;
                        last_space = false;
                    }
                    _ => last_space = false,
                }
                continue;
            }
            if c == b'{' && variable {
                continue;
            }
            variable = false;
            if c == b'\\' {
                escaped = true;
                continue;
            }
            if c == b'$' {
                variable = true;
                continue;
            }
            let found = if dquoted {
                dquoted = c != b'"';
                need_space = !dquoted;
                !dquoted
            } else if squoted {
                squoted = c != b'\'';
                need_space = !squoted;
                !squoted
            } else if is_space(c) || c == b';' || c == b'{' {
                last_space = true;
                true
            } else {
                false
            };
            if found {
                args.push(unescape(&self.src[start..self.pos - 1]));
                match c {
                    b';' => return Ok(self.directive(args, false)),
                    b'{' => return Ok(self.directive(args, true)),
                    _ => {}
                }
            }
        }
    }

    fn directive(&self, args: Vec<Vec<u8>>, block: bool) -> Token {
        Token::Directive { args, block, location: self.here() }
    }
}

/// Copies a token, applying nginx's escapes.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' && i + 1 < raw.len() {
            let replaced = match raw[i + 1] {
                b'"' | b'\'' | b'\\' => Some(raw[i + 1]),
                b't' => Some(b'\t'),
                b'r' => Some(b'\r'),
                b'n' => Some(b'\n'),
                _ => None,
            };
            if let Some(b) = replaced {
                out.push(b);
                i += 2;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &[u8]) -> Result<Vec<Vec<String>>, String> {
        let mut lx = Lexer::new(text, Arc::new(PathBuf::from("t")));
        let mut out = Vec::new();
        loop {
            match lx.next_token().map_err(|e| e.to_string())? {
                Token::Directive { args, .. } => {
                    out.push(args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect())
                }
                Token::BlockEnd { .. } => out.push(vec!["}".to_string()]),
                Token::Eof { .. } => return Ok(out),
            }
        }
    }

    #[test]
    fn nginx_token_rules() {
        assert_eq!(tokens(b"if ($a = \"POST\") {").unwrap(), [["if", "($a", "=", "POST", ")"]]);
        assert_eq!(tokens(b"return 301 https://${host}$uri;").unwrap(), [["return", "301", "https://${host}$uri"]]);
        assert_eq!(tokens(b"a b}; }").unwrap(), [vec!["a", "b}"], vec!["}"]]);
        assert_eq!(tokens(b"# caf\xe9\na;").unwrap(), [["a"]]);
        assert_eq!(tokens(b"a 'x\\'y' \"\\t\";").unwrap(), [["a", "x'y", "\t"]]);
        assert_eq!(tokens(b"a \"x\"y;").unwrap_err(), "unexpected \"y\" in t:1");
        assert_eq!(tokens(b"a b").unwrap_err(), "unexpected end of file, expecting \";\" or \"}\" in t:1");
        assert_eq!(tokens(b"a o\\\nk;\n;").unwrap_err(), "unexpected \";\" in t:3");
        let long = [b"a ".as_slice(), &[b'x'; 5000], b";"].concat();
        assert_eq!(tokens(&long).unwrap_err(), "too long parameter \"xxxxxxxxxx...\" started in t:1");
        let long = [b"#".as_slice(), &[b'x'; 5000], b"\na;"].concat();
        assert_eq!(tokens(&long).unwrap_err(), "too long parameter \"#xxxxxxxxx...\" started in t:1");
        let long = [b"a \"".as_slice(), &[b'x'; 5000], b"\";"].concat();
        assert!(tokens(&long).unwrap_err().starts_with("too long parameter, probably missing terminating \"\"\""));
        let ok = [b"a ".as_slice(), &[b'x'; 4000], b";"].concat();
        assert!(tokens(&ok).is_ok());
    }
}
