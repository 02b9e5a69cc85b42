//! Hostname resolution as nginx does it at startup (`ngx_inet_resolve_host`).
//!
//! nginx calls `getaddrinfo(host, NULL, {AF_UNSPEC, SOCK_STREAM, AI_ADDRCONFIG})` and keeps every IPv4 and
//! IPv6 result **in the resolver's order** (since 1.15.10). Each address becomes one peer carrying the line's
//! server string. This module makes the same call, so the peer order matches nginx's on the same machine.

use std::ffi::{CStr, CString};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a name did not resolve. `Display` uses nginx's wording.
///
/// # Example
///
/// ```
/// let err = nginx_ketama::resolve::resolve_host("no-such-host.invalid").unwrap_err();
/// assert_eq!(err.to_string(), "host not found");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// getaddrinfo failed or returned no IPv4/IPv6 address.
    #[error("host not found")]
    HostNotFound {
        /// The resolver's own message, if it gave one.
        detail: String,
    },
}

/// Resolves `host` like nginx at startup and returns its addresses in the resolver's order.
///
/// # Errors
///
/// [`ResolveError::HostNotFound`] when getaddrinfo fails or yields no IP address.
///
/// # Example
///
/// ```
/// let addrs = nginx_ketama::resolve::resolve_host("127.0.0.1")?;
/// assert_eq!(addrs, ["127.0.0.1".parse::<std::net::IpAddr>()?]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn resolve_host(host: &str) -> Result<Vec<IpAddr>, ResolveError> {
    let c_host = CString::new(host).map_err(|_| ResolveError::HostNotFound { detail: "NUL in host name".into() })?;
    // SAFETY: an all-zero addrinfo is a valid "no hints" value; we then set the fields nginx sets.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = libc::AF_UNSPEC;
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_flags = libc::AI_ADDRCONFIG;
    let mut res: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: valid NUL-terminated host, null service, valid hints, and an out-pointer we free below.
    let rc = unsafe { libc::getaddrinfo(c_host.as_ptr(), std::ptr::null(), &hints, &mut res) };
    if rc != 0 {
        // SAFETY: gai_strerror returns a static NUL-terminated string for any code.
        let detail = unsafe { CStr::from_ptr(libc::gai_strerror(rc)) }.to_string_lossy().into_owned();
        return Err(ResolveError::HostNotFound { detail });
    }
    let mut out = Vec::new();
    let mut rp = res;
    while !rp.is_null() {
        // SAFETY: rp walks the list getaddrinfo returned, which stays valid until freeaddrinfo.
        let ai = unsafe { &*rp };
        match ai.ai_family {
            libc::AF_INET => {
                // SAFETY: for AF_INET, ai_addr points to a sockaddr_in.
                let sin = unsafe { &*(ai.ai_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
            }
            libc::AF_INET6 => {
                // SAFETY: for AF_INET6, ai_addr points to a sockaddr_in6.
                let sin6 = unsafe { &*(ai.ai_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
            _ => {}
        }
        rp = ai.ai_next;
    }
    // SAFETY: res came from a successful getaddrinfo and is freed once.
    unsafe { libc::freeaddrinfo(res) };
    if out.is_empty() {
        return Err(ResolveError::HostNotFound { detail: "no IPv4 or IPv6 address".into() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_failures() {
        assert_eq!(resolve_host("127.0.0.9").unwrap(), [IpAddr::from([127, 0, 0, 9])]);
        assert!(resolve_host("no-such-host.invalid").is_err());
        assert!(resolve_host("a\0b").is_err());
    }
}
