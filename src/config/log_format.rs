//! `log_format` (`ngx_http_log_module`, algorithm §12.10): how an access log line is written, so that it can
//! be read back into the request it records ([`crate::access_log`]).

use super::error::Location;
use super::expression::{Expression, Part};

/// `escape=`: how a variable's value is written (`ngx_http_log_set_format`,
/// src/http/modules/ngx_http_log_module.c, all modelled releases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// `"`, `\`, bytes below 0x20 and from 0x7f up as `\xHH`; a value not found as `-`
    /// (`ngx_http_log_escape`, `ngx_http_log_variable`).
    Default,
    /// JSON string escapes; a value not found as nothing (`ngx_http_log_json_variable`).
    Json,
    /// As is; a value not found as nothing (`ngx_http_log_unescaped_variable`).
    None,
}

/// One `log_format`.
#[derive(Debug, Clone)]
pub struct LogFormat {
    /// Its name (`combined` is predefined).
    pub name: String,
    /// `escape=`.
    pub escape: Escape,
    /// The format: its strings concatenated, as a complex value.
    pub format: Expression,
    /// Where it is defined (`None` for the predefined `combined`).
    pub at: Option<Location>,
}

/// The predefined format's text (`ngx_http_combined_fmt`).
pub const COMBINED: &str = "$remote_addr - $remote_user [$time_local] \"$request\" $status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"";

impl LogFormat {
    /// The predefined `combined` format.
    pub fn combined() -> LogFormat {
        LogFormat {
            name: "combined".into(),
            escape: Escape::Default,
            format: Expression::parse(COMBINED.as_bytes()).unwrap_or_default(),
            at: None,
        }
    }

    /// A format given as text (as `log_format NAME [escape=…] TEXT` would define it).
    ///
    /// # Errors
    ///
    /// The text's variable syntax error ([`super::ErrorKind::InvalidVariableName`],
    /// [`super::ErrorKind::MissingBracket`]).
    pub fn from_text(name: &str, escape: Escape, text: &[u8]) -> Result<LogFormat, super::ErrorKind> {
        Ok(LogFormat { name: name.to_string(), escape, format: Expression::parse(text)?, at: None })
    }

    /// The variables the format writes, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.format.parts().iter().filter_map(|p| match p {
            Part::Variable(v) => Some(v.as_str()),
            _ => None,
        })
    }

    /// `log_format NAME [escape=…] STRING…` as written (arguments after the directive's name).
    pub(crate) fn directive(args: &[Vec<u8>], at: &Location) -> Option<LogFormat> {
        let (name, mut rest) = args.split_first()?;
        let mut escape = Escape::Default;
        if let Some(e) = rest.first().and_then(|a| a.strip_prefix(b"escape=")) {
            escape = match e {
                b"json" => Escape::Json,
                b"none" => Escape::None,
                _ => Escape::Default,
            };
            rest = &rest[1..];
        }
        let text = rest.concat();
        let format = Expression::parse(&text).ok()?;
        Some(LogFormat { name: String::from_utf8_lossy(name).into_owned(), escape, format, at: Some(at.clone()) })
    }
}
