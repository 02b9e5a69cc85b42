//! `$remote_addr`/`$server_addr` (text) and `$binary_remote_addr` (4 or 16 raw bytes, network order):
//! `ngx_http_variable_remote_addr`, `ngx_http_variable_binary_remote_addr` in
//! src/http/ngx_http_variables.c (all modelled releases).

use std::net::IpAddr;

/// The text form (`ngx_sock_ntop`): dotted IPv4, RFC 5952 IPv6.
pub(super) fn text(ip: IpAddr) -> String {
    ip.to_string()
}

/// The raw bytes.
pub(super) fn binary(ip: IpAddr, out: &mut Vec<u8>) {
    match ip {
        IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
    }
}
