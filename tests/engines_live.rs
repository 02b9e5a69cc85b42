//! The engine models against the real engines: every provisioned HAProxy and Caddy build (`.engines/`, or
//! `$NGINX_KETAMA_ENGINES_DIR`; engines/README.md) is started on 127.0.0.1 in front of echo backends in
//! this process, and the backend each key reaches is compared with the model's pick — the harness's
//! `engines` layer, which `verify --engine` runs too.
//!
//! * HAProxy: one random topology of each kind (weights, ids, a `disabled` server), every hash function
//!   and `avalanche`, `hash-key`, `map-based`, backups with and without `allbackups`. Where the hash is
//!   computable from the key (`crc32` by forging keys, `none` by writing the number) the keys sit at both
//!   ends of every segment of the model's answer, ties between two nodes included; 150 random keys each.
//! * Caddy: each hashing `lb_policy` over 2 random pools, 300 random requests each: `header`, `uri_hash`
//!   (paths and queries as sent), `ip_hash` (from random 127.x.y.z sources) on every release; from 2.7
//!   `query` (repeated and encoded names) and `client_ip_hash` behind `trusted_proxies`.
//!
//! Without provisioned engines this prints a loud `SKIP:` line and passes, unless `NGINX_PARITY=require`.
//! Every process is killed when its guard drops, and by the kernel if this process dies (`PR_SET_PDEATHSIG`).

use nginx_ketama_harness::engines::backends::EchoBackends;
use nginx_ketama_harness::engines::install::{Live, builds, default_root};
use nginx_ketama_harness::engines::proof::{self, BACKENDS, ModelRule, Options};
use nginx_ketama_harness::testkit::{report, skip};

/// Every provisioned build of `engine` against its model: 0 mismatches, or the first few with the
/// configuration that shows them.
fn prove_every_release(engine: Live, seed: u64, model: ModelRule) -> Vec<proof::ReleaseReport> {
    let builds = builds(engine, &default_root());
    if builds.is_empty() {
        skip(&format!("engines_live: no {engine} under {} — run scripts/provision-engines", default_root().display()));
        return Vec::new();
    }
    let backends = EchoBackends::start(BACKENDS).expect("echo backends");
    let options = Options { seed, model, ..Options::default() };
    builds
        .iter()
        .map(|build| proof::prove(build, &backends, &options, &mut |_| {}).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn assert_clean(reports: &[proof::ReleaseReport]) {
    for r in reports {
        if let Some(first) = r.mismatches.first() {
            let shown: Vec<String> = r.mismatches[..r.mismatches.len().min(5)]
                .iter()
                .map(|m| {
                    format!(
                        "topology {} ({}) {:?}: {} {:?}, model {:?}",
                        m.topology,
                        m.label,
                        String::from_utf8_lossy(&m.key),
                        r.engine,
                        m.engine_said,
                        m.model_said
                    )
                })
                .collect();
            panic!(
                "{} {}: {} mismatches, first {shown:#?}\nconfig:\n{}",
                r.engine,
                r.release,
                r.mismatches.len(),
                first.config
            );
        }
        report(&format!(
            "engines_live: {} {}: {} topologies, {} keys, 0 mismatches",
            r.engine, r.release, r.topologies, r.requests
        ));
        for k in r.kinds.iter().filter(|_| r.engine == Live::Caddy) {
            report(&format!("engines_live:   {}: {} requests, 0 mismatches", k.kind, k.requests));
        }
    }
}

#[test]
fn haproxy_models_match_the_real_engines() {
    assert_clean(&prove_every_release(Live::HaProxy, 0x5eed_4a9e, ModelRule::Right));
}

#[test]
fn caddy_models_match_the_real_engines() {
    assert_clean(&prove_every_release(Live::Caddy, 0x000c_add7, ModelRule::Right));
}
