//! The `server { }` blocks of `http { }` as far as they decide where a request goes (algorithm §12.7):
//! `listen` (address, port, `default_server`), `server_name`, `merge_slashes`, the rewrite module's
//! directives (`set`, `return`, `break`, algorithm §12.9) and the `location` tree with each location's
//! `proxy_pass`.

use super::error::{ErrorKind, Location};
use crate::regex::Regex;
use crate::version::NginxVersion;

/// How a `location` matches (`ngx_http_core_location`, src/http/ngx_http_core_module.c).
#[derive(Debug, Clone)]
pub enum Match {
    /// `location = /x`.
    Exact(Vec<u8>),
    /// `location /x`.
    Prefix(Vec<u8>),
    /// `location ^~ /x`: a prefix that, when it is the longest, stops the regular-expression search.
    PrefixNoRegex(Vec<u8>),
    /// `location ~ re` or `location ~* re` (caseless; `ngx_http_core_regex_location`).
    Regex(Regex),
    /// `location @name`: reached only by internal redirects.
    Named(Vec<u8>),
}

/// What a location does with a request once its rewrite directives have run, as far as this crate models it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    /// `proxy_pass URL`.
    ProxyPass {
        /// The URL as written.
        url: Vec<u8>,
        /// Where the directive is written: the key to its retry rules in [`Config::proxied`]
        /// (`crate::config::Proxied::location`).
        ///
        /// [`Config::proxied`]: crate::config::Config::proxied
        at: Location,
    },
    /// Not `proxy_pass`: files, another module's content handler.
    Other,
}

/// One directive of the rewrite module (`ngx_http_rewrite_module`), in the order written: they run in that
/// order, the server's before the location is chosen, the location's after (algorithm §12.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// `set $variable value`: the name lower-cased without `$`, the value as written.
    Set {
        /// The variable.
        variable: String,
        /// Its value, a complex value.
        value: Vec<u8>,
    },
    /// `return CODE [TEXT]` (`return URL` is 302): the request is answered.
    Return {
        /// The status.
        status: u16,
        /// The text (a complex value as written) of `return CODE TEXT` for a code that is not a
        /// redirection (`ngx_http_rewrite_return` sends it as the body).
        text: Option<Vec<u8>>,
    },
    /// `break`: the rest of this block's rewrite directives are skipped.
    Break,
    /// `rewrite` or an `if` block: not modelled.
    Unmodelled {
        /// `rewrite` or `if`.
        directive: &'static str,
        /// Where it is.
        at: Location,
    },
}

/// One `location` block.
#[derive(Debug, Clone)]
pub struct LocationBlock {
    /// How it matches.
    pub matcher: Match,
    /// Its rewrite directives, in order (not inherited by nested locations).
    pub rewrites: Vec<Rewrite>,
    /// What it does.
    pub handler: Handler,
    /// Its nested locations, in order.
    pub nested: Vec<LocationBlock>,
    /// Where it is written.
    pub at: Location,
}

/// One `listen` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    /// The address (`None` for `*` or a bare port).
    pub addr: Option<std::net::IpAddr>,
    /// The port.
    pub port: u16,
    /// `default_server` (or `default`).
    pub default_server: bool,
}

/// One `server { }` block of `http { }`.
#[derive(Debug, Clone)]
pub struct Site {
    /// Its `listen` lines (none written: nginx listens on `*:80`, as root).
    pub listen: Vec<Listen>,
    /// Its `server_name` values in order, lower-cased but for regular expressions (`~…`, kept as written;
    /// none written: `""`).
    pub names: Vec<Vec<u8>>,
    /// Its regular-expression names (`server_name ~re`), in order, compiled.
    pub regex_names: Vec<Regex>,
    /// `merge_slashes` (default on).
    pub merge_slashes: bool,
    /// Its server-level rewrite directives, in order (they run before a location is chosen).
    pub rewrites: Vec<Rewrite>,
    /// Its top-level locations, in order.
    pub locations: Vec<LocationBlock>,
    /// Where it is written.
    pub at: Location,
}

impl Site {
    /// `$server_name`: the first `server_name`, without the leading dot of a `.example.com` form; empty
    /// without one (`ngx_http_core_merge_srv_conf`, src/http/ngx_http_core_module.c, all modelled releases).
    pub fn server_name(&self) -> &[u8] {
        let first = self.names.first().map_or(&[][..], Vec::as_slice);
        first.strip_prefix(b".").unwrap_or(first)
    }
}

/// Builds the sites while the walk reads `http { }`.
#[derive(Debug)]
pub(crate) struct Builder {
    pub(crate) sites: Vec<Site>,
    /// The open server (if any) and the open locations, innermost last.
    open: Option<Site>,
    locations: Vec<LocationBlock>,
    /// The release read for (the regular-expression compiler's name in errors).
    release: NginxVersion,
}

fn parse_listen(args: &[Vec<u8>]) -> Option<Listen> {
    let spec = std::str::from_utf8(args.first()?).ok()?;
    let default_server = args[1..].iter().any(|a| a == b"default_server" || a == b"default");
    let (addr, port) = if let Ok(port) = spec.parse::<u16>() {
        (None, port)
    } else if let Ok(sa) = spec.parse::<std::net::SocketAddr>() {
        (Some(sa.ip()), sa.port())
    } else if let Some(rest) = spec.strip_prefix("*:") {
        (None, rest.parse().ok()?)
    } else if let Ok(ip) = spec.parse::<std::net::IpAddr>() {
        (Some(ip), 80)
    } else {
        return None;
    };
    Some(Listen { addr, port, default_server })
}

impl Builder {
    pub(crate) fn new(release: NginxVersion) -> Builder {
        Builder { sites: Vec::new(), open: None, locations: Vec::new(), release }
    }

    pub(crate) fn open_server(&mut self, at: &Location) {
        self.open = Some(Site {
            listen: Vec::new(),
            names: Vec::new(),
            regex_names: Vec::new(),
            merge_slashes: true,
            rewrites: Vec::new(),
            locations: Vec::new(),
            at: at.clone(),
        });
    }

    pub(crate) fn close_server(&mut self) {
        if let Some(mut s) = self.open.take() {
            if s.names.is_empty() {
                s.names.push(Vec::new());
            }
            self.sites.push(s);
        }
    }

    /// `location [MODIFIER] URI {` (`ngx_http_core_location`); a regular expression is compiled as
    /// `ngx_http_core_regex_location` does (`~*` caseless).
    pub(crate) fn open_location(&mut self, args: &[Vec<u8>], at: &Location) -> Result<(), ErrorKind> {
        let regex = |p: &[u8], caseless: bool| {
            Regex::compile(p, caseless, self.release).map(Match::Regex).map_err(|e| ErrorKind::Regex(e.0))
        };
        let matcher = match args {
            [m, p] if m == b"=" => Match::Exact(p.clone()),
            [m, p] if m == b"^~" => Match::PrefixNoRegex(p.clone()),
            [m, p] if m == b"~" => regex(p, false)?,
            [m, p] if m == b"~*" => regex(p, true)?,
            [one] => {
                if let Some(r) = one.strip_prefix(b"=") {
                    Match::Exact(r.to_vec())
                } else if let Some(r) = one.strip_prefix(b"^~") {
                    Match::PrefixNoRegex(r.to_vec())
                } else if let Some(r) = one.strip_prefix(b"~*") {
                    regex(r, true)?
                } else if let Some(r) = one.strip_prefix(b"~") {
                    regex(r, false)?
                } else if one.starts_with(b"@") {
                    Match::Named(one.clone())
                } else {
                    Match::Prefix(one.clone())
                }
            }
            _ => Match::Prefix(args.get(1).cloned().unwrap_or_default()),
        };
        self.locations.push(LocationBlock {
            matcher,
            rewrites: Vec::new(),
            handler: Handler::Other,
            nested: Vec::new(),
            at: at.clone(),
        });
        Ok(())
    }

    pub(crate) fn close_location(&mut self) {
        let Some(done) = self.locations.pop() else { return };
        match self.locations.last_mut() {
            Some(parent) => parent.nested.push(done),
            None => {
                if let Some(s) = &mut self.open {
                    s.locations.push(done);
                }
            }
        }
    }

    /// An `if` block in the open server or location (its contents are not read).
    pub(crate) fn open_if(&mut self, at: &Location) {
        self.rewrite(Rewrite::Unmodelled { directive: "if", at: at.clone() });
    }

    /// Appends a rewrite directive to the innermost open location, else the open server.
    fn rewrite(&mut self, r: Rewrite) {
        match (self.locations.last_mut(), &mut self.open) {
            (Some(l), _) => l.rewrites.push(r),
            (None, Some(site)) => site.rewrites.push(r),
            (None, None) => {}
        }
    }

    /// A directive inside the open server or location.
    pub(crate) fn directive(&mut self, args: &[Vec<u8>], at: &Location) -> Result<(), ErrorKind> {
        if self.open.is_none() {
            return Ok(());
        }
        let (name, rest) = (args[0].as_slice(), &args[1..]);
        match name {
            b"return" => {
                let parsed: Option<u16> = rest.first().and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
                let status = parsed.unwrap_or(302);
                let redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
                let text = match rest {
                    [_, text] if parsed.is_some() && !redirect => Some(text.clone()),
                    _ => None,
                };
                self.rewrite(Rewrite::Return { status, text });
                return Ok(());
            }
            b"set" => {
                if let [var, value] = rest {
                    let variable = String::from_utf8_lossy(var.strip_prefix(b"$").unwrap_or(var)).to_ascii_lowercase();
                    self.rewrite(Rewrite::Set { variable, value: value.clone() });
                }
                return Ok(());
            }
            b"break" => {
                self.rewrite(Rewrite::Break);
                return Ok(());
            }
            b"rewrite" => {
                self.rewrite(Rewrite::Unmodelled { directive: "rewrite", at: at.clone() });
                return Ok(());
            }
            _ => {}
        }
        let in_location = !self.locations.is_empty();
        let release = self.release;
        let Some(site) = &mut self.open else { return Ok(()) };
        match name {
            b"listen" if !in_location => {
                if let Some(l) = parse_listen(rest) {
                    site.listen.push(l);
                }
            }
            b"server_name" if !in_location => {
                for n in rest {
                    // ngx_http_core_server_name: a name is lower-cased unless it is a regular expression,
                    // compiled caseless when it has an upper-case ASCII letter.
                    let Some(re) = n.strip_prefix(b"~") else {
                        site.names.push(n.to_ascii_lowercase());
                        continue;
                    };
                    if re.is_empty() {
                        return Err(ErrorKind::EmptyServerNameRegex);
                    }
                    let caseless = re.iter().any(u8::is_ascii_uppercase);
                    site.regex_names.push(Regex::compile(re, caseless, release).map_err(|e| ErrorKind::Regex(e.0))?);
                    site.names.push(n.clone());
                }
            }
            b"merge_slashes" if !in_location => site.merge_slashes = rest.first().is_some_and(|v| v == b"on"),
            b"proxy_pass" => {
                if let (Some(l), Some(url)) = (self.locations.last_mut(), rest.first())
                    && l.handler == Handler::Other
                {
                    l.handler = Handler::ProxyPass { url: url.clone(), at: at.clone() };
                }
            }
            _ => {}
        }
        Ok(())
    }
}
