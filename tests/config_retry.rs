//! The config reader's retry rules (algorithm §5.1, §7): `*_next_upstream`, `_tries` and `_timeout` per
//! place that proxies to a hash upstream, with nginx's inheritance (a block that sets a directive replaces
//! its parent's value; several `*_next_upstream` lines in one block add up; `off` is alone), nginx's
//! messages for bad values (the same messages are checked against `nginx -t` in `config_acceptance_live.rs`),
//! and `keepalive` before `hash` (algorithm §2.3).

use nginx_ketama::NginxVersion;
use nginx_ketama::config::{Config, Input, Keepalive, LoadOptions, Retry};
use nginx_ketama::failure::{Condition, NextUpstream, Proxying, RetryPolicy, StreamPolicy};

fn read(text: &str) -> Config {
    Config::parse_str(text, "x.conf", &LoadOptions { resolve: false, ..LoadOptions::fragment() }).unwrap()
}

fn http(conf: &Config, i: usize) -> RetryPolicy {
    match conf.proxied[i].retry {
        Retry::Http(p) => p,
        Retry::Stream(_) => panic!("a stream policy"),
    }
}

const UP: &str = "upstream u { hash $uri consistent; server 10.0.0.1; server 10.0.0.2; }\n";

#[test]
fn defaults_are_error_timeout_no_limits() {
    let conf = read(&format!("{UP}server {{ location / {{ proxy_pass http://u; }} }}"));
    assert_eq!(conf.proxied.len(), 1);
    assert_eq!(http(&conf, 0), RetryPolicy::default());
    assert_eq!(conf.proxied[0].upstream, "u");
    assert_eq!(conf.proxied[0].location.line, 2);
}

#[test]
fn inner_blocks_replace_and_lines_add_up() {
    let conf = read(&format!(
        "{UP}proxy_next_upstream error http_502;\nproxy_next_upstream_tries 3;\n\
         server {{\n proxy_next_upstream_timeout 5s;\n\
           location /a {{ proxy_pass http://u; }}\n\
           location /b {{ proxy_pass http://U/x; proxy_next_upstream http_503; proxy_next_upstream http_404 timeout; }}\n\
           location /c {{ location /c/d {{ proxy_pass http://u; proxy_next_upstream_tries 0; }} proxy_next_upstream off; }}\n\
           location /m {{ memcached_pass u; memcached_next_upstream not_found; }}\n\
           location /n {{ proxy_pass http://$host; }}\n\
         }}\n"
    ));
    let a = http(&conf, 0);
    assert_eq!(a.next_upstream, NextUpstream::EMPTY.with(Condition::Error).with(Condition::Http502));
    assert_eq!((a.tries, a.timeout_ms), (3, 5000));
    let b = http(&conf, 1);
    assert_eq!(b.next_upstream.to_string(), "timeout http_503 http_404");
    let c = http(&conf, 2);
    assert_eq!((c.next_upstream, c.tries), (NextUpstream::OFF, 0));
    let m = http(&conf, 3);
    assert_eq!(conf.proxied[3].module, Proxying::Memcached);
    assert_eq!(m.next_upstream.to_string(), "http_404", "memcached's own words; not proxy's settings");
    assert_eq!(m.tries, 0);
    assert_eq!(conf.proxied.len(), 4, "a URL with variables names no block");
}

#[test]
fn bad_values_get_nginx_messages() {
    let err = |body: &str| {
        Config::parse_str(&format!("{UP}server {{ location / {{\n{body}\n}} }}"), "x.conf", &LoadOptions::fragment())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(err("proxy_next_upstream error bogus;"), "invalid value \"bogus\" in x.conf:3");
    assert_eq!(err("memcached_next_upstream http_502;"), "invalid value \"http_502\" in x.conf:3");
    assert_eq!(
        err("proxy_next_upstream_tries x;"),
        "\"proxy_next_upstream_tries\" directive invalid number in x.conf:3"
    );
    assert_eq!(
        err("proxy_next_upstream_tries -1;"),
        "\"proxy_next_upstream_tries\" directive invalid number in x.conf:3"
    );
    assert_eq!(
        err("proxy_next_upstream_timeout 1x;"),
        "\"proxy_next_upstream_timeout\" directive invalid value in x.conf:3"
    );
    assert_eq!(
        err("proxy_next_upstream_tries 1; proxy_next_upstream_tries 2;"),
        "\"proxy_next_upstream_tries\" directive is duplicate in x.conf:3"
    );
    let conf = read(&format!("{UP}server {{ location / {{\nproxy_next_upstream error ERROR;\n}} }}"));
    assert_eq!(conf.warnings[0].to_string(), "duplicate value \"ERROR\" in x.conf:3");
}

#[test]
fn stream_servers_have_on_or_off() {
    let options = LoadOptions { resolve: false, input: Input::StreamFragment, ..LoadOptions::default() };
    let text = "upstream s { hash $remote_addr; server 10.0.0.1:53; server 10.0.0.2:53; }\n\
                proxy_next_upstream_tries 2;\n\
                server { listen 53; proxy_pass s; proxy_next_upstream OFF; }\n\
                server { listen 54; proxy_pass s; }";
    let conf = Config::parse_str(text, "x.conf", &options).unwrap();
    let policies: Vec<Retry> = conf.proxied.iter().map(|p| p.retry).collect();
    assert_eq!(
        policies,
        [
            Retry::Stream(StreamPolicy { next_upstream: false, tries: 2, timeout_ms: 0 }),
            Retry::Stream(StreamPolicy { next_upstream: true, tries: 2, timeout_ms: 0 }),
        ]
    );
    let err = Config::parse_str(
        "upstream s { hash $remote_addr; server 10.0.0.1:53; }\nserver { listen 53; proxy_pass s;\nproxy_next_upstream error; }",
        "x.conf",
        &options,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid value \"error\" in \"proxy_next_upstream\" directive, it must be \"on\" or \"off\" in x.conf:3"
    );
}

/// Before 1.29.7 `keepalive` occupies the balancer's slot: `hash` after it warns and drops it; after it,
/// `keepalive` wraps the hash. From 1.29.7 there is no warning and keepalive is on by default (32).
#[test]
fn keepalive_before_hash_by_release() {
    let read_at = |v: NginxVersion, text: &str| {
        Config::parse_str(text, "x.conf", &LoadOptions { resolve: false, version: v, ..LoadOptions::fragment() })
            .unwrap()
    };
    let before = "upstream u {\n keepalive 8;\n hash $uri;\n server 10.0.0.1;\n}";
    let after = "upstream u {\n hash $uri;\n keepalive 8;\n server 10.0.0.1;\n}";
    let none = "upstream u {\n hash $uri;\n server 10.0.0.1;\n}";
    let old = NginxVersion::new(1, 26, 3);
    let new = NginxVersion::new(1, 30, 6);
    let c = read_at(old, before);
    assert_eq!(c.warnings[0].to_string(), "load balancing method redefined in x.conf:3");
    assert_eq!(c.upstreams[0].keepalive, Keepalive::Replaced);
    let c = read_at(old, after);
    assert!(c.warnings.is_empty());
    assert_eq!(c.upstreams[0].keepalive, Keepalive::Cached(8));
    assert_eq!(read_at(old, none).upstreams[0].keepalive, Keepalive::Off);
    let c = read_at(new, before);
    assert!(c.warnings.is_empty());
    assert_eq!(c.upstreams[0].keepalive, Keepalive::Cached(8));
    assert_eq!(read_at(new, none).upstreams[0].keepalive, Keepalive::Cached(32));
    let zero = "upstream u {\n hash $uri;\n keepalive 0;\n server 10.0.0.1;\n}";
    assert_eq!(read_at(new, zero).upstreams[0].keepalive, Keepalive::Off);
}
