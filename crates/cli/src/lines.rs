//! Reading lines of input the command does not control (keys on stdin or in `--keys FILE`, shim messages)
//! in bounded memory: a line is never held whole before its length is checked, so one endless line
//! (`--keys /dev/zero`) is an error naming its line, not a process that grows until the machine runs out.

use anyhow::{Context, Result};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// The longest key read: 16 MiB.
///
/// The limit is there to bound memory, and must never refuse a key nginx could hash. nginx builds a key
/// from the request: each request line or header field must fit in one `large_client_header_buffers`
/// buffer (8k by default; sites raise it to 16k–64k) or nginx answers 414/400. 16 MiB is far above any
/// of these and costs nothing until a key is that long.
pub(crate) const MAX_KEY_BYTES: usize = 16 << 20;

/// The longest shim protocol message `nginx-ketama shim` reads (64 MiB): far more than any upstream or
/// request the harness sends, whose topologies and keys are small.
#[cfg(feature = "live")]
pub(crate) const MAX_SHIM_MESSAGE_BYTES: usize = 4 * MAX_KEY_BYTES;

/// A buffered reader that hands out at most `max` bytes of one line (its `\n` excluded): reading past
/// that is an error naming the source and the line, e.g. `stdin:1: a key longer than 16 MiB (16777216
/// bytes)`. Lines are split on `\n` only.
#[derive(Debug)]
pub(crate) struct BoundedLines<R> {
    input: BufReader<R>,
    source: String,
    what: &'static str,
    max: usize,
    /// Lines finished so far.
    line: u64,
    /// Bytes of the current line handed out so far.
    taken: usize,
}

impl<R: Read> BoundedLines<R> {
    /// Lines of `input`, called `source` in messages (`stdin`, a file name), each one `what` (`a key`) of
    /// at most `max` bytes.
    pub(crate) fn new(input: R, source: impl Into<String>, what: &'static str, max: usize) -> BoundedLines<R> {
        BoundedLines {
            input: BufReader::with_capacity(64 * 1024, input),
            source: source.into(),
            what,
            max,
            line: 0,
            taken: 0,
        }
    }

    /// Reads the next line into `line` (cleared first) without its `\n`; `false` at the end of the input.
    ///
    /// # Errors
    ///
    /// A line longer than the limit, or a read error, each naming the source and the line.
    pub(crate) fn next_into(&mut self, line: &mut Vec<u8>) -> Result<bool> {
        line.clear();
        let n = match self.read_until(b'\n', line) {
            Ok(n) => n,
            // It names the source and the line already.
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<TooLong>()) => return Err(e.into()),
            Err(e) => return Err(anyhow::Error::from(e).context(format!("reading {}", self.source))),
        };
        if n == 0 {
            return Ok(false);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        Ok(true)
    }

    /// Whether no input is waiting in the buffer (the reader would have to wait for more).
    pub(crate) fn drained(&self) -> bool {
        self.input.buffer().is_empty()
    }
}

impl<R: Read> BufRead for BoundedLines<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let room = self.max - self.taken;
        let (line, max, source, what) = (self.line + 1, self.max, &self.source, self.what);
        let buf = self.input.fill_buf()?;
        // Hand out the rest of the current line only: up to and including its `\n`, within the limit.
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) if end <= room => Ok(&buf[..=end]),
            None if buf.len() <= room => Ok(buf),
            _ if room > 0 => Ok(&buf[..room]),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                TooLong(format!("{source}:{line}: {what} longer than {}", size(max))),
            )),
        }
    }

    fn consume(&mut self, n: usize) {
        // What fill_buf handed out holds at most one `\n`, as its last byte.
        if n > 0 && self.input.buffer()[n - 1] == b'\n' {
            self.line += 1;
            self.taken = 0;
        } else {
            self.taken += n;
        }
        self.input.consume(n);
    }
}

/// A line longer than the limit: `SOURCE:LINE: WHAT longer than SIZE`.
#[derive(Debug)]
struct TooLong(String);

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TooLong {}

/// `16 MiB (16777216 bytes)`, or `8 bytes`.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB ({bytes} bytes)", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

impl<R: Read> Read for BoundedLines<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// Streams the keys of `--keys FILE` (one per line, split on `\n` only; an empty line is the empty key; a
/// final newline does not start one more key, as `route` reads stdin) through `count`, one owned key at
/// a time: memory does not grow with the file.
///
/// # Errors
///
/// The file cannot be opened or read, or a line is longer than [`MAX_KEY_BYTES`].
pub(crate) fn count_keys<T>(path: &Path, count: impl FnOnce(&mut dyn Iterator<Item = Vec<u8>>) -> T) -> Result<T> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut lines = BoundedLines::new(file, path.display().to_string(), "a key", MAX_KEY_BYTES);
    let mut error = None;
    let mut keys = std::iter::from_fn(|| {
        let mut key = Vec::new();
        match lines.next_into(&mut key) {
            Ok(true) => Some(key),
            Ok(false) => None,
            Err(e) => {
                error = Some(e);
                None
            }
        }
    });
    let counted = count(&mut keys);
    match error {
        Some(e) => Err(e),
        None => Ok(counted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Result<Vec<Vec<u8>>> {
        let mut lines = BoundedLines::new(input, "keys.txt", "a key", max);
        let mut out = Vec::new();
        let mut line = Vec::new();
        while lines.next_into(&mut line)? {
            out.push(line.clone());
        }
        Ok(out)
    }

    #[test]
    fn lines_split_on_newline_only() {
        assert_eq!(all(b"a\r\n\nb", 8).unwrap(), [b"a\r".to_vec(), Vec::new(), b"b".to_vec()]);
        assert_eq!(all(b"a\n", 8).unwrap(), [b"a".to_vec()], "a final newline starts no key");
        assert!(all(b"", 8).unwrap().is_empty());
    }

    #[test]
    fn a_line_of_the_limit_is_read_and_one_byte_more_is_an_error_naming_its_line() {
        let ok = all(b"12345678\nabc\n12345678", 8).unwrap();
        assert_eq!(ok, [b"12345678".to_vec(), b"abc".to_vec(), b"12345678".to_vec()]);
        let e = all(b"1\n2\n123456789\n", 8).unwrap_err();
        assert_eq!(format!("{e:#}"), "keys.txt:3: a key longer than 8 bytes");
        let e = all(b"123456789", 8).unwrap_err();
        assert!(format!("{e:#}").contains("keys.txt:1: "), "{e:#}");
    }

    /// An endless line costs at most the limit and a buffer, whatever the reader's buffer size.
    #[test]
    fn an_endless_line_stops_at_the_limit() {
        let mut lines = BoundedLines::new(std::io::repeat(b'x'), "stdin", "a key", MAX_KEY_BYTES);
        let mut line = Vec::new();
        let e = lines.next_into(&mut line).unwrap_err();
        assert_eq!(format!("{e:#}"), "stdin:1: a key longer than 16 MiB (16777216 bytes)");
        assert_eq!(line.len(), MAX_KEY_BYTES);
    }

    /// `lines()` over it (the shim's reader) is bounded too.
    #[test]
    fn lines_of_text_are_bounded_too() {
        let input = BoundedLines::new(&b"{}\n0123456789\n"[..], "stdin", "a message", 4);
        // An error repeats on every call after it: the reader stops there.
        let lines: Vec<_> = input.lines().take(3).collect();
        assert_eq!(lines[0].as_ref().unwrap(), "{}");
        assert_eq!(lines[1].as_ref().unwrap_err().to_string(), "stdin:2: a message longer than 4 bytes");
        assert!(lines[2].is_err());
    }
}
