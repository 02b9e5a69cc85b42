//! Gates: limits an analysis command's answer is held to (`diff --fail-moved-above`, `share
//! --fail-skew-above`, `compare --fail-agreement-below`), so that a pipeline step fails when a change moves
//! too much. The command writes its answer whole, then each limit crossed is one line on stderr naming the
//! limit and by how much, and the command exits 1 ([`Verdict`]).
//!
//! The thresholds parse here, once: a [`Percent`] (`20%`, or the fraction `0.2`) and a [`Ratio`] (`1.25`);
//! a value that does not parse is a usage error (exit 2) that names the accepted forms.

use std::fmt;
use std::io::ErrorKind;

/// What the limits made of an answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// No limit asked for was crossed (or none was asked for): exit 0.
    Within,
    /// These limits were crossed, one line each: exit 1.
    Crossed(Vec<String>),
}

impl Verdict {
    /// The verdict of several checks: every line crossed.
    pub(crate) fn of(crossed: impl IntoIterator<Item = Option<String>>) -> Verdict {
        let lines: Vec<String> = crossed.into_iter().flatten().collect();
        if lines.is_empty() { Verdict::Within } else { Verdict::Crossed(lines) }
    }
}

/// The verdict of an answer that was being written (`written`): a reader that went away early (`| head
/// -1`), not an error for a command without limits, does not hide a limit crossed.
pub(crate) fn after(verdict: Verdict, written: anyhow::Result<()>) -> anyhow::Result<Verdict> {
    match written {
        Ok(()) => Ok(verdict),
        Err(e)
            if matches!(verdict, Verdict::Crossed(_)) && crate::stdout::failure(&e) == Some(ErrorKind::BrokenPipe) =>
        {
            Ok(verdict)
        }
        Err(e) => Err(e),
    }
}

/// A part of a whole, from 0 to 1: written `20%` (or `20.5%`) or as the fraction `0.2`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) struct Percent(f64);

/// What a percentage threshold accepts, for the error of one that does not parse.
const PERCENT_FORMS: &str = "a percentage from 0% to 100% (e.g. 20% or 12.5%) or a fraction from 0 to 1 (e.g. 0.2)";

impl Percent {
    /// As a fraction of 1.
    pub(crate) fn fraction(self) -> f64 {
        self.0
    }

    /// `value` (`20%`, `0.2`).
    ///
    /// # Errors
    ///
    /// Anything else, with the accepted forms.
    pub(crate) fn parse(value: &str) -> Result<Percent, String> {
        let (number, scale) = match value.strip_suffix('%') {
            Some(number) => (number, 100.0),
            None => (value, 1.0),
        };
        match number.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && (0.0..=scale).contains(&x) && !number.trim().is_empty() => Ok(Percent(x / scale)),
            _ => Err(format!("{value:?} is not a threshold: expected {PERCENT_FORMS}")),
        }
    }
}

/// As the tables show a part: three decimals, `20.000%`; a limit the user wrote is shown with no trailing
/// zeros (`20%`).
impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", trimmed(self.0 * 100.0))
    }
}

/// A ratio of at least 1, e.g. `1.25`: how many times its fair share a server may answer.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) struct Ratio(f64);

/// What a ratio threshold accepts.
const RATIO_FORMS: &str = "a ratio of at least 1, the largest share over the fair share (e.g. 1.25)";

impl Ratio {
    /// The ratio.
    pub(crate) fn value(self) -> f64 {
        self.0
    }

    /// `value` (`1.25`).
    ///
    /// # Errors
    ///
    /// Anything else, with the accepted form.
    pub(crate) fn parse(value: &str) -> Result<Ratio, String> {
        match value.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 1.0 => Ok(Ratio(x)),
            _ => Err(format!("{value:?} is not a threshold: expected {RATIO_FORMS}")),
        }
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&trimmed(self.0))
    }
}

/// `x` with at most three decimals and no trailing zeros: `20`, `12.5`, `1.25`.
fn trimmed(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// `part` of `whole` as the tables show it: `15.193%`.
fn shown(part: f64) -> String {
    format!("{:.3}%", part * 100.0)
}

/// `--fail-moved-above LIMIT` and the part that moved (`moved` of `total`, over `what`): the line if it
/// is above the limit.
pub(crate) fn moved_above(limit: Percent, moved: u64, total: u64, what: &str) -> Option<String> {
    let part = if total == 0 { 0.0 } else { moved as f64 / total as f64 };
    (part > limit.fraction()).then(|| {
        format!(
            "--fail-moved-above {limit} crossed: {} of {what} moved ({moved} of {total}), {} points above the limit",
            shown(part),
            trimmed3((part - limit.fraction()) * 100.0)
        )
    })
}

/// `--fail-agreement-below LIMIT` and the part both implementations send to the same server (`agree` of
/// `total`, over `what`, against `other`): the line if it is below the limit.
pub(crate) fn agreement_below(limit: Percent, agree: u64, total: u64, what: &str, other: &str) -> Option<String> {
    let part = if total == 0 { 0.0 } else { agree as f64 / total as f64 };
    (part < limit.fraction()).then(|| {
        format!(
            "--fail-agreement-below {limit} crossed: {other} agrees with nginx on {} of {what} ({agree} of {total}), \
             {} points below the limit",
            shown(part),
            trimmed3((limit.fraction() - part) * 100.0)
        )
    })
}

/// `--fail-skew-above LIMIT` and the most loaded server (`server`, `skew` times its fair share, over
/// `what`): the line if it is above the limit.
pub(crate) fn skew_above(limit: Ratio, server: &str, skew: f64, what: &str) -> Option<String> {
    (skew > limit.value()).then(|| {
        format!(
            "--fail-skew-above {limit} crossed: {server} answers {} times its fair share of {what}, {} above the limit",
            trimmed3(skew),
            trimmed3(skew - limit.value())
        )
    })
}

/// `x` with three decimals.
fn trimmed3(x: f64) -> String {
    format!("{x:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_takes_a_percentage_or_a_fraction_and_names_both_when_it_cannot() {
        assert_eq!(Percent::parse("20%"), Ok(Percent(0.2)));
        assert_eq!(Percent::parse("12.5%"), Ok(Percent(0.125)));
        assert_eq!(Percent::parse("0.2"), Ok(Percent(0.2)));
        assert_eq!(Percent::parse("100%"), Ok(Percent(1.0)));
        assert_eq!(Percent::parse("0"), Ok(Percent(0.0)));
        for bad in ["20", "120%", "-1%", "%", "", "twenty", "NaN", "inf%", "1e999"] {
            let e = Percent::parse(bad).unwrap_err();
            assert!(e.contains("20% or 12.5%") && e.contains("0.2"), "{bad}: {e}");
        }
        assert_eq!(Percent(0.2).to_string(), "20%");
        assert_eq!(Percent(0.125).to_string(), "12.5%");
    }

    #[test]
    fn ratio_is_at_least_one() {
        assert_eq!(Ratio::parse("1.25"), Ok(Ratio(1.25)));
        assert_eq!(Ratio::parse("1"), Ok(Ratio(1.0)));
        for bad in ["0.9", "25%", "", "x", "inf"] {
            assert!(Ratio::parse(bad).unwrap_err().contains("at least 1"), "{bad}");
        }
        assert_eq!(Ratio(1.25).to_string(), "1.25");
    }

    /// A limit is crossed only past it: at the limit the answer is within.
    #[test]
    fn a_limit_is_crossed_only_past_it() {
        let limit = Percent(0.25);
        assert_eq!(moved_above(limit, 1, 4, "x"), None);
        let line = moved_above(limit, 2, 4, "the hash space").unwrap();
        assert_eq!(
            line,
            "--fail-moved-above 25% crossed: 50.000% of the hash space moved (2 of 4), 25.000 points above the limit"
        );
        assert_eq!(agreement_below(limit, 1, 4, "x", "y"), None);
        assert!(agreement_below(limit, 0, 4, "x", "y").unwrap().contains("25.000 points below"));
        assert_eq!(skew_above(Ratio(1.25), "a", 1.25, "x"), None);
        assert!(skew_above(Ratio(1.25), "a", 1.5, "x").unwrap().ends_with("0.250 above the limit"));
        assert_eq!(Verdict::of([None, None]), Verdict::Within);
        assert_eq!(Verdict::of([None, Some("l".into())]), Verdict::Crossed(vec!["l".into()]));
    }
}
