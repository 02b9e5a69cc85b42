//! nginx's error output, shortened for a fault report.

/// How many lines of nginx's error log a fault report shows.
pub const LOG_TAIL_LINES: usize = 20;

/// The last [`LOG_TAIL_LINES`] relevant lines of nginx's error output: its `[emerg]`, `[alert]`, `[crit]`,
/// `[error]` and `[warn]` lines (all lines when it printed none of those), never the whole log.
pub fn log_tail(logs: &str) -> String {
    const LEVELS: [&str; 5] = ["[emerg]", "[alert]", "[crit]", "[error]", "[warn]"];
    let lines: Vec<&str> = logs.lines().collect();
    let relevant: Vec<&str> = lines.iter().copied().filter(|l| LEVELS.iter().any(|lv| l.contains(lv))).collect();
    let chosen = if relevant.is_empty() { lines } else { relevant };
    let skipped = chosen.len().saturating_sub(LOG_TAIL_LINES);
    let mut out = String::new();
    if skipped > 0 {
        out.push_str(&format!("[... {skipped} earlier lines]\n"));
    }
    for line in &chosen[skipped..] {
        out.push_str(line);
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("(nginx printed nothing)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tail_keeps_the_last_relevant_lines() {
        let mut log = String::from("2026/12/01 [notice] 1#1: start worker process 2\n");
        for i in 1..=25 {
            log.push_str(&format!("2026/12/01 [error] 2#2: *{i} connect() failed\n"));
            log.push_str("2026/12/01 [info] 2#2: client closed keepalive connection\n");
        }
        let tail = log_tail(&log);
        let lines: Vec<&str> = tail.lines().collect();
        assert_eq!(lines.len(), LOG_TAIL_LINES + 1);
        assert_eq!(lines[0], "[... 5 earlier lines]");
        assert!(lines[1].contains("*6 connect()") && lines[20].contains("*25 connect()"));
        assert!(lines[1..].iter().all(|l| l.contains("[error]")));
        assert_eq!(log_tail("a\nb\n"), "a\nb\n", "without levelled lines, the last lines as they are");
        assert_eq!(log_tail(""), "(nginx printed nothing)\n");
    }
}
