//! Names matched the way nginx's combined hash matches them (algorithm §12.8): `server_name` values and the
//! keys of a `map` block with `hostnames`. An exact name first, then the longest leading wildcard
//! (`*.example.com`, `.example.com`), then the longest trailing wildcard (`www.example.*`)
//! (`ngx_hash_find_combined`, `ngx_hash_find_wc_head`, `ngx_hash_find_wc_tail` in src/core/ngx_hash.c;
//! the forms a key may take are `ngx_hash_add_key`'s; all modelled releases).

/// One name as nginx stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamePattern {
    /// An exact name, lower-cased.
    Exact(Vec<u8>),
    /// `*.example.com` (`apex: false`: subdomains only) or `.example.com` (`apex: true`: `example.com`
    /// too); the domain without the leading `*.` or `.`, lower-cased.
    Leading {
        /// `example.com`.
        domain: Vec<u8>,
        /// The `.example.com` form.
        apex: bool,
    },
    /// `www.example.*`: the part before `.*`, lower-cased.
    Trailing(Vec<u8>),
}

/// `ngx_hash_add_key` declined the name (nginx: `invalid hostname or wildcard "…"` in a `map`, `invalid
/// server name or wildcard "…"` in `server_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declined;

impl NamePattern {
    /// A name where wildcards are allowed (`NGX_HASH_WILDCARD_KEY`): at most one `*`, no `..`, no NUL;
    /// a `*` only as the first label (`*.`) or the last (`.*`).
    ///
    /// # Errors
    ///
    /// [`Declined`] where `ngx_hash_add_key` returns `NGX_DECLINED`.
    pub fn wildcard(name: &[u8]) -> Result<NamePattern, Declined> {
        let stars = name.iter().filter(|&&c| c == b'*').count();
        if stars > 1 || name.windows(2).any(|w| w == b"..") || name.contains(&0) {
            return Err(Declined);
        }
        let low = name.to_ascii_lowercase();
        if low.len() > 1 && low[0] == b'.' {
            return Ok(NamePattern::Leading { domain: low[1..].to_vec(), apex: true });
        }
        if low.len() > 2 {
            if let Some(domain) = low.strip_prefix(b"*.") {
                return Ok(NamePattern::Leading { domain: domain.to_vec(), apex: false });
            }
            if let Some(prefix) = low.strip_suffix(b".*") {
                return Ok(NamePattern::Trailing(prefix.to_vec()));
            }
        }
        if stars > 0 {
            return Err(Declined);
        }
        Ok(NamePattern::Exact(low))
    }

    /// A name where wildcards are not allowed: always exact.
    pub fn exact(name: &[u8]) -> NamePattern {
        NamePattern::Exact(name.to_ascii_lowercase())
    }

    /// The key `ngx_hash_add_key` checks for conflicts: two names with the same key clash
    /// (`.example.com` clashes with `example.com` and with `*.example.com`).
    pub fn clashes_with(&self, other: &NamePattern) -> bool {
        use NamePattern::*;
        match (self, other) {
            (Exact(a), Exact(b)) | (Trailing(a), Trailing(b)) => a == b,
            (Leading { domain: a, .. }, Leading { domain: b, .. }) => a == b,
            (Leading { domain, apex: true }, Exact(e)) | (Exact(e), Leading { domain, apex: true }) => domain == e,
            _ => false,
        }
    }
}

/// The entry whose pattern nginx's combined hash finds for `name` (already lower-cased by the caller, as
/// nginx lower-cases before it looks): the first exact match, else the leading wildcard with the longest
/// domain, else the trailing wildcard with the longest prefix; `None` if none matches. Among equally long
/// matches the first wins (nginx refuses or ignores the later one as conflicting).
pub fn find<'p, T>(entries: impl IntoIterator<Item = (&'p NamePattern, T)> + Clone, name: &[u8]) -> Option<T> {
    if let Some((_, t)) = entries.clone().into_iter().find(|(p, _)| matches!(p, NamePattern::Exact(e) if e == name)) {
        return Some(t);
    }
    if name.is_empty() {
        return None;
    }
    let longest = |score: &dyn Fn(&NamePattern) -> Option<usize>| {
        let mut best: Option<(usize, T)> = None;
        for (p, t) in entries.clone() {
            if let Some(len) = score(p)
                && best.as_ref().is_none_or(|(b, _)| len > *b)
            {
                best = Some((len, t));
            }
        }
        best.map(|(_, t)| t)
    };
    let leading = longest(&|p| match p {
        // `*.example.com` matches whatever ends in `.example.com` (even the bare `.example.com`).
        NamePattern::Leading { domain, apex } => {
            let dotted =
                name.len() > domain.len() && name.ends_with(domain) && name[name.len() - domain.len() - 1] == b'.';
            (dotted || (*apex && name == domain.as_slice())).then_some(domain.len())
        }
        _ => None,
    });
    if leading.is_some() {
        return leading;
    }
    longest(&|p| match p {
        // `www.example.*` matches whatever starts with `www.example.` (a label after it may be empty).
        NamePattern::Trailing(prefix) => {
            (name.len() > prefix.len() && name.starts_with(prefix) && name[prefix.len()] == b'.')
                .then_some(prefix.len())
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick<'a>(patterns: &'a [(&str, &'a str)], name: &str) -> Option<&'a str> {
        let parsed: Vec<(NamePattern, &str)> =
            patterns.iter().map(|(p, v)| (NamePattern::wildcard(p.as_bytes()).unwrap(), *v)).collect();
        find(parsed.iter().map(|(p, v)| (p, *v)), name.as_bytes())
    }

    #[test]
    fn forms() {
        assert_eq!(
            NamePattern::wildcard(b"*.Ex.com"),
            Ok(NamePattern::Leading { domain: b"ex.com".to_vec(), apex: false })
        );
        assert_eq!(
            NamePattern::wildcard(b".ex.com"),
            Ok(NamePattern::Leading { domain: b"ex.com".to_vec(), apex: true })
        );
        assert_eq!(NamePattern::wildcard(b"www.ex.*"), Ok(NamePattern::Trailing(b"www.ex".to_vec())));
        assert_eq!(NamePattern::wildcard(b"a.*.com"), Err(Declined));
        assert_eq!(NamePattern::wildcard(b"*.*"), Err(Declined));
        assert_eq!(NamePattern::wildcard(b"a..b"), Err(Declined));
        assert_eq!(NamePattern::wildcard(b"*"), Err(Declined));
        assert_eq!(NamePattern::wildcard(b"."), Ok(NamePattern::Exact(b".".to_vec())));
    }

    #[test]
    fn lookup_order() {
        let p = [("*.example.com", "star"), (".a.example.com", "dot-a"), ("www.*", "www"), ("www.example.*", "wwwex")];
        assert_eq!(pick(&p, "x.example.com"), Some("star"));
        assert_eq!(pick(&p, ".example.com"), Some("star"));
        assert_eq!(pick(&p, "example.com"), None);
        assert_eq!(pick(&p, "a.example.com"), Some("dot-a"));
        assert_eq!(pick(&p, "b.a.example.com"), Some("dot-a"));
        assert_eq!(pick(&p, "www.example.com"), Some("star"), "a leading wildcard before a trailing one");
        assert_eq!(pick(&p, "www.example.org"), Some("wwwex"));
        assert_eq!(pick(&p, "www.examples.org"), Some("www"));
        assert_eq!(pick(&p, "www"), None);
        assert_eq!(pick(&p, "xexample.com"), None);
    }
}
