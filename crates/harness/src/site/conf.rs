//! The nginx configuration a parity run needs: the upstream under test, a front server that proxies to it
//! and reports `$upstream_addr`, and echo listeners for every live peer — all inside one nginx.

use super::failures::{Failing, listen_arg, render_listeners};
use super::token::{escape_in_quotes, token};
use super::topology::Listen;
use std::fmt::Write as _;

/// What one nginx instance must serve.
#[derive(Debug, Clone, Default)]
pub struct Site {
    /// The HTTP part: an `upstream` block (named [`crate::site::topology::UPSTREAM`]) and its live listeners.
    pub http: Option<Part>,
    /// The stream part (needs the stream module): same shape, keyed by the client's source port.
    pub stream: Option<Part>,
    /// A private `/etc/hosts` for nginx's resolver, if the upstream uses hostnames.
    pub hosts: Option<String>,
    /// Hostnames (with a port) whose resolved address order nginx should report at `/__resolve/<i>`.
    pub probes: Vec<String>,
    /// Listeners that fail on purpose and the front's retry policy (failure kinds); `None`: every listener
    /// answers `200 OK` and the front retries on `error` only.
    pub failing: Option<Failing>,
}

/// One context's upstream and echo listeners.
#[derive(Debug, Clone)]
pub struct Part {
    /// The `upstream` block text.
    pub upstream_block: String,
    /// Addresses that must accept connections.
    pub listeners: Vec<Listen>,
}

/// Where the rendered configuration will run.
#[derive(Debug, Clone)]
pub struct Environment {
    /// Directory for pid, logs and temp files (absolute, as nginx will see it).
    pub prefix: String,
    /// `listen` argument of the HTTP front server (e.g. `127.0.0.1:41234` or `8080`).
    pub http_front: String,
    /// `listen` argument of the stream front server.
    pub stream_front: String,
    /// `load_module` path of the stream module, when a stream part is present.
    pub stream_module: Option<String>,
    /// Emit `user root root;` (nginx runs as root; lets workers reach root-owned unix sockets).
    pub user_root: bool,
}

/// The front servers' ports in a private namespace or a container (on `127.0.0.1`; no topology uses that
/// address, and both ports are outside [`crate::nginx::netns::EPHEMERAL_PORTS`]).
pub const FRONT_HTTP_PORT: u16 = 8080;
/// See [`FRONT_HTTP_PORT`].
pub const FRONT_STREAM_PORT: u16 = 8081;

/// The key expression the HTTP upstream hashes: the raw bytes of the `X-Key` request header.
pub const HTTP_KEY: &str = "$http_x_key";
/// The key expression the stream upstream hashes: the client's source port.
pub const STREAM_KEY: &str = "$remote_port";

/// The templates in `nginx/harness/`: the static nginx directives live there, readable as nginx config.
const MAIN: &str = include_str!("../../../../nginx/harness/main.conf.in");
const HTTP_FRONT: &str = include_str!("../../../../nginx/harness/http-front.conf.in");
const HTTP_ECHO: &str = include_str!("../../../../nginx/harness/http-echo.conf.in");
const STREAM: &str = include_str!("../../../../nginx/harness/stream.conf.in");

/// Fills `@NAME@` placeholders.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("@{name}@"), value);
    }
    debug_assert!(!out.contains("@PREFIX@") && !out.contains("@FRONT@"), "unfilled placeholder");
    out
}

/// Indents every line of a block by `n` spaces.
fn indent(text: &str, n: usize) -> String {
    text.lines().map(|l| format!("{:n$}{l}\n", "")).collect()
}

/// Renders `nginx.conf` from the templates in `nginx/harness/`.
pub fn render(site: &Site, env: &Environment) -> String {
    let up = crate::site::topology::UPSTREAM;
    let user = if env.user_root { "user root root;\n" } else { "" };
    let load_module = match (&site.stream, &env.stream_module) {
        (Some(_), Some(m)) => format!("load_module {};\n", token(m)),
        _ => String::new(),
    };
    // The HTTP front always exists: its first accepted connection tells that nginx is up (all listening
    // sockets, stream ones included, are opened together before the worker starts).
    let http = match &site.http {
        Some(http) => {
            let mut probe_upstreams = String::new();
            let mut probes = String::new();
            // Round-robin over a name's addresses, all refusing, tries them in list order: one request to
            // /__resolve/<i> reports the resolver's order in $upstream_addr.
            for (i, name) in site.probes.iter().enumerate() {
                let _ = writeln!(probe_upstreams, "    upstream probe{i} {{ server {} max_fails=0; }}", token(name));
                let _ = writeln!(
                    probes,
                    "        location = /__resolve/{i} {{ proxy_pass http://probe{i}; add_header X-Upstream $upstream_addr always; }}"
                );
            }
            let retry = match &site.failing {
                Some(f) => indent(&f.front_directives(), 12),
                None => indent("proxy_next_upstream error;", 12),
            };
            let front = fill(
                HTTP_FRONT,
                &[("FRONT", &token(&env.http_front)), ("UPSTREAM", up), ("PROBES", &probes), ("RETRY", &retry)],
            );
            let echo = if http.listeners.is_empty() {
                String::new()
            } else {
                let listen: String =
                    http.listeners.iter().map(|l| format!("        listen {};\n", listen_arg(l))).collect();
                fill(HTTP_ECHO, &[("LISTEN", &listen)])
            };
            let failing = site.failing.as_ref().map(|f| render_listeners(&f.groups, listen_arg)).unwrap_or_default();
            format!("{}{probe_upstreams}{front}{echo}{failing}", indent(&http.upstream_block, 4))
        }
        None => format!("    server {{ listen {}; return 204; }}\n", token(&env.http_front)),
    };
    let stream = match &site.stream {
        Some(stream) => {
            let echo: String = stream
                .listeners
                .iter()
                .map(|l| format!("    server {{ listen {}; return \"ok\\n\"; }}\n", listen_arg(l)))
                .collect();
            fill(
                STREAM,
                &[
                    ("UPSTREAM_BLOCK", &indent(&stream.upstream_block, 4)),
                    ("FRONT", &token(&env.stream_front)),
                    ("UPSTREAM", up),
                    ("PREFIX", &escape_in_quotes(&env.prefix)),
                    ("ECHO", &echo),
                ],
            )
        }
        None => String::new(),
    };
    fill(
        MAIN,
        &[
            ("PREFIX", &escape_in_quotes(&env.prefix)),
            ("USER", user),
            ("LOAD_MODULE", &load_module),
            ("HTTP", &http),
            ("STREAM", &stream),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::topology::Listen;

    #[test]
    fn renders_every_placeholder() {
        let site = Site {
            http: Some(Part {
                upstream_block: "upstream parity {\n    server 127.0.0.2:1;\n    hash $http_x_key consistent;\n}\n"
                    .into(),
                listeners: vec![Listen::Tcp("127.0.0.2:1".parse().unwrap()), Listen::Unix("/tmp/x.sock".into())],
            }),
            stream: Some(Part {
                upstream_block: "upstream parity {\n    server 127.0.0.3:2;\n}\n".into(),
                listeners: vec![],
            }),
            hosts: None,
            probes: vec!["a.test:9".into()],
            failing: None,
        };
        let env = Environment {
            prefix: "/p".into(),
            http_front: "127.0.0.1:8".into(),
            stream_front: "127.0.0.1:9".into(),
            stream_module: Some("/m.so".into()),
            user_root: true,
        };
        let conf = render(&site, &env);
        assert!(!conf.contains('@'), "{conf}");
        for needle in [
            "pid \"/p/nginx.pid\";",
            "user root root;",
            "load_module /m.so;",
            "        hash $http_x_key consistent;",
            "listen 127.0.0.1:8;",
            "listen unix:/tmp/x.sock;",
            "upstream probe0 { server a.test:9 max_fails=0; }",
            "location = /__resolve/0",
            "access_log \"/p/logs/stream.log\" parity;",
        ] {
            assert!(conf.contains(needle), "missing {needle:?} in\n{conf}");
        }
        // Balanced braces: nginx would reject the file otherwise.
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
    }

    /// Strings with blanks, quotes, `;`, `{`, `}`, `#`, `$` and backslashes come back from nginx's tokenizer
    /// (the library's config reader follows it) exactly as they went in, as server strings, listen paths
    /// and the prefix; plain strings are rendered as they are.
    #[test]
    fn whatever_a_string_holds_it_is_one_token() {
        use crate::site::topology::{Endpoint, ServerLine, Spelling, Topology};
        use nginx_ketama::config::{Config, LoadOptions};
        let odd = [
            "unix:/tmp/sock dir/a.sock",
            "unix:/tmp/q\"uote'd.sock",
            "unix:/tmp/semi;colon{brace}.sock",
            "unix:/tmp/#hash.sock",
            "unix:/tmp/$dollar${x}.sock",
            "unix:/tmp/back\\slash\\t.sock",
            "unix:/tmp/tab\there.sock",
        ];
        let lines: Vec<ServerLine> = odd
            .iter()
            .map(|s| ServerLine {
                server: (*s).to_string(),
                spelling: Spelling::Unix,
                weight: 1,
                down: false,
                dead: false,
                backup: false,
                max_fails: 0,
                fail_timeout: 10,
                endpoints: vec![Endpoint { listen: Listen::Unix(s["unix:".len()..].to_string()), name: (*s).into() }],
            })
            .collect();
        let t = Topology { seed: 1, method: nginx_ketama::Method::Consistent, lines, hosts: Vec::new() };
        let block = t.upstream_block(HTTP_KEY, true);
        let config =
            Config::parse_str(&block, "t.conf", &LoadOptions::fragment()).unwrap_or_else(|e| panic!("{e}\n{block}"));
        let read: Vec<String> = match &config.upstreams[0].balancer {
            nginx_ketama::config::Balancer::Hash { upstream, .. } => {
                upstream.primary().iter().map(|p| p.server().as_str().to_string()).collect()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(read, odd, "{block}");
        assert_eq!(token("10.0.0.1:8080"), "10.0.0.1:8080");
        assert_eq!(token("unix:/run/app.sock"), "unix:/run/app.sock");
        assert_eq!(token(""), "\"\"");
        // The whole rendered file, with an odd prefix and odd listeners, tokenizes into the same strings.
        let site = Site {
            http: Some(Part { upstream_block: block, listeners: t.live_listeners() }),
            stream: None,
            hosts: None,
            probes: vec![],
            failing: None,
        };
        let env = Environment {
            prefix: "/tmp/a \"b\" {c};#".into(),
            http_front: "127.0.0.1:8".into(),
            stream_front: "127.0.0.1:9".into(),
            stream_module: None,
            user_root: false,
        };
        let conf = render(&site, &env);
        let whole =
            Config::parse_str(&conf, "nginx.conf", &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}\n{conf}"));
        assert_eq!(whole.upstreams.len(), 1, "{conf}");
        for s in odd {
            assert!(conf.contains(&format!("listen {};", crate::site::token::quote(s))), "{s} in\n{conf}");
        }
    }
}
