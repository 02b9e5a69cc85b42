//! How a proof ends: the one verdict of every driver (`verify` on random topologies, `verify --config`,
//! a shim), computed by one rule from what the proof counted.

/// How a proof ends; [`Verdict::code`] is the exit code of `nginx-ketama verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Exit 0: requests were compared and every one matched.
    Proven,
    /// Exit 1: nginx and the implementation under test differed on at least one request (mismatches win
    /// over faults).
    Mismatches,
    /// Exit 1: the shim under test broke the protocol (`ports/SHIM.md`): no answer in time, a line that is
    /// not an answer, an extra line, an attempt that is no peer's, an exit. The implementation under test
    /// failed, as with a mismatch — not the harness, so not exit 3 (which says "retry, nothing was
    /// learnt"); it wins over harness faults.
    ProtocolFault,
    /// Exit 2: what was asked for is impossible (or is nothing at all): a build whose version is not
    /// modelled, a configuration none of whose upstreams can be hosted here. Refused, not guessed.
    Usage,
    /// Exit 3: the harness could not run or finish a check (no nginx, nginx not starting or not answering,
    /// a socket error), or nothing was compared. Never a pass, and never called a mismatch.
    HarnessFault,
}

impl Verdict {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Verdict::Proven => 0,
            Verdict::Mismatches | Verdict::ProtocolFault => 1,
            Verdict::Usage => 2,
            Verdict::HarnessFault => 3,
        }
    }

    /// How the reports and the soak table name it (`proven`, `protocol fault`).
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Proven => "proven",
            Verdict::Mismatches => "mismatches",
            Verdict::ProtocolFault => "protocol fault",
            Verdict::Usage => "usage error",
            Verdict::HarnessFault => "harness fault",
        }
    }

    /// The verdict of a proof that counted `tally`: mismatches first, then a broken protocol, then harness
    /// faults; a proof that compared nothing is a usage error when nothing could be hosted, else a harness
    /// fault; only then proven.
    pub fn of(tally: &Tally) -> Verdict {
        if tally.mismatches > 0 {
            Verdict::Mismatches
        } else if tally.protocol_faults > 0 {
            Verdict::ProtocolFault
        } else if tally.harness_faults > 0 {
            Verdict::HarnessFault
        } else if tally.compared == 0 {
            if tally.unhostable_only { Verdict::Usage } else { Verdict::HarnessFault }
        } else {
            Verdict::Proven
        }
    }
}

/// What a proof counted, as [`Verdict::of`] judges it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests (or stream sessions) on which nginx and the implementation under test differed.
    pub mismatches: usize,
    /// Checks the implementation under test (a shim) broke the protocol in.
    pub protocol_faults: usize,
    /// Checks the harness could not run to the end.
    pub harness_faults: usize,
    /// Requests and stream sessions compared (not counting those nginx's clock made not comparable).
    pub compared: usize,
    /// Nothing was run because nothing asked for can be hosted here (`verify --config` on a config whose
    /// every upstream is refused by the namespace plan).
    pub unhostable_only: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_count_decides_in_the_documented_order() {
        let proven = Tally { compared: 10, ..Tally::default() };
        assert_eq!(Verdict::of(&proven), Verdict::Proven);
        let everything = Tally { mismatches: 1, protocol_faults: 1, harness_faults: 1, ..proven };
        assert_eq!(Verdict::of(&everything), Verdict::Mismatches);
        assert_eq!(Verdict::of(&Tally { mismatches: 0, ..everything }), Verdict::ProtocolFault);
        assert_eq!(Verdict::of(&Tally { mismatches: 0, protocol_faults: 0, ..everything }), Verdict::HarnessFault);
        // Nothing compared is never a pass.
        assert_eq!(Verdict::of(&Tally::default()), Verdict::HarnessFault);
        assert_eq!(Verdict::of(&Tally { unhostable_only: true, ..Tally::default() }), Verdict::Usage);
        // A fault wins over "nothing could be hosted".
        assert_eq!(
            Verdict::of(&Tally { unhostable_only: true, harness_faults: 1, ..Tally::default() }),
            Verdict::HarnessFault
        );
    }

    #[test]
    fn exit_codes_are_the_documented_ones() {
        let codes: Vec<u8> =
            [Verdict::Proven, Verdict::Mismatches, Verdict::ProtocolFault, Verdict::Usage, Verdict::HarnessFault]
                .map(Verdict::code)
                .to_vec();
        assert_eq!(codes, [0, 1, 1, 2, 3]);
    }
}
