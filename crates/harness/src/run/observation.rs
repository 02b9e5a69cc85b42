//! What one request ended as: the one observation type of runs, recording and replay, read from nginx's
//! status and `$upstream_addr` or made from a model's outcome.

use crate::site::topology::UPSTREAM;
use nginx_ketama::upstream::Upstream;
use nginx_ketama::worker::{self, Status};
use serde::{Deserialize, Serialize};

/// What one request ended as, read from its status and `$upstream_addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// A peer answered (200).
    Answered,
    /// Every attempt failed and the retries ran out (502 with the last error).
    Failed,
    /// nginx found no usable peer: `$upstream_addr` ends with the upstream name.
    NoLiveUpstreams,
}

impl Outcome {
    /// The outcome as written in fixtures and snapshots.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Failed => "failed",
            Outcome::NoLiveUpstreams => "noLiveUpstreams",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What nginx answered to one request (or what a model says it would): the one observation type of
/// recording and replay.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Observation {
    /// HTTP status.
    pub status: u16,
    /// `$upstream_addr` exactly as nginx reported it.
    pub upstream_addr: String,
    /// `$upstream_status` exactly as nginx reported it, where it is compared (runs with failure kinds);
    /// `None` elsewhere (records and refused-only runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_status: Option<String>,
}

impl Observation {
    /// The attempted addresses and the outcome.
    pub fn attempts(&self) -> (Vec<&str>, Outcome) {
        let mut parts: Vec<&str> =
            if self.upstream_addr.is_empty() { Vec::new() } else { self.upstream_addr.split(", ").collect() };
        if parts.last() == Some(&UPSTREAM) {
            parts.pop();
            (parts, Outcome::NoLiveUpstreams)
        } else if self.status == 200 {
            (parts, Outcome::Answered)
        } else {
            (parts, Outcome::Failed)
        }
    }

    /// The outcome alone.
    pub fn outcome(&self) -> Outcome {
        self.attempts().1
    }
}

/// What nginx answers when a request on `up` went as `out`: the status and `$upstream_addr` (attempted
/// addresses, plus the upstream name when nothing usable was left).
pub fn observation(up: &Upstream, out: &worker::Outcome) -> Observation {
    let mut names: Vec<&str> = out.attempts.iter().map(|&id| up.peer(id).name()).collect();
    if out.status == Status::NoLiveUpstreams {
        names.push(UPSTREAM);
    }
    Observation {
        status: if out.status == Status::Answered { 200 } else { 502 },
        upstream_addr: names.join(", "),
        upstream_status: None,
    }
}

/// [`observation`] for a run with failure kinds: the client's status as the library says (the passed
/// response's, or nginx's own 502/504) and `$upstream_status` (one entry per attempt, plus nginx's 502 when
/// nothing usable was left).
pub fn failure_observation(up: &Upstream, out: &worker::Outcome) -> Observation {
    let mut statuses: Vec<String> = out.results.iter().map(|r| r.upstream_status.to_string()).collect();
    if out.status == Status::NoLiveUpstreams {
        statuses.push("502".into());
    }
    Observation { status: out.client_status, upstream_status: Some(statuses.join(", ")), ..observation(up, out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_from_upstream_addr() {
        let o = |status, a: &str| Observation { status, upstream_addr: a.to_string(), upstream_status: None };
        assert_eq!(o(200, "127.0.0.1:1").attempts(), (vec!["127.0.0.1:1"], Outcome::Answered));
        assert_eq!(o(502, "a:1, b:2").attempts(), (vec!["a:1", "b:2"], Outcome::Failed));
        assert_eq!(o(502, "a:1, parity").attempts(), (vec!["a:1"], Outcome::NoLiveUpstreams));
        assert_eq!(o(502, "parity").attempts(), (vec![], Outcome::NoLiveUpstreams));
    }

    #[test]
    fn outcome_names_are_serde_spellings() {
        for o in [Outcome::Answered, Outcome::Failed, Outcome::NoLiveUpstreams] {
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{o}\""));
        }
    }
}
