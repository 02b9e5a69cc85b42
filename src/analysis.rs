//! Answers over the whole hash space: who owns what share of the keys, why one key went where it went, what
//! a change moves, keys that land on a chosen server, and how far other ketama implementations agree.
//!
//! The first pick of a non-empty key is a function of `crc32(key)` alone (consistent hash), or of 15 bits of
//! it (plain hash, first step), so every answer here is a sum of arc lengths over the 2³² CRC32 values,
//! computed from the ring's points and never by sampling keys ([`HASH_SPACE`]).
//!
//! * [`picks`]: [`PickMap`], which server answers each CRC32 value (with failing and `down` servers walked
//!   past as nginx walks past them), the base of everything else; [`Arc`], the hash range a point closes.
//! * [`share`]: each server's exact share of the hash space ([`Share`]).
//! * [`explain`]: every step nginx takes for one key ([`Explanation`]).
//! * [`diff`]: what moves between two upstreams ([`Diff`]), by a merge of their maps.
//! * [`forge`]: keys that land on a chosen server ([`forge::Forger`], [`forge::forge_keys`]).
//! * [`compare`]: agreement with pingora-ketama (exact), libketama and MD5 virtual nodes (sampled), and
//!   other proxies (feature `engines`).
//! * [`hot`]: the hottest keys of a stream of any length in bounded memory ([`hot::SpaceSaving`]), for
//!   the keys with the most requests next to a share or a change.
//! * `migrate` (feature `engines`): what another proxy moves when its servers change, and the settings a
//!   migration report tries.
//!
//! [`Share`], [`Diff`] and [`compare::Comparison`] also count a list of real keys (`of_keys`), whose CRC32
//! values are not uniform, next to the uniform figure ([`Unit`]).
//!
//! # Example
//!
//! ```
//! use nginx_ketama::analysis::{HASH_SPACE, PickMap, Share};
//! use nginx_ketama::{Method, Peer, Upstream};
//!
//! let up = Upstream::builder(Method::Consistent)
//!     .peers((9001..=9005).map(|p| Peer::new(format!("127.0.0.1:{p}"))))
//!     .build()?;
//! let share = Share::of(&PickMap::new(&up));
//! assert_eq!(share.servers.iter().map(|s| s.count).sum::<u64>() + share.round_robin, HASH_SPACE);
//! # Ok::<(), nginx_ketama::UpstreamError>(())
//! ```

pub mod compare;
pub mod diff;
pub mod explain;
pub mod forge;
pub mod hot;
#[cfg(feature = "engines")]
pub mod migrate;
pub mod picks;
pub mod share;

pub use diff::Diff;
pub use explain::Explanation;
pub use picks::{Arc, Basis, HASH_SPACE, Pick, PickMap, ServerHealth, first_attempt};
pub use share::{Share, Unit};
