//! The directive walk: pulls directives from the tokenizer in file order and checks each one as nginx does
//! (known name, allowed context, `;` versus `{`), follows blocks and includes, and hands `upstream` blocks to
//! [`super::block`]. Errors come out in the order nginx meets them.

use super::block::{self, UpstreamBlock};
use super::directives::{self, Ctx, DirectiveFlags};
use super::error::{ConfigError, ErrorKind, Location, Text};
use super::includes::{self, MAX_CONFIG_BYTES};
use super::tokens::{Lexer, Token};
use super::values;
use super::{Balancer, Context, Input, LoadOptions, Proxied, Retry, UpstreamConfig, Warning};
use crate::failure::{Condition, NextUpstream, Proxying, RetryPolicy, StreamPolicy};
use crate::server::Address;
use crate::version::Rules;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The deepest `include` nesting followed.
///
/// NGINX-DIFF: nginx has no limit (an include cycle ends when it runs out of file descriptors).
pub const MAX_INCLUDE_DEPTH: usize = 64;

/// The deepest block nesting followed.
///
/// NGINX-DIFF: nginx has no limit; the reader stops here instead of exhausting its stack.
pub const MAX_NESTING: usize = 64;

/// One upstream name nginx knows in a context: declared by `upstream` or implied by `proxy_pass` & co.
#[derive(Debug)]
struct Known {
    host: Vec<u8>,
    created: bool,
    port: u16,
    no_port: bool,
    location: Location,
}

/// The retry directives one block sets for one module (unset fields inherit, algorithm §5.1).
#[derive(Debug, Default, Clone)]
struct RetrySettings {
    /// `*_next_upstream` words as written (several lines add up; `None`: not set here).
    next: Option<Vec<Condition>>,
    /// `proxy_next_upstream on|off` (stream).
    flag: Option<bool>,
    tries: Option<u32>,
    timeout_ms: Option<u64>,
}

/// One block that can hold retry directives (`http`, `server`, `location`, `if` in a location,
/// `limit_except`, `stream`, a stream `server`) and its parent.
#[derive(Debug, Default)]
struct Frame {
    parent: Option<usize>,
    settings: Vec<(Proxying, RetrySettings)>,
}

/// A `*_pass` naming an upstream by name (no port, no variables), in the frame it sits in.
#[derive(Debug)]
struct Pass {
    frame: usize,
    module: Proxying,
    host: Vec<u8>,
    at: Location,
}

/// What one `http {}` or `stream {}` collects until it ends.
#[derive(Debug, Default)]
struct Scope {
    known: Vec<Known>,
    blocks: Vec<UpstreamBlock>,
    defined: Vec<Vec<u8>>,
    /// The `hash` keys' variables, in order, with where they were used.
    used: Vec<Vec<u8>>,
    resolver: bool,
    /// The first `location` that repeats a sibling's (reported once the block is read).
    duplicate_location: Option<(Text, Location)>,
    /// Blocks with retry directives; frame 0 is the `http {}`/`stream {}` (or the fragment) itself.
    frames: Vec<Frame>,
    /// The open frames, innermost last.
    open: Vec<usize>,
    passes: Vec<Pass>,
}

/// How nginx compares locations for duplicates: exact or not, and the name; regex locations never clash.
fn location_key(args: &[Vec<u8>]) -> Option<(u8, Vec<u8>)> {
    let (modifier, name): (&[u8], &[u8]) = match args {
        [m, n] => (m, n),
        [one] => {
            if one.starts_with(b"@") {
                // Named locations may repeat.
                return None;
            } else if let Some(rest) = one.strip_prefix(b"=") {
                (b"=", rest)
            } else if let Some(rest) = one.strip_prefix(b"^~") {
                (b"^~", rest)
            } else if one.starts_with(b"~") {
                return None;
            } else {
                (b"", one)
            }
        }
        _ => return None,
    };
    match modifier {
        b"=" => Some((1, name.to_vec())),
        b"" | b"^~" => Some((0, name.to_vec())),
        _ => None,
    }
}

/// `user NAME [GROUP]`: nginx (run as root) looks both up when it reads the directive.
fn check_user(user: &[u8], group: &[u8], at: &Location) -> Result<(), ConfigError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let (Ok(u), Ok(g)) = (std::ffi::CString::new(user), std::ffi::CString::new(group)) else { return Ok(()) };
    // SAFETY: both arguments are NUL-terminated strings that outlive the calls; the results are only
    // compared with null.
    if unsafe { libc::getpwnam(u.as_ptr()) }.is_null() {
        return fail(ErrorKind::LookupFailed("getpwnam", Text::new(user)), at);
    }
    // SAFETY: as above.
    if unsafe { libc::getgrnam(g.as_ptr()) }.is_null() {
        return fail(ErrorKind::LookupFailed("getgrnam", Text::new(group)), at);
    }
    Ok(())
}

pub(crate) struct Walk<'o> {
    options: &'o LoadOptions,
    rules: Rules,
    prefix: PathBuf,
    budget: u64,
    includes: usize,
    depth: usize,
    stream_loaded: bool,
    in_stream: bool,
    seen: [bool; 3],
    scope: Scope,
    /// Directives that may not repeat ([`directives::is_single`]) seen so far, one list per open block (the main level first).
    singles: Vec<Vec<Vec<u8>>>,
    /// Sibling `location` keys, one list per open `server`/`location`.
    locations: Vec<Vec<(u8, Vec<u8>)>>,
    zones: Vec<(Vec<u8>, u64, Context)>,
    pub(crate) upstreams: Vec<UpstreamConfig>,
    /// The `server { }` blocks of `http { }`.
    pub(crate) sites: super::sites::Builder,
    /// The `map` blocks of `http { }`.
    pub(crate) maps: super::maps::Builder,
    /// The `log_format`s of `http { }`.
    pub(crate) log_formats: Vec<super::log_format::LogFormat>,
    pub(crate) warnings: Vec<Warning>,
    pub(crate) proxied: Vec<Proxied>,
    /// Every file read from disk, in the order read.
    pub(crate) files: Vec<PathBuf>,
}

impl<'o> Walk<'o> {
    pub(crate) fn new(options: &'o LoadOptions, prefix: PathBuf) -> Walk<'o> {
        Walk {
            options,
            rules: options.version.rules(),
            prefix,
            budget: MAX_CONFIG_BYTES,
            includes: 0,
            depth: 0,
            stream_loaded: false,
            in_stream: false,
            seen: [false; 3],
            scope: Scope::default(),
            singles: vec![Vec::new()],
            locations: Vec::new(),
            zones: Vec::new(),
            upstreams: Vec::new(),
            sites: super::sites::Builder::new(options.version),
            maps: super::maps::Builder::new(options.version),
            log_formats: Vec::new(),
            warnings: Vec::new(),
            proxied: Vec::new(),
            files: Vec::new(),
        }
    }

    /// The release whose rules apply.
    pub(crate) fn version(&self) -> crate::version::NginxVersion {
        self.options.version
    }

    /// What the checks inside `upstream { }` see of this walk.
    fn env(&mut self) -> block::Env<'_> {
        block::Env { rules: self.rules, options: self.options, warnings: &mut self.warnings }
    }

    /// Reads the main file's bytes.
    pub(crate) fn read_main(&mut self, path: &Path) -> Result<Vec<u8>, ConfigError> {
        self.read(path, None)
    }

    /// Reads a file's bytes (within the budget) and notes that it was read.
    fn read(&mut self, path: &Path, at: Option<&Location>) -> Result<Vec<u8>, ConfigError> {
        let text = includes::read(path, at, &mut self.budget)?;
        self.files.push(path.to_path_buf());
        Ok(text)
    }

    pub(crate) fn take_budget(&mut self, n: usize) -> Result<(), ConfigError> {
        self.budget = self.budget.checked_sub(n as u64).ok_or_else(|| {
            ConfigError::invalid(ErrorKind::TooLarge(MAX_CONFIG_BYTES), Location { file: Arc::default(), line: 1 })
        })?;
        Ok(())
    }

    /// Walks the main file, then runs the checks nginx makes once everything is read.
    pub(crate) fn main(&mut self, text: &[u8], file: &Path) -> Result<(), ConfigError> {
        let file = Arc::new(file.to_path_buf());
        let mut lx = Lexer::new(text, file.clone());
        let ctx = match self.options.input {
            Input::Config => Ctx::Main,
            Input::Fragment => Ctx::Http,
            Input::StreamFragment => Ctx::Stream,
        };
        if ctx == Ctx::Stream {
            self.stream_loaded = true;
            self.in_stream = true;
        }
        let end = self.block(&mut lx, ctx, false)?;
        match ctx {
            Ctx::Main => {
                if !self.seen[0] {
                    return Err(ConfigError::invalid(ErrorKind::NoEvents, end));
                }
            }
            Ctx::Http => self.finish(Context::Http)?,
            _ => self.finish(Context::Stream)?,
        }
        // Shared memory is set up once the whole configuration is read.
        if let Some((name, ..)) = self.zones.iter().find(|(_, size, _)| *size == 0) {
            return Err(ConfigError::invalid(ErrorKind::ZeroSizeZone(Text::new(name)), end));
        }
        Ok(())
    }

    /// Reads directives until the end of the block (`inside`) or of the file; returns where it ended.
    fn block(&mut self, lx: &mut Lexer<'_>, ctx: Ctx, inside: bool) -> Result<Location, ConfigError> {
        loop {
            match lx.next_token()? {
                Token::Eof { location } => {
                    if inside {
                        return Err(ConfigError::invalid(ErrorKind::EofInBlock, location));
                    }
                    return Ok(location);
                }
                Token::BlockEnd { location } => {
                    if !inside {
                        return Err(ConfigError::invalid(ErrorKind::Unexpected(b'}'), location));
                    }
                    return Ok(location);
                }
                Token::Directive { args, block, location } => {
                    if ctx == Ctx::Opaque || ctx == Ctx::Map {
                        if block {
                            return Err(ConfigError::invalid(ErrorKind::Unexpected(b'{'), location));
                        }
                        if ctx == Ctx::Map
                            && args.len() != 2
                            && !(args.len() == 1 && (args[0] == b"hostnames" || args[0] == b"volatile"))
                        {
                            return Err(ConfigError::invalid(ErrorKind::MapParameters, location));
                        }
                        if ctx == Ctx::Map {
                            self.maps.line(&args).map_err(|k| ConfigError::invalid(k, location.clone()))?;
                        }
                        for a in &args {
                            self.scope.defined.extend(values::named_captures(a));
                        }
                        if args[0] == b"include" && args.len() == 2 {
                            self.include(&args, &location, ctx)?;
                        }
                        continue;
                    }
                    self.directive(lx, ctx, args, block, location)?;
                }
            }
        }
    }

    /// Enters a block directive's body.
    fn enter(&mut self, lx: &mut Lexer<'_>, ctx: Ctx, at: &Location) -> Result<Location, ConfigError> {
        if self.depth >= MAX_NESTING {
            return Err(ConfigError::invalid(ErrorKind::NestingDepth(MAX_NESTING), at.clone()));
        }
        self.depth += 1;
        self.singles.push(Vec::new());
        let framed =
            matches!(ctx, Ctx::Server | Ctx::Location | Ctx::LocationIf | Ctx::LimitExcept | Ctx::StreamServer);
        if framed {
            let parent = self.frame();
            self.scope.frames.push(Frame { parent: Some(parent), settings: Vec::new() });
            self.scope.open.push(self.scope.frames.len() - 1);
        }
        let r = self.block(lx, ctx, true);
        if framed {
            self.scope.open.pop();
        }
        self.singles.pop();
        self.depth -= 1;
        r
    }

    /// The innermost open frame (frame 0, the `http {}`/`stream {}` level, is made on first use).
    fn frame(&mut self) -> usize {
        if self.scope.frames.is_empty() {
            self.scope.frames.push(Frame::default());
        }
        self.scope.open.last().copied().unwrap_or(0)
    }

    /// `*_next_upstream`, `*_next_upstream_tries`, `*_next_upstream_timeout`: checked with nginx's slot
    /// handlers' messages and remembered for the frame.
    fn retry_directive(
        &mut self,
        ctx: Ctx,
        module: Proxying,
        args: &[Vec<u8>],
        at: &Location,
    ) -> Result<(), ConfigError> {
        let name = args[0].as_slice();
        let stream = matches!(ctx, Ctx::Stream | Ctx::StreamServer);
        let frame = self.frame();
        let mut settings = {
            let f = &mut self.scope.frames[frame];
            match f.settings.iter().position(|(m, _)| *m == module) {
                Some(i) => f.settings[i].1.clone(),
                None => RetrySettings::default(),
            }
        };
        if name.ends_with(b"_tries") {
            let n = values::atoi(&args[1]).ok_or_else(|| {
                ConfigError::invalid(ErrorKind::DirectiveInvalidNumber(Text::c_str(name)), at.clone())
            })?;
            settings.tries = Some(u32::try_from(n).unwrap_or(u32::MAX));
        } else if name.ends_with(b"_timeout") {
            let ms = values::parse_time(&args[1], false)
                .ok_or_else(|| ConfigError::invalid(ErrorKind::DirectiveInvalidValue(Text::c_str(name)), at.clone()))?;
            settings.timeout_ms = Some(ms);
        } else if stream {
            // ngx_conf_set_flag_slot: `on` or `off`, any letter case.
            let v = &args[1];
            settings.flag = Some(if v.eq_ignore_ascii_case(b"on") {
                true
            } else if v.eq_ignore_ascii_case(b"off") {
                false
            } else {
                return fail(ErrorKind::NotOnOff(Text::c_str(v), Text::c_str(name)), at);
            });
        } else {
            // ngx_conf_set_bitmask_slot: every word known (any case); a repeated one is a warning.
            let words = settings.next.get_or_insert_with(Vec::new);
            for word in &args[1..] {
                let condition = std::str::from_utf8(word).ok().and_then(|w| module.condition(w));
                let Some(c) = condition else {
                    return fail(ErrorKind::InvalidValue(Text::c_str(word)), at);
                };
                if words.contains(&c) {
                    self.warnings.push(Warning {
                        message: format!("duplicate value \"{}\"", Text::c_str(word)),
                        location: at.clone(),
                    });
                } else {
                    words.push(c);
                }
            }
        }
        let f = &mut self.scope.frames[frame];
        match f.settings.iter().position(|(m, _)| *m == module) {
            Some(i) => f.settings[i].1 = settings,
            None => f.settings.push((module, settings)),
        }
        Ok(())
    }

    fn directive(
        &mut self,
        lx: &mut Lexer<'_>,
        ctx: Ctx,
        args: Vec<Vec<u8>>,
        is_block: bool,
        location: Location,
    ) -> Result<(), ConfigError> {
        let at = &location;
        let name = args[0].as_slice();
        let flags = self.flags(name);
        if !flags.is_known(self.stream_loaded) {
            return fail(ErrorKind::UnknownDirective(Text::c_str(name)), at);
        }
        if !flags.allows(ctx) {
            return fail(ErrorKind::NotAllowedHere(Text::c_str(name)), at);
        }
        let wants_block = flags.is_block_in(ctx);
        if wants_block && !is_block {
            return fail(ErrorKind::NoOpeningBrace(Text::c_str(name)), at);
        }
        if !wants_block && is_block {
            return fail(ErrorKind::NotTerminated(Text::c_str(name)), at);
        }
        let n = args.len() - 1;
        let count = |ok: bool| if ok { Ok(()) } else { fail(ErrorKind::ArgumentCount(Text::c_str(name)), at) };
        if !is_block && let Some(arity) = directives::arity(name) {
            // NGINX-DIFF: argument counts are those of the newest probed release, for every release.
            count(arity.accepts(n))?;
        }
        if !is_block && directives::is_single(name) {
            let seen = self.singles.last_mut().expect("the main level is always open");
            if seen.iter().any(|s| s == name) {
                return fail(ErrorKind::Duplicate(Text::c_str(name)), at);
            }
            seen.push(name.to_vec());
        }
        for a in &args {
            self.scope.defined.extend(values::named_captures(a));
        }
        if matches!(ctx, Ctx::Server | Ctx::Location) && !is_block {
            self.sites.directive(&args, &location).map_err(|k| ConfigError::invalid(k, at.clone()))?;
        }
        match (ctx, name) {
            (_, b"include") => {
                count(n == 1)?;
                return self.include(&args, at, ctx);
            }
            (Ctx::Main, b"events" | b"http" | b"stream") => {
                count(n == 0)?;
                let i = match name {
                    b"events" => 0,
                    b"http" => 1,
                    _ => 2,
                };
                if self.seen[i] {
                    return fail(ErrorKind::Duplicate(Text::new(name)), at);
                }
                self.seen[i] = true;
                let (inner, context) = match i {
                    0 => {
                        self.enter(lx, Ctx::Events, at)?;
                        return Ok(());
                    }
                    1 => (Ctx::Http, Context::Http),
                    _ => (Ctx::Stream, Context::Stream),
                };
                self.scope = Scope::default();
                self.in_stream = context == Context::Stream;
                self.enter(lx, inner, at)?;
                let r = self.finish(context);
                self.in_stream = false;
                return r;
            }
            (Ctx::Main, b"load_module") => {
                count(n == 1)?;
                if args[1].ends_with(b"ngx_stream_module.so") {
                    // NGINX-DIFF: the module file is not opened; only the stream module is modelled.
                    self.stream_loaded = true;
                }
            }
            (Ctx::Http | Ctx::Stream, b"upstream") => {
                count(n == 1)?;
                let context = if ctx == Ctx::Http { Context::Http } else { Context::Stream };
                self.declare(&args[1], at)?;
                let inner = if ctx == Ctx::Http { Ctx::Upstream } else { Ctx::StreamUpstream };
                let mut up = UpstreamBlock::new(Text::new(&args[1]), context, at.clone());
                // The body's directives are checked against the table like any other, then by `block`.
                self.upstream_body(lx, inner, &mut up)?;
                self.scope.blocks.push(up);
            }
            (Ctx::Http | Ctx::Stream, b"resolver") => self.scope.resolver = true,
            (Ctx::Http, b"server") | (Ctx::Stream, b"server") => {
                count(n == 0)?;
                self.locations.push(Vec::new());
                if ctx == Ctx::Http {
                    self.sites.open_server(at);
                }
                let r = self.enter(lx, if ctx == Ctx::Http { Ctx::Server } else { Ctx::StreamServer }, at);
                if ctx == Ctx::Http {
                    self.sites.close_server();
                }
                self.locations.pop();
                r?;
            }
            (Ctx::Main, b"user") => {
                count((1..=2).contains(&n))?;
                check_user(&args[1], args.get(2).unwrap_or(&args[1]), at)?;
            }
            (Ctx::Server | Ctx::Location, b"location") => {
                count((1..=2).contains(&n))?;
                if let Some(key) = location_key(&args[1..]) {
                    let siblings = self.locations.last_mut().expect("a server or location is open");
                    if siblings.contains(&key) && self.scope.duplicate_location.is_none() {
                        self.scope.duplicate_location = Some((Text::new(&key.1), at.clone()));
                    }
                    siblings.push(key);
                }
                self.locations.push(Vec::new());
                self.sites.open_location(&args[1..], at).map_err(|k| ConfigError::invalid(k, at.clone()))?;
                let r = self.enter(lx, Ctx::Location, at);
                self.sites.close_location();
                self.locations.pop();
                r?;
            }
            (Ctx::Server | Ctx::Location, b"if") => {
                count(n >= 1)?;
                self.sites.open_if(at);
                self.enter(lx, if ctx == Ctx::Server { Ctx::ServerIf } else { Ctx::LocationIf }, at)?;
            }
            (Ctx::Location, b"limit_except") => {
                count(n >= 1)?;
                self.enter(lx, Ctx::LimitExcept, at)?;
            }
            (_, b"map") => {
                count(n == 2)?;
                if !self.in_stream {
                    self.maps.open(&args[1], &args[2], at).map_err(|k| ConfigError::invalid(k, at.clone()))?;
                }
                self.define(&args[2]);
                let r = self.enter(lx, Ctx::Map, at);
                self.maps.close();
                r?;
            }
            (Ctx::Http, b"log_format") => {
                if let Some(f) = super::log_format::LogFormat::directive(&args[1..], at) {
                    self.log_formats.push(f);
                }
            }
            (_, b"split_clients") => {
                count(n == 2)?;
                self.define(&args[2]);
                self.enter(lx, Ctx::Opaque, at)?;
            }
            (_, b"geo") => {
                count((1..=2).contains(&n))?;
                self.define(&args[n]);
                self.enter(lx, Ctx::Opaque, at)?;
            }
            (_, b"set" | b"auth_request_set" | b"perl_set" | b"js_set") if n >= 1 => self.define(&args[1]),
            (_, b"proxy_pass" | b"fastcgi_pass" | b"uwsgi_pass" | b"scgi_pass" | b"grpc_pass" | b"memcached_pass")
                if n == 1 =>
            {
                if let Some(host) = self.implied(name, &args[1], at)? {
                    let module = module_of(name);
                    let frame = self.frame();
                    self.scope.passes.push(Pass { frame, module, host, at: at.clone() });
                }
            }
            (_, _) if retry_module(name).is_some() && n >= 1 => {
                let module = retry_module(name).expect("checked");
                self.retry_directive(ctx, module, &args, at)?;
            }
            _ if is_block => {
                // NGINX-DIFF: other blocks (`types`, `charset_map`, …) hold entries the reader does not check.
                self.enter(lx, Ctx::Opaque, at)?;
            }
            // NGINX-DIFF: outside `upstream`, arguments are not checked.
            _ => {}
        }
        Ok(())
    }

    /// What the chosen release knows of the directive `name`.
    fn flags(&self, name: &[u8]) -> DirectiveFlags {
        directives::flags(name, self.rules.directive_table)
    }

    fn define(&mut self, var: &[u8]) {
        if let Some(v) = var.strip_prefix(b"$") {
            self.scope.defined.push(v.to_ascii_lowercase());
        }
    }

    /// Reads an `upstream { }` body: generic checks, then the upstream's own rules.
    fn upstream_body(&mut self, lx: &mut Lexer<'_>, ctx: Ctx, up: &mut UpstreamBlock) -> Result<(), ConfigError> {
        if self.depth >= MAX_NESTING {
            return Err(ConfigError::invalid(ErrorKind::NestingDepth(MAX_NESTING), up.location.clone()));
        }
        self.depth += 1;
        let r = self.upstream_tokens(lx, ctx, up);
        self.depth -= 1;
        let end = r?;
        if up.servers.is_empty() {
            return Err(ConfigError::invalid(ErrorKind::NoServersInside, end));
        }
        Ok(())
    }

    fn upstream_tokens(
        &mut self,
        lx: &mut Lexer<'_>,
        ctx: Ctx,
        up: &mut UpstreamBlock,
    ) -> Result<Location, ConfigError> {
        loop {
            let (args, is_block, at) = match lx.next_token()? {
                Token::Eof { location } => return Err(ConfigError::invalid(ErrorKind::EofInBlock, location)),
                Token::BlockEnd { location } => return Ok(location),
                Token::Directive { args, block, location } => (args, block, location),
            };
            self.upstream_directive(lx, ctx, up, args, is_block, at)?;
        }
    }

    fn upstream_directive(
        &mut self,
        lx: &mut Lexer<'_>,
        ctx: Ctx,
        up: &mut UpstreamBlock,
        args: Vec<Vec<u8>>,
        is_block: bool,
        location: Location,
    ) -> Result<(), ConfigError> {
        let at = &location;
        let name = args[0].as_slice();
        let mut flags = self.flags(name);
        // Releases between probed ones: the version rules say what changed inside `upstream`.
        let here = DirectiveFlags::KNOWN | DirectiveFlags::allowed_in(ctx);
        match name {
            b"resolver" | b"resolver_timeout" if self.rules.server_resolve => flags |= here,
            b"sticky" if self.rules.sticky && ctx == Ctx::Upstream => flags |= here,
            _ => {}
        }
        if !flags.is_known(self.stream_loaded) {
            return fail(ErrorKind::UnknownDirective(Text::c_str(name)), at);
        }
        if !flags.allows(ctx) {
            return fail(ErrorKind::NotAllowedHere(Text::c_str(name)), at);
        }
        if is_block {
            return fail(ErrorKind::NotTerminated(Text::c_str(name)), at);
        }
        if name == b"include" {
            if args.len() != 2 {
                return fail(ErrorKind::ArgumentCount(Text::c_str(name)), at);
            }
            let files = self.include_files(&args, at)?;
            if self.includes >= MAX_INCLUDE_DEPTH {
                return fail(ErrorKind::IncludeDepth(MAX_INCLUDE_DEPTH), at);
            }
            for file in files {
                let text = self.read(&file, Some(at))?;
                let mut inner = Lexer::new(&text, Arc::new(file));
                self.includes += 1;
                let r = (|| loop {
                    match inner.next_token()? {
                        Token::Eof { .. } => return Ok(()),
                        Token::BlockEnd { location } => {
                            return Err(ConfigError::invalid(ErrorKind::Unexpected(b'}'), location));
                        }
                        Token::Directive { args, block, location } => {
                            self.upstream_directive(&mut inner, ctx, up, args, block, location)?
                        }
                    }
                })();
                self.includes -= 1;
                r?;
            }
            let _ = lx;
            return Ok(());
        }
        let context = up.context;
        let used = block::directive(&mut self.env(), up, &args, at)?;
        for v in used {
            self.scope.used.push(v);
        }
        if name == b"zone" && args.len() >= 2 {
            let size = if args.len() == 3 { values::parse_size(&args[2]).unwrap_or(0) } else { 0 };
            match self.zones.iter_mut().find(|(n, _, c)| *n == args[1] && *c == context) {
                Some(z) if z.1 == 0 => z.1 = size,
                Some(_) => {}
                None => self.zones.push((args[1].clone(), size, context)),
            }
        }
        Ok(())
    }

    /// `upstream NAME`: nginx's list of upstream names is shared with implied ones, compared ignoring case.
    fn declare(&mut self, name: &[u8], at: &Location) -> Result<(), ConfigError> {
        for k in &mut self.scope.known {
            if !k.host.eq_ignore_ascii_case(name) {
                continue;
            }
            if k.created {
                return fail(ErrorKind::DuplicateUpstream(Text::new(name)), at);
            }
            if !k.no_port {
                return fail(ErrorKind::UpstreamPort(Text::new(name), u32::from(k.port), Some(k.location.clone())), at);
            }
            k.created = true;
            k.port = 0;
            return Ok(());
        }
        self.scope.known.push(Known {
            host: name.to_vec(),
            created: true,
            port: 0,
            no_port: true,
            location: at.clone(),
        });
        Ok(())
    }

    /// `proxy_pass URL` and its siblings name an upstream (or make an implicit one) unless the URL has
    /// variables.
    /// Returns the name when the URL names an upstream without a port (what an `upstream` block can be).
    fn implied(&mut self, directive: &[u8], url: &[u8], at: &Location) -> Result<Option<Vec<u8>>, ConfigError> {
        if url.contains(&b'$') {
            return Ok(None);
        }
        let schemes: &[&[u8]] = match directive {
            b"proxy_pass" if self.scope_is_http() => &[b"http://", b"https://"],
            b"uwsgi_pass" => &[b"uwsgi://", b"suwsgi://"],
            b"grpc_pass" => &[b"grpc://", b"grpcs://"],
            _ => &[],
        };
        let mut rest = url;
        let mut prefixed = false;
        for s in schemes {
            if rest.len() >= s.len() && rest[..s.len()].eq_ignore_ascii_case(s) {
                rest = &rest[s.len()..];
                prefixed = true;
            }
        }
        if directive == b"proxy_pass" && self.scope_is_http() && !prefixed {
            return fail(ErrorKind::InvalidUrlPrefix, at);
        }
        // NGINX-DIFF: an invalid URL prefix or address in these directives is not reported.
        if rest.len() >= 5 && rest[..5].eq_ignore_ascii_case(b"unix:") {
            return Ok(None);
        }
        let authority = rest.split(|&c| c == b'/').next().unwrap_or_default();
        let Ok(text) = std::str::from_utf8(authority) else { return Ok(None) };
        let Ok(address) = Address::parse(text) else { return Ok(None) };
        let (host, port) = match &address {
            Address::Host { host, port } => (host.as_bytes().to_vec(), *port),
            Address::Ipv6 { port, .. } => {
                (authority[..authority.iter().position(|&c| c == b']').unwrap_or(0) + 1].to_vec(), *port)
            }
            Address::Unix { .. } => return Ok(None),
        };
        let named = port.is_none().then(|| host.clone());
        for k in &self.scope.known {
            if !k.host.eq_ignore_ascii_case(&host) {
                continue;
            }
            if k.created && port.is_some() {
                return Err(ConfigError::invalid(
                    ErrorKind::UpstreamPort(Text::new(&host), u32::from(port.unwrap_or(0)), None),
                    at.clone(),
                ));
            }
            if k.port != 0 && port.is_some_and(|p| p != k.port) {
                continue;
            }
            return Ok(named);
        }
        self.scope.known.push(Known {
            host,
            created: false,
            port: port.unwrap_or(0),
            no_port: port.is_none(),
            location: at.clone(),
        });
        Ok(named)
    }

    fn scope_is_http(&self) -> bool {
        // The scope being read is http unless a stream block is open; `stream { proxy_pass host:port; }` has
        // no scheme.
        !self.in_stream
    }

    /// The end of an `http {}` or `stream {}`: each upstream is initialised, then variables are looked up.
    fn finish(&mut self, context: Context) -> Result<(), ConfigError> {
        let scope = std::mem::take(&mut self.scope);
        // Upstreams are initialised in the order their names first appeared; an implied one (from
        // `proxy_pass` & co. with no `upstream` block) has its host looked up then.
        for k in &scope.known {
            if k.created {
                if let Some(up) = scope.blocks.iter().find(|b| b.name.as_bytes().eq_ignore_ascii_case(&k.host)) {
                    let u = block::finish(&mut self.env(), up, scope.resolver)?;
                    self.upstreams.push(u);
                }
                continue;
            }
            let host = String::from_utf8_lossy(&k.host).into_owned();
            let literal = host.starts_with('[') || crate::server::ngx_inet_addr(&host).is_some();
            if self.options.resolve && !literal && crate::resolve::resolve_host(&host).is_err() {
                return Err(ConfigError::invalid(
                    ErrorKind::ImpliedHostNotFound(Text::new(&k.host), k.location.clone()),
                    k.location.clone(),
                ));
            }
        }
        for pass in &scope.passes {
            let Some(up) = self
                .upstreams
                .iter()
                .rev()
                .find(|u| u.context == context && u.name.as_bytes().eq_ignore_ascii_case(&pass.host))
            else {
                continue;
            };
            if !matches!(up.balancer, Balancer::Hash { .. }) {
                continue;
            }
            let upstream = up.name.clone();
            let retry = retry_in(&scope, pass.frame, pass.module, context);
            self.proxied.push(Proxied { upstream, module: pass.module, location: pass.at.clone(), retry });
        }
        if let Some((name, at)) = scope.duplicate_location {
            return Err(ConfigError::invalid(ErrorKind::DuplicateLocation(name, at.clone()), at));
        }
        for v in &scope.used {
            if !scope.defined.contains(v) && !super::variables::builtin(v, context, self.rules.directive_table) {
                return Err(ConfigError::invalid(
                    ErrorKind::UnknownVariable(Text::new(v)),
                    Location { file: Arc::default(), line: 0 },
                ));
            }
        }
        Ok(())
    }

    fn include_files(&mut self, args: &[Vec<u8>], at: &Location) -> Result<Vec<PathBuf>, ConfigError> {
        use std::os::unix::ffi::OsStrExt;
        let name = Path::new(std::ffi::OsStr::from_bytes(&args[1]));
        let mut path = if name.is_absolute() { name.to_path_buf() } else { self.prefix.join(name) };
        if self.options.input != Input::Config
            && !name.is_absolute()
            && !includes::has_wildcard(&args[1])
            && !path.exists()
            && let Some(beside) = at.file.parent().map(|dir| dir.join(name))
            && beside.exists()
        {
            // NGINX-DIFF (fragment mode only): a relative include that does not exist under the prefix is
            // also looked up beside the including file, which helps with fragments read on their own.
            path = beside;
        }
        Ok(if includes::has_wildcard(&args[1]) { includes::glob(&path) } else { vec![path] })
    }

    fn include(&mut self, args: &[Vec<u8>], at: &Location, ctx: Ctx) -> Result<(), ConfigError> {
        if self.includes >= MAX_INCLUDE_DEPTH {
            return Err(ConfigError::invalid(ErrorKind::IncludeDepth(MAX_INCLUDE_DEPTH), at.clone()));
        }
        for file in self.include_files(args, at)? {
            let text = self.read(&file, Some(at))?;
            let mut lx = Lexer::new(&text, Arc::new(file));
            self.includes += 1;
            let r = self.block(&mut lx, ctx, false);
            self.includes -= 1;
            r?;
        }
        Ok(())
    }
}

/// The rules in force in `frame` for `module`: each field from the innermost block that sets it.
fn retry_in(scope: &Scope, frame: usize, module: Proxying, context: Context) -> Retry {
    let mut merged = RetrySettings::default();
    let mut at = Some(frame);
    while let Some(i) = at {
        let f = &scope.frames[i];
        if let Some((_, s)) = f.settings.iter().find(|(m, _)| *m == module) {
            merged.next = merged.next.or_else(|| s.next.clone());
            merged.flag = merged.flag.or(s.flag);
            merged.tries = merged.tries.or(s.tries);
            merged.timeout_ms = merged.timeout_ms.or(s.timeout_ms);
        }
        at = f.parent;
    }
    let (tries, timeout_ms) = (merged.tries.unwrap_or(0), merged.timeout_ms.unwrap_or(0));
    match context {
        Context::Stream => {
            Retry::Stream(StreamPolicy { next_upstream: merged.flag.unwrap_or(true), tries, timeout_ms })
        }
        Context::Http => {
            let next_upstream =
                merged.next.map_or(NextUpstream::DEFAULT, |words| words.into_iter().collect::<NextUpstream>());
            Retry::Http(RetryPolicy { next_upstream, tries, timeout_ms })
        }
    }
}

/// The module of a `*_next_upstream`, `*_next_upstream_tries` or `*_next_upstream_timeout` directive.
fn retry_module(name: &[u8]) -> Option<Proxying> {
    Proxying::ALL.into_iter().find(|m| {
        name.strip_prefix(m.prefix().as_bytes())
            .is_some_and(|rest| matches!(rest, b"_next_upstream" | b"_next_upstream_tries" | b"_next_upstream_timeout"))
    })
}

/// The module of a `*_pass` directive.
fn module_of(pass: &[u8]) -> Proxying {
    Proxying::ALL.into_iter().find(|m| pass.starts_with(m.prefix().as_bytes())).unwrap_or(Proxying::Proxy)
}

/// An error of `kind` at `at`.
fn fail<T>(kind: ErrorKind, at: &Location) -> Result<T, ConfigError> {
    Err(ConfigError::invalid(kind, at.clone()))
}
