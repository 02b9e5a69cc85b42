//! Key vectors (issue 21, point 5): the bytes nginx hashes for a list of key expressions, recorded from real
//! nginx for a fixed, named list of raw requests (`vectors/keys/v1/keys.json`, schema
//! `vectors/keys/v1/keys.schema.json`, documented in `vectors/README.md`).
//!
//! Every provisioned build runs [`nginx_conf`]: a few servers answering `return 200 "<every expression,
//! separated by SEPARATOR>"`. Each request of [`cases`] is sent from a fixed client address and port to a fixed
//! server address ([`Listener`]), so that `$remote_addr`, `$remote_port`, `$server_addr` and the rest are
//! reproducible; nginx's answer is split into one value per expression, or kept as the status nginx refused
//! the request with. Builds whose answers to a case agree share one group, as in the ring vectors.
//!
//! Nothing here computes a key: the library is checked against the file by `tests/key_vectors.rs`, and the
//! Python port by `ports/python/test_keys.py`.

use crate::nginx::install::Installation;
use crate::nginx::single::{Single, temp_paths};
use anyhow::{Context as _, Result, ensure};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The first line of the file's header.
pub const HEADER: &str = "Recorded from real nginx by scripts/record-key-vectors; DO NOT EDIT.";

/// The `server_name` of every server of [`nginx_conf`] (`$server_name`, and `$host` without a host).
pub const SERVER_NAME: &str = "keys.test";

/// What separates the expressions' values in nginx's answer. A value containing it would split into too
/// many parts, which the recorder refuses.
const SEPARATOR: &str = "<|~|>";

/// The expressions recorded for every request, by name: one per modelled http variable (except
/// `$hostname`, see [`NOT_RECORDED`]), then concatenations and two maps.
pub const EXPRESSIONS: &[(&str, &str)] = &[
    ("request_uri", "$request_uri"),
    ("uri", "$uri"),
    ("document_uri", "$document_uri"),
    ("args", "$args"),
    ("query_string", "$query_string"),
    ("is_args", "$is_args"),
    ("arg_id", "$arg_id"),
    ("arg_e", "$arg_e"),
    ("cookie_a", "$cookie_a"),
    ("cookie_b", "$cookie_b"),
    ("cookie_c", "$cookie_C"),
    ("host", "$host"),
    ("http_host", "$http_host"),
    ("http_user_agent", "$http_user_agent"),
    ("http_x_custom", "$http_x_custom"),
    ("http_x_forwarded_for", "$http_x_forwarded_for"),
    ("http_cookie", "$http_cookie"),
    ("http_accept", "$http_accept"),
    ("content_type", "$content_type"),
    ("server_name", "$server_name"),
    ("remote_addr", "$remote_addr"),
    ("binary_remote_addr", "$binary_remote_addr"),
    ("remote_port", "$remote_port"),
    ("server_addr", "$server_addr"),
    ("server_port", "$server_port"),
    ("scheme", "$scheme"),
    ("request_method", "$request_method"),
    ("request", "$request"),
    ("host_request_uri", "$host$request_uri"),
    ("braced", "${host}x${uri}"),
    ("uri_is_args_args", "$uri$is_args$args"),
    ("origin", "$scheme://$host:$server_port"),
    ("map_tenant", "$tenant"),
    ("map_zone", "z=$zone|t=$tenant"),
    // Regular expressions (the `routed` listener): which location answered (`set` there), a map with
    // regex keys (before any `$N`, so that the one complex value nginx answers with reads each capture
    // at one state), the captures and the named captures the last match left.
    ("where", "$where"),
    ("map_regex", "$rx"),
    ("captures", "$1|$2|$3"),
    ("named_captures", "${sub}|${dom}|${leaf}|${sect}|${word}"),
];

/// The `map` blocks of [`nginx_conf`] (the expressions `map_tenant`, `map_zone` and `map_regex`).
pub const MAPS: &str = "  map $http_x_tenant $tenant { default none; alpha a-pool; Beta b-pool; \\default escaped; \"\" empty-src; }\n\
\x20 map $host $zone { hostnames; default z0; .shop.test shop; *.eu.shop.test eu; www.shop.* wwwshop; exact.test ex; }\n\
\x20 map $http_x_rx $rx { default rx-none; word-1 exact; ~^(?<word>[a-z]+)-(\\d+)$ \"w=$word n=$2\"; ~*^UP(.*)$ up=$1; \
~^plain$ plain; \"~^(x)(y)?(z)$\" \"xyz=$1,$2,$3\"; }\n";

/// The `server_name` of the `routed` listener's default server.
pub const ROUTED_DEFAULT_NAME: &str = "rx-default.test";

/// The servers of the `routed` listener: locations of every kind (exact, prefix, `^~`, regular expressions
/// with and without captures, caseless, nested), and servers chosen by exact, wildcard and regular-expression
/// names; each location says which it is (`$where`) and answers with every expression.
fn routed_servers(ret: &str) -> String {
    let at = Listener::Routed.server();
    let l = |m: &str, name: &str| format!("location {m} {{ set $where {name}; {ret} }}");
    let nested = l("~ ^/pre/nested/(?<leaf>[a-z]+)$", "nested-regex");
    let pre = format!("location /pre/ {{ set $where prefix-pre; {ret} {nested} }}");
    format!(
        "  server {{ listen {at} default_server; server_name {ROUTED_DEFAULT_NAME}; {} {} {} {} {} {} {} }}\n\
         \x20 server {{ listen {at}; server_name exact.rx.test *.wild.rx.test ~^(?<sub>[a-z0-9.-]+)\\.rx\\.test$ \
         ~^WWW\\.(?<dom>.+)$; {} {} }}\n\
         \x20 server {{ listen {at}; server_name ~^(a)(b)?(c)\\.test$ third.rx.test; {} }}\n",
        l("/", "prefix-root"),
        pre,
        l("^~ /stop/", "noregex-stop"),
        l("= /exact.php", "exact"),
        l("~ \\.php$", "php"),
        l("~* ^/(?<sect>img|css)/(.+)\\.(png|CSS)$", "caseless-asset"),
        l("~ ^/(\\d+)/(\\d+)?(x)?$", "digits"),
        l("/", "named-server"),
        l("~ ^/cap/(.*)$", "named-server-cap"),
        l("/", "third-server"),
    )
}

/// Modelled variables deliberately left out, with the reason.
pub const NOT_RECORDED: &[(&str, &str)] = &[(
    "$hostname",
    "the recording machine's gethostname(), lower-cased: it depends on the machine, not on the request",
)];

/// The servers of [`nginx_conf`]: where a request is sent and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Listener {
    /// IPv4, `merge_slashes on` (the default).
    Merged,
    /// IPv4, `merge_slashes off`.
    Unmerged,
    /// IPv6 (`[::1]`), `merge_slashes on`.
    Ipv6,
    /// IPv4, several servers and locations chosen by regular expressions (`server_name`, `location`).
    Routed,
}

impl Listener {
    /// Every listener, in the file's order.
    pub const ALL: [Listener; 4] = [Listener::Merged, Listener::Unmerged, Listener::Ipv6, Listener::Routed];

    /// The address nginx listens on.
    pub fn server(self) -> SocketAddr {
        match self {
            Listener::Merged => "127.0.201.1:20801".parse().unwrap_or_else(|_| unreachable!()),
            Listener::Unmerged => "127.0.201.1:20802".parse().unwrap_or_else(|_| unreachable!()),
            Listener::Ipv6 => "[::1]:20803".parse().unwrap_or_else(|_| unreachable!()),
            Listener::Routed => "127.0.201.1:20804".parse().unwrap_or_else(|_| unreachable!()),
        }
    }

    /// The client address requests to this listener come from (the port is per request).
    pub fn client_ip(self) -> std::net::IpAddr {
        match self {
            Listener::Merged | Listener::Unmerged | Listener::Routed => std::net::IpAddr::from([127, 0, 201, 2]),
            Listener::Ipv6 => std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        }
    }

    /// Whether the server merges slashes.
    pub fn merge_slashes(self) -> bool {
        !matches!(self, Listener::Unmerged)
    }

    /// The first `server_name` of its default server.
    pub fn server_name(self) -> &'static str {
        match self {
            Listener::Routed => ROUTED_DEFAULT_NAME,
            _ => SERVER_NAME,
        }
    }
}

/// One named request of a case.
#[derive(Debug, Clone)]
pub struct KeyRequest {
    /// Unique within its case.
    pub name: &'static str,
    /// The server it is sent to.
    pub listener: Listener,
    /// The request line and header lines, each ended by CRLF, without the final empty line
    /// (the recorder adds `Connection: close` and the empty line).
    pub head: String,
}

/// A named list of requests: one group of the file (or one per set of agreeing builds).
#[derive(Debug, Clone)]
pub struct KeyCase {
    /// Unique.
    pub name: &'static str,
    /// One line: what the case exercises.
    pub description: &'static str,
    /// In sending order.
    pub requests: Vec<KeyRequest>,
}

fn req(name: &'static str, listener: Listener, head: impl Into<String>) -> KeyRequest {
    KeyRequest { name, listener, head: head.into() }
}

/// A request to the `routed` listener's default server, with an `X-Rx` header (the `map_regex` source)
/// unless `x_rx` is empty.
fn rx(target: &str, x_rx: &str) -> String {
    let header = if x_rx.is_empty() { String::new() } else { format!("X-Rx: {x_rx}\r\n") };
    format!("GET {target} HTTP/1.1\r\nHost: {ROUTED_DEFAULT_NAME}\r\n{header}")
}

/// The cases, in the file's order.
pub fn cases() -> Vec<KeyCase> {
    use Listener::{Ipv6, Merged, Routed, Unmerged};
    let h = "Host: keys.test\r\n";
    let get = |target: &str| format!("GET {target} HTTP/1.1\r\n{h}");
    vec![
        KeyCase {
            name: "targets",
            description: "request targets: percent-escapes (valid, invalid, %00, %2F), doubled slashes, . and .. \
                          segments, # and ?, spaces and tabs, non-ASCII bytes",
            requests: vec![
                req("root", Merged, get("/")),
                req("double-slashes", Merged, get("/a//b///c")),
                req("dot-segments", Merged, get("/a/./b/../c")),
                req("final-dotdot", Merged, get("/a/b/..")),
                req("final-dot", Merged, get("/a/.")),
                req("dotdot-above-root", Merged, get("/..")),
                req("dotdot-twice", Merged, get("/a/../../b")),
                req("escaped-dotdot", Merged, get("/%2e%2E/x")),
                req("escaped-slashes", Merged, get("/a%2Fb%2f%2fc")),
                req("escaped-specials", Merged, get("/%41%3f%23%25")),
                req("bad-escape", Merged, get("/%zz")),
                req("short-escape", Merged, get("/%4")),
                req("escaped-nul", Merged, get("/a%00")),
                req("query-untouched", Merged, get("/a?b=/../%zz#f")),
                req("fragment", Merged, get("/a#f?x")),
                req("dotdot-query", Merged, get("/a/..?x")),
                req("dots-in-names", Merged, get("/a.b/c..d/....")),
                req("utf8", Merged, get("/caf\u{e9}/%C3%A9?q=%20")),
                req("plus", Merged, get("/a+b%2B")),
                req("space", Merged, get("/a b")),
                req("tab", Merged, get("/a\tb")),
            ],
        },
        KeyCase {
            name: "merge-slashes-off",
            description: "targets on a server with merge_slashes off",
            requests: vec![
                req("double-slashes", Unmerged, get("/a//b")),
                req("leading-double-dotdot", Unmerged, get("//..")),
                req("double-then-dotdot", Unmerged, get("/a//../b")),
                req("escaped-slashes", Unmerged, get("/x%2F%2F/y")),
            ],
        },
        KeyCase {
            name: "args",
            description: "query arguments in every position: first, last, repeated, empty, without =, caseless \
                          names, a name that ends another",
            requests: vec![
                req("first", Merged, get("/p?id=1&x=2")),
                req("last", Merged, get("/p?x=2&id=1")),
                req("repeated", Merged, get("/p?id=1&id=2")),
                req("caseless", Merged, get("/p?ID=7&e=")),
                req("suffix-name", Merged, get("/p?xid=3&id")),
                req("no-equals", Merged, get("/p?id&e=5")),
                req("empty-name", Merged, get("/p?=x&Id=%41")),
                req("empty-query", Merged, get("/p?")),
                req("semicolon", Merged, get("/p?a=1;id=2&e=3")),
                req("encoded", Merged, get("/p?id=a%26b&e=c+d")),
            ],
        },
        KeyCase {
            name: "request-line",
            description: "absolute targets (request-line authority), methods, HTTP versions and spacing",
            requests: vec![
                req("absolute", Merged, format!("GET http://Ex.COM:81/p?q=1 HTTP/1.1\r\n{h}")),
                req("absolute-query-no-path", Merged, format!("GET http://ex.com?q HTTP/1.1\r\n{h}")),
                req("absolute-no-path", Merged, format!("GET http://ex.com HTTP/1.1\r\n{h}")),
                req("absolute-ipv6", Merged, format!("GET HTTP://[::1]:8080/x HTTP/1.1\r\n{h}")),
                req("absolute-underscore", Merged, format!("GET http://a_b/ HTTP/1.1\r\n{h}")),
                req("lower-case-method", Merged, format!("get / HTTP/1.1\r\n{h}")),
                req("http-2", Merged, format!("GET / HTTP/2.0\r\n{h}")),
                req("relative-target", Merged, format!("GET a HTTP/1.1\r\n{h}")),
                req("extra-spaces", Merged, format!("GET  /spaces   HTTP/1.1\r\n{h}")),
                req("unknown-method", Merged, format!("PURGE /m HTTP/1.1\r\n{h}")),
                req("post-http-1-0", Merged, format!("POST /m HTTP/1.0\r\n{h}")),
                req("delete", Merged, format!("DELETE /m?x=1 HTTP/1.1\r\n{h}")),
                req("minor-10", Merged, format!("GET /v HTTP/1.10\r\n{h}")),
            ],
        },
        KeyCase {
            name: "host",
            description: "Host variants: absent, case, port, trailing dot, IPv6 literal, invalid, repeated; the \
                          server_name fallback",
            requests: vec![
                req("absent-http-1-0", Merged, "GET /noh HTTP/1.0\r\n"),
                req("absent-http-1-1", Merged, "GET /noh HTTP/1.1\r\n"),
                req("case-and-port", Merged, "GET /h HTTP/1.1\r\nHost: Example.COM:8080\r\n"),
                req("trailing-dot", Merged, "GET /h HTTP/1.1\r\nHost: example.com.\r\n"),
                req("ipv6-literal", Merged, "GET /h HTTP/1.1\r\nHost: [::1]:80\r\n"),
                req("double-dot", Merged, "GET /h HTTP/1.1\r\nHost: a..b\r\n"),
                req("slash", Merged, "GET /h HTTP/1.1\r\nHost: a/b\r\n"),
                req("port-only", Merged, "GET /h HTTP/1.1\r\nHost: :80\r\n"),
                req("space", Merged, "GET /h HTTP/1.1\r\nHost: a b\r\n"),
                req("at-sign", Merged, "GET /h HTTP/1.1\r\nHost: a@b\r\n"),
                req("bad-port", Merged, "GET /h HTTP/1.1\r\nHost: a:8x\r\n"),
                req("port-too-big", Merged, "GET /h HTTP/1.1\r\nHost: x.test:99999\r\n"),
                req("upper-case", Merged, "GET /h HTTP/1.1\r\nHost: KEYS.test\r\n"),
                req("repeated", Merged, format!("GET /h HTTP/1.1\r\n{h}{h}")),
                req("authority-wins", Merged, "GET http://Line.test/a HTTP/1.1\r\nHost: header.test\r\n"),
                req("map-hostnames", Merged, "GET /m HTTP/1.1\r\nHost: x.EU.shop.test.\r\nX-Tenant: BETA\r\n"),
                req("map-trailing-wildcard", Merged, "GET /m HTTP/1.1\r\nHost: www.shop.org\r\nX-Tenant: \r\n"),
                req("map-dot-form", Merged, "GET /m HTTP/1.1\r\nHost: shop.test\r\nX-Tenant: default\r\n"),
            ],
        },
        KeyCase {
            name: "headers",
            description: "repeated and unusual header lines: $http_NAME, $content_type, $http_x_forwarded_for",
            requests: vec![
                req(
                    "repeated-custom",
                    Merged,
                    format!("GET /hd HTTP/1.1\r\n{h}X-Custom: one\r\nX-Custom: two\r\nx-custom:   three  \r\n"),
                ),
                req(
                    "repeated-user-agent",
                    Merged,
                    format!("GET /hd HTTP/1.1\r\n{h}User-Agent: first\r\nUser-Agent: second\r\n"),
                ),
                req(
                    "repeated-forwarded-for",
                    Merged,
                    format!(
                        "GET /hd HTTP/1.1\r\n{h}X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3\r\n"
                    ),
                ),
                req(
                    "repeated-content-type",
                    Merged,
                    format!("GET /hd HTTP/1.1\r\n{h}Content-Type: text/plain\r\nContent-Type: a/b\r\n"),
                ),
                req("repeated-accept", Merged, format!("GET /hd HTTP/1.1\r\n{h}Accept: */*\r\nAccept: text/html\r\n")),
                req(
                    "underscore-and-dot-names",
                    Merged,
                    format!("GET /hd HTTP/1.1\r\n{h}X_Custom: underscore\r\nX.Custom: dot\r\nX-Custom: dash\r\n"),
                ),
                req(
                    "repeated-content-length",
                    Merged,
                    format!("GET /hd HTTP/1.1\r\n{h}Content-Length: 0\r\nContent-Length: 0\r\n"),
                ),
                req("repeated-if-match", Merged, format!("GET /hd HTTP/1.1\r\n{h}If-Match: a\r\nIf-Match: b\r\n")),
                req("map-exact", Merged, format!("GET /hd HTTP/1.1\r\n{h}X-Tenant: Alpha\r\n")),
                req(
                    "map-repeated-source",
                    Merged,
                    format!("GET /hd HTTP/1.1\r\n{h}X-Tenant: alpha\r\nX-Tenant: beta\r\n"),
                ),
            ],
        },
        KeyCase {
            name: "cookies",
            description: "Cookie lines: several, commas, spaces around =, caseless names, a name without =",
            requests: vec![
                req("two-lines", Merged, format!("GET /c HTTP/1.1\r\n{h}Cookie: a=1; b=2\r\nCookie: C=3\r\n")),
                req("comma", Merged, format!("GET /c HTTP/1.1\r\n{h}Cookie: a=1, b=2; C=3\r\n")),
                req("spaces", Merged, format!("GET /c HTTP/1.1\r\n{h}Cookie: A = 5 ;b=6\r\n")),
                req("prefix-name", Merged, format!("GET /c HTTP/1.1\r\n{h}Cookie: ab=1; a=2\r\n")),
                req("name-without-value", Merged, format!("GET /c HTTP/1.1\r\n{h}Cookie: a;b=1\r\n")),
                req("comma-no-space", Merged, format!("GET /c HTTP/1.1\r\n{h}Cookie: x=1,b=7\r\n")),
            ],
        },
        KeyCase {
            name: "ipv6",
            description: "requests over IPv6: $remote_addr, $binary_remote_addr (16 bytes) and $server_addr",
            requests: vec![
                req("plain", Ipv6, get("/six?id=6")),
                req("host-literal", Ipv6, "GET /six HTTP/1.1\r\nHost: [::1]:20803\r\n"),
                req("absent-host", Ipv6, "GET /six HTTP/1.0\r\n"),
            ],
        },
        KeyCase {
            name: "regex-locations",
            description: "location order: exact, longest prefix, ^~, regular expressions in order (caseless ~*, \
                          captures, groups that do not take part), nested regular expressions",
            requests: vec![
                req("prefix-only", Routed, rx("/a/b", "")),
                req("exact-before-regex", Routed, rx("/exact.php", "")),
                req("regex-after-prefix", Routed, rx("/x/index.php", "")),
                req("regex-over-longer-prefix", Routed, rx("/pre/a.php", "")),
                req("noregex-prefix", Routed, rx("/stop/a.php", "")),
                req("nested-regex", Routed, rx("/pre/nested/leaf", "")),
                req("nested-miss-then-outer-regex", Routed, rx("/pre/nested/LEAF.php", "")),
                req("prefix-with-nested-miss", Routed, rx("/pre/nested/x1", "")),
                req("caseless", Routed, rx("/IMG/Cat.PNG", "")),
                req("caseless-group-case", Routed, rx("/css/a.b.css", "")),
                req("case-sensitive-miss", Routed, rx("/a.PHP", "")),
                req("optional-groups-set", Routed, rx("/12/34x", "")),
                req("optional-groups-unset", Routed, rx("/12/", "")),
                req("middle-group-unset", Routed, rx("/12/x", "")),
                req("decoded-uri", Routed, rx("/%31%32/3", "")),
                req("first-regex-wins", Routed, rx("/1/2.php", "")),
            ],
        },
        KeyCase {
            name: "regex-server-names",
            description: "server_name: exact, wildcard, then regular expressions in order (an upper-case letter \
                          makes one caseless), captures and named captures in the key",
            requests: vec![
                req("exact-name", Routed, "GET /cap/e HTTP/1.1\r\nHost: exact.rx.test\r\n"),
                req("wildcard-before-regex", Routed, "GET /cap/w HTTP/1.1\r\nHost: a.wild.rx.test\r\n"),
                req("named-capture", Routed, "GET / HTTP/1.1\r\nHost: Shop-1.RX.test\r\n"),
                req("regex-then-location-capture", Routed, "GET /cap/x/y HTTP/1.1\r\nHost: shop.rx.test\r\n"),
                req("uppercase-pattern-caseless", Routed, "GET / HTTP/1.1\r\nHost: www.example.org\r\n"),
                req("first-server-regex-wins", Routed, "GET / HTTP/1.1\r\nHost: www.rx.test\r\n"),
                req("positional-captures", Routed, "GET / HTTP/1.1\r\nHost: ac.test\r\n"),
                req("exact-after-regex-server", Routed, "GET / HTTP/1.1\r\nHost: third.rx.test\r\n"),
                req("no-match-default", Routed, "GET / HTTP/1.1\r\nHost: other.test\r\n"),
                req("request-line-host", Routed, "GET http://abc.test/1/2 HTTP/1.1\r\nHost: x\r\n"),
                req("trailing-dot", Routed, "GET / HTTP/1.1\r\nHost: shop.rx.test.\r\n"),
            ],
        },
        KeyCase {
            name: "regex-maps",
            description: "map keys ~ and ~*: after exact keys, in order, on the value as sent; captures and named \
                          captures in the value; an empty value tries none",
            requests: vec![
                req("exact-before-regex", Routed, rx("/", "word-1")),
                req("named-and-positional", Routed, rx("/", "alpha-42")),
                req("caseless", Routed, rx("/", "upper")),
                req("case-sensitive-miss", Routed, rx("/", "Alpha-42")),
                req("no-groups", Routed, rx("/12/34", "plain")),
                req("optional-group-unset", Routed, rx("/", "xz")),
                req("default", Routed, rx("/", "none of them")),
                req("empty-value", Routed, rx("/12/34", "")),
                req("map-after-location-captures", Routed, rx("/12/34", "beta-7")),
            ],
        },
    ]
}

/// The client port of the `index`-th request of a run (0-based over every case): fixed, so that
/// `$remote_port` is reproducible.
pub fn client_port(index: usize) -> u16 {
    31_000 + u16::try_from(index).unwrap_or_else(|_| unreachable!("fewer than 30,000 requests"))
}

/// The `http` block's servers (without temp paths), as nginx runs them.
pub fn servers_conf() -> String {
    let body = EXPRESSIONS.iter().map(|(_, e)| *e).collect::<Vec<_>>().join(SEPARATOR);
    let answer = format!("return 200 \"{body}\";");
    let ret = format!("location / {{ {answer} }}");
    let [m, u, v6, _] = Listener::ALL.map(Listener::server);
    format!(
        "{MAPS}  server {{ listen {m}; listen {v6}; server_name {SERVER_NAME}; {ret} }}\n\
         \x20 server {{ listen {u}; server_name {SERVER_NAME}; merge_slashes off; {ret} }}\n{}",
        routed_servers(&answer)
    )
}

/// The whole `nginx.conf` for a scratch prefix.
pub fn nginx_conf(prefix: &Path) -> String {
    let temp = temp_paths(prefix);
    format!(
        "daemon off;\nmaster_process off;\nerror_log stderr notice;\npid {};\nevents {{}}\nhttp {{\n  access_log off;\n{temp}{}}}\n",
        prefix.join("nginx.pid").display(),
        servers_conf()
    )
}

// ---------------------------------------------------------------------------------------------------------
// The file.

/// `vectors/keys/v1/keys.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyVectors {
    /// `keys.schema.json`.
    pub schema: String,
    /// `nginx-http-key`.
    pub algorithm: String,
    /// 1.
    pub format_version: u32,
    /// Tests in the file.
    pub number_of_tests: usize,
    /// [`HEADER`] and how to read the file.
    pub header: Vec<String>,
    /// Every flag used, with its meaning.
    pub notes: std::collections::BTreeMap<String, Note>,
    /// The `http` block's servers and maps nginx ran (temp paths left out).
    pub config: String,
    /// The listeners: addresses and settings.
    pub listeners: Vec<ListenerInfo>,
    /// The expressions, in the order of every test's `keys`.
    pub expressions: Vec<ExpressionInfo>,
    /// Modelled variables left out, with the reason.
    pub not_recorded: Vec<NotRecorded>,
    /// One group per case and set of agreeing builds.
    pub test_groups: Vec<KeyGroup>,
}

/// A flag's meaning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Note {
    /// Wycheproof's category.
    pub bug_type: String,
    /// What it means.
    pub description: String,
}

/// One listener of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListenerInfo {
    /// As tests name it.
    pub name: Listener,
    /// Where nginx listened.
    pub server: String,
    /// The client address requests came from (ports per test).
    pub client_address: String,
    /// `merge_slashes`.
    pub merge_slashes: bool,
    /// The server's first `server_name`.
    pub server_name: String,
    /// `http`.
    pub scheme: String,
}

/// One expression.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpressionInfo {
    /// Short name.
    pub name: String,
    /// As written in `hash` (and in the `return` nginx answered).
    pub expression: String,
}

/// A variable not recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotRecorded {
    /// `$hostname`.
    pub variable: String,
    /// Why.
    pub reason: String,
}

/// Where a group's results come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// `nginx`.
    pub name: String,
    /// Build labels (`1.26.3`, `1.26.3-musl`) whose answers agree.
    pub versions: Vec<String>,
    /// Debian package versions, one per build.
    pub packages: Vec<String>,
    /// C libraries, one per build.
    pub libc: Vec<String>,
    /// UTC day of the recording (kept while the results stay the same).
    pub recorded: String,
}

/// One group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyGroup {
    /// `<case>` or `<case>@<builds>`.
    pub name: String,
    /// The case's description (and the split's reason).
    pub description: String,
    /// The builds.
    pub source: Source,
    /// In sending order.
    pub tests: Vec<KeyTest>,
}

/// One request and what nginx made of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyTest {
    /// Unique in the file.
    pub tc_id: usize,
    /// The request's name in its case.
    pub comment: String,
    /// Flags of `notes`.
    pub flags: Vec<String>,
    /// The listener it was sent to.
    pub listener: Listener,
    /// `address:port` it came from.
    pub client: String,
    /// `address:port` it went to.
    pub server: String,
    /// The bytes sent, as text (`null` if not UTF-8).
    pub request: Option<String>,
    /// The bytes sent: authoritative.
    pub request_hex: String,
    /// `key` (nginx answered 200 with the values) or `refused`.
    pub outcome: Outcome,
    /// nginx's status.
    pub status: u16,
    /// One per expression when `key`, empty when `refused`.
    pub keys: Vec<KeyBytes>,
}

/// What nginx did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Answered 200 with every expression's value.
    Key,
    /// Refused the request (400, 505, …) before any key was computed.
    Refused,
}

/// One value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyBytes {
    /// As text, `null` if not UTF-8.
    pub text: Option<String>,
    /// Authoritative.
    pub hex: String,
}

impl KeyBytes {
    fn of(bytes: &[u8]) -> KeyBytes {
        KeyBytes { text: std::str::from_utf8(bytes).ok().map(str::to_string), hex: super::to_hex(bytes) }
    }
}

/// Decodes lower-case hex.
///
/// # Errors
///
/// Odd length or a non-hex digit.
pub fn from_hex(s: &str) -> Result<Vec<u8>> {
    ensure!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).with_context(|| format!("bad hex {s:?}")))
        .collect()
}

/// The file's path in a repository.
pub fn key_vectors_path(root: &Path) -> PathBuf {
    root.join("vectors/keys/v1/keys.json")
}

/// The file's text: pretty JSON and a final newline (what the recorder writes).
///
/// # Errors
///
/// Never in practice (serialization of plain data).
pub fn render(file: &KeyVectors) -> Result<String> {
    Ok(serde_json::to_string_pretty(file)? + "\n")
}

// ---------------------------------------------------------------------------------------------------------
// Recording.

/// What one build answered to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    keys: Vec<Vec<u8>>,
}

fn start(install: &Installation) -> Result<Single> {
    let listens: Vec<SocketAddr> = Listener::ALL.iter().map(|l| l.server()).collect();
    Single::start(install, "nk-keyvec-", nginx_conf, &listens)
}

/// A connection from `client` (address and port, bound with `SO_REUSEADDR`) to `server`.
fn connect_from(client: SocketAddr, server: SocketAddr) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
        // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match a {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_in fits in sockaddr_storage.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                    sin6_scope_id: 0,
                };
                // SAFETY: sockaddr_in6 fits in sockaddr_storage.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        (storage, len as libc::socklen_t)
    }
    let family = if client.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain socket calls on a descriptor this function owns until it is handed to TcpStream.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let one: libc::c_int = 1;
        let on = (&raw const one).cast::<libc::c_void>();
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        if libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, on, size) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (c, clen) = sockaddr(client);
        if libc::bind(fd, (&raw const c).cast::<libc::sockaddr>(), clen) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (s, slen) = sockaddr(server);
        if libc::connect(fd, (&raw const s).cast::<libc::sockaddr>(), slen) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// The bytes sent for a request: its head, `Connection: close` and the empty line.
pub fn wire_bytes(head: &str) -> Vec<u8> {
    format!("{head}Connection: close\r\n\r\n").into_bytes()
}

fn send(client: SocketAddr, server: SocketAddr, bytes: &[u8]) -> Result<Answer> {
    let mut s = connect_from(client, server).with_context(|| format!("connecting from {client} to {server}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(bytes)?;
    let mut response = Vec::new();
    s.read_to_end(&mut response).context("reading the response")?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").context("no response head from nginx")?;
    let head = String::from_utf8_lossy(&response[..split]);
    let status: u16 =
        head.lines().next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).context("no status code")?;
    if status != 200 {
        return Ok(Answer { status, keys: Vec::new() });
    }
    let body = &response[split + 4..];
    let keys = split_body(body);
    ensure!(
        keys.len() == EXPRESSIONS.len(),
        "nginx's answer splits into {} values, not {}: a value contains the separator {SEPARATOR:?}",
        keys.len(),
        EXPRESSIONS.len()
    );
    Ok(Answer { status, keys })
}

/// nginx's answer split into one value per expression, at every separator (`<|~|>`).
pub fn split_body(body: &[u8]) -> Vec<Vec<u8>> {
    let sep = SEPARATOR.as_bytes();
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.windows(sep.len()).position(|w| w == sep) {
        out.push(rest[..i].to_vec());
        rest = &rest[i + sep.len()..];
    }
    out.push(rest.to_vec());
    out
}

/// Every case's answers on one build, in [`cases`] order.
fn record_build(install: &Installation, cases: &[KeyCase]) -> Result<Vec<Vec<Answer>>> {
    let _nginx = start(install)?;
    let mut index = 0;
    let mut out = Vec::new();
    for case in cases {
        let mut answers = Vec::new();
        for r in &case.requests {
            let client = SocketAddr::new(r.listener.client_ip(), client_port(index));
            index += 1;
            let answer = send(client, r.listener.server(), &wire_bytes(&r.head))
                .with_context(|| format!("{} {}/{}", install.label(), case.name, r.name))?;
            answers.push(answer);
        }
        out.push(answers);
    }
    Ok(out)
}

/// Records every case on every build in `installs` (oldest first) and returns the file, keeping each
/// group's `recorded` day from `previous` when the group is unchanged.
///
/// # Errors
///
/// An nginx that does not start, a request that gets no answer, an answer that does not split into one
/// value per expression, a request containing the separator.
pub fn record(installs: &[Installation], previous: Option<&KeyVectors>, today: &str) -> Result<KeyVectors> {
    ensure!(!installs.is_empty(), "no nginx to record from");
    let cases = cases();
    for case in &cases {
        for r in &case.requests {
            ensure!(!r.head.contains(SEPARATOR), "request {}/{} contains the separator", case.name, r.name);
        }
    }
    let _lock = super::lock_catalog()?;
    let mut runs = Vec::new();
    for install in installs {
        runs.push(record_build(install, &cases)?);
    }
    let mut groups = Vec::new();
    let mut tc_id = 0;
    let mut index_base = 0;
    for (ci, case) in cases.iter().enumerate() {
        // Builds whose answers agree, in build order.
        let mut parts: Vec<(Vec<usize>, &Vec<Answer>)> = Vec::new();
        for (bi, run) in runs.iter().enumerate() {
            match parts.iter_mut().find(|(_, a)| **a == run[ci]) {
                Some((builds, _)) => builds.push(bi),
                None => parts.push((vec![bi], &run[ci])),
            }
        }
        let split = parts.len() > 1;
        for (builds, answers) in parts {
            let labels: Vec<String> = builds.iter().map(|&b| installs[b].label()).collect();
            let name = if split { format!("{}@{}", case.name, labels.join("+")) } else { case.name.to_string() };
            let description = if split {
                format!("{} (these builds only: the others answer at least one request differently)", case.description)
            } else {
                case.description.to_string()
            };
            let mut tests = Vec::new();
            for (ri, (r, a)) in case.requests.iter().zip(answers).enumerate() {
                tc_id += 1;
                let bytes = wire_bytes(&r.head);
                let mut flags = Vec::new();
                // Per test: only where this request's own answers differ between the builds.
                if split && runs.iter().any(|run| run[ci][ri] != *a) {
                    flags.push("VersionDependent".to_string());
                }
                if a.status != 200 {
                    flags.push("Refused".to_string());
                }
                tests.push(KeyTest {
                    tc_id,
                    comment: r.name.to_string(),
                    flags,
                    listener: r.listener,
                    client: SocketAddr::new(r.listener.client_ip(), client_port(index_base + ri)).to_string(),
                    server: r.listener.server().to_string(),
                    request: std::str::from_utf8(&bytes).ok().map(str::to_string),
                    request_hex: super::to_hex(&bytes),
                    outcome: if a.status == 200 { Outcome::Key } else { Outcome::Refused },
                    status: a.status,
                    keys: a.keys.iter().map(|k| KeyBytes::of(k)).collect(),
                });
            }
            let source = Source {
                name: "nginx".to_string(),
                versions: labels,
                packages: builds.iter().map(|&b| installs[b].package().unwrap_or_default()).collect(),
                libc: builds.iter().map(|&b| installs[b].libc_description()).collect(),
                recorded: today.to_string(),
            };
            let mut group = KeyGroup { name, description, source, tests };
            if let Some(old) = previous.and_then(|p| p.test_groups.iter().find(|g| g.name == group.name)) {
                let mut same = old.clone();
                same.source.recorded = today.to_string();
                if same == group {
                    group.source.recorded = old.source.recorded.clone();
                }
            }
            groups.push(group);
        }
        index_base += case.requests.len();
    }
    Ok(assemble(groups))
}

fn assemble(test_groups: Vec<KeyGroup>) -> KeyVectors {
    let mut notes = std::collections::BTreeMap::new();
    let used = |f: &str| test_groups.iter().flat_map(|g| &g.tests).any(|t| t.flags.iter().any(|x| x == f));
    if used("Refused") {
        notes.insert(
            "Refused".to_string(),
            Note {
                bug_type: "EDGE_CASE".to_string(),
                description: "nginx refused the request (400, 505) before computing any key".to_string(),
            },
        );
    }
    if used("VersionDependent") {
        notes.insert(
            "VersionDependent".to_string(),
            Note {
                bug_type: "LEGACY".to_string(),
                description: "builds disagree on this case: the group holds the answers of the builds in \
                              source.versions only"
                    .to_string(),
            },
        );
    }
    let listeners = Listener::ALL
        .iter()
        .map(|&l| ListenerInfo {
            name: l,
            server: l.server().to_string(),
            client_address: l.client_ip().to_string(),
            merge_slashes: l.merge_slashes(),
            server_name: l.server_name().to_string(),
            scheme: "http".to_string(),
        })
        .collect();
    KeyVectors {
        schema: "keys.schema.json".to_string(),
        algorithm: "nginx-http-key".to_string(),
        format_version: 1,
        number_of_tests: test_groups.iter().map(|g| g.tests.len()).sum(),
        header: vec![
            HEADER.to_string(),
            "Each test is one raw request (requestHex, authoritative) sent from `client` to `server`; nginx \
             answered with the value of every expression (keys, in the order of `expressions`) or refused it \
             (status)."
                .to_string(),
            "Groups hold the builds (source.versions) whose answers to a case agree; see vectors/README.md, \
             \"Key vectors\"."
                .to_string(),
        ],
        notes,
        config: servers_conf(),
        listeners,
        expressions: EXPRESSIONS
            .iter()
            .map(|(n, e)| ExpressionInfo { name: (*n).to_string(), expression: (*e).to_string() })
            .collect(),
        not_recorded: NOT_RECORDED
            .iter()
            .map(|(v, r)| NotRecorded { variable: (*v).to_string(), reason: (*r).to_string() })
            .collect(),
        test_groups,
    }
}

/// Reads a key-vector file.
///
/// # Errors
///
/// Unreadable, or not this format.
pub fn load(path: &Path) -> Result<KeyVectors> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
