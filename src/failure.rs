//! Failures as nginx sees them (algorithm §5.1 and §7): what one attempt at a peer can end with ([`Reply`],
//! [`StreamReply`]), which of those nginx retries ([`RetryPolicy`]: `proxy_next_upstream`,
//! `proxy_next_upstream_tries`, `proxy_next_upstream_timeout`; [`StreamPolicy`] for `stream`), and what of
//! the client's request can stop a retry ([`ClientRequest`]: the method and whether the body is buffered).
//! [`Worker::request_with`](crate::Worker::request_with) and [`Worker::session`](crate::Worker::session)
//! apply them; [`decide`] and [`decide_stream`] are the rules, in one place.

use std::fmt;

/// One word of `proxy_next_upstream` (and of its grpc, fastcgi, uwsgi, scgi and memcached siblings): the
/// `NGX_HTTP_UPSTREAM_FT_*` bits of `src/http/ngx_http_upstream.h`.
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::Condition;
///
/// assert_eq!(Condition::Http502.to_string(), "http_502");
/// assert_eq!(Condition::for_status(429), Some(Condition::Http429));
/// assert_eq!(Condition::for_status(501), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Condition {
    /// `error`: the connection failed or was closed before a response header.
    Error,
    /// `timeout`: connecting, sending or reading the header timed out.
    Timeout,
    /// `invalid_header` (memcached: `invalid_response`).
    InvalidHeader,
    /// `http_500`.
    Http500,
    /// `http_502`.
    Http502,
    /// `http_503`.
    Http503,
    /// `http_504`.
    Http504,
    /// `http_403`.
    Http403,
    /// `http_404` (memcached: `not_found`).
    Http404,
    /// `http_429`.
    Http429,
    /// `updating` (the cache only; never a reason for the balancer).
    Updating,
    /// `non_idempotent`: also retry POST, LOCK and PATCH once the request was sent.
    NonIdempotent,
    /// `off`: never retry (it makes the set `off` alone).
    Off,
}

impl Condition {
    /// Every condition, in the order nginx's `proxy_next_upstream` lists them.
    pub const ALL: [Condition; 13] = [
        Condition::Error,
        Condition::Timeout,
        Condition::InvalidHeader,
        Condition::NonIdempotent,
        Condition::Http500,
        Condition::Http502,
        Condition::Http503,
        Condition::Http504,
        Condition::Http403,
        Condition::Http404,
        Condition::Http429,
        Condition::Updating,
        Condition::Off,
    ];

    /// The word `proxy_next_upstream` uses.
    pub const fn word(self) -> &'static str {
        match self {
            Condition::Error => "error",
            Condition::Timeout => "timeout",
            Condition::InvalidHeader => "invalid_header",
            Condition::Http500 => "http_500",
            Condition::Http502 => "http_502",
            Condition::Http503 => "http_503",
            Condition::Http504 => "http_504",
            Condition::Http403 => "http_403",
            Condition::Http404 => "http_404",
            Condition::Http429 => "http_429",
            Condition::Updating => "updating",
            Condition::NonIdempotent => "non_idempotent",
            Condition::Off => "off",
        }
    }

    /// The condition of a status code nginx can retry (`ngx_http_upstream_next_errors`), if any.
    pub const fn for_status(status: u16) -> Option<Condition> {
        Some(match status {
            500 => Condition::Http500,
            502 => Condition::Http502,
            503 => Condition::Http503,
            504 => Condition::Http504,
            403 => Condition::Http403,
            404 => Condition::Http404,
            429 => Condition::Http429,
            _ => return None,
        })
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// The module whose `*_next_upstream` directive is read: each has its own words (algorithm §5.1).
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::{Condition, Proxying};
///
/// assert_eq!(Proxying::Memcached.condition("not_found"), Some(Condition::Http404));
/// assert_eq!(Proxying::Fastcgi.condition("http_502"), None);
/// assert_eq!(Proxying::Proxy.condition("HTTP_502"), Some(Condition::Http502)); // any letter case
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proxying {
    /// `proxy_pass` (http).
    Proxy,
    /// `grpc_pass`.
    Grpc,
    /// `fastcgi_pass`.
    Fastcgi,
    /// `uwsgi_pass`.
    Uwsgi,
    /// `scgi_pass`.
    Scgi,
    /// `memcached_pass`.
    Memcached,
}

impl Proxying {
    /// Every module, `proxy` first.
    pub const ALL: [Proxying; 6] =
        [Proxying::Proxy, Proxying::Grpc, Proxying::Fastcgi, Proxying::Uwsgi, Proxying::Scgi, Proxying::Memcached];

    /// The directives' prefix: `proxy`, `grpc`, …
    pub const fn prefix(self) -> &'static str {
        match self {
            Proxying::Proxy => "proxy",
            Proxying::Grpc => "grpc",
            Proxying::Fastcgi => "fastcgi",
            Proxying::Uwsgi => "uwsgi",
            Proxying::Scgi => "scgi",
            Proxying::Memcached => "memcached",
        }
    }

    /// The module's words and what they mean (`ngx_http_*_next_upstream_masks`, 1.18.0–1.30.x).
    pub fn words(self) -> &'static [(&'static str, Condition)] {
        use Condition::*;
        const PROXY: &[(&str, Condition)] = &[
            ("error", Error),
            ("timeout", Timeout),
            ("invalid_header", InvalidHeader),
            ("non_idempotent", NonIdempotent),
            ("http_500", Http500),
            ("http_502", Http502),
            ("http_503", Http503),
            ("http_504", Http504),
            ("http_403", Http403),
            ("http_404", Http404),
            ("http_429", Http429),
            ("updating", Updating),
            ("off", Off),
        ];
        const GRPC: &[(&str, Condition)] = &[
            ("error", Error),
            ("timeout", Timeout),
            ("invalid_header", InvalidHeader),
            ("non_idempotent", NonIdempotent),
            ("http_500", Http500),
            ("http_502", Http502),
            ("http_503", Http503),
            ("http_504", Http504),
            ("http_403", Http403),
            ("http_404", Http404),
            ("http_429", Http429),
            ("off", Off),
        ];
        const CGI: &[(&str, Condition)] = &[
            ("error", Error),
            ("timeout", Timeout),
            ("invalid_header", InvalidHeader),
            ("non_idempotent", NonIdempotent),
            ("http_500", Http500),
            ("http_503", Http503),
            ("http_403", Http403),
            ("http_404", Http404),
            ("http_429", Http429),
            ("updating", Updating),
            ("off", Off),
        ];
        const MEMCACHED: &[(&str, Condition)] = &[
            ("error", Error),
            ("timeout", Timeout),
            ("invalid_response", InvalidHeader),
            ("not_found", Http404),
            ("off", Off),
        ];
        match self {
            Proxying::Proxy => PROXY,
            Proxying::Grpc => GRPC,
            Proxying::Fastcgi | Proxying::Uwsgi | Proxying::Scgi => CGI,
            Proxying::Memcached => MEMCACHED,
        }
    }

    /// The condition a word names for this module (compared ignoring ASCII case, as nginx does).
    pub fn condition(self, word: &str) -> Option<Condition> {
        self.words().iter().find(|(w, _)| w.eq_ignore_ascii_case(word)).map(|&(_, c)| c)
    }
}

/// The set of conditions of `proxy_next_upstream` (a bit set, like nginx's mask).
///
/// `off` anywhere makes the set `off` alone, as nginx's merge does (`ngx_http_proxy_merge_loc_conf()`).
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::{Condition, NextUpstream};
///
/// assert_eq!(NextUpstream::default().to_string(), "error timeout");
/// let set = NextUpstream::default().with(Condition::Http502);
/// assert!(set.contains(Condition::Http502) && !set.contains(Condition::Http503));
/// assert_eq!(set.with(Condition::Off), NextUpstream::OFF);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextUpstream(u16);

impl NextUpstream {
    /// No condition (only useful to build a set).
    pub const EMPTY: NextUpstream = NextUpstream(0);
    /// nginx's default: `error timeout`.
    pub const DEFAULT: NextUpstream = NextUpstream(Condition::Error.bit() | Condition::Timeout.bit());
    /// `off`.
    pub const OFF: NextUpstream = NextUpstream(Condition::Off.bit());

    /// The set with `condition` added (`off` replaces everything).
    #[must_use]
    pub const fn with(self, condition: Condition) -> NextUpstream {
        if self.0 & Condition::Off.bit() != 0 || matches!(condition, Condition::Off) {
            return NextUpstream::OFF;
        }
        NextUpstream(self.0 | condition.bit())
    }

    /// Whether `condition` is in the set.
    pub const fn contains(self, condition: Condition) -> bool {
        self.0 & condition.bit() != 0
    }

    /// The conditions in the set, in nginx's order.
    pub fn iter(self) -> impl Iterator<Item = Condition> {
        Condition::ALL.into_iter().filter(move |&c| self.contains(c))
    }
}

impl Default for NextUpstream {
    fn default() -> Self {
        NextUpstream::DEFAULT
    }
}

impl FromIterator<Condition> for NextUpstream {
    fn from_iter<I: IntoIterator<Item = Condition>>(iter: I) -> Self {
        iter.into_iter().fold(NextUpstream::EMPTY, NextUpstream::with)
    }
}

impl fmt::Display for NextUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = self.iter().map(Condition::word).collect();
        f.write_str(&words.join(" "))
    }
}

/// When nginx tries another peer after a failed attempt: one location's `proxy_next_upstream` (or a
/// sibling module's), `proxy_next_upstream_tries` and `proxy_next_upstream_timeout`.
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::RetryPolicy;
///
/// let p = RetryPolicy::default();
/// assert_eq!((p.next_upstream.to_string(), p.tries, p.timeout_ms), ("error timeout".to_string(), 0, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RetryPolicy {
    /// The conditions that may be retried.
    pub next_upstream: NextUpstream,
    /// `proxy_next_upstream_tries`: the most attempts (0: no limit but the peers).
    pub tries: u32,
    /// `proxy_next_upstream_timeout` in milliseconds (0: none).
    pub timeout_ms: u64,
}

impl RetryPolicy {
    /// The budget a request starts with when its peers allow `peers` attempts (`ngx_http_upstream_init_request()`).
    pub fn budget(&self, peers: u32) -> u32 {
        if self.tries != 0 && peers > self.tries { self.tries } else { peers }
    }

    fn expired(&self, elapsed_ms: u64) -> bool {
        self.timeout_ms != 0 && elapsed_ms >= self.timeout_ms
    }
}

/// The client's request method, as far as retries care: POST, LOCK and PATCH are not idempotent.
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::RequestMethod;
///
/// let m: RequestMethod = "PATCH".parse().unwrap();
/// assert!(m.is_non_idempotent());
/// assert!(!"GET".parse::<RequestMethod>().unwrap().is_non_idempotent());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RequestMethod {
    /// GET.
    #[default]
    Get,
    /// HEAD.
    Head,
    /// POST (not idempotent).
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// OPTIONS.
    Options,
    /// PATCH (not idempotent).
    Patch,
    /// LOCK (WebDAV; not idempotent).
    Lock,
    /// Any other method (idempotent for nginx's retry rule).
    Other,
}

impl RequestMethod {
    /// POST, LOCK or PATCH: the methods nginx does not retry once sent unless `non_idempotent` is listed.
    pub const fn is_non_idempotent(self) -> bool {
        matches!(self, RequestMethod::Post | RequestMethod::Lock | RequestMethod::Patch)
    }
}

impl std::str::FromStr for RequestMethod {
    type Err = std::convert::Infallible;

    /// Method names are case-sensitive, as in HTTP; an unknown name is [`RequestMethod::Other`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "GET" => RequestMethod::Get,
            "HEAD" => RequestMethod::Head,
            "POST" => RequestMethod::Post,
            "PUT" => RequestMethod::Put,
            "DELETE" => RequestMethod::Delete,
            "OPTIONS" => RequestMethod::Options,
            "PATCH" => RequestMethod::Patch,
            "LOCK" => RequestMethod::Lock,
            _ => RequestMethod::Other,
        })
    }
}

/// Whether nginx buffered the request body before sending it (`proxy_request_buffering`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RequestBody {
    /// Read whole before the first attempt (the default, and any request without a body).
    #[default]
    Buffered,
    /// Streamed to the upstream (`proxy_request_buffering off`): once sent, never retried.
    Unbuffered,
}

/// What of the client's request can stop a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClientRequest {
    /// The method.
    pub method: RequestMethod,
    /// The body's buffering.
    pub body: RequestBody,
}

/// How one HTTP attempt at a peer ended (algorithm §5.1's table).
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::Reply;
///
/// assert_eq!(Reply::OK, Reply::Status(200));
/// assert!(!Reply::Refused.request_sent() && Reply::ReadTimeout.request_sent());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reply {
    /// A response header with this status.
    Status(u16),
    /// The connection was refused or failed (`error`, before the request was sent).
    Refused,
    /// Connecting timed out (`timeout`, before the request was sent).
    ConnectTimeout,
    /// The connection was closed or reset before a response header (`error`, after the request was sent).
    Closed,
    /// Sending the request or reading the header timed out (`timeout`, after the request was sent).
    ReadTimeout,
    /// The response header could not be parsed (`invalid_header`).
    InvalidHeader,
    /// A cached keepalive connection turned out closed (`error` on `u->peer.cached`): the attempt is given back.
    StaleConnection,
}

impl Reply {
    /// A plain `200 OK`.
    pub const OK: Reply = Reply::Status(200);

    /// Whether nginx had started sending the request when the attempt ended (`u->request_sent`).
    pub const fn request_sent(self) -> bool {
        !matches!(self, Reply::Refused | Reply::ConnectTimeout)
    }

    /// The condition this attempt is, if it is an error or a timeout (statuses are judged by [`decide`]).
    pub const fn condition(self) -> Option<Condition> {
        match self {
            Reply::Status(_) => None,
            Reply::Refused | Reply::Closed | Reply::StaleConnection => Some(Condition::Error),
            Reply::ConnectTimeout | Reply::ReadTimeout => Some(Condition::Timeout),
            Reply::InvalidHeader => Some(Condition::InvalidHeader),
        }
    }
}

/// An attempt's reply and how long it took (for `proxy_next_upstream_timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// How it ended.
    pub reply: Reply,
    /// Milliseconds it took (0 unless a timeout is modelled).
    pub ms: u64,
}

impl From<Reply> for Attempt {
    fn from(reply: Reply) -> Attempt {
        Attempt { reply, ms: 0 }
    }
}

/// The state a peer is freed with (`ngx_http_upstream_free_round_robin_peer()`'s argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Freed {
    /// State 0: a success (may reset `fails` when the peer was picked after its `fail_timeout`).
    Success,
    /// `NGX_PEER_NEXT` (a retried 403 or 404): tried, not failed; accounted like a success.
    Next,
    /// `NGX_PEER_FAILED`: `fails += 1`, the weight drops.
    Failed,
}

/// What nginx does after one attempt: how it frees the peer, whether the attempt is given back, whether it
/// moves on (if budget is left after the free), and the statuses it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The state the peer is freed with.
    pub freed: Freed,
    /// `pc.tries += 1` after the free (an error on a cached connection).
    pub given_back: bool,
    /// nginx calls `get()` again if the budget after the free is above 0.
    pub retry: bool,
    /// The attempt's `$upstream_status`.
    pub upstream_status: u16,
    /// What the client gets if this attempt ends the request.
    pub client_status: u16,
}

/// nginx's rule for one HTTP attempt (`ngx_http_upstream_test_next()` and `ngx_http_upstream_next()`,
/// algorithm §5.1): `budget` is `pc.tries` before the peer is freed, `elapsed_ms` the time since the
/// request started, at the end of the attempt.
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::{decide, ClientRequest, Condition, Freed, NextUpstream, Reply, RetryPolicy};
///
/// let policy = RetryPolicy { next_upstream: NextUpstream::default().with(Condition::Http502), ..Default::default() };
/// let client = ClientRequest::default();
/// // A 502 with budget left is a failure and moves on; the last attempt's 502 is passed on, as a success.
/// assert_eq!(decide(Reply::Status(502), &policy, &client, 2, 0).freed, Freed::Failed);
/// let last = decide(Reply::Status(502), &policy, &client, 1, 0);
/// assert_eq!((last.freed, last.retry, last.client_status), (Freed::Success, false, 502));
/// ```
pub fn decide(reply: Reply, policy: &RetryPolicy, client: &ClientRequest, budget: u32, elapsed_ms: u64) -> Decision {
    let sent = reply.request_sent();
    let next = policy.next_upstream;
    // The conditions that must all be listed: the kind, and `non_idempotent` for POST/LOCK/PATCH once sent.
    let listed = |c: Condition| {
        next.contains(c)
            && !next.contains(Condition::Off)
            && (!(sent && client.method.is_non_idempotent()) || next.contains(Condition::NonIdempotent))
    };
    let body_stops = sent && client.body == RequestBody::Unbuffered;
    let expired = policy.expired(elapsed_ms);
    match reply {
        Reply::Status(status) => {
            let condition = if status >= 300 { Condition::for_status(status) } else { None };
            match condition {
                Some(c) if budget > 1 && listed(c) && !body_stops && !expired => Decision {
                    freed: if matches!(c, Condition::Http403 | Condition::Http404) {
                        Freed::Next
                    } else {
                        Freed::Failed
                    },
                    given_back: false,
                    retry: true,
                    upstream_status: status,
                    client_status: status,
                },
                _ => Decision {
                    freed: Freed::Success,
                    given_back: false,
                    retry: false,
                    upstream_status: status,
                    client_status: status,
                },
            }
        }
        _ => {
            let c = reply.condition().expect("not a status");
            let status = if c == Condition::Timeout { 504 } else { 502 };
            Decision {
                freed: Freed::Failed,
                given_back: matches!(reply, Reply::StaleConnection),
                retry: listed(c) && !body_stops && !expired,
                upstream_status: status,
                client_status: status,
            }
        }
    }
}

/// `proxy_next_upstream on|off`, `proxy_next_upstream_tries` and `proxy_next_upstream_timeout` of a
/// `stream` server (algorithm §7).
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::StreamPolicy;
///
/// assert!(StreamPolicy::default().next_upstream);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamPolicy {
    /// `on` (the default) or `off`.
    pub next_upstream: bool,
    /// `proxy_next_upstream_tries` (0: no limit).
    pub tries: u32,
    /// `proxy_next_upstream_timeout` in milliseconds (0: none).
    pub timeout_ms: u64,
}

impl Default for StreamPolicy {
    fn default() -> Self {
        StreamPolicy { next_upstream: true, tries: 0, timeout_ms: 0 }
    }
}

impl StreamPolicy {
    /// The same budget rule as HTTP.
    pub fn budget(&self, peers: u32) -> u32 {
        RetryPolicy { next_upstream: NextUpstream::DEFAULT, tries: self.tries, timeout_ms: 0 }.budget(peers)
    }
}

/// How one stream attempt ended (algorithm §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamReply {
    /// Connected; the session then ends normally, whatever happens on the connection (TCP), or without a
    /// socket error (UDP).
    Connected,
    /// Connecting failed (refused, unreachable, a failed upstream TLS handshake).
    Refused,
    /// Connecting timed out (`proxy_connect_timeout`).
    ConnectTimeout,
    /// A UDP session whose upstream socket saw an error (or timed out short of `proxy_responses`): a
    /// failure, counted when the session ends, never retried.
    UdpError,
}

/// The attempt's reply and duration, as [`Attempt`] for HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamAttempt {
    /// How it ended.
    pub reply: StreamReply,
    /// Milliseconds it took.
    pub ms: u64,
}

impl From<StreamReply> for StreamAttempt {
    fn from(reply: StreamReply) -> StreamAttempt {
        StreamAttempt { reply, ms: 0 }
    }
}

/// nginx's rule for one stream attempt (`ngx_stream_proxy_next_upstream()`, `ngx_stream_proxy_finalize()`);
/// the statuses are the session's `$status` (200 or 502).
///
/// # Example
///
/// ```
/// use nginx_ketama::failure::{decide_stream, Freed, StreamPolicy, StreamReply};
///
/// let off = StreamPolicy { next_upstream: false, ..Default::default() };
/// let d = decide_stream(StreamReply::Refused, &off, 0);
/// assert_eq!((d.freed, d.retry), (Freed::Failed, false)); // counted, not retried
/// ```
pub fn decide_stream(reply: StreamReply, policy: &StreamPolicy, elapsed_ms: u64) -> Decision {
    let (freed, retry, status) = match reply {
        StreamReply::Connected => (Freed::Success, false, 200),
        StreamReply::Refused | StreamReply::ConnectTimeout => {
            let expired = policy.timeout_ms != 0 && elapsed_ms >= policy.timeout_ms;
            (Freed::Failed, policy.next_upstream && !expired, 502)
        }
        StreamReply::UdpError => (Freed::Failed, false, 502),
    };
    Decision { freed, given_back: false, retry, upstream_status: status, client_status: status }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(words: &[Condition]) -> RetryPolicy {
        RetryPolicy { next_upstream: words.iter().copied().collect(), ..RetryPolicy::default() }
    }

    /// `ngx_http_upstream_test_next()`: a listed status is a failure only with budget left after it (tries >
    /// 1); 403/404 free as NEXT, the other listed ones (429 included) as FAILED; an unlisted one is a success.
    #[test]
    fn listed_statuses_fail_only_when_another_try_happens() {
        let all = policy(&[Condition::Http500, Condition::Http502, Condition::Http503, Condition::Http504])
            .next_upstream
            .with(Condition::Http403)
            .with(Condition::Http404)
            .with(Condition::Http429);
        let p = RetryPolicy { next_upstream: all, ..RetryPolicy::default() };
        let c = ClientRequest::default();
        for (status, freed) in [
            (500, Freed::Failed),
            (502, Freed::Failed),
            (503, Freed::Failed),
            (504, Freed::Failed),
            (429, Freed::Failed),
            (403, Freed::Next),
            (404, Freed::Next),
        ] {
            let d = decide(Reply::Status(status), &p, &c, 2, 0);
            assert_eq!((d.freed, d.retry), (freed, true), "{status}");
            let last = decide(Reply::Status(status), &p, &c, 1, 0);
            assert_eq!((last.freed, last.retry, last.client_status), (Freed::Success, false, status), "{status}");
            let unlisted = decide(Reply::Status(status), &RetryPolicy::default(), &c, 5, 0);
            assert_eq!((unlisted.freed, unlisted.retry), (Freed::Success, false), "{status}");
        }
        for status in [200, 201, 301, 400, 401, 501, 505] {
            assert_eq!(decide(Reply::Status(status), &p, &c, 5, 0).freed, Freed::Success, "{status}");
        }
    }

    /// `ngx_http_upstream_next()`: errors and timeouts free as FAILED whatever the policy; they move on only
    /// when listed, not suppressed by the method, the body or the timeout.
    #[test]
    fn errors_always_count_and_retry_only_when_allowed() {
        let c = ClientRequest::default();
        for reply in [Reply::Refused, Reply::ConnectTimeout, Reply::Closed, Reply::ReadTimeout, Reply::InvalidHeader] {
            for p in [RetryPolicy::default(), policy(&[Condition::Off]), policy(&[Condition::Http502])] {
                let d = decide(reply, &p, &c, 3, 0);
                assert_eq!(d.freed, Freed::Failed, "{reply:?} {p:?}");
                let listed = p.next_upstream.contains(reply.condition().unwrap());
                assert_eq!(d.retry, listed, "{reply:?} {p:?}");
            }
        }
        assert_eq!(decide(Reply::ReadTimeout, &RetryPolicy::default(), &c, 3, 0).client_status, 504);
        assert_eq!(decide(Reply::ConnectTimeout, &RetryPolicy::default(), &c, 3, 0).client_status, 504);
        assert_eq!(decide(Reply::Refused, &RetryPolicy::default(), &c, 3, 0).client_status, 502);
        let ih = decide(Reply::InvalidHeader, &policy(&[Condition::InvalidHeader]), &c, 3, 0);
        assert_eq!((ih.retry, ih.client_status), (true, 502));
        // Only an error on a cached connection gives the attempt back.
        assert!(decide(Reply::StaleConnection, &RetryPolicy::default(), &c, 1, 0).given_back);
        assert!(!decide(Reply::Closed, &RetryPolicy::default(), &c, 1, 0).given_back);
    }

    /// POST/LOCK/PATCH: not retried once sent unless `non_idempotent`; a refused connect was not sent.
    #[test]
    fn non_idempotent_methods_and_unbuffered_bodies_stop_retries_once_sent() {
        let post = ClientRequest { method: RequestMethod::Post, body: RequestBody::Buffered };
        let p = policy(&[Condition::Error, Condition::Timeout, Condition::Http502]);
        assert!(decide(Reply::Refused, &p, &post, 3, 0).retry);
        assert!(decide(Reply::ConnectTimeout, &p, &post, 3, 0).retry);
        for reply in [Reply::Closed, Reply::ReadTimeout, Reply::Status(502), Reply::StaleConnection] {
            let d = decide(reply, &p, &post, 3, 0);
            assert!(!d.retry, "{reply:?}");
            let with = RetryPolicy { next_upstream: p.next_upstream.with(Condition::NonIdempotent), ..p };
            assert!(decide(reply, &with, &post, 3, 0).retry, "{reply:?}");
        }
        // The 502 that is not retried is passed on, as a success.
        assert_eq!(decide(Reply::Status(502), &p, &post, 3, 0).freed, Freed::Success);
        let put = ClientRequest { method: RequestMethod::Put, ..post };
        assert!(decide(Reply::ReadTimeout, &p, &put, 3, 0).retry);
        let streamed = ClientRequest { body: RequestBody::Unbuffered, ..put };
        assert!(decide(Reply::Refused, &p, &streamed, 3, 0).retry);
        assert!(!decide(Reply::ReadTimeout, &p, &streamed, 3, 0).retry);
        assert_eq!(decide(Reply::Status(502), &p, &streamed, 3, 0).freed, Freed::Success);
    }

    #[test]
    fn timeout_and_tries_limit_the_sequence() {
        let p =
            RetryPolicy { next_upstream: NextUpstream::DEFAULT.with(Condition::Http503), tries: 2, timeout_ms: 100 };
        let c = ClientRequest::default();
        assert!(decide(Reply::Refused, &p, &c, 2, 99).retry);
        assert!(!decide(Reply::Refused, &p, &c, 2, 100).retry, "the expiry is inclusive (>=)");
        assert_eq!(decide(Reply::Status(503), &p, &c, 2, 100).freed, Freed::Success);
        assert_eq!((p.budget(5), p.budget(1)), (2, 1));
        assert_eq!(RetryPolicy::default().budget(7), 7);
    }

    #[test]
    fn off_is_alone_and_words_are_per_module() {
        let set: NextUpstream = [Condition::Error, Condition::Off, Condition::Http502].into_iter().collect();
        assert_eq!(set, NextUpstream::OFF);
        assert_eq!(set.to_string(), "off");
        assert_eq!(Proxying::Grpc.condition("updating"), None);
        assert_eq!(Proxying::Memcached.condition("invalid_response"), Some(Condition::InvalidHeader));
        assert_eq!(Proxying::Memcached.condition("http_404"), None);
        assert_eq!(Proxying::Scgi.condition("http_504"), None);
        assert_eq!(Proxying::Uwsgi.condition("http_429"), Some(Condition::Http429));
    }

    #[test]
    fn stream_retries_only_connects() {
        let on = StreamPolicy::default();
        assert_eq!(decide_stream(StreamReply::Connected, &on, 0).freed, Freed::Success);
        assert!(decide_stream(StreamReply::Refused, &on, 0).retry);
        assert!(decide_stream(StreamReply::ConnectTimeout, &on, 0).retry);
        let udp = decide_stream(StreamReply::UdpError, &on, 0);
        assert_eq!((udp.freed, udp.retry), (Freed::Failed, false));
        let late = StreamPolicy { timeout_ms: 10, ..on };
        assert!(!decide_stream(StreamReply::Refused, &late, 10).retry);
    }
}
