//! `--hottest N` of `share`, `diff` and `compare`: the keys with the most requests (for a change, the most
//! requests that move) and where each goes, counted in bounded memory by the core's
//! [`SpaceSaving`](nginx_ketama::analysis::hot::SpaceSaving) and shown the same way by all three.

use crate::render::key_text;
use crate::render::rows::{Cell, Column, Rows};
use anyhow::Result;
use nginx_ketama::Server;
use nginx_ketama::analysis::Pick;
use nginx_ketama::analysis::hot::SpaceSaving;
use std::hash::Hash;
use std::io::Write;
use std::num::NonZeroUsize;

/// Counters per key asked for: the counter keeps `COUNTERS_PER_KEY × N` keys (at least [`MIN_COUNTERS`]).
pub(crate) const COUNTERS_PER_KEY: usize = 10;
/// The fewest counters.
pub(crate) const MIN_COUNTERS: usize = 100;

/// A counter for the `n` hottest keys.
pub(crate) fn counter<K: Hash + Eq + Clone + Ord>(n: NonZeroUsize) -> SpaceSaving<K> {
    let capacity = n.get().saturating_mul(COUNTERS_PER_KEY).max(MIN_COUNTERS);
    SpaceSaving::new(NonZeroUsize::new(capacity).expect("at least MIN_COUNTERS"))
}

/// The server a pick names among `servers` (`None`: round-robin).
pub(crate) fn server(servers: &[Server], pick: Pick) -> Option<&Server> {
    match pick {
        Pick::Server(i) => Some(&servers[i]),
        Pick::RoundRobin => None,
    }
}

/// Where the keys go, one column per place: `share` has the server, `diff` the server before and after,
/// `compare` nginx's and the other's.
pub(crate) struct Place {
    /// Its field in JSON.
    pub(crate) json: &'static str,
    /// Its heading in the table.
    pub(crate) heading: String,
}

/// One hot key.
struct HotKey {
    key: Vec<u8>,
    /// The key after the change, when the change changes it (`diff` of two key expressions).
    to_key: Option<Vec<u8>>,
    count: u64,
    error: u64,
    /// One per [`Place`]: a server, or `None` for round-robin.
    goes: Vec<Option<String>>,
}

/// The hottest keys of one measure, ready to be shown.
pub(crate) struct Hottest {
    /// What was counted, for the table's heading: `keys`, `moved keys`, `keys pingora-ketama sends elsewhere`.
    what: String,
    /// The requests of the measure (the percentages' whole).
    total: u64,
    /// The requests given to the counter (for a change, those that move).
    counted: u64,
    counters: usize,
    /// The number of distinct keys counted, when every one had a counter.
    distinct: Option<usize>,
    certain: bool,
    places: Vec<Place>,
    keys: Vec<HotKey>,
}

impl Hottest {
    /// The `n` hottest keys of `counter`: `key` gives a counted item's key (and its key after a change),
    /// `goes` where it goes, one entry per place.
    pub(crate) fn of<K: Hash + Eq + Clone + Ord>(
        counter: &SpaceSaving<K>,
        n: NonZeroUsize,
        what: String,
        total: u64,
        places: Vec<Place>,
        key: impl Fn(&K) -> (Vec<u8>, Option<Vec<u8>>),
        goes: impl Fn(&K) -> Vec<Option<String>>,
    ) -> Hottest {
        let top = counter.top(n.get());
        let keys = top
            .keys
            .iter()
            .map(|c| {
                let (k, to) = key(c.key);
                let goes = goes(c.key);
                assert_eq!(goes.len(), places.len(), "one answer per place");
                HotKey { to_key: to.filter(|t| *t != k), key: k, count: c.count, error: c.error, goes }
            })
            .collect();
        Hottest {
            what,
            total,
            counted: counter.total(),
            counters: counter.capacity(),
            distinct: top.exact.then(|| counter.len()),
            certain: top.certain,
            places,
            keys,
        }
    }

    /// A heading line, then the keys as a table.
    pub(crate) fn write_table(&self, out: &mut impl Write) -> Result<()> {
        let how = match self.distinct {
            Some(d) => format!("exact: {d} distinct keys, each counted"),
            None => {
                let sure = if self.certain {
                    "no key left out can be hotter than one shown"
                } else {
                    "a key left out may be hotter than the last ones shown"
                };
                format!(
                    "estimated with {} counters (Space-Saving): each count is an upper bound, at most `over` above \
                     the true count; {sure}",
                    self.counters
                )
            }
        };
        writeln!(out, "hottest {}: {} of {} requests ({how})", self.what, self.keys.len(), self.counted)?;
        self.rows().write_table(out)
    }

    fn rows(&self) -> Rows {
        let estimated = self.distinct.is_none();
        let changed = self.keys.iter().any(|k| k.to_key.is_some());
        let mut columns = vec![Column::text("key")];
        if changed {
            columns.push(Column::text("key after"));
        }
        columns.push(Column::number("requests"));
        if estimated {
            columns.push(Column::number("over"));
        }
        columns.push(Column::number("percent"));
        columns.extend(self.places.iter().map(|p| Column::text(p.json).headed(p.heading.clone())));
        let mut rows = Rows::new(columns);
        let text = |k: &[u8]| Cell::Text(String::from_utf8_lossy(k).into_owned());
        for k in &self.keys {
            let mut row = vec![text(&k.key)];
            if changed {
                row.push(k.to_key.as_deref().map_or(Cell::Text("(same)".into()), text));
            }
            row.push(Cell::Count(k.count));
            if estimated {
                row.push(Cell::Count(k.error));
            }
            row.push(Cell::Fraction { n: k.count, total: self.total });
            row.extend(k.goes.iter().map(|g| Cell::Pick(g.clone())));
            rows.push(row);
        }
        rows
    }
}

impl serde::Serialize for Hottest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde_json::{Map, Value};
        #[derive(serde::Serialize)]
        struct HottestJson {
            /// The requests given to the counter.
            counted: u64,
            /// How many keys the counter holds at most.
            counters: usize,
            /// Every distinct key had a counter: the counts are exact.
            exact: bool,
            /// The number of distinct keys, when exact.
            distinct: Option<usize>,
            /// No key left out can be hotter than one shown.
            certain: bool,
            keys: Vec<Map<String, Value>>,
        }
        let keys = self
            .keys
            .iter()
            .map(|k| {
                let mut m = Map::new();
                let mut bytes = |name: &str, b: &[u8]| {
                    let (text, hex) = key_text(b);
                    m.insert(name.to_string(), text.into_owned().into());
                    if let Some(hex) = hex {
                        m.insert(format!("{name}_hex"), hex.into());
                    }
                };
                bytes("key", &k.key);
                if let Some(to) = &k.to_key {
                    bytes("to_key", to);
                }
                m.insert("requests".into(), k.count.into());
                m.insert("error".into(), k.error.into());
                m.insert("fraction".into(), crate::render::rows::fraction(k.count, self.total).into());
                for (p, g) in self.places.iter().zip(&k.goes) {
                    m.insert(p.json.into(), g.clone().map_or(Value::Null, Value::from));
                }
                m
            })
            .collect();
        HottestJson {
            counted: self.counted,
            counters: self.counters,
            exact: self.distinct.is_some(),
            distinct: self.distinct,
            certain: self.certain,
            keys,
        }
        .serialize(serializer)
    }
}
