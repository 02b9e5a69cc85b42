//! Reading files and expanding `include` wildcards the way glob(3) does for nginx.

use super::error::{ConfigError, ErrorKind, Location};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most configuration text (all files together) the reader accepts.
///
/// NGINX-DIFF: nginx has no limit; it reads each file in 4 KiB buffers and stops at the first error.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// Reads a whole file, at most `budget` bytes; like nginx, only as many bytes as the file's size says
/// (so `/dev/zero` and other character devices read as empty).
pub(crate) fn read(path: &Path, at: Option<&Location>, budget: &mut u64) -> Result<Vec<u8>, ConfigError> {
    let mut file = std::fs::File::open(path).map_err(|e| ConfigError::io("open", path, at, e))?;
    let meta = file.metadata().map_err(|e| ConfigError::io("fstat", path, None, e))?;
    let size = meta.len();
    if size > *budget {
        let location = at.cloned().unwrap_or_else(|| Location { file: path.to_path_buf().into(), line: 1 });
        return Err(ConfigError::invalid(ErrorKind::TooLarge(MAX_CONFIG_BYTES), location));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    (&mut file).take(size).read_to_end(&mut bytes).map_err(|e| ConfigError::io("pread", path, None, e))?;
    *budget -= bytes.len() as u64;
    Ok(bytes)
}

/// Whether an include argument is a pattern (nginx looks for any of `*?[`).
pub(crate) fn has_wildcard(s: &[u8]) -> bool {
    s.iter().any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// Expands a pattern like glob(3) with no flags: wildcards in any component, names sorted bytewise (the C
/// locale), a leading `.` matched only by a literal `.`, no match is an empty list.
pub(crate) fn glob(pattern: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = pattern.as_os_str().as_bytes();
    let absolute = bytes.first() == Some(&b'/');
    let mut current: Vec<PathBuf> = vec![if absolute { PathBuf::from("/") } else { PathBuf::new() }];
    let parts: Vec<&[u8]> = bytes.split(|&b| b == b'/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for base in &current {
            if !has_wildcard(part) {
                let p = base.join(std::ffi::OsStr::from_bytes(part));
                if last || p.is_dir() {
                    next.push(p);
                }
                continue;
            }
            let dir = if base.as_os_str().is_empty() { Path::new(".") } else { base.as_path() };
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            let mut names: Vec<Vec<u8>> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().as_bytes().to_vec())
                .filter(|n| (n[0] != b'.' || part[0] == b'.') && wildcard_match(part, n))
                .collect();
            names.sort();
            for n in names {
                let p = base.join(std::ffi::OsStr::from_bytes(&n));
                if last || p.is_dir() {
                    next.push(p);
                }
            }
        }
        current = next;
    }
    if parts.iter().any(|p| has_wildcard(p)) {
        current.retain(|p| std::fs::symlink_metadata(p).is_ok());
        current.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
    }
    current
}

/// `*`, `?` and `[...]` (with `!`/`^` negation and ranges) over bytes, like fnmatch(3) without flags.
///
/// Greedy with one backtrack point for the last `*`, so time is at most `pattern × name`, never exponential.
pub(crate) fn wildcard_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, len)) = class(&p[pi..], s[si]) {
                        if hit {
                            pi += len;
                            si += 1;
                            continue;
                        }
                    } else if s[si] == b'[' {
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
                b'\\' if pi + 1 < p.len() && p[pi + 1] == s[si] => {
                    pi += 2;
                    si += 1;
                    continue;
                }
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// A bracket expression at the start of `p`: whether `c` is in it and its length, or `None` if unclosed.
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            hit |= p[i] <= c && c <= p[i + 2];
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard_match(b"*.conf", b"a.conf"));
        assert!(!wildcard_match(b"*.conf", b"a.conf.bak"));
        assert!(wildcard_match(b"a?[0-9]", b"ab7"));
        assert!(!wildcard_match(b"a[!0-9]", b"a7"));
        assert!(wildcard_match(b"[]]x", b"]x"));
        assert!(wildcard_match(b"*a*b", b"xxaxxb"));
    }

    #[test]
    fn many_stars_are_fast() {
        let p = b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let s = vec![b'a'; 5000];
        let t = std::time::Instant::now();
        assert!(!wildcard_match(p, &s));
        assert!(t.elapsed().as_secs_f64() < 1.0);
    }
}
