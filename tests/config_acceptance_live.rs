//! Config acceptance parity with `nginx -t`: every generated variant (and every whole real-world config under
//! `tests/data/config-acceptance/`) goes through `nginx -t` on each provisioned release and through the
//! reader with that release's rules. Accept/refuse must agree and, on refusal, so must the message and the
//! line. A table per release is printed; any disagreement not on [`ALLOWED`] fails the test.
//!
//! Expectations come only from the live nginx run. Without provisioned nginx this prints a loud `SKIP:` and
//! passes, unless `NGINX_PARITY=require`.

use nginx_ketama::NginxVersion;
use nginx_ketama::config::{Config, LoadOptions};
use nginx_ketama_harness::nginx::install::Installation;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use nginx_ketama_harness::testkit::report;

/// Known disagreements, each with its reason: `(case name, releases it applies to ("" = all), reason)`.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "syntax/server { listen 127.0.0.1:8443 ssl; ssl_certificate @P@/missing.pem; ssl_certificate_key @P@/missing.key; }",
        "",
        "NGINX-DIFF: files named by directives (certificates, keys, …) are not opened; only `include` files are read",
    ),
    (
        "syntax/server { return 200 $undefined_var; }",
        "",
        "NGINX-DIFF: variables are looked up only in `hash` keys; nginx also refuses unknown variables elsewhere",
    ),
    (
        "include/cycle",
        "",
        "NGINX-DIFF: nginx follows an include cycle until it runs out of file descriptors (its message names \
         errno 24); the reader stops at 64 levels with its own message",
    ),
    (
        "long/name/*",
        "",
        "nginx cuts a log line at 2 KiB (NGX_MAX_ERROR_STR), so its message about a 4 KiB name is truncated; \
         the reader's is whole",
    ),
    (
        "params/http/max_fails=99999999999",
        "",
        "NGINX-DIFF: numbers above u32::MAX, which nginx accepts up to its ngx_int_t range, are refused",
    ),
    (
        "params/stream/max_fails=99999999999",
        "",
        "NGINX-DIFF: numbers above u32::MAX, which nginx accepts up to its ngx_int_t range, are refused",
    ),
];

/// One test configuration: files relative to its directory (the first is the main file), directories and
/// symlinks to create. `@P@` is replaced by the directory, `@STREAM@` by the stream module, `@H@` by the
/// lines every `http {}` needs to pass `nginx -t` unprivileged (temp paths and logs inside the directory).
#[derive(Clone, Debug)]
struct Case {
    name: String,
    files: Vec<(String, Vec<u8>)>,
    dirs: Vec<String>,
    links: Vec<(String, String)>,
}

const H: &str = "access_log off; client_body_temp_path @P@/t1; proxy_temp_path @P@/t2; fastcgi_temp_path @P@/t3; \
                 uwsgi_temp_path @P@/t4; scgi_temp_path @P@/t5;";

fn case(name: impl Into<String>, main: impl AsRef<[u8]>) -> Case {
    Case { name: name.into(), files: vec![("nginx.conf".into(), main.as_ref().to_vec())], dirs: vec![], links: vec![] }
}

impl Case {
    fn file(mut self, path: &str, text: impl AsRef<[u8]>) -> Case {
        self.files.push((path.into(), text.as_ref().to_vec()));
        self
    }
    fn dir(mut self, path: &str) -> Case {
        self.dirs.push(path.into());
        self
    }
    fn link(mut self, link: &str, target: &str) -> Case {
        self.links.push((link.into(), target.into()));
        self
    }
}

/// A whole configuration with `body` inside `http {}`.
fn http(body: &str) -> String {
    format!("events {{}}\nhttp {{ @H@\n{body}\n}}\n")
}

/// A whole configuration with `body` inside `stream {}`.
fn stream(body: &str) -> String {
    format!("load_module @STREAM@;\nevents {{}}\nstream {{\n{body}\n}}\n")
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    // Server parameters, valid and invalid, in http and stream.
    let params = [
        "weight=1",
        "weight=0",
        "weight=x",
        "weight=",
        "weight=1é",
        "weight=007",
        "Weight=2",
        "weight=2x",
        "max_fails=0",
        "max_fails=-1",
        "max_fails=99999999999",
        "max_conns=10",
        "max_conns=x",
        "fail_timeout=10s",
        "fail_timeout=1m30s",
        "fail_timeout=500ms",
        "fail_timeout=1é",
        "fail_timeout=1s1m",
        "fail_timeout=",
        "fail_timeout=1h",
        "fail_timeout=1d2h",
        "backup",
        "down",
        "drain",
        "resolve",
        "route=a",
        "service=http",
        "slow_start=10s",
        "foo",
        "down backup",
        "weight=3 max_fails=2 fail_timeout=5s max_conns=1",
    ];
    for p in params {
        out.push(case(format!("params/http/{p}"), http(&format!("upstream u {{ server 127.0.0.1:1 {p}; }}"))));
        out.push(case(format!("params/stream/{p}"), stream(&format!("upstream u {{ server 127.0.0.1:1 {p}; }}"))));
    }
    // `backup` and every balancer, before and after the server line.
    let balancers = [
        "",
        "hash $remote_addr consistent;",
        "hash $remote_addr;",
        "least_conn;",
        "ip_hash;",
        "random;",
        "random two;",
        "random two least_conn;",
    ];
    for b in balancers {
        for (ctx, wrap) in [("http", http as fn(&str) -> String), ("stream", stream)] {
            out.push(case(
                format!("backup/{ctx}/before/{b}"),
                wrap(&format!("upstream u {{ {b} server 127.0.0.1:1; server 127.0.0.1:2 backup; }}")),
            ));
            out.push(case(
                format!("backup/{ctx}/after/{b}"),
                wrap(&format!("upstream u {{ server 127.0.0.1:1; server 127.0.0.1:2 backup; {b} }}")),
            ));
        }
    }
    // Every address spelling.
    let addresses = [
        "127.0.0.1",
        "127.0.0.1:80",
        "127.0.0.1:0",
        "127.0.0.1:65535",
        "127.0.0.1:65536",
        "127.0.0.1:x",
        "127.0.0.1:",
        ":80",
        "localhost",
        "localhost:8080",
        "[::1]",
        "[::1]:80",
        "[:1::]:80",
        "[:1:2:3:4:5:6:7:8]:80",
        "[::1.2.3.04]:80",
        "[1:2:3:4:5:6:7::]:80",
        "[1::2::3]:80",
        "[zz]:80",
        "[]:80",
        "[::1",
        "[::1]x",
        "[::ffff:127.0.0.1]:80",
        "[0:0::1]:9101",
        "[::]:80",
        "[1:2:3:4:5:6:7:8]:80",
        "[12345::]:80",
        "[::1.2.3]:80",
        "unix:/tmp/nk.sock",
        "unix:",
        "UNIX:/tmp/nk.sock",
        "127.0.0.1/x",
        "127.0.0.1:80?a",
        "127.0.0.1:080",
        "127.0.0.1:00080",
        "0x7f000001:80",
        "127.1:80",
        "a.invalid",
        "a.invalid:80",
        "1.2.3.4:99999",
    ];
    for a in addresses {
        out.push(case(format!("address/http/{a}"), http(&format!("upstream u {{ server {a}; }}"))));
        out.push(case(format!("address/stream/{a}"), stream(&format!("upstream u {{ server {a}; }}"))));
    }
    // Directives inside `upstream {}` (http).
    let inside = [
        "zone;",
        "zone z;",
        "zone z 1;",
        "zone z abc;",
        "zone z 64k;",
        "zone z 1m;",
        "zone z 32k;",
        "zone z 32767;",
        "keepalive;",
        "keepalive abc;",
        "keepalive 16;",
        "keepalive 16 extra;",
        "keepalive 16 local;",
        "keepalive 1; keepalive 2;",
        "keepalive 0;",
        "keepalive -1;",
        "keepalive_timeout bad;",
        "keepalive_timeout 60s;",
        "keepalive_timeout 500ms;",
        "keepalive_timeout 1s; keepalive_timeout 2s;",
        "keepalive_requests x;",
        "keepalive_requests 100;",
        "keepalive_time 1h;",
        "keepalive_time x;",
        "hash $undefined_var consistent;",
        "hash $ consistent;",
        "hash ${request_uri consistent;",
        "hash ${request_uri} consistent;",
        "hash $request_uri consistent;",
        "hash $Request_Uri;",
        "hash $arg_a$1;",
        "hash $http_x_user consistent;",
        "hash $cookie_sid;",
        "hash $uri$is_args$args;",
        "hash $remote_addr x;",
        "hash $uri consistent extra;",
        "hash;",
        "hash ${};",
        "hash $-;",
        "hash literal;",
        "random three;",
        "random two three;",
        "ip_hash x;",
        "least_conn x;",
        "resolver 127.0.0.1;",
        "resolver_timeout 1s;",
        "resolver_timeout x;",
        "ntlm;",
        "queue 1;",
        "state /x;",
        "least_time header;",
        "sticky cookie srv;",
        "sticky;",
        "ip_hash; hash $uri;",
        "hash $uri; hash $uri consistent;",
        "server 127.0.0.1:2 { }",
        "location / { }",
        "proxy_pass http://x;",
        "bogus;",
        "include;",
        "upstream v { server 127.0.0.1; }",
    ];
    for d in inside {
        out.push(case(format!("inside/http/{d}"), http(&format!("upstream u {{\n{d}\nserver 127.0.0.1:1;\n}}"))));
    }
    let stream_inside = [
        "hash $remote_addr consistent;",
        "hash $remote_addr;",
        "hash $request_uri;",
        "hash $http_host;",
        "hash $undefined;",
        "ip_hash;",
        "least_conn;",
        "random;",
        "zone z 64k;",
        "keepalive 16;",
        "resolver 127.0.0.1;",
        "sticky cookie a;",
        "hash $ssl_preread_server_name;",
        "hash $server_port consistent;",
    ];
    for d in stream_inside {
        out.push(case(format!("inside/stream/{d}"), stream(&format!("upstream u {{\n{d}\nserver 127.0.0.1:1;\n}}"))));
    }
    // Run-time resolution (1.27.3+): names need a zone and a resolver; IP literals need neither.
    let resolve = [
        "server a.invalid resolve;",
        "zone z 64k; server a.invalid resolve;",
        "zone z 64k; resolver 127.0.0.1; server a.invalid resolve;",
        "server 127.0.0.1:9001 resolve;",
        "server [::1]:9001 resolve;",
        "zone z 64k; resolver 127.0.0.1; server a.invalid service=http resolve;",
        "server a.invalid service=http;",
        "zone z 64k; server localhost:19009 resolve;",
    ];
    for r in resolve {
        out.push(case(format!("resolve/http/{r}"), http(&format!("upstream u {{ {r} }}"))));
        out.push(case(format!("resolve/stream/{r}"), stream(&format!("upstream u {{ {r} }}"))));
    }
    out.push(case(
        "resolve/http-level-resolver",
        http("resolver 127.0.0.1;\nupstream u { zone z 64k; server a.invalid resolve; }"),
    ));
    // Quoting, escapes, comments, variables and rewrite-module syntax elsewhere in the file.
    let syntax = [
        r#"server { if ($request_method = "POST") { return 405; } }"#,
        r#"server { if ($uri ~* '\.php$') { return 403; } }"#,
        r#"server { if ($request_method = "POST"}) { return 405; } }"#,
        r#"server { return 301 https://${host}$request_uri; }"#,
        r#"server { set $a ${uri}x; }"#,
        r#"server { set $a "${uri}x"; return 200 $a; }"#,
        r#"server { return 200 "a\"b"; }"#,
        r#"server { return 200 'a\'b'; }"#,
        r#"server { return 200 "x"y; }"#,
        r#"server { return 200 "x"; }"#,
        r#"server { return 200 ok}; }"#,
        "server { return 200 o\\\nk; }\nbogus;",
        "server { return 200 \"multi\nline\"; }\nbogus;",
        r#"server { location ~ ^/(?<id>\d+)$ { return 200 $id; } }"#,
        r#"server { location = /x { return 200; } location ^~ /y { return 200; } location @n { return 200; } }"#,
        r#"server { location / { limit_except GET { deny all; } } }"#,
        r#"server { location / { if ($arg_x) { set $y 1; } } }"#,
        "map $uri $m { default 0; ~^/a 1; }",
        "map $uri $m { default 0; include; }",
        "map $uri $m { default 0; x { } }",
        "map $uri $m { default 0; } upstream u { hash $m consistent; server 127.0.0.1:1; }",
        "geo $g { default 0; 10.0.0.0/8 1; } upstream u { hash $g; server 127.0.0.1:1; }",
        "geo $remote_addr $g { default 0; }",
        "split_clients $uri $s { 50% a; * b; } upstream u { hash $s; server 127.0.0.1:1; }",
        "types { text/html html; }",
        "# a comment ; { } \" '\nserver { }",
        "server { # comment }\n}",
        "server { listen 127.0.0.1:8080; server_name example.com *.example.com; root /tmp; index index.html; }",
        "server { location / { proxy_pass http://u; } } upstream u { server 127.0.0.1:1; }",
        "server { location / { proxy_pass http://u:8080; } } upstream u { server 127.0.0.1:1; }",
        "upstream u { server 127.0.0.1:1; } server { location / { proxy_pass http://u:8080; } }",
        "upstream u { server 127.0.0.1:1; } server { location / { proxy_pass http://U; } }",
        "upstream u { server 127.0.0.1:1; } server { location / { proxy_pass http://$host; } }",
        "upstream u { server 127.0.0.1:1; } server { location / { fastcgi_pass u:9000; } }",
        "server { location / { proxy_pass http://127.0.0.1:8080; } }",
        "server { location / { return 200; } location / { return 200; } }",
        "server { listen 127.0.0.1:8080 default_server; } server { listen 127.0.0.1:8081; }",
        "server { bogus; }",
        "server { location / { bogus on; } }",
        "server { location / { server { } } }",
        "server { events { } }",
        "server { http { } }",
        "events { }",
        "server { location / { upstream x { server 127.0.0.1; } } }",
        "server { upstream x { server 127.0.0.1; } }",
        "server { location / }",
        "server ;",
        "server x { }",
        "server { location { } }",
        "server { location a b c { } }",
        "server { if { } }",
        "gzip on; sendfile on;\ngzip on;",
        "include;",
        "charset_map koi8-r utf-8 { C0 D18E; }",
        "proxy_pass http://x;",
        "server { listen 127.0.0.1:8080; listen [::1]:8080; server_name _; return 444; }",
        r#"server { location ~* \.(jpg|png)$ { expires 30d; } error_page 404 /404.html; }"#,
        "server { rewrite ^/old(.*)$ /new$1 permanent; add_header X-Frame-Options SAMEORIGIN always; }",
        "limit_req_zone $binary_remote_addr zone=one:10m rate=1r/s; server { location / { limit_req zone=one burst=5; } }",
        "proxy_cache_path @P@/cache levels=1:2 keys_zone=c:10m; server { location / { proxy_cache c; proxy_pass http://127.0.0.1:1; } }",
        "server { if ($host != example.com) { return 301 https://example.com$request_uri; } }",
        "set_real_ip_from 10.0.0.0/8; real_ip_header X-Forwarded-For;",
        r#"log_format j escape=json '{"a":"$remote_addr","b":"$request"}'; access_log @P@/j.log j;"#,
        r#"server { location / { default_type application/json; return 200 '{"status":"ok"}'; } }"#,
        r#"server { location / { return 200 "ok
"; } }"#,
        "server { location / { include fastcgi_params; } }",
        r#"server { if ($http_user_agent ~* (bot|crawler)) { return 403; } }"#,
        "server { if ($a) return 403; }",
        "server { location / { if ($a) { location /x { } } } }",
        "server { location / { proxy_set_header Host $host; proxy_set_header X-Real-IP $remote_addr; proxy_pass http://127.0.0.1:1/; } }",
        "server { location /ws { proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; proxy_pass http://127.0.0.1:1; } }",
        "server { location = /favicon.ico { log_not_found off; access_log off; } }",
        "server { location ^~ /static/ { alias /tmp/; } location ^~ /static/ { alias /tmp/; } }",
        "server { location @fallback { return 200; } location @fallback { return 200; } }",
        "server { location = /x { } location /x { } }",
        "server { location ~ /x { } location ~ /x { } }",
        "server { location / { location /a { } location /a { } } }",
        "server { listen 127.0.0.1:8443 ssl; ssl_certificate @P@/missing.pem; ssl_certificate_key @P@/missing.key; }",
        "server { auth_basic \"closed\"; auth_basic_user_file @P@/htpasswd; }",
        "map $http_upgrade $connection_upgrade { default upgrade; '' close; }",
        "map $uri $m { hostnames; default 0; }",
        "map $uri $m { volatile; default 0; }",
        "map $uri $m { default 0 1; }",
        "map $uri m { default 0; }",
        "map $uri $m { default 0; default 1; }",
        "map $uri $m { a 0; A 1; }",
        "map $uri $m { \\default 0; default 1; }",
        "map $host $m { hostnames; example.com 0; .example.com 1; }",
        "map $host $m { hostnames; *.example.com 0; .example.com 1; }",
        "map $host $m { *.example.com 0; .example.com 1; hostnames; }",
        "map $host $m { hostnames; a.*.com 0; }",
        "map $host $m { hostnames; *.*.com 0; }",
        "map $host $m { a.*.com 0; }",
        "map $host $m { hostnames; *.example.com $host; www.example.* $uri; default -; }",
        "map $host $m { hostnames; www.example.* 0; www.example.* 1; }",
        "split_clients $uri $s { 50% a; * b; x { } }",
        "geo $g { default 0; include geo.conf; }",
        "upstream u { server 127.0.0.1:1; } server { location / { proxy_pass http://u; proxy_next_upstream error timeout; } }",
        "upstream u { server 127.0.0.1:1; } upstream v { server 127.0.0.1:2; } server { location / { proxy_pass http://u:80; } }",
        "server { location / { proxy_pass http://u:80; } } server { location / { proxy_pass http://u:81; } }",
        "server { location / { proxy_pass http://u:80; } } upstream u { server 127.0.0.1:1; }",
        "server { location / { proxy_pass http://u; } } upstream u { server 127.0.0.1:1; }",
        "server { location / { grpc_pass grpc://u:50051; } } upstream u { server 127.0.0.1:1; }",
        "server { location / { uwsgi_pass u; } } upstream u { server 127.0.0.1:1; }",
        "server { location / { proxy_pass http://unix:/tmp/nk.sock; } }",
        "server { location / { proxy_pass http://backend.invalid; } }",
        "server { location / { proxy_pass http://backend.invalid:8080/x; } }",
        "server { location / { proxy_pass ftp://x; } }",
        "gzip;",
        "gzip on off;",
        "server { listen; }",
        "server { return; }",
        "server { return 301 a b; }",
        "add_header X;",
        "add_header X y always extra;",
        "server { server_name a b c d e f g h i j; }",
        "server { location / { try_files; } }",
        "keepalive_timeout 1 2 3;",
        "resolver;",
        "sendfile on; tcp_nodelay off; types_hash_max_size 2048 4096;",
        "server { gzip on; location / { gzip off; } }",
        "server { gzip on; include g.conf; }",
        "server { location / { if ($arg_a) { gzip on; } gzip on; } }",
        "server { return 200 $undefined_var; }",
        "server { root /a; root /b; }",
        "default_type a/b; server { default_type c/d; } default_type e/f;",
        "server { add_header A b; add_header A b; }",
    ];
    for s in syntax {
        out.push(case(format!("syntax/{s}"), http(s)));
    }
    // Contexts and the main level.
    let main = [
        ("user-unknown", "user nobody;\nevents {}\n".into()),
        ("user-missing", "user no-such-user-nk;\nevents {}\n".into()),
        ("no-events", "http { }\n".to_string()),
        ("two-http", "events {}\nhttp { }\nhttp { }\n".into()),
        ("two-events", "events {}\nevents {}\n".into()),
        ("upstream-top", "events {}\nupstream u { server 127.0.0.1; }\n".into()),
        ("upstream-in-events", "events { upstream u { server 127.0.0.1; } }\n".into()),
        ("stream-without-module", "events {}\nstream { upstream u { server 127.0.0.1:1; } }\n".into()),
        ("stream-with-module", "load_module @STREAM@;\nevents {}\nstream { upstream u { server 127.0.0.1:1; } }\n".into()),
        ("stream-server", "load_module @STREAM@;\nevents {}\nstream { server { listen 127.0.0.1:9999; proxy_pass u; } upstream u { server 127.0.0.1:1; } }\n".into()),
        ("stream-proxy-port", "load_module @STREAM@;\nevents {}\nstream { upstream u { server 127.0.0.1:1; } server { listen 127.0.0.1:9999; proxy_pass u:99; } }\n".into()),
        ("stream-proxy-unresolvable", "load_module @STREAM@;\nevents {}\nstream {\nserver { listen 127.0.0.1:9999; proxy_pass backend.invalid:80; }\n}\n".into()),
        ("stream-proxy-ip", "load_module @STREAM@;\nevents {}\nstream { server { listen 127.0.0.1:9999; proxy_pass 127.0.0.1:1; } }\n".into()),
        ("mail-block", "events {}\nmail { }\n".into()),
        ("two-stream", "load_module @STREAM@;\nevents {}\nstream { }\nstream { }\n".into()),
        ("unknown-top", "events {}\nbogus;\n".into()),
        ("unknown-events", "events { bogus; }\n".into()),
        ("main-directives", "user nobody nogroup;\nworker_processes 2;\nworker_rlimit_nofile 1024;\nevents { worker_connections 64; multi_accept on; }\n".into()),
        ("http-args", "events {}\nhttp x { }\n".into()),
        ("events-semicolon", "events;\n".into()),
        ("worker-block", "worker_processes 1 { }\nevents {}\n".into()),
        ("worker-args", "worker_processes 1 2;\nevents {}\n".into()),
        ("events-args", "events { worker_connections; }\n".into()),
        ("daemon-off", "daemon off;\nmaster_process off;\nevents {}\n".into()),
        ("empty", "".into()),
        ("only-comment", "# nothing\n".into()),
        ("eof-in-directive", "events {}\nworker_processes 1".into()),
        ("eof-in-block", "events {\n".into()),
        ("extra-close", "events {}\n}\n".into()),
        ("lone-semicolon", "events {}\n;\n".into()),
        ("lone-brace", "events {}\n{ }\n".into()),
        ("eof-in-quote", "events {}\nuser \"nobody;\n".into()),
        ("http-in-http", "events {}\nhttp { http { } }\n".into()),
        ("same-name-http-stream", "load_module @STREAM@;\nevents {}\nhttp { @H@ upstream u { server 127.0.0.1:1; } }\nstream { upstream u { server 127.0.0.1:1; } }\n".into()),
        ("stream-proxy-pass-before", "load_module @STREAM@;\nevents {}\nstream { server { listen 127.0.0.1:9999; proxy_pass u:99; } upstream u { server 127.0.0.1:1; } }\n".into()),
    ];
    for (n, t) in main {
        out.push(case(format!("main/{n}"), t));
    }
    // Duplicate names in any letter case.
    for (a, b) in [("u", "u"), ("u", "U"), ("Backend", "bACKEND"), ("u", "v"), ("u-1", "U-1")] {
        out.push(case(
            format!("duplicate/http/{a}/{b}"),
            http(&format!("upstream {a} {{ server 127.0.0.1:1; }}\nupstream {b} {{ server 127.0.0.1:2; }}")),
        ));
        out.push(case(
            format!("duplicate/stream/{a}/{b}"),
            stream(&format!("upstream {a} {{ server 127.0.0.1:1; }}\nupstream {b} {{ server 127.0.0.1:2; }}")),
        ));
    }
    // Bytes: BOM, CRLF, CR, Latin-1, NUL, long tokens.
    let up = "upstream u { hash $remote_addr consistent; server 127.0.0.1:1; }";
    let bytes: Vec<(&str, Vec<u8>)> = vec![
        ("bom", [b"\xef\xbb\xbf".as_slice(), http(up).as_bytes()].concat()),
        ("crlf", http(up).replace('\n', "\r\n").into_bytes()),
        ("cr", http(up).replace('\n', "\r").into_bytes()),
        ("latin1-comment", [b"# caf\xe9\n".as_slice(), http(up).as_bytes()].concat()),
        ("utf8-arg", http("server { return 200 \"caf\u{e9}\"; }").into_bytes()),
        ("latin1-arg", replace(http("server { return 200 \"caf@E9@\"; }").as_bytes(), b"@E9@", b"\xe9")),
        ("latin1-raw", replace(http("server { return 200 caf@E9@; }").as_bytes(), b"@E9@", b"\xe9")),
        ("latin1-param", replace(http("upstream u { server 127.0.0.1:1 weight=1@E9@; }").as_bytes(), b"@E9@", b"\xe9")),
        ("latin1-name", [b"events {}\nbogus\xe9;\n".as_slice()].concat()),
        ("nul-comment", [b"# a\x00b\n".as_slice(), http(up).as_bytes()].concat()),
        ("nul-name", b"events {}\nbo\x00gus;\n".to_vec()),
        ("nul-arg", http("upstream u { server 127.0.0.1:1 back\u{0}up; }").into_bytes()),
        ("nul-param", http("upstream u { server 127.0.0.1:1 weight=1\u{0}; }").into_bytes()),
        ("utf8-name", "events {}\nbogüs;\n".as_bytes().to_vec()),
        ("tab-separators", http(up).replace(' ', "\t").into_bytes()),
    ];
    for (n, b) in bytes {
        out.push(case(format!("bytes/{n}"), b));
    }
    for len in [10, 4000, 4085, 4086, 4087, 4095, 4096, 4097, 5000, 10000] {
        let tok = "a".repeat(len);
        out.push(case(format!("long/token/{len}"), http(&format!("server {{ return 200 {tok}; }}"))));
        out.push(case(format!("long/quoted/{len}"), http(&format!("server {{ return 200 \"{tok}\"; }}"))));
        out.push(case(format!("long/comment/{len}"), format!("#{tok}\n{}", http(""))));
        out.push(case(format!("long/name/{len}"), format!("events {{}}\n{tok};\n")));
    }
    // Includes and globs.
    out.push(case("include/missing", http("include missing.conf;")));
    out.push(case("include/missing-main-level", "events {}\ninclude missing.conf;\n"));
    out.push(case("include/glob-no-match", http("include conf.d/*.conf;")));
    out.push(
        case("include/glob", http("include conf.d/*.conf;"))
            .file("conf.d/b.conf", "upstream b { server 127.0.0.1:2; }\n")
            .file("conf.d/a.conf", "upstream a { server 127.0.0.1:1; }\n")
            .file("conf.d/.hidden.conf", "bogus;\n")
            .file("conf.d/c.txt", "bogus;\n"),
    );
    out.push(
        case("include/glob-error-second", http("include conf.d/*.conf;"))
            .file("conf.d/a.conf", "upstream a { server 127.0.0.1:1; }\n")
            .file("conf.d/b.conf", "\n\nupstream b { server 127.0.0.1:2 weight=0; }\n"),
    );
    out.push(
        case("include/glob-in-dir", http("include */up.conf;"))
            .file("x/up.conf", "upstream a { server 127.0.0.1:1; }\n"),
    );
    out.push(case("include/directory", http("include conf.d;")).dir("conf.d"));
    out.push(case("include/glob-directory", http("include conf.d/*;")).file("conf.d/a.conf", "").dir("conf.d/sub"));
    out.push(case("include/cycle", http("include nginx2.conf;")).file("nginx2.conf", "include nginx2.conf;\n"));
    out.push(case("include/symlink-loop", http("include loop.conf;")).link("loop.conf", "loop.conf"));
    out.push(case("include/glob-symlink-loop", http("include d/*.conf;")).link("d/loop.conf", "loop.conf"));
    out.push(
        case("include/bom", http("include up.conf;"))
            .file("up.conf", [b"\xef\xbb\xbf".as_slice(), up.as_bytes()].concat()),
    );
    out.push(
        case("include/in-upstream", http("upstream u {\ninclude servers.inc;\n}"))
            .file("servers.inc", "hash $uri consistent;\nserver 127.0.0.1:1 weight=2;\n"),
    );
    out.push(
        case("include/in-upstream-bad", http("upstream u {\ninclude servers.inc;\n}"))
            .file("servers.inc", "\nserver 127.0.0.1:1 weight=0;\n"),
    );
    out.push(
        case("include/in-upstream-close", http("upstream u {\ninclude servers.inc;\n}"))
            .file("servers.inc", "server 127.0.0.1:1; }\n"),
    );
    out.push(case("include/unclosed", http("include part.conf;\n}")).file("part.conf", "server {\n"));
    out.push(case("include/close-parent", "events {}\nhttp { @H@\ninclude part.conf;\n").file("part.conf", "}\n"));
    out.push(case("include/args", http("include a.conf b.conf;")));
    out.push(
        case("include/mime", http("include mime.types;\ndefault_type application/octet-stream;"))
            .file("mime.types", "types {\n text/html html htm;\n image/png png;\n}\n"),
    );
    out.push(
        case("include/glob-pattern", http(&format!("include d/{};", "*a".repeat(14) + "*b")))
            .file(&format!("d/{}", "a".repeat(200)), ""),
    );
    out.push(
        case("include/upstream-in-server", http("server { include up.conf; }"))
            .file("up.conf", "upstream u { server 127.0.0.1:1; }\n"),
    );
    out.push(case("include/events", "include ev.conf;\n").file("ev.conf", "events { }\n"));
    // Nesting.
    for depth in [1, 5, 50] {
        let open = "location / { ".repeat(depth);
        let close = "} ".repeat(depth);
        out.push(case(format!("nesting/location/{depth}"), http(&format!("server {{ {open}{close}}}"))));
    }
    out.push(case("nesting/unknown-deep", format!("events {{}}\n{}", "a { ".repeat(1000))));
    out
}

/// What one side said: `None` when it accepted, else the message.
type Verdict = Option<String>;

fn nginx_verdict(install: &Installation, dir: &Path) -> Verdict {
    let conf = dir.join("nginx.conf");
    let pid = format!("pid {}/nginx.pid;", dir.display());
    let mut cmd = std::process::Command::new(install.binary());
    cmd.args(["-t", "-q", "-p"]).arg(format!("{}/", dir.display())).arg("-c").arg(&conf);
    // nginx before 1.19.5 has no `-e`: the configuration's error log goes to stderr through `-g`, and its
    // start-up [alert] about the compiled log path (absent here) is not a verdict on the configuration.
    const STARTUP_ALERT: &str = "could not open error log file";
    if install.version.rules().error_log_switch {
        cmd.args(["-e", "stderr", "-g", &pid]);
    } else {
        cmd.arg("-g").arg(format!("{pid} error_log stderr;"));
    }
    let out = cmd.output().expect("nginx runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr.lines().filter(|l| !l.contains(STARTUP_ALERT)).find_map(|l| {
        for level in ["[emerg]", "[crit]", "[alert]"] {
            if let Some(i) = l.find(level) {
                let rest = &l[i + level.len() + 1..];
                // `PID#TID: message`, except for messages printed before logging starts.
                return Some(match rest.split_once(": ") {
                    Some((pid, m)) if pid.contains('#') => m.to_string(),
                    _ => rest.to_string(),
                });
            }
        }
        None
    });
    if out.status.success() { None } else { Some(first.unwrap_or_else(|| format!("failed: {stderr}"))) }
}

fn reader_verdict(version: NginxVersion, dir: &Path) -> Verdict {
    let options = LoadOptions { version, ..LoadOptions::default() };
    Config::load(dir.join("nginx.conf"), &options).err().map(|e| e.to_string())
}

fn materialise(case: &Case, dir: &Path, stream_module: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.display().to_string();
    let expand = |b: &[u8]| -> Vec<u8> {
        let mut s = b.to_vec();
        for (from, to) in
            [("@H@", H.to_string()), ("@P@", p.clone()), ("@STREAM@", stream_module.display().to_string())]
        {
            s = replace(&s, from.as_bytes(), to.as_bytes());
        }
        s
    };
    for d in &case.dirs {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    for (path, text) in &case.files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, expand(text)).unwrap();
    }
    for (link, target) in &case.links {
        let full = dir.join(link);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, full).unwrap();
    }
}

fn replace(s: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// The whole real-world configurations: nginx accepts them, so the reader must.
fn real_world() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/config-acceptance");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&root) else { return out };
    let mut dirs: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for d in dirs {
        let mut c = Case {
            name: format!("real/{}", d.file_name().unwrap().to_string_lossy()),
            files: vec![],
            dirs: vec![],
            links: vec![],
        };
        let mut stack = vec![d.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&d).unwrap().to_string_lossy().into_owned();
                    c.files.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        c.files.sort_by_key(|(p, _)| p != "nginx.conf");
        out.push(c);
    }
    out
}

/// A message cut to a readable length (long-token cases repeat 4 KiB names).
fn short(s: &str) -> String {
    if s.chars().count() <= 200 { s.to_string() } else { format!("{}…", s.chars().take(200).collect::<String>()) }
}

#[derive(Default)]
struct Tally {
    rows: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
    allowed: Vec<String>,
}

#[test]
fn config_acceptance_matches_nginx() {
    // The directive tables are probed from Debian's builds (glibc); the musl build leaves modules out.
    let Some(all) = nginx_ketama_harness::testkit::provisioned_or_skip() else { return };
    let installs: Vec<Installation> = all.into_iter().filter(|i| i.libc == nginx_ketama::Libc::Glibc).collect();
    let mut all = cases();
    let real = real_world();
    let generated = all.len();
    all.extend(real.iter().cloned());
    assert!(generated >= 400, "only {generated} generated variants");
    let tmp = tempfile::Builder::new().prefix("nk-acceptance-").tempdir().unwrap();
    let base = tmp.path();
    let jobs: Vec<(usize, usize)> = (0..installs.len()).flat_map(|v| (0..all.len()).map(move |c| (v, c))).collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(vec![(None, None); jobs.len()]);
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                loop {
                    let j = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(v, c)) = jobs.get(j) else { return };
                    let install = &installs[v];
                    let dir = base.join(format!("{}-{c}", install.version));
                    let module = install.stream_module().expect("Debian's builds have the dynamic stream module");
                    materialise(&all[c], &dir, &module);
                    let n = nginx_verdict(install, &dir);
                    let r = reader_verdict(install.version, &dir);
                    results.lock().unwrap()[j] = (n, r);
                    let _ = std::fs::remove_dir_all(&dir);
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let mut tallies: Vec<Tally> = installs.iter().map(|_| Tally::default()).collect();
    for (j, &(v, c)) in jobs.iter().enumerate() {
        let (n, r) = &results[j];
        let case = &all[c];
        let version = installs[v].version.to_string();
        let kind = match (n, r) {
            (None, None) => "agree: accept",
            (Some(a), Some(b)) if a == b => "agree: refuse, same message and line",
            (Some(_), Some(_)) => "differ: both refuse, different message or line",
            (None, Some(_)) => "differ: nginx accepts, reader refuses",
            (Some(_), None) => "differ: nginx refuses, reader accepts",
        };
        let t = &mut tallies[v];
        *t.rows.entry(kind).or_default() += 1;
        if kind.starts_with("differ") {
            let line = format!(
                "  {} [{}] {kind}\n      nginx:  {}\n      reader: {}",
                case.name,
                version,
                short(n.as_deref().unwrap_or("ok")),
                short(r.as_deref().unwrap_or("ok"))
            );
            let allowed = ALLOWED.iter().any(|(name, v, _)| {
                let hit = match name.strip_suffix('*') {
                    Some(prefix) => case.name.starts_with(prefix),
                    None => *name == case.name,
                };
                hit && (v.is_empty() || v.contains(&version))
            });
            if allowed { t.allowed.push(line) } else { t.failures.push(line) }
        }
    }
    let mut text = format!(
        "config acceptance: {generated} generated variants + {} real-world configs, {} releases, {:.1}s\n",
        real.len(),
        installs.len(),
        started.elapsed().as_secs_f64()
    );
    let kinds = [
        "agree: accept",
        "agree: refuse, same message and line",
        "differ: both refuse, different message or line",
        "differ: nginx accepts, reader refuses",
        "differ: nginx refuses, reader accepts",
    ];
    text.push_str(&format!("  {:<50}", "outcome"));
    for i in &installs {
        text.push_str(&format!("{:>9}", i.version.to_string()));
    }
    text.push('\n');
    for k in kinds {
        text.push_str(&format!("  {k:<50}"));
        for t in &tallies {
            text.push_str(&format!("{:>9}", t.rows.get(k).copied().unwrap_or(0)));
        }
        text.push('\n');
    }
    let allowed: usize = tallies.iter().map(|t| t.allowed.len()).sum();
    let failures: Vec<&String> = tallies.iter().flat_map(|t| &t.failures).collect();
    text.push_str(&format!("  of the disagreements: {allowed} allow-listed, {} not\n", failures.len()));
    for t in &tallies {
        for a in &t.allowed {
            text.push_str(&format!("  allowed:{}\n", a.trim_start()));
        }
    }
    report(&text);
    if !failures.is_empty() {
        let list: Vec<&str> = failures.iter().map(|s| s.as_str()).collect();
        panic!("{} disagreements with nginx -t:\n{}", failures.len(), list.join("\n"));
    }
}
