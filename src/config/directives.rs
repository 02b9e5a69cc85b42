//! Which directives the chosen nginx release knows, where it allows each, which ones take a block, how many
//! arguments each takes and which may not repeat: a typed view of the tables `scripts/gen-directive-table`
//! generates into [`table`] from the real binaries.

mod table;

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

/// Where a directive sits; the order is the bit order of [`DirectiveFlags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctx {
    Main = 0,
    Events = 1,
    Http = 2,
    Server = 3,
    Location = 4,
    ServerIf = 5,
    LocationIf = 6,
    LimitExcept = 7,
    Upstream = 8,
    Stream = 9,
    StreamServer = 10,
    StreamUpstream = 11,
    /// The inside of `map`, `geo`, `split_clients`, `types`, `charset_map`: entries, not directives (not in
    /// the table: nothing is allowed there).
    Opaque = 12,
    /// The inside of `map`: like [`Ctx::Opaque`], and each entry has two parts.
    Map = 13,
}

impl Ctx {
    /// The contexts the table has a column for, in bit order.
    const TABLE: [Ctx; 12] = [
        Ctx::Main,
        Ctx::Events,
        Ctx::Http,
        Ctx::Server,
        Ctx::Location,
        Ctx::ServerIf,
        Ctx::LocationIf,
        Ctx::LimitExcept,
        Ctx::Upstream,
        Ctx::Stream,
        Ctx::StreamServer,
        Ctx::StreamUpstream,
    ];

    /// This context's bit among [`DirectiveFlags::ALLOWED`] (none for [`Ctx::Opaque`] and [`Ctx::Map`]).
    const fn allowed_bit(self) -> u32 {
        match self {
            Ctx::Opaque | Ctx::Map => 0,
            ctx => 1 << ctx as u32,
        }
    }
}

/// What one probed release knows of one directive: whether it knows it at all, whether only with the stream
/// module loaded, the contexts where it is allowed and those where it opens a block.
///
/// The table stores the bits: [`DirectiveFlags::KNOWN`] (bit 31), [`DirectiveFlags::STREAM_MODULE`] (bit
/// 30), allowed in context `i` (bit `i`, 0–11, [`Ctx`] order), a block in context `i` (bit `12 + i`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirectiveFlags(u32);

impl DirectiveFlags {
    /// Not a directive of this release.
    pub(crate) const UNKNOWN: DirectiveFlags = DirectiveFlags(0);
    /// A directive of this release (set on every entry that is not [`DirectiveFlags::UNKNOWN`]).
    pub(crate) const KNOWN: DirectiveFlags = DirectiveFlags(1 << 31);
    /// Known only when the stream module is loaded (every context it is allowed in is a stream one).
    pub(crate) const STREAM_MODULE: DirectiveFlags = DirectiveFlags(1 << 30);
    /// The bits of the contexts a directive is allowed in.
    const ALLOWED: u32 = 0xfff;
    /// How far a context's block bit sits above its allowed bit.
    const BLOCK_SHIFT: u32 = 12;

    /// Allowed in `ctx` (nothing for [`Ctx::Opaque`] and [`Ctx::Map`], where no directive is).
    pub(crate) const fn allowed_in(ctx: Ctx) -> DirectiveFlags {
        DirectiveFlags(ctx.allowed_bit())
    }

    /// A block directive in `ctx` (`{` instead of `;`).
    pub(crate) const fn block_in(ctx: Ctx) -> DirectiveFlags {
        DirectiveFlags(ctx.allowed_bit() << Self::BLOCK_SHIFT)
    }

    /// Both sets of flags.
    pub(crate) const fn union(self, other: DirectiveFlags) -> DirectiveFlags {
        DirectiveFlags(self.0 | other.0)
    }

    /// Whether every flag of `other` is set.
    pub(crate) const fn contains(self, other: DirectiveFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the release knows the directive, given which modules are loaded.
    pub(crate) const fn is_known(self, stream_loaded: bool) -> bool {
        self.contains(Self::KNOWN) && (stream_loaded || !self.contains(Self::STREAM_MODULE))
    }

    /// Whether the directive is allowed in `ctx`.
    pub(crate) const fn allows(self, ctx: Ctx) -> bool {
        ctx.allowed_bit() != 0 && self.contains(Self::allowed_in(ctx))
    }

    /// Whether the directive opens a block in `ctx`.
    pub(crate) const fn is_block_in(self, ctx: Ctx) -> bool {
        ctx.allowed_bit() != 0 && self.contains(Self::block_in(ctx))
    }
}

impl BitOr for DirectiveFlags {
    type Output = DirectiveFlags;

    fn bitor(self, other: DirectiveFlags) -> DirectiveFlags {
        self.union(other)
    }
}

impl BitOrAssign for DirectiveFlags {
    fn bitor_assign(&mut self, other: DirectiveFlags) {
        *self = self.union(other);
    }
}

/// Lists the flags by name, as `bitflags` does: `KNOWN | Http | Server | block in Http`.
impl fmt::Debug for DirectiveFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<String> = Vec::new();
        if self.contains(Self::KNOWN) {
            names.push("KNOWN".into());
        }
        if self.contains(Self::STREAM_MODULE) {
            names.push("STREAM_MODULE".into());
        }
        names.extend(Ctx::TABLE.iter().filter(|&&c| self.allows(c)).map(|c| format!("{c:?}")));
        names.extend(Ctx::TABLE.iter().filter(|&&c| self.is_block_in(c)).map(|c| format!("block in {c:?}")));
        let rest =
            self.0 & !(Self::KNOWN.0 | Self::STREAM_MODULE.0 | Self::ALLOWED | Self::ALLOWED << Self::BLOCK_SHIFT);
        if rest != 0 {
            names.push(format!("{rest:#x}"));
        }
        if names.is_empty() {
            return f.write_str("DirectiveFlags(UNKNOWN)");
        }
        write!(f, "DirectiveFlags({})", names.join(" | "))
    }
}

/// The argument counts a directive accepts: bit `n` for `n` arguments, bit 8 for eight or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arity(u16);

impl Arity {
    /// Whether the directive accepts `n` arguments.
    pub(crate) const fn accepts(self, n: usize) -> bool {
        let bit = if n < 8 { n } else { 8 };
        self.0 >> bit & 1 == 1
    }
}

/// What release `release` (an index into [`crate::version::PROBED`]) knows of the directive `name`.
pub(crate) fn flags(name: &[u8], release: usize) -> DirectiveFlags {
    table::DIRECTIVES
        .binary_search_by(|(n, _)| n.cmp(&name))
        .map_or(DirectiveFlags::UNKNOWN, |i| table::DIRECTIVES[i].1[release])
}

/// The argument counts the newest probed release accepts for the non-block directive `name`, when probed.
pub(crate) fn arity(name: &[u8]) -> Option<Arity> {
    table::ARGUMENTS.binary_search_by(|(n, _)| n.cmp(&name)).ok().map(|i| table::ARGUMENTS[i].1)
}

/// Whether nginx refuses to see the directive `name` twice in one block (`"x" directive is duplicate`).
pub(crate) fn is_single(name: &[u8]) -> bool {
    table::SINGLE.binary_search(&name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::PROBED;

    /// The generator's bit layout is the one [`DirectiveFlags`] reads: directives whose places every nginx
    /// release agrees on, read through the type.
    #[test]
    fn the_table_reads_as_nginx_places_directives() {
        for release in 0..PROBED.len() {
            let events = flags(b"events", release);
            assert_eq!(
                events,
                DirectiveFlags::KNOWN | DirectiveFlags::allowed_in(Ctx::Main) | DirectiveFlags::block_in(Ctx::Main)
            );
            let upstream = flags(b"upstream", release);
            for ctx in [Ctx::Http, Ctx::Stream] {
                assert!(upstream.allows(ctx) && upstream.is_block_in(ctx), "{upstream:?}");
            }
            assert!(!upstream.allows(Ctx::Server) && upstream.is_known(false), "{upstream:?}");
            let hash = flags(b"hash", release);
            assert!(hash.allows(Ctx::Upstream) && hash.allows(Ctx::StreamUpstream) && !hash.is_block_in(Ctx::Upstream));
            let stream = flags(b"stream", release);
            assert!(stream.is_known(true) && !stream.is_known(false), "{stream:?}");
            assert!(stream.is_block_in(Ctx::Main));
            assert_eq!(flags(b"no_such_directive", release), DirectiveFlags::UNKNOWN);
            assert!(!flags(b"include", release).allows(Ctx::Opaque));
        }
        assert!(arity(b"hash").is_some_and(|a| a.accepts(1) && a.accepts(2) && !a.accepts(0) && !a.accepts(3)));
        assert!(arity(b"root").is_some_and(|a| a.accepts(1) && !a.accepts(0) && !a.accepts(2)));
        assert!(is_single(b"root") && !is_single(b"server"));
    }

    /// Every entry is either unknown or marked known, so "known" is one bit; a stream-module entry is
    /// allowed only in stream contexts.
    #[test]
    fn every_entry_is_unknown_or_known() {
        let stream = [Ctx::Stream, Ctx::StreamServer, Ctx::StreamUpstream];
        for (name, columns) in table::DIRECTIVES {
            for &f in columns {
                let name = String::from_utf8_lossy(name);
                assert!(f == DirectiveFlags::UNKNOWN || f.contains(DirectiveFlags::KNOWN), "{name}: {f:?}");
                if f.contains(DirectiveFlags::STREAM_MODULE) && *name != *"stream" {
                    assert!(Ctx::TABLE.iter().all(|&c| !f.allows(c) || stream.contains(&c)), "{name}: {f:?}");
                }
            }
        }
    }
}
