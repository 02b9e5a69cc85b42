//! Recording a catalog case on real nginx: start it (a local process in its own network namespace, or a
//! container of a local image) for the case's topology, send the keys, check that the recording is reproducible, and assemble the [`Record`].

use super::record_file::{PeerRecord, Record, Run, skeleton};
use super::snapshots::show;
use crate::catalog::{Case, UNIX_DIR};
use crate::nginx::build::Build;
use crate::nginx::instance::Instance;
use crate::nginx::log::log_tail;
use crate::run::client::{Method, Response, pipeline_methods};
use crate::run::clock::Window;
use crate::run::observation::Observation;
use crate::run::parity::start_resolving;
use crate::site::failures::Failures;
use crate::site::topology::Topology;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::time::Duration;

/// Holds an exclusive lock while the catalog runs: its fixed addresses and socket paths cannot be shared
/// by two recordings at once (the recorder and the live test). Released when dropped.
#[derive(Debug)]
pub struct CatalogLock(#[allow(dead_code)] std::fs::File);

/// Waits for the catalog lock (`/tmp/nginx-ketama-catalog.lock`).
///
/// # Errors
///
/// The lock file cannot be opened.
pub fn lock_catalog() -> Result<CatalogLock> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("nginx-ketama-catalog.lock"))
        .context("opening the catalog lock")?;
    // SAFETY: flock on a file descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        bail!("locking the catalog: {}", std::io::Error::last_os_error());
    }
    Ok(CatalogLock(f))
}

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn utc_today() -> String {
    utc_time(std::time::SystemTime::now())[..10].to_string()
}

/// A moment in UTC to the second, `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_time(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// Starts nginx for `topology` and, if it uses hostnames, rewrites their endpoints in the order nginx's own
/// resolver returned them (asked through probe upstreams in the same nginx).
/// A container brings its own [`UNIX_DIR`] (the Docker backend creates the directory of every unix
/// listener), `[::1]` and port 80 on a `lo` of its own.
fn start(build: &Build, topology: Topology, failures: Option<&Failures>) -> Result<(Box<dyn Instance>, Topology)> {
    if let Build::Local(_) = build {
        std::fs::create_dir_all(UNIX_DIR).with_context(|| format!("creating {UNIX_DIR}"))?;
        // nginx never unlinks a socket file left by an earlier (killed) instance; the catalog lock makes
        // these paths ours. The TCP addresses are nginx's alone: it runs in a network namespace of its own.
        for e in std::fs::read_dir(UNIX_DIR)?.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
    start_resolving(build, topology, true, failures)
}

/// The peers of `topology` in nginx's list order.
pub fn peers_of(topology: &Topology) -> Vec<PeerRecord> {
    topology
        .lines
        .iter()
        .flat_map(|l| {
            l.endpoints.iter().map(move |e| PeerRecord {
                server: l.server.clone(),
                address: e.name.clone(),
                weight: l.weight,
                down: l.down,
                backup: l.backup,
                max_fails: l.max_fails,
                fail_timeout: l.fail_timeout,
                refuses: l.dead,
                answer: None,
            })
        })
        .collect()
}

/// [`peers_of`] with each failing server's answer (`failures`).
pub fn failing_peers_of(topology: &Topology, failures: &Failures) -> Vec<PeerRecord> {
    peers_of(topology)
        .into_iter()
        .map(|p| PeerRecord { answer: failures.answers.get(&p.server).map(|a| a.word()), ..p })
        .collect()
}

/// The slack after a second boundary before a request of a clocked case goes out: nginx reads its clock
/// when the request arrives, a few milliseconds later, well inside the same second.
const CLOCK_SLACK: Duration = Duration::from_millis(200);

/// Sends `requests` one at a time, each when the wall clock (nginx's clock, read by the same kernel) is
/// [`CLOCK_SLACK`] into the second `at` seconds after the first request's; checks that nginx's own
/// [`Window`] for each was exactly that second.
fn send_clocked(
    instance: &dyn Instance,
    requests: &[(Method, &[u8], u64)],
    logs: &dyn Fn() -> String,
) -> Result<Vec<Response>> {
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    // Start just after a second boundary.
    let t = now();
    std::thread::sleep(Duration::from_secs(1) - Duration::from_nanos(u64::from(t.subsec_nanos())) + CLOCK_SLACK);
    let start = now().as_secs();
    let mut out = Vec::with_capacity(requests.len());
    for (i, &(method, key, at)) in requests.iter().enumerate() {
        let due = Duration::from_secs(start + at) + CLOCK_SLACK;
        let t = now();
        if t > due + Duration::from_millis(500) {
            bail!("request #{} of a clocked case is late: due at {due:?}, now {t:?} (the machine is too busy)", i + 1);
        }
        if due > t {
            std::thread::sleep(due - t);
        }
        let mut r = pipeline_methods(instance.net(), instance.http_front(), &[(method, key)], &mut |_| {})
            .with_context(|| format!("talking to nginx\nnginx's error log ends:\n{}", log_tail(&logs())))?;
        let r = r.pop().context("no response")?;
        let want = Window::at(start + at);
        if r.clock != Some(want) {
            bail!(
                "request #{} was meant for second {} of nginx's clock ({}), but nginx reports {:?}",
                i + 1,
                at,
                start + at,
                r.clock
            );
        }
        out.push(r);
    }
    Ok(out)
}

/// Sends the keys of `case` in `order` (indices into its keys), as the case says: pipelined, or one at a
/// time at set seconds; with `$upstream_status` in a case with failure kinds.
fn send(instance: &dyn Instance, case: &Case, order: &[usize], logs: &dyn Fn() -> String) -> Result<Vec<Observation>> {
    let requests: Vec<(Method, &[u8], u64)> = order
        .iter()
        .map(|&i| (case.keys[i].method, case.keys[i].key.as_slice(), case.keys[i].at.unwrap_or(0)))
        .collect();
    let responses = if case.clocked() {
        send_clocked(instance, &requests, logs)?
    } else {
        let plain: Vec<(Method, &[u8])> = requests.iter().map(|&(m, k, _)| (m, k)).collect();
        pipeline_methods(instance.net(), instance.http_front(), &plain, &mut |_| {})
            .with_context(|| format!("talking to nginx\nnginx's error log ends:\n{}", log_tail(&logs())))?
    };
    responses
        .into_iter()
        .map(|r| {
            Ok(Observation {
                status: r.status,
                upstream_addr: r.upstream_addr.context("a response without X-Upstream")?,
                upstream_status: if case.failures.is_some() {
                    Some(r.upstream_status.context("a response without X-Upstream-Status")?)
                } else {
                    None
                },
            })
        })
        .collect()
}

/// Records one case on one nginx: keys in order on a fresh nginx; then, to prove the stateless claim, the
/// keys in reverse order on another fresh nginx (a stateful case is recorded a second time in order, to
/// prove it is deterministic). Any difference is an error.
///
/// # Errors
///
/// nginx failing to start or answer, an address that maps to two server strings, or results that differ
/// between the two recordings.
pub fn record_run(build: &Build, case: &Case, date: &str) -> Result<Run> {
    let keys: Vec<Vec<u8>> = case.keys.iter().map(|k| k.key.clone()).collect();
    let once = |order_reversed: bool| -> Result<(Vec<PeerRecord>, Vec<Observation>)> {
        let (instance, topology) = start(build, case.topology.clone(), case.failures.as_ref())?;
        let logs = || instance.logs();
        let results = if order_reversed {
            let rev: Vec<usize> = (0..keys.len()).rev().collect();
            let mut r = send(instance.as_ref(), case, &rev, &logs)?;
            r.reverse();
            r
        } else {
            send(instance.as_ref(), case, &(0..keys.len()).collect::<Vec<_>>(), &logs)?
        };
        let peers = match &case.failures {
            Some(f) => failing_peers_of(&topology, f),
            None => peers_of(&topology),
        };
        Ok((peers, results))
    };
    let (peers, results) = once(false).with_context(|| format!("case {} on nginx {}", case.name, build.version()))?;
    let (peers2, results2) =
        once(!case.stateful).with_context(|| format!("case {} on nginx {} (2nd)", case.name, build.version()))?;
    if peers != peers2 {
        bail!("case {}: nginx {} resolved the peers differently on two starts", case.name, build.version());
    }
    let order = if case.stateful { "a second time in order" } else { "in reverse order" };
    for (i, (a, b)) in results.iter().zip(&results2).enumerate() {
        if a != b {
            bail!(
                "case {} on nginx {}: key #{} ({}) gave {:?} in order but {:?} {order}; the case is {} — fix the \
                 catalog",
                case.name,
                build.version(),
                i + 1,
                show(&keys[i]),
                a,
                b,
                if case.stateful { "not deterministic" } else { "not stateless" }
            );
        }
    }
    let mut by_addr: BTreeMap<&str, &str> = BTreeMap::new();
    for p in &peers {
        if let Some(prev) = by_addr.insert(&p.address, &p.server)
            && prev != p.server
        {
            bail!("case {}: address {} belongs to {prev:?} and {:?}", case.name, p.address, p.server);
        }
    }
    for r in &results {
        for a in r.attempts().0 {
            if !by_addr.contains_key(a) {
                bail!("case {}: nginx tried {a}, which is no configured peer ({})", case.name, r.upstream_addr);
            }
        }
    }
    Ok(Run {
        nginx: build.version(),
        package: build.package().unwrap_or_else(|| "unknown".to_string()),
        libc: build.libc_description(),
        recorded: date.to_string(),
        peers,
        results,
    })
}

/// Records `case` on every build and assembles its record.
///
/// # Errors
///
/// See [`record_run`].
pub fn record_case(builds: &[Build], case: &Case, date: &str) -> Result<Record> {
    let runs = builds.iter().map(|b| record_run(b, case, date)).collect::<Result<Vec<_>>>()?;
    Ok(Record { runs, ..skeleton(case) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_shape() {
        let d = utc_today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }

    #[test]
    fn utc_time_of_known_moments() {
        let at = |secs| utc_time(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // `date -u -d @1709251199`: the last second of 2024-02-29 (a leap day).
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(at(1_709_251_200), "2024-03-01T00:00:00Z");
    }
}
