//! A directive's complex value (the `hash` key, a `return` text, a `map` source or value, a `set` value)
//! parsed as nginx's script compiler reads it: literal bytes, `$name`, `${name}` and the captures `$1`…`$9`
//! (algorithm §12.1; `src/http/ngx_http_script.c` `ngx_http_script_compile`, all modelled releases).

use super::error::{ErrorKind, Text};

/// One piece of a complex value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Bytes copied as they are.
    Literal(Vec<u8>),
    /// `$name` or `${name}`: the name, lower-cased as nginx looks variables up.
    Variable(String),
    /// `$1`…`$9`: a capture of the last regular expression that matched (`$0` is not one: nginx's
    /// compiler reads it as a variable named `0`).
    Capture(u8),
}

/// A parsed complex value.
///
/// # Example
///
/// ```
/// use nginx_ketama::config::expression::{Expression, Part};
///
/// let e = Expression::parse(b"${host}:$request_uri")?;
/// assert_eq!(e.parts(), [Part::Variable("host".into()), Part::Literal(b":".to_vec()), Part::Variable("request_uri".into())]);
/// assert_eq!(Expression::parse(b"$").unwrap_err().to_string(), "invalid variable name");
/// # Ok::<(), nginx_ketama::config::ErrorKind>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expression {
    parts: Vec<Part>,
}

impl Expression {
    /// Parses a value as written in the configuration (after the tokenizer's unquoting).
    ///
    /// # Errors
    ///
    /// nginx's messages: [`ErrorKind::InvalidVariableName`] for a `$` not followed by a name,
    /// [`ErrorKind::MissingBracket`] for `${name` without `}`.
    pub fn parse(value: &[u8]) -> Result<Expression, ErrorKind> {
        let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < value.len() {
            if value[i] != b'$' {
                literal.push(value[i]);
                i += 1;
                continue;
            }
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            i += 1;
            if i == value.len() {
                return Err(ErrorKind::InvalidVariableName);
            }
            // ngx_http_script_compile: a digit after `$` is a capture reference, one digit long.
            if (b'1'..=b'9').contains(&value[i]) {
                parts.push(Part::Capture(value[i] - b'0'));
                i += 1;
                continue;
            }
            let bracket = value[i] == b'{';
            if bracket {
                i += 1;
            }
            let start = i;
            while i < value.len() && is_name(value[i]) {
                i += 1;
            }
            let name = &value[start..i];
            if bracket {
                if value.get(i) != Some(&b'}') {
                    let end = value[start..].iter().position(|&c| c == b'}').map_or(value.len(), |p| start + p);
                    return Err(ErrorKind::MissingBracket(Text::new(&value[start..end])));
                }
                i += 1;
            }
            if name.is_empty() {
                return Err(ErrorKind::InvalidVariableName);
            }
            parts.push(Part::Variable(String::from_utf8_lossy(name).to_ascii_lowercase()));
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Expression { parts })
    }

    /// The pieces, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The variables named, in order (captures not included).
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Variable(v) => Some(v.as_str()),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces() {
        let e = Expression::parse(b"a${Host}b$uri$1$arg_X-").unwrap();
        assert_eq!(
            e.parts(),
            [
                Part::Literal(b"a".to_vec()),
                Part::Variable("host".into()),
                Part::Literal(b"b".to_vec()),
                Part::Variable("uri".into()),
                Part::Capture(1),
                Part::Variable("arg_x".into()),
                Part::Literal(b"-".to_vec()),
            ]
        );
        assert_eq!(Expression::parse(b"$-"), Err(ErrorKind::InvalidVariableName));
        assert_eq!(Expression::parse(b"${uri"), Err(ErrorKind::MissingBracket(Text::new(b"uri"))));
        assert_eq!(Expression::parse(b"").unwrap().parts(), []);
    }
}
