//! The engine models against the real engines: every provisioned HAProxy and Caddy build
//! (`.engines/`, or `$NGINX_KETAMA_ENGINES_DIR`; engines/README.md) is started on 127.0.0.1 in front of
//! echo backends in this process, and the backend each key reaches is compared with the model's pick.
//!
//! * HAProxy: random topologies (weights, ids, a `disabled` server), every hash function and `avalanche`,
//!   `hash-key`, `map-based`, backups with and without `allbackups`. Where the hash is computable from the
//!   key (`crc32` by forging keys, `none` by writing the number) the keys sit at both ends of every
//!   segment of the model's answer, ties between two nodes included; elsewhere random keys.
//! * Caddy: `lb_policy header` over random pools, random keys.
//!
//! Without provisioned engines this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.
//! Every process is killed when its guard drops, and by the kernel if this process dies (`PR_SET_PDEATHSIG`).

use nginx_ketama::analysis::compare::sample_key;
use nginx_ketama::analysis::forge::Forger;
use nginx_ketama::engines::caddy;
use nginx_ketama::engines::haproxy::{Backend, Function, HashKey, Method, Options, Release, Server};
use nginx_ketama_harness::testkit::{report, skip};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn engines_dir() -> PathBuf {
    std::env::var_os("NGINX_KETAMA_ENGINES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".engines"))
}

/// The provisioned builds of `engine` (`<engine>-<release>` directories with a `run` wrapper), by release.
fn builds(engine: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(engines_dir()) else { return out };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(release) = name.strip_prefix(&format!("{engine}-")) else { continue };
        // Release directories only (`haproxy-3.0.11`), not the suite links (`haproxy-trixie`).
        if !release.starts_with(|c: char| c.is_ascii_digit()) || entry.file_type().map_or(true, |t| t.is_symlink()) {
            continue;
        }
        if entry.path().join("run").is_file() {
            out.push((release.to_string(), entry.path()));
        }
    }
    out.sort();
    out
}

/// Echo backends: backend `i` listens on 127.0.0.`i+1` (distinct addresses, for `hash-key addr`) and
/// answers every request with its index. The threads live as long as the test process.
fn echo_backends(n: usize) -> Vec<SocketAddr> {
    (0..n)
        .map(|i| {
            let l = TcpListener::bind(format!("127.0.0.{}:0", i + 1)).expect("bind an echo backend");
            let addr = l.local_addr().unwrap();
            std::thread::spawn(move || {
                for conn in l.incoming().flatten() {
                    std::thread::spawn(move || serve(conn, i));
                }
            });
            addr
        })
        .collect()
}

fn serve(mut conn: TcpStream, index: usize) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // One request per connection (the proxies are told to close), so the head is all there is to read.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = index.to_string();
    let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
}

/// A started engine, killed on drop.
struct Running {
    child: Child,
    front: SocketAddr,
    dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `build/run args` in a fresh directory holding `config(front port)` as `file`, on a free port;
/// retries with another port when the one picked was taken meanwhile.
fn start(build: &Path, file: &str, config: &dyn Fn(u16) -> String, args: &[&str], caddy: bool) -> Running {
    for _ in 0..5 {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        std::fs::write(dir.path().join(file), config(port)).unwrap();
        let mut cmd = Command::new(build.join("run"));
        cmd.args(args).current_dir(dir.path()).stdin(Stdio::null()).stdout(Stdio::null());
        cmd.stderr(std::fs::File::create(dir.path().join("stderr")).unwrap());
        if caddy {
            let home = dir.path().join("home");
            cmd.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", &home);
            for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")] {
                cmd.env(var, home.join(sub));
            }
        }
        // SAFETY: prctl is async-signal-safe; the child dies with the thread that started it.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e}", build.display()));
        let mut running = Running { child, front: SocketAddr::from(([127, 0, 0, 1], port)), dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = running.child.try_wait().unwrap() {
                let err = std::fs::read_to_string(running.dir.path().join("stderr")).unwrap_or_default();
                if err.contains("ddress already in use") {
                    break;
                }
                panic!("{} exited ({status}) before listening:\n{err}\nconfig:\n{}", build.display(), config(port));
            }
            if TcpStream::connect(running.front).is_ok() {
                return running;
            }
            assert!(Instant::now() < deadline, "{} did not listen within 20 s", build.display());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("no free port for {} after 5 tries", build.display());
}

/// The backend index the request with `X-Key: key` reached, or `None` for any other answer.
fn ask(front: SocketAddr, key: &[u8]) -> Option<usize> {
    let mut conn = TcpStream::connect(front).expect("connect to the engine");
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\nX-Key: ".to_vec();
    req.extend_from_slice(key);
    req.extend_from_slice(b"\r\n\r\n");
    conn.write_all(&req).unwrap();
    let mut resp = Vec::new();
    conn.read_to_end(&mut resp).expect("read the answer");
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n")?;
    if !resp.starts_with(b"HTTP/1.1 200") {
        return None;
    }
    std::str::from_utf8(&resp[at + 4..]).ok()?.trim().parse().ok()
}

/// A tiny deterministic generator for topologies (splitmix64).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn haproxy_release(s: &str) -> Release {
    s.parse().unwrap_or_else(|e| panic!("a provisioned HAProxy the models lack: {e}"))
}

/// One HAProxy case: options and servers.
struct Case {
    name: String,
    options: Options,
    servers: Vec<Server>,
}

fn haproxy_config(case: &Case, port: u16) -> String {
    let o = &case.options;
    let mut c = String::from(
        "global\n    maxconn 200\n\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    timeout server 10s\n\n",
    );
    c += &format!(
        "frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    balance hdr(X-Key)\n"
    );
    c += &format!("    hash-type {} {}{}\n", o.method, o.function, if o.avalanche { " avalanche" } else { "" });
    if o.all_backups {
        c += "    option allbackups\n";
    }
    for (i, s) in case.servers.iter().enumerate() {
        c += &format!("    server s{i} {} weight {}", s.addr, s.weight);
        if let Some(id) = s.id {
            c += &format!(" id {id}");
        }
        if s.backup {
            c += " backup";
        }
        if s.disabled {
            c += " disabled";
        }
        // A server keyword in 3.0 (`srv_parse_hash_key`).
        if o.release.has_hash_key() && o.hash_key != HashKey::Id {
            c += &format!(" hash-key {}", o.hash_key);
        }
        c += "\n";
    }
    c
}

/// The keys a case is asked: at both ends of every segment of the model's answer where the hash is
/// computable from the key, plus random keys.
fn haproxy_keys(case: &Case, model: &Backend, forger: &Forger, rng: &mut Gen) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut key = Vec::new();
    for i in 0..150 {
        sample_key(rng.next(), i, &mut key);
        keys.push(key.clone());
    }
    let at = |h: u32| -> Option<Vec<u8>> {
        match (case.options.function, case.options.avalanche) {
            (Function::Crc32, false) => Some(forger.forge(b"k", h)),
            (Function::None, false) => Some(h.to_string().into_bytes()),
            _ => None,
        }
    };
    if let Some(segments) = model.hash_segments() {
        for (start, _) in segments {
            for h in [start, start.wrapping_sub(1)] {
                keys.extend(at(h));
            }
        }
    }
    keys
}

fn random_servers(rng: &mut Gen, backends: &[SocketAddr], ids: bool) -> Vec<Server> {
    let n = 2 + rng.below(backends.len() as u64 - 1) as usize;
    let mut servers: Vec<Server> =
        backends[..n].iter().map(|&a| Server { weight: 1 + rng.below(4) as u32, ..Server::new(a) }).collect();
    if ids {
        // Explicit ids on some servers: the others take the first unused numbers.
        for s in servers.iter_mut() {
            if rng.below(3) == 0 {
                s.id = Some(1 + rng.below(9) as u32);
            }
        }
        let mut seen = Vec::new();
        for s in servers.iter_mut() {
            if let Some(id) = s.id {
                if seen.contains(&id) {
                    s.id = None;
                } else {
                    seen.push(id);
                }
            }
        }
    }
    if n > 2 && rng.below(2) == 0 {
        servers[rng.below(n as u64) as usize].disabled = true;
    }
    servers
}

fn haproxy_cases(release: Release, backends: &[SocketAddr], rng: &mut Gen) -> Vec<Case> {
    let mut cases = Vec::new();
    let functions: Vec<Function> =
        Function::ALL.into_iter().filter(|&f| f != Function::None || release.has_hash_key()).collect();
    for (k, &function) in functions.iter().enumerate() {
        for avalanche in [false, true] {
            let options = Options { avalanche, ..Options::consistent(release).with_function(function) };
            cases.push(Case {
                name: format!("consistent {function}{}", if avalanche { " avalanche" } else { "" }),
                options,
                servers: random_servers(rng, backends, k % 2 == 0),
            });
        }
        let options = Options { method: Method::MapBased, ..Options::consistent(release).with_function(function) };
        cases.push(Case {
            name: format!("map-based {function}"),
            options,
            servers: random_servers(rng, backends, false),
        });
    }
    if release.has_hash_key() {
        for hash_key in [HashKey::Addr, HashKey::AddrPort] {
            let options = Options { hash_key, ..Options::consistent(release).with_function(Function::Crc32) };
            cases.push(Case {
                name: format!("hash-key {hash_key}"),
                options,
                servers: random_servers(rng, backends, false),
            });
        }
    }
    // Failover to backups: every active server disabled.
    for all_backups in [false, true] {
        for method in [Method::Consistent, Method::MapBased] {
            let mut servers = random_servers(rng, &backends[..4], false);
            servers.iter_mut().for_each(|s| s.disabled = true);
            for &a in &backends[4..] {
                servers.push(Server { backup: true, weight: 1 + rng.below(3) as u32, ..Server::new(a) });
            }
            let options =
                Options { method, all_backups, ..Options::consistent(release).with_function(Function::Crc32) };
            cases.push(Case { name: format!("backups {method} allbackups={all_backups}"), options, servers });
        }
    }
    cases
}

#[test]
fn haproxy_models_match_the_real_engines() {
    let builds = builds("haproxy");
    if builds.is_empty() {
        skip(&format!("engines_live: no HAProxy under {} — run scripts/provision-engines", engines_dir().display()));
        return;
    }
    let backends = echo_backends(7);
    let forger = Forger::new();
    let mut rng = Gen(0x5eed_4a9e);
    for (release, build) in &builds {
        let release = haproxy_release(release);
        let mut asked = 0;
        let cases = haproxy_cases(release, &backends, &mut rng);
        for case in &cases {
            let model = Backend::new(case.options, &case.servers).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let config = |port: u16| haproxy_config(case, port);
            let running = start(build, "haproxy.cfg", &config, &["-db", "-f", "haproxy.cfg"], false);
            let mut mismatches = Vec::new();
            for key in haproxy_keys(case, &model, &forger, &mut rng) {
                // The echo body is the backend's index; the model answers a server's index.
                let real =
                    ask(running.front, &key).map(|b| case.servers.iter().position(|s| s.addr == backends[b]).unwrap());
                let want = model.pick(&key);
                asked += 1;
                if real != want {
                    mismatches.push(format!("{:?}: haproxy {real:?}, model {want:?}", String::from_utf8_lossy(&key)));
                }
            }
            assert!(
                mismatches.is_empty(),
                "haproxy {release}, {}: {} mismatches, first {:?}\nconfig:\n{}",
                case.name,
                mismatches.len(),
                &mismatches[..mismatches.len().min(5)],
                haproxy_config(case, running.front.port())
            );
        }
        report(&format!("engines_live: haproxy {release}: {} cases, {asked} keys, 0 mismatches", cases.len()));
    }
}

fn caddy_config(upstreams: &[SocketAddr], port: u16) -> String {
    let to: Vec<String> = upstreams.iter().map(SocketAddr::to_string).collect();
    format!(
        "{{\n\tadmin off\n\tauto_https off\n\tskip_install_trust\n\tservers {{\n\t\tprotocols h1\n\t}}\n}}\n\n\
         http://:{port} {{\n\tbind 127.0.0.1\n\treverse_proxy {{\n\t\tto {}\n\t\tlb_policy header X-Key\n\t}}\n}}\n",
        to.join(" ")
    )
}

#[test]
fn caddy_models_match_the_real_engines() {
    let builds = builds("caddy");
    if builds.is_empty() {
        skip(&format!("engines_live: no Caddy under {} — run scripts/provision-engines", engines_dir().display()));
        return;
    }
    let backends = echo_backends(7);
    let mut rng = Gen(0x000c_add7);
    for (release, build) in &builds {
        let release: caddy::Release =
            release.parse().unwrap_or_else(|e| panic!("a provisioned Caddy the models lack: {e}"));
        let mut asked = 0;
        for round in 0..4 {
            let n = 2 + rng.below(6) as usize;
            // A pool in another order than the backends' (the order breaks ties).
            let mut pool: Vec<SocketAddr> = backends[..n].to_vec();
            pool.rotate_left(round % n);
            let model = caddy::Pool::new(release, pool.iter().map(SocketAddr::to_string));
            let config = |port: u16| caddy_config(&pool, port);
            let running =
                start(build, "Caddyfile", &config, &["run", "--config", "Caddyfile", "--adapter", "caddyfile"], true);
            let mut key = Vec::new();
            let mut mismatches = Vec::new();
            for i in 0..300 {
                sample_key(rng.next(), i, &mut key);
                let real = ask(running.front, &key).map(|b| pool.iter().position(|a| *a == backends[b]).unwrap());
                let want = model.pick(&key);
                asked += 1;
                if real != want {
                    mismatches.push(format!("{:?}: caddy {real:?}, model {want:?}", String::from_utf8_lossy(&key)));
                }
            }
            assert!(
                mismatches.is_empty(),
                "caddy {release}, pool {pool:?}: {} mismatches, first {:?}",
                mismatches.len(),
                &mismatches[..mismatches.len().min(5)]
            );
        }
        report(&format!("engines_live: caddy {release}: 4 pools, {asked} keys, 0 mismatches"));
    }
}
