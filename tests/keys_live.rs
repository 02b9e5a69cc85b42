//! Live check of key evaluation (issue 21): every provisioned nginx answers crafted raw requests with the
//! value of a key expression (`return 200 "<expression>"`), and the library must compute the same bytes —
//! or the same refusal (400/505) — from the same request and configuration.
//!
//! The requests cover odd targets (`%2F`, `//`, `/../`, `%00`, spaces and tabs, absolute forms), Host
//! variants (case, port, trailing dot, invalid), repeated headers and cookies, query arguments and methods.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use nginx_ketama::NginxVersion;
use nginx_ketama::config::expression::Expression;
use nginx_ketama::key::{self, Context};
use nginx_ketama::request::{Request, Scheme};
use nginx_ketama_harness::nginx::install::Installation;
use nginx_ketama_harness::nginx::single::{Single, temp_paths};
use nginx_ketama_harness::testkit::{provisioned_or_skip, report};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Every modelled http variable, in one `return` text (the separators are literals of the expression).
const TEMPLATE: &str = "ru=$request_uri|u=$uri|du=$document_uri|a=$args|qs=$query_string|ia=$is_args|\
    id=$arg_id|ID=$arg_ID|e=$arg_e|ck=$cookie_a|cb=$cookie_b|cc=$cookie_C|h=$host|hh=$http_host|\
    ua=$http_user_agent|xc=$http_x_custom|xff=$http_x_forwarded_for|hc=$http_cookie|acc=$http_accept|\
    ct=$content_type|sn=$server_name|hn=$hostname|ra=$remote_addr|bra=$binary_remote_addr|\
    rp=$remote_port|sa=$server_addr|sp=$server_port|s=$scheme|m=$request_method|r=$request|\
    br=${host}x${uri}";

const SERVER_NAME: &str = "keys.test";

/// One nginx under test: a single process (`master_process off`) in a scratch prefix.
struct Nginx {
    single: Single,
    /// The default server with `merge_slashes on` (the default).
    merged: SocketAddr,
    /// The default server with `merge_slashes off`.
    unmerged: SocketAddr,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("an ephemeral port").local_addr().expect("its address").port()
}

/// nginx on `conf` (written for its prefix), listening on the two loopback ports `a` (merge_slashes on) and `b`.
fn start_on(install: &Installation, conf: impl FnOnce(&std::path::Path) -> String, a: u16, b: u16) -> Nginx {
    let (merged, unmerged) = (SocketAddr::from(([127, 0, 0, 1], a)), SocketAddr::from(([127, 0, 0, 1], b)));
    let single = Single::start(install, "nk-keys-", conf, &[merged, unmerged]).unwrap_or_else(|e| panic!("{e:#}"));
    Nginx { single, merged, unmerged }
}

fn start(install: &Installation) -> Nginx {
    let (a, b) = (free_port(), free_port());
    let conf = |p: &std::path::Path| {
        format!(
            "daemon off;\nmaster_process off;\nerror_log stderr notice;\npid {pid};\nevents {{}}\nhttp {{\n  access_log off;\n{temp}\
             \x20 server {{ listen 127.0.0.1:{a}; server_name {SERVER_NAME}; location / {{ return 200 \"{TEMPLATE}\"; }} }}\n\
             \x20 server {{ listen 127.0.0.1:{b}; server_name {SERVER_NAME}; merge_slashes off; location / {{ return 200 \"{TEMPLATE}\"; }} }}\n}}\n",
            pid = p.join("nginx.pid").display(),
            temp = temp_paths(p),
        )
    };
    start_on(install, conf, a, b)
}

/// Sends `head` (request line and header lines, each ended by CRLF, plus `Connection: close` and the
/// empty line) and returns the response's status and body, with the connection's two addresses.
fn send(to: SocketAddr, head: &[u8]) -> (u16, Vec<u8>, SocketAddr) {
    let mut s = TcpStream::connect(to).expect("connecting to nginx");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
    let client = s.local_addr().expect("the client address");
    let mut bytes = head.to_vec();
    bytes.extend_from_slice(b"Connection: close\r\n\r\n");
    s.write_all(&bytes).expect("sending the request");
    let mut response = Vec::new();
    s.read_to_end(&mut response).expect("reading the response");
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let status_line = String::from_utf8_lossy(&response[..split]).lines().next().unwrap_or_default().to_string();
    let status: u16 = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    (status, response[split + 4..].to_vec(), client)
}

/// What the library says for the same request: 200 and the key, or nginx's refusal.
fn model(version: NginxVersion, head: &[u8], client: SocketAddr, server: SocketAddr, merge: bool) -> (u16, Vec<u8>) {
    let mut bytes = head.to_vec();
    bytes.extend_from_slice(b"Connection: close\r\n");
    let req = Request::from_head(&bytes, client, server, Scheme::Http).expect("a request line");
    let rules = version.key_rules();
    match req.parse_as(rules, merge) {
        Err(bad) => (bad.status().expect("a modelled refusal"), Vec::new()),
        Ok(parsed) => {
            let hostname = key::local_hostname();
            let ctx = Context::new(rules, SERVER_NAME.as_bytes(), &hostname);
            let expr = Expression::parse(TEMPLATE.as_bytes()).expect("the template parses");
            (200, key::evaluate(&expr, &parsed, &ctx).expect("every variable is modelled"))
        }
    }
}

/// The requests: `(merge_slashes, head)`, each head's lines ended by CRLF.
fn cases() -> Vec<(bool, Vec<u8>)> {
    let h = "Host: keys.test\r\n";
    let mut out: Vec<(bool, String)> = Vec::new();
    for target in [
        "/",
        "/a//b///c",
        "/a/./b/../c",
        "/a/b/..",
        "/a/.",
        "/..",
        "/a/../../b",
        "/%2e%2E/x",
        "/a%2Fb%2f%2fc",
        "/%41%3f%23%25",
        "/%zz",
        "/%4",
        "/a%00",
        "/a?b=/../%zz#f",
        "/a#f?x",
        "/a/..?x",
        "/a.b/c..d/....",
        "/p?id=1&ID=2&xid=3&e=",
        "/p?xid=1&id",
        "/p?=x&Id=%41",
        "/p?",
        "/caf\u{e9}/%C3%A9?q=%20",
        "/a+b%2B",
        "/a b",
        "/a\tb",
    ] {
        out.push((true, format!("GET {target} HTTP/1.1\r\n{h}")));
    }
    for target in ["/a//b", "//..", "/a//../b", "/x%2F%2F/y"] {
        out.push((false, format!("GET {target} HTTP/1.1\r\n{h}")));
    }
    for line in [
        "GET http://Ex.COM:81/p?q=1 HTTP/1.1",
        "GET http://ex.com?q HTTP/1.1",
        "GET http://ex.com HTTP/1.1",
        "GET HTTP://[::1]:8080/x HTTP/1.1",
        "GET http://a_b/ HTTP/1.1",
        "get / HTTP/1.1",
        "GET / HTTP/2.0",
        "GET a HTTP/1.1",
        "GET  /spaces   HTTP/1.1",
        "PURGE /m HTTP/1.1",
        "POST /m HTTP/1.0",
        "GET /v HTTP/1.10",
    ] {
        out.push((true, format!("{line}\r\n{h}")));
    }
    out.push((true, "GET /noh HTTP/1.0\r\n".to_string()));
    out.push((true, "GET /noh HTTP/1.1\r\n".to_string()));
    for host in [
        "Example.COM:8080",
        "example.com.",
        "[::1]:80",
        "a..b",
        "a/b",
        ":80",
        "a b",
        "a@b",
        "a:8x",
        "x.test:99999",
        "KEYS.test",
    ] {
        out.push((true, format!("GET /h HTTP/1.1\r\nHost: {host}\r\n")));
    }
    out.push((true, format!("GET /h HTTP/1.1\r\n{h}{h}")));
    for headers in [
        "X-Custom: one\r\nX-Custom: two\r\nx-custom:   three  \r\n",
        "User-Agent: first\r\nUser-Agent: second\r\n",
        "X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-For: 10.0.0.2, 10.0.0.3\r\n",
        "Content-Type: text/plain\r\nContent-Type: a/b\r\n",
        "Accept: */*\r\nAccept: text/html\r\n",
        "X_Custom: underscore\r\nX.Custom: dot\r\nX-Custom: dash\r\n",
        "Cookie: a=1; b=2\r\nCookie: C=3\r\n",
        "Cookie: a=1, b=2; C=3\r\n",
        "Cookie: A = 5 ;b=6\r\n",
        "Cookie: ab=1; a=2\r\n",
        "Cookie: a;b=1\r\n",
        "Cookie: x=1,b=7\r\n",
        "Content-Length: 0\r\nContent-Length: 0\r\n",
        "If-Match: a\r\nIf-Match: b\r\n",
    ] {
        out.push((true, format!("GET /hd HTTP/1.1\r\n{h}{headers}")));
    }
    out.into_iter().map(|(m, s)| (m, s.into_bytes())).collect()
}

#[test]
fn library_keys_match_live_nginx() {
    let Some(installs) = provisioned_or_skip() else { return };
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for install in &installs {
        let nginx = start(install);
        for (merge, head) in cases() {
            let to = if merge { nginx.merged } else { nginx.unmerged };
            let (status, body, client) = send(to, &head);
            let (want_status, want_body) = model(install.version, &head, client, to, merge);
            checked += 1;
            let body = if status == 200 { body } else { Vec::new() };
            if (status, &body) != (want_status, &want_body) {
                mismatches.push(format!(
                    "{} {:?} (merge_slashes {merge}):\n  nginx:   {status} {:?}\n  library: {want_status} {:?}",
                    install.label(),
                    String::from_utf8_lossy(&head),
                    String::from_utf8_lossy(&body),
                    String::from_utf8_lossy(&want_body)
                ));
            }
        }
        drop(nginx);
    }
    assert!(mismatches.is_empty(), "{} of {checked} requests differ:\n{}", mismatches.len(), mismatches.join("\n"));
    let builds: Vec<String> = installs.iter().map(Installation::label).collect();
    report(&format!("keys_live: {checked} requests, library keys equal nginx's on {}", builds.join(", ")));
}

/// The configuration of the dispatch test: `{LOC:name}` is where a location hands the request to upstream
/// `name`. nginx answers `return 200 "name|<the upstream's hash expression>"` there; the library reads the
/// same configuration with `proxy_pass http://name;` and must say `Dispatch::Hash { upstream: name, key }`.
const SITES: &str = "
  upstream u_a { hash $host$request_uri consistent; server 127.0.0.1:1; }
  upstream u_exact { hash $uri$is_args$args; server 127.0.0.1:1; }
  upstream u_static { hash $server_name:$arg_id consistent; server 127.0.0.1:1; }
  upstream u_deep { hash ${host}-$uri; server 127.0.0.1:1; }
  upstream u_stop { hash $http_x_k|$cookie_s consistent; server 127.0.0.1:1; }
  upstream u_dflt { hash $host|$server_name|$http_host; server 127.0.0.1:1; }
  upstream u_wild { hash $host$uri consistent; server 127.0.0.1:1; }
  upstream u_wild2 { hash w2$host; server 127.0.0.1:1; }
  upstream u_trail { hash $host$server_port; server 127.0.0.1:1; }
  upstream u_dot { hash $server_name/$host; server 127.0.0.1:1; }
  upstream u_b { hash $uri; server 127.0.0.1:1; }
  upstream u_map { hash $tenant|$zone|$combo|$lvl1; server 127.0.0.1:1; }
  upstream u_loop { hash $loop1; server 127.0.0.1:1; }
  upstream u_loop2 { hash $loop2|$loop1; server 127.0.0.1:1; }
  upstream u_vol { hash $vol2|$vol1|$vol2; server 127.0.0.1:1; }
  upstream u_vp { hash $vp; server 127.0.0.1:1; }
  upstream u_set { hash $shard|$who|$tier|$tenant; server 127.0.0.1:1; }
  map $http_x_tenant $tenant { default none; alpha a-pool; Beta b-pool; \\default escaped; \"\" empty-src; }
  map $http_x_host $zone {
    *.early.test early; hostnames; default z0;
    .shop.test shop; *.eu.shop.test eu; www.shop.* wwwshop; exact.test ex;
  }
  map $tenant$zone $combo { default c-$tenant; a-poolshop combo-$host; }
  map $uri $lvl1 { /m/x $lvl2; default -; }
  map $uri $lvl2 { default deep-$tenant; }
  map $http_x_loop $loop1 { default $loop2; }
  map $http_x_loop $loop2 { default <$loop1>; }
  map $http_x_loop $vol1 { volatile; default [$vol2]; }
  map $http_x_loop $vol2 { default $vol1.; }
  map $vol2 $vp { default $vol1; }
  server { listen 127.0.0.1:{A}; server_name a.test alias.test;
    location / { {LOC:u_a} }
    location = /x { {LOC:u_exact} }
    location /static/ { {LOC:u_static} location /static/deep/ { {LOC:u_deep} } }
    location ^~ /stop/ { {LOC:u_stop} }
    location = /health { return 204; }
  }
  server { listen 127.0.0.1:{A} default_server; server_name dflt.test; location / { {LOC:u_dflt} } }
  server { listen 127.0.0.1:{A}; server_name *.wild.test; location / { {LOC:u_wild} } }
  server { listen 127.0.0.1:{A}; server_name *.deeper.wild.test; location / { {LOC:u_wild2} } }
  server { listen 127.0.0.1:{A}; server_name www.trail.*; location / { {LOC:u_trail} } }
  server { listen 127.0.0.1:{A}; server_name .dot.test; location / { {LOC:u_dot} } }
  server { listen 127.0.0.1:{A}; server_name map.test; location /m/ { {LOC:u_map} } location /loop/ { {LOC:u_loop} }
    location /loop2/ { {LOC:u_loop2} } location /vol/ { {LOC:u_vol} }
    location /vp/ { {LOC:u_vp} } }
  server { listen 127.0.0.1:{A}; server_name set.test;
    set $tier gold; set $who $tier-$http_x_user; break; set $tier silver;
    location /s/ { set $shard $arg_s:$who; set $tenant $shard+$tenant; {LOC:u_set} }
    location /r/ { set $shard one; return 204; {LOC:u_set} }
    location /u/ { {LOC:u_set} }
    location /n/ { location /n/x/ { {LOC:u_set} } set $shard outer; {LOC:u_set} }
  }
  server { listen 127.0.0.1:{B}; server_name b.test; merge_slashes off; location /a/ { {LOC:u_b} } }
";

fn sites_config(prefix: &std::path::Path, a: u16, b: u16, live: bool) -> String {
    let mut body = SITES.replace("{A}", &a.to_string()).replace("{B}", &b.to_string());
    while let Some(start) = body.find("{LOC:") {
        let end = start + body[start..].find('}').expect("a closing brace");
        let name = body[start + 5..end].to_string();
        let key = SITES
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("upstream {name} {{ hash ")))
            .and_then(|rest| rest.split(';').next())
            .map(|k| k.trim_end_matches(" consistent").to_string())
            .expect("the upstream's hash line");
        let handler = if live { format!("return 200 \"{name}|{key}\";") } else { format!("proxy_pass http://{name};") };
        body.replace_range(start..=end, &handler);
    }
    let temp = temp_paths(prefix);
    format!(
        "daemon off;\nmaster_process off;\nerror_log stderr notice;\npid {};\nevents {{}}\nhttp {{\n  access_log off;\n{temp}{body}}}\n",
        prefix.join("nginx.pid").display()
    )
}

#[test]
fn dispatch_matches_live_nginx() {
    use nginx_ketama::config::{Config, LoadOptions};
    use nginx_ketama::dispatch::{Dispatch, dispatch};
    let Some(installs) = provisioned_or_skip() else { return };
    let requests: Vec<(bool, String)> = [
        (true, "GET / HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /x HTTP/1.1\r\nHost: ALIAS.test:99\r\n"),
        (true, "GET /x?q=1 HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /x/ HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /static/f?id=9 HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /static/deep/f HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /static//deep/./g HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /static/%64eep/h HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /stop/a HTTP/1.1\r\nHost: a.test\r\nX-K: k1\r\nCookie: s=c1\r\n"),
        (true, "GET /health HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: nobody.test\r\n"),
        (true, "GET /p HTTP/1.0\r\n"),
        (true, "GET http://a.test/r?z HTTP/1.1\r\nHost: dflt.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: x.wild.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: y.x.deeper.wild.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: wild.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: www.trail.org\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: dot.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: a.dot.test.\r\n"),
        (true, "GET /.. HTTP/1.1\r\nHost: a.test\r\n"),
        (true, "GET /p HTTP/1.1\r\nHost: .wild.test\r\n"),
        (true, "GET /m/x HTTP/1.1\r\nHost: map.test\r\nX-Tenant: alpha\r\nX-Host: Shop.test\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Tenant: BETA\r\nX-Host: x.eu.shop.test.\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Tenant: default\r\nX-Host: www.shop.org\r\n"),
        (true, "GET /m/x HTTP/1.1\r\nHost: map.test\r\nX-Host: exact.test\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Tenant: zeta\r\nX-Host: .eu.shop.test\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Host: eu.shop.test\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Host: www.shop\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Host: www.shop.\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Host: *.early.test\r\n"),
        (true, "GET /m/y HTTP/1.1\r\nHost: map.test\r\nX-Host: a.early.test\r\n"),
        (true, "GET /loop/ HTTP/1.1\r\nHost: map.test\r\nX-Loop: 1\r\n"),
        (true, "GET /s/a?s=7 HTTP/1.1\r\nHost: set.test\r\nX-User: ann\r\nX-Tenant: alpha\r\n"),
        (true, "GET /r/ HTTP/1.1\r\nHost: set.test\r\n"),
        (true, "GET /u/ HTTP/1.1\r\nHost: set.test\r\nX-User: bob\r\n"),
        (true, "GET /n/x/y HTTP/1.1\r\nHost: set.test\r\n"),
        (true, "GET /n/z HTTP/1.1\r\nHost: set.test\r\n"),
        (true, "GET /loop2/ HTTP/1.1\r\nHost: map.test\r\nX-Loop: 1\r\n"),
        (true, "GET /vol/ HTTP/1.1\r\nHost: map.test\r\nX-Loop: 1\r\n"),
        (true, "GET /vp/ HTTP/1.1\r\nHost: map.test\r\nX-Loop: 1\r\n"),
        (false, "GET /a//b HTTP/1.1\r\nHost: b.test\r\n"),
        (false, "GET /b HTTP/1.1\r\nHost: b.test\r\n"),
        (false, "GET //a/b HTTP/1.1\r\nHost: b.test\r\n"),
    ]
    .into_iter()
    .map(|(m, s)| (m, s.to_string()))
    .collect();
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for install in &installs {
        let (a, b) = (free_port(), free_port());
        let nginx = start_on(install, |p| sites_config(p, a, b, true), a, b);
        let prefix = nginx.single.prefix();
        let modelled = sites_config(prefix, a, b, false);
        let options = LoadOptions { resolve: false, version: install.version, ..LoadOptions::default() };
        let config = Config::parse_str(&modelled, prefix.join("nginx.conf"), &options).expect("the library reads it");
        for (merge, head) in &requests {
            let to = if *merge { nginx.merged } else { nginx.unmerged };
            let (status, body, client) = send(to, head.as_bytes());
            let mut bytes = head.as_bytes().to_vec();
            bytes.extend_from_slice(b"Connection: close\r\n");
            let req = Request::from_head(&bytes, client, to, Scheme::Http).expect("a request line");
            let (want_status, want_body) = match dispatch(&config, &req).expect("modelled") {
                Dispatch::Hash { upstream, key, .. } => (200, [upstream.as_bytes(), b"|", &key].concat()),
                Dispatch::Return { status } => (status, Vec::new()),
                Dispatch::BadRequest(bad) => (bad.status().expect("a status"), Vec::new()),
                Dispatch::NoLocation => (404, Vec::new()),
                other => panic!("unexpected {other:?}"),
            };
            let body = if status == 200 { body } else { Vec::new() };
            checked += 1;
            if (status, &body) != (want_status, &want_body) {
                mismatches.push(format!(
                    "{} {head:?}:\n  nginx:   {status} {:?}\n  library: {want_status} {:?}",
                    install.label(),
                    String::from_utf8_lossy(&body),
                    String::from_utf8_lossy(&want_body)
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{} of {checked} requests differ:\n{}", mismatches.len(), mismatches.join("\n"));
    report(&format!("keys_live: {checked} requests dispatched (server, location, upstream, key) as nginx does"));
}
