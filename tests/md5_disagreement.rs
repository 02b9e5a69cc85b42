//! How often the popular MD5 answers disagree with nginx. The library is checked against nginx elsewhere
//! (crates/cli/tests/verify_live.rs, tests/golden.rs); here its answers stand for nginx's, anchored on keys nginx itself routed
//! (docs/nginx-algorithm.md §11 A).

use nginx_ketama::md5_variants::{LibketamaRing, Md5VnodeRing};
use nginx_ketama::{Method, Peer, Route, Server, Upstream};

const NGINX_A: [(&str, &str); 12] = [
    ("k0", "9005"),
    ("k1", "9003"),
    ("k2", "9002"),
    ("k3", "9003"),
    ("k4", "9004"),
    ("k5", "9001"),
    ("k6", "9001"),
    ("k7", "9003"),
    ("k8", "9002"),
    ("k9", "9005"),
    ("k10", "9004"),
    ("k11", "9002"),
];

fn rates(servers: &[(Server, u32)], keys: usize) -> (f64, f64) {
    let up = Upstream::builder(Method::Consistent)
        .peers(servers.iter().map(|(s, w)| Peer::new(s.clone()).with_weight(*w)))
        .build()
        .unwrap();
    let libketama = LibketamaRing::new(servers.iter().map(|(s, w)| (s, *w)));
    let vnodes = Md5VnodeRing::new(servers.iter().map(|(s, w)| (s, *w)));
    let (mut a, mut b) = (0, 0);
    for i in 0..keys {
        let key = format!("/abc/{i}/object");
        let Route::Server(nginx) = up.route(key.as_bytes()) else { panic!("hashed") };
        a += usize::from(libketama.owner(key.as_bytes()) != Some(nginx));
        b += usize::from(vnodes.owner(key.as_bytes()) != Some(nginx));
    }
    (a as f64 / keys as f64, b as f64 / keys as f64)
}

#[test]
fn md5_rings_disagree_with_nginx_on_most_keys() {
    let five: Vec<(Server, u32)> = (9001..=9005).map(|p| (Server::new(format!("127.0.0.1:{p}")), 1)).collect();
    // Anchor: on the keys nginx routed itself, count the MD5 rings' misses.
    let libketama = LibketamaRing::new(five.iter().map(|(s, w)| (s, *w)));
    let vnodes = Md5VnodeRing::new(five.iter().map(|(s, w)| (s, *w)));
    let miss = |owner: Option<&Server>, port: &str| owner.map(|s| !s.as_str().ends_with(port)).unwrap_or(true);
    let lk = NGINX_A.iter().filter(|(k, p)| miss(libketama.owner(k.as_bytes()), p)).count();
    let vn = NGINX_A.iter().filter(|(k, p)| miss(vnodes.owner(k.as_bytes()), p)).count();
    eprintln!("on 12 keys routed by real nginx: libketama wrong on {lk}, md5(server:i) wrong on {vn}");

    let shapes: Vec<(&str, Vec<(Server, u32)>)> = vec![
        ("5 × 127.0.0.1:900N (algorithm §11 A)", five.clone()),
        (
            "3 hostnames, weights 1/2/3",
            vec![
                (Server::new("cache-a:11211"), 1),
                (Server::new("cache-b:11211"), 2),
                (Server::new("cache-c:11211"), 3),
            ],
        ),
        ("50 × 10.0.0.N:8080", (1..=50).map(|i| (Server::new(format!("10.0.0.{i}:8080")), 1)).collect()),
    ];
    eprintln!("{:<34} {:>10} {:>16}", "upstream", "libketama", "md5(server:i)");
    for (name, servers) in &shapes {
        let (a, b) = rates(servers, 20_000);
        eprintln!("{name:<34} {:>9.1}% {:>15.1}%", a * 100.0, b * 100.0);
        // A random guess among n equal servers is wrong (n-1)/n of the time; both variants are no better.
        let floor = 1.0 - 1.0 / servers.len() as f64 - 0.1;
        assert!(a > floor && b > floor, "{name}: {a} {b}");
    }
    assert!(lk >= 6 && vn >= 6, "MD5 answers should miss most nginx-routed keys");
}
