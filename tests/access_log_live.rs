//! Live check of reading access logs back into requests (issue 21 point 3, algorithm §12.10): every
//! provisioned nginx serves crafted requests and writes three access logs — one in a user's `log_format`
//! (default escaping), one with `escape=json`, one in `combined` — and a fourth log holding, per request,
//! the value nginx computed for a key expression. The library reads each request back from the first three
//! logs and must compute the same key bytes as nginx did.
//!
//! Without provisioned nginx this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.

use nginx_ketama::access_log::{Defaults, LogLine};
use nginx_ketama::config::expression::Expression;
use nginx_ketama::config::{Config, LoadOptions};
use nginx_ketama::key::{self, Context, Evaluation};
use nginx_ketama_harness::nginx::single::{Single, temp_paths};
use nginx_ketama_harness::testkit::{provisioned_or_skip, report};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// The key nginx logs for each request (`keys` format) and the library computes from the other logs.
const KEY: &str = "$host$request_uri|$cookie_s|$arg_id|$tenant|$remote_addr|$uri|$http_user_agent|$http_x_tenant";
/// The same key without `$host`, `$cookie_s` and `$http_x_tenant`, for the `combined` log (which has none of them).
const COMBINED_KEY: &str = "$request_uri|$arg_id|$remote_addr|$uri|$http_user_agent";

const HTTP: &str = r#"
  map $http_x_tenant $tenant { default none; alpha a-pool; Beta b-pool; }
  log_format main '$remote_addr:$remote_port "$request" "$http_host" "$http_user_agent" "$http_cookie" "$http_x_tenant" $status';
  log_format j escape=json '{"a":"$remote_addr","p":"$remote_port","r":"$request","h":"$http_host","ua":"$http_user_agent","c":"$http_cookie","t":"$http_x_tenant","s":"$status"}';
  log_format keys escape=none '$status @KEY@';
  log_format ckeys escape=none '$status @COMBINED_KEY@';
"#;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("an ephemeral port").local_addr().expect("its address").port()
}

/// Requests (head lines without the final empty line).
fn requests() -> Vec<String> {
    let h = "Host: logs.test\r\n";
    let mut out = Vec::new();
    for target in ["/", "/a/b?id=7", "/a%20b/../c?x=1&id=%41", "//x//y?id=", "/q\"uote?id=\\x", "/%C3%A9t%C3%A9?id=1"] {
        out.push(format!("GET {target} HTTP/1.1\r\n{h}"));
    }
    out.push(format!("GET /c HTTP/1.1\r\n{h}Cookie: s=one; t=2\r\nCookie: s=two\r\n"));
    out.push(format!("GET /t?id=3 HTTP/1.1\r\n{h}X-Tenant: BETA\r\nUser-Agent: curl/8 (\"x\")\r\n"));
    out.push(format!("GET /t HTTP/1.1\r\n{h}X-Tenant: alpha\r\nX-Tenant: gamma\r\n"));
    out.push(format!("GET /u HTTP/1.1\r\n{h}User-Agent: tab\there\\back\r\n"));
    out.push("GET /h HTTP/1.1\r\nHost: LOGS.test:8080\r\n".to_string());
    out.push("GET http://abs.test/p?id=5 HTTP/1.1\r\nHost: logs.test\r\n".into());
    out.push("GET /old HTTP/1.0\r\n".into());
    out.push("POST /p?id=9 HTTP/1.1\r\nHost: logs.test\r\nContent-Length: 0\r\n".into());
    out
}

fn lines(path: &std::path::Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    bytes.split(|&c| c == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
}

#[test]
fn keys_from_access_logs_match_live_nginx() {
    let Some(installs) = provisioned_or_skip() else { return };
    let http = HTTP.replace("@KEY@", KEY).replace("@COMBINED_KEY@", COMBINED_KEY);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for install in &installs {
        let port = free_port();
        let to = SocketAddr::from(([127, 0, 0, 1], port));
        let names = ["main", "j", "combined", "keys", "ckeys"];
        let conf = |p: &std::path::Path| {
            let access: String =
                names.iter().map(|n| format!("  access_log {} {n};\n", p.join(format!("{n}.log")).display())).collect();
            format!(
                "daemon off;\nmaster_process off;\nerror_log stderr notice;\npid {pid};\nevents {{}}\nhttp {{\n{temp}{http}{access}\
                 \x20 server {{ listen 127.0.0.1:{port}; server_name logs.test; location / {{ return 200 ok; }} }}\n}}\n",
                pid = p.join("nginx.pid").display(),
                temp = temp_paths(p),
            )
        };
        let mut nginx = Single::start(install, "nk-logs-", conf, &[to]).unwrap_or_else(|e| panic!("{e:#}"));
        let p = nginx.prefix().to_path_buf();
        let logs = names.map(|n| p.join(format!("{n}.log")));
        let file = p.join("nginx.conf");
        let text = std::fs::read_to_string(&file).expect("nginx.conf");
        let options = LoadOptions { resolve: false, version: install.version, ..LoadOptions::default() };
        let config = Config::parse_str(&text, &file, &options).expect("the library reads the configuration");
        for head in requests() {
            let mut s = TcpStream::connect(to).expect("connecting");
            s.set_read_timeout(Some(Duration::from_secs(10))).expect("a timeout");
            s.write_all(format!("{head}Connection: close\r\n\r\n").as_bytes()).expect("sending");
            let mut response = Vec::new();
            s.read_to_end(&mut response).expect("reading");
        }
        // Logs are written when each request ends, before the connection closes; stop nginx to be sure
        // every buffer is on disk.
        nginx.stop();

        let formats = [
            ("main", config.log_format("main").expect("main")),
            ("j", config.log_format("j").expect("j")),
            ("combined", config.log_format("combined").expect("combined")),
        ];
        let (keys, ckeys) = (lines(&logs[3]), lines(&logs[4]));
        let hostname = key::local_hostname();
        for ((name, format), path) in formats.iter().zip(&logs) {
            let (expr, want_lines) = if *name == "combined" { (COMBINED_KEY, &ckeys) } else { (KEY, &keys) };
            let expr = Expression::parse(expr.as_bytes()).expect("the key parses");
            let got_lines = lines(path);
            assert_eq!(got_lines.len(), want_lines.len(), "{name}.log and the key log differ in length");
            for (line, want) in got_lines.iter().zip(want_lines) {
                let want = want.clone();
                let (status, want_key) = want.split_at(4);
                if status != b"200 " {
                    continue;
                }
                let parsed = LogLine::parse(format, line).unwrap_or_else(|e| panic!("{name}: {e}: {line:?}"));
                // As `route --log` does for a format without the host: the first server's name.
                let host = Some(b"logs.test".to_vec());
                let request = parsed.request(&Defaults { server: to, host, ..Defaults::default() }).expect("a request");
                let got = match request.parse_as(install.version.key_rules(), true) {
                    Ok(r) => {
                        let ctx = Context {
                            maps: config.maps(),
                            ..Context::new(install.version.key_rules(), b"logs.test", &hostname)
                        };
                        Evaluation::new(&r, &ctx).evaluate(&expr).map_err(|e| e.to_string())
                    }
                    Err(bad) => Err(bad.to_string()),
                };
                checked += 1;
                if got.as_deref() != Ok(want_key) {
                    mismatches.push(format!(
                        "{} {name}.log {:?}:\n  nginx:   {:?}\n  library: {:?}",
                        install.label(),
                        String::from_utf8_lossy(line),
                        String::from_utf8_lossy(want_key),
                        got.map(|g| String::from_utf8_lossy(&g).into_owned())
                    ));
                }
            }
        }
    }
    assert!(mismatches.is_empty(), "{} of {checked} log lines differ:\n{}", mismatches.len(), mismatches.join("\n"));
    report(&format!("access_log_live: {checked} log lines read back into requests whose keys equal nginx's"));
}
