//! Kong's `consistent-hashing` upstream algorithm (Kong/kong 3.9.3,
//! `kong/runloop/balancer/consistent_hashing.lua`, unchanged since its refactor in 6a8f3e267, first in
//! 2.6.0).
//!
//! * **Wheel** (`consistent_hashing.new`): `points` = the upstream's `slots` (schema
//!   `kong/db/schema/entities/upstreams.lua`: default 10000, between 10 and 65536) when it is between
//!   `MIN_CONTINUUM_SIZE` (1000) and 2³², else `DEFAULT_CONTINUUM_SIZE` (1000).
//! * **Entries** (`afterHostUpdate`): targets sorted by name then port, each target's addresses by
//!   `ip:port` (`sort_hosts_and_addresses`); an address of weight `w` gets `floor(w / totalWeight ×
//!   #targets × 160)` entries (at least 1 if `w > 0`), where `totalWeight` sums every address's weight
//!   (`balancers.lua`, `addAddress`) and `#targets` counts *targets*, not addresses. Entry `i` (from 1)
//!   is the slot `xxhash32(ip .. ":" .. ":" .. port .. " " .. i) % points + 1`: the name has two colons,
//!   as the code writes it (`local port = ":" .. port`, then `ip .. ":" .. port`). A slot already taken
//!   is a collision: the address tries one more `i`. More tries than `points` leaves the wheel as it was
//!   (empty for a new balancer) with a critical log line.
//! * **Hash** (`luaxxhash >= 1.0` in Kong's rockspec; szensk/luaxxhash tag 1.0.0, `luaxxhash.lua`,
//!   `xxhash32(data, len, seed)`): xxHash32 with seed 0, returned as an *unsigned* number since commit
//!   a52780f ("clamped return value to uint32t"; earlier versions returned LuaJIT's signed `bit.bxor`
//!   result, and Lua's floored `%` of a negative value would pick other slots). So `slot = h % points + 1`.
//! * **Lookup** (`getPeer`): `xxhash32(tostring(value)) % points + 1`, then the first slot holding an
//!   address (available and not disabled), walking *down* from there and wrapping from 1 to `points`.
//!
//! The value hashed is the upstream's `hash_on` input (header, cookie, consumer, IP, path, query
//! argument…) as a string: [`Wheel::pick`] takes it raw. Not modelled: `hash_fallback`, health
//! (unavailable addresses are skipped by the walk), DNS targets resolving to several addresses beyond
//! what [`Target::addresses`] lists, and the `i > points` failure beyond reporting it.

use super::EngineError;

/// `SERVER_POINTS`: entries per target when all weights are equal.
pub const SERVER_POINTS: f64 = 160.0;
/// `DEFAULT_CONTINUUM_SIZE` (also `MIN_CONTINUUM_SIZE`).
pub const MIN_POINTS: u64 = 1000;
/// The `slots` default in Kong's upstream schema.
pub const DEFAULT_SLOTS: u64 = 10000;
/// The largest `slots` Kong's schema accepts.
pub const MAX_SLOTS: u64 = 65536;

/// An upstream target (`name:port`, weight) and the addresses it resolves to (an IP target resolves
/// to itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The target's name (an IP, or a hostname).
    pub name: String,
    /// The target's port.
    pub port: u16,
    /// Its addresses: IP (as Kong prints it: IPv6 without brackets), port and weight.
    pub addresses: Vec<(String, u16, u32)>,
}

impl Target {
    /// A target that is an IP address: one address of the target's weight.
    pub fn ip(ip: std::net::IpAddr, port: u16, weight: u32) -> Target {
        Target { name: ip.to_string(), port, addresses: vec![(ip.to_string(), port, weight)] }
    }
}

/// luaxxhash 1.0.0's `xxhash32(data)`: xxHash32, seed 0, as an unsigned number.
pub fn luaxxhash(data: &[u8]) -> u32 {
    twox_hash::XxHash32::oneshot(0, data)
}

/// `get_continuum_index`: `xxhash32(value) % points + 1`.
pub fn continuum_index(value: &[u8], points: u64) -> u64 {
    u64::from(luaxxhash(value)) % points + 1
}

/// A consistent-hashing wheel.
///
/// # Example
///
/// ```
/// use nginx_ketama::engines::kong::{Target, Wheel};
///
/// let targets = [Target::ip("10.0.0.1".parse()?, 80, 100), Target::ip("10.0.0.2".parse()?, 80, 100)];
/// let wheel = Wheel::new(10000, &targets)?;
/// assert_eq!(wheel.entries_per_address(), vec![160, 160]);
/// assert!(wheel.pick(b"/video/42").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Wheel {
    /// Slot `i` (1-based, at `i - 1`): the address (index in the flattened, original order) or `None`.
    slots: Vec<Option<u32>>,
    addresses: usize,
}

impl Wheel {
    /// The wheel of `slots` (Kong's `slots`; below 1000 Kong uses 1000) over `targets`, each address
    /// numbered in the order given (target by target).
    ///
    /// # Errors
    ///
    /// [`EngineError::Refused`] for `slots` outside Kong's schema (10 to 65536), and when the entries do
    /// not fit (Kong's critical log: the wheel stays empty).
    pub fn new(slots: u64, targets: &[Target]) -> Result<Wheel, EngineError> {
        if !(10..=MAX_SLOTS).contains(&slots) {
            return Err(EngineError::Refused {
                engine: "kong",
                message: format!("slots {slots}: value should be between 10 and 65536"),
            });
        }
        let points = if slots >= MIN_POINTS { slots } else { MIN_POINTS };
        // Flattened numbering, in the order given.
        let mut numbered: Vec<(&Target, &(String, u16, u32), u32)> = Vec::new();
        for t in targets {
            for a in &t.addresses {
                numbered.push((t, a, numbered.len() as u32));
            }
        }
        let total_weight: u64 = numbered.iter().map(|&(_, a, _)| u64::from(a.2)).sum();
        let targets_count = targets.len() as f64;
        // sort_hosts_and_addresses: targets by (name, port), addresses by "ip:port" (byte order).
        let mut order: Vec<usize> = (0..targets.len()).collect();
        order.sort_by(|&a, &b| {
            let (ta, tb) = (&targets[a], &targets[b]);
            ta.name.as_bytes().cmp(tb.name.as_bytes()).then(ta.port.cmp(&tb.port))
        });
        let mut wheel = vec![None; points as usize];
        for t in order {
            let target = &targets[t];
            let mut addrs: Vec<&(&Target, &(String, u16, u32), u32)> =
                numbered.iter().filter(|(owner, _, _)| std::ptr::eq(*owner, target)).collect();
            addrs.sort_by(|x, y| format!("{}:{}", x.1.0, x.1.1).cmp(&format!("{}:{}", y.1.0, y.1.1)));
            for &&(_, &(ref ip, port, weight), index) in &addrs {
                let prop = f64::from(weight) / total_weight as f64;
                let mut entries = (prop * targets_count * SERVER_POINTS).floor() as u64;
                if weight > 0 && entries == 0 {
                    entries = 1;
                }
                let mut i: u64 = 1;
                while i <= entries {
                    let name = format!("{ip}::{port} {i}");
                    let slot = continuum_index(name.as_bytes(), points) as usize - 1;
                    if wheel[slot].is_none() {
                        wheel[slot] = Some(index);
                    } else {
                        entries += 1;
                    }
                    i += 1;
                    if i > points {
                        return Err(EngineError::Refused {
                            engine: "kong",
                            message: "consistent hashing balancer requires more entries to add the number of hosts \
                                      requested, please increase the wheel size"
                                .into(),
                        });
                    }
                }
            }
        }
        Ok(Wheel { slots: wheel, addresses: numbered.len() })
    }

    /// Number of slots (`points`).
    pub fn points(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Slots held per address (flattened order).
    pub fn entries_per_address(&self) -> Vec<u64> {
        let mut counts = vec![0; self.addresses];
        for a in self.slots.iter().flatten() {
            counts[*a as usize] += 1;
        }
        counts
    }

    /// The address at a 1-based slot index, or the first below it (wrapping); `None` on an empty wheel.
    pub fn at_index(&self, index: u64) -> Option<usize> {
        let start = index as usize - 1;
        let n = self.slots.len();
        (0..n).map(|k| (start + n - k) % n).find_map(|s| self.slots[s]).map(|a| a as usize)
    }

    /// The address (index, flattened order) `value` goes to.
    pub fn pick(&self, value: &[u8]) -> Option<usize> {
        self.at_index(continuum_index(value, self.points()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// szensk/luaxxhash `test.lua` at tag 1.0.0 (the library Kong's rockspec requires): its expected
    /// values, unsigned. ("sherlock.txt" is left out: not in the repository; the seeded `abc` case uses a
    /// seed Kong never passes.)
    #[test]
    fn luaxxhash_matches_its_own_test() {
        let a = "a";
        let cats = "Cats are interesting.";
        let cases: [(String, u32); 9] = [
            (a.repeat(4), 0xDA576727),
            (a.repeat(16), 0x5DACDD8C),
            (a.repeat(32), 0xA3234FBE),
            (a.repeat(32) + a + &a.repeat(4), 0x3F87545B),
            (cats.repeat(256), 0xF1DB4C68),
            (String::new(), 0x02CC5D05),
            ("dupa".into(), 0x1A47C09D),
            (cats.into(), 0x65ED1AFC),
            (a.into(), 0x550D7456),
        ];
        for (s, h) in cases {
            assert_eq!(luaxxhash(s.as_bytes()), h, "{s:.20}");
        }
        assert_eq!(twox_hash::XxHash32::oneshot(0x5BD1E995, b"abc"), 0xBDDEB201);
    }

    fn addr(ip: &str, port: u16, w: u32) -> (String, u16, u32) {
        (ip.to_string(), port, w)
    }

    /// Kong's `spec/01-unit/09-balancer/03-consistent_hashing_spec.lua` (3.9.3), "wheel manipulation":
    /// the number of slots each address holds.
    #[test]
    fn entries_match_kongs_spec() {
        // "equal weights and 'fitting' indices": one target (weight 100), two addresses, wheel 1000.
        let t = Target {
            name: "mashape.com".into(),
            port: 80,
            addresses: vec![addr("1.2.3.4", 80, 100), addr("1.2.3.5", 80, 100)],
        };
        assert_eq!(Wheel::new(1000, std::slice::from_ref(&t)).unwrap().entries_per_address(), [80, 80]);
        // "adding a host": mashape.com weight 5 (two addresses), getkong.org:8080 weight 10 (::1),
        // wheel 2000: 80, 80, 160.
        let mashape = |w| Target {
            name: "mashape.com".into(),
            port: 80,
            addresses: vec![addr("1.2.3.4", 80, w), addr("1.2.3.5", 80, w)],
        };
        let getkong = |port, w| Target { name: "getkong.org".into(), port, addresses: vec![addr("::1", port, w)] };
        let w = Wheel::new(2000, &[mashape(5), getkong(8080, 10)]).unwrap();
        assert_eq!(w.entries_per_address(), [80, 80, 160]);
        // "weight change updates properly": both weight 10, wheel 1000: 106 each; mashape.com to 25:
        // 133, 133, 53.
        assert_eq!(Wheel::new(1000, &[mashape(10), getkong(80, 10)]).unwrap().entries_per_address(), [106; 3]);
        assert_eq!(Wheel::new(1000, &[mashape(25), getkong(80, 10)]).unwrap().entries_per_address(), [133, 133, 53]);
    }

    /// One changed rule fails the spec: counting addresses instead of targets in `#targets × 160`.
    #[test]
    fn counting_addresses_instead_of_targets_fails_kongs_spec() {
        let entries =
            |w: u32, total: u32, count: f64| ((f64::from(w) / f64::from(total)) * count * SERVER_POINTS).floor();
        assert_eq!(entries(10, 30, 2.0), 106.0, "the rule as Kong writes it");
        assert_ne!(entries(10, 30, 3.0), 106.0);
    }

    /// "gets an IP address and port number; consistent hashing": mashape.com:123 (1.2.3.4) weight 10 and
    /// getkong.org:321 (5.6.7.8) weight 5, wheel 1000, keys "1"…"1500": 1.2.3.4 gets 900 to 1100 and
    /// 5.6.7.8 450 to 550 (bounds, not an exact vector: Kong's spec has none).
    #[test]
    fn distribution_within_kongs_spec_bounds() {
        let w = Wheel::new(
            1000,
            &[
                Target { name: "mashape.com".into(), port: 123, addresses: vec![addr("1.2.3.4", 123, 10)] },
                Target { name: "getkong.org".into(), port: 321, addresses: vec![addr("5.6.7.8", 321, 5)] },
            ],
        )
        .unwrap();
        let mut counts = [0u32; 2];
        for n in 1..=1500 {
            counts[w.pick(n.to_string().as_bytes()).unwrap()] += 1;
        }
        assert!((901..1100).contains(&counts[0]) && (451..550).contains(&counts[1]), "{counts:?}");
    }

    /// Kong's "evaluate the change in the continuum": targets 10.0.0.1:1 … 10.0.0.5:5 (weight 100), wheel
    /// 5000, keys 1 … 10000.
    fn continuum_change() -> (usize, usize, usize) {
        let wheel = |n: u8| {
            let targets: Vec<Target> =
                (1..=n).map(|i| Target::ip(format!("10.0.0.{i}").parse().unwrap(), u16::from(i), 100)).collect();
            let w = Wheel::new(5000, &targets).unwrap();
            (1..=10_000).map(|k: u32| w.pick(k.to_string().as_bytes()).unwrap()).collect::<Vec<_>>()
        };
        let (five, six, eight) = (wheel(5), wheel(6), wheel(8));
        let moved = |a: &[usize], b: &[usize]| a.iter().zip(b).filter(|(x, y)| x != y).count();
        (moved(&five, &six), moved(&five, &eight), moved(&six, &eight))
    }

    /// Its bounds: adding 10.0.0.6:6 moves under 20% of the keys; adding :7 and :8 as well, under 40% from
    /// the first wheel and under 25% from the second (the model: 1702, 3774 and 2429 of 10000).
    #[test]
    fn continuum_changes_within_kongs_spec_bounds() {
        let (five_six, five_eight, six_eight) = continuum_change();
        assert!(five_six < 2000 && five_eight < 4000 && six_eight < 2500, "{five_six} {five_eight} {six_eight}");
    }

    /// One changed rule fails that spec: walking *up* from the key's slot moves 2524 keys from six targets
    /// to eight.
    #[test]
    fn walking_up_fails_kongs_spec() {
        let picks = |n: u8| {
            let targets: Vec<Target> =
                (1..=n).map(|i| Target::ip(format!("10.0.0.{i}").parse().unwrap(), u16::from(i), 100)).collect();
            let w = Wheel::new(5000, &targets).unwrap();
            (1..=10_000u32)
                .map(|k| {
                    let s = continuum_index(k.to_string().as_bytes(), 5000) as usize - 1;
                    (0..5000).map(|d| (s + d) % 5000).find_map(|x| w.slots[x]).unwrap()
                })
                .collect::<Vec<_>>()
        };
        let (six, eight) = (picks(6), picks(8));
        assert!(six.iter().zip(&eight).filter(|(a, b)| a != b).count() >= 2500);
    }

    /// One changed rule fails that spec: the signed hash of luaxxhash before 1.0.0 (Lua's floored `%` of
    /// a negative number) moves 2623 keys from six targets to eight, over the spec's 2500.
    #[test]
    fn the_signed_hash_of_older_luaxxhash_fails_kongs_spec() {
        let wheel = |n: u8| {
            let mut w = vec![None; 5000];
            for t in 1..=n {
                let mut entries = ((100.0 / (100.0 * f64::from(n))) * f64::from(n) * SERVER_POINTS).floor() as u64;
                let mut i = 1;
                while i <= entries {
                    let h = luaxxhash(format!("10.0.0.{t}::{t} {i}").as_bytes()) as i32;
                    let slot = i64::from(h).rem_euclid(5000) as usize;
                    if w[slot].is_none() {
                        w[slot] = Some(t);
                    } else {
                        entries += 1;
                    }
                    i += 1;
                }
            }
            (1..=10_000u32)
                .map(|k| {
                    let s = i64::from(luaxxhash(k.to_string().as_bytes()) as i32).rem_euclid(5000) as usize;
                    (0..5000).map(|d| (s + 5000 - d) % 5000).find_map(|x| w[x]).unwrap()
                })
                .collect::<Vec<_>>()
        };
        let (six, eight) = (wheel(6), wheel(8));
        let moved = six.iter().zip(&eight).filter(|(a, b)| a != b).count();
        assert!(moved >= 2500, "{moved}");
    }

    #[test]
    fn lookup_walks_down_and_wraps() {
        let t = [Target::ip("10.0.0.1".parse().unwrap(), 80, 1)];
        let w = Wheel::new(1000, &t).unwrap();
        // One address: every index finds it.
        assert!([1, 2, 500, 1000].iter().all(|&i| w.at_index(i) == Some(0)));
        let err = Wheel::new(5, &t).unwrap_err().to_string();
        assert_eq!(err, "kong: slots 5: value should be between 10 and 65536");
    }
}
