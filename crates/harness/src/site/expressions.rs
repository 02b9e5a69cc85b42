//! Key expressions for `verify`'s random topologies (issue 21 point 4): every so often a topology's upstream
//! hashes one of these instead of the raw-key header, with the `map` blocks it reads, and
//! [`crate::run::keyed`] sends it generated requests. The set covers the modelled request variables, a
//! concatenation, the `${name}` form, and maps with exact keys, `default`, regular expressions with
//! captures and `hostnames`.

use rand::RngExt;

/// A key expression and the `map` blocks (http level) it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyExpression {
    /// The expression as written after `hash`.
    pub expression: &'static str,
    /// The `map` blocks it needs.
    pub maps: &'static [&'static str],
    /// Whether it reads the client's address or port: a container's port proxy hides them, so only
    /// local builds draw it.
    pub reads_client: bool,
}

const TENANT_MAP: &str =
    "map $http_x_tenant $tenant {\n    default $arg_user;\n    ~^(?<region>[a-z]+)-eu$ eu-$region;\n    alpha a;\n}\n";
const SITE_MAP: &str =
    "map $host $site {\n    hostnames;\n    default other;\n    *.example shop;\n    a.b.test ab;\n}\n";

/// The expressions drawn from.
pub const EXPRESSIONS: &[KeyExpression] = &[
    KeyExpression { expression: "$request_uri", maps: &[], reads_client: false },
    KeyExpression { expression: "$uri", maps: &[], reads_client: false },
    KeyExpression { expression: "$host$uri$is_args$args", maps: &[], reads_client: false },
    KeyExpression { expression: "$arg_id", maps: &[], reads_client: false },
    KeyExpression { expression: "${cookie_sid}-$arg_user", maps: &[], reads_client: false },
    KeyExpression { expression: "$http_x_tenant", maps: &[], reads_client: false },
    KeyExpression { expression: "$request_method $document_uri?$query_string", maps: &[], reads_client: false },
    KeyExpression { expression: "$tenant", maps: &[TENANT_MAP], reads_client: false },
    KeyExpression { expression: "$site/$tenant$uri", maps: &[SITE_MAP, TENANT_MAP], reads_client: false },
    KeyExpression { expression: "$site", maps: &[SITE_MAP], reads_client: false },
    KeyExpression { expression: "$remote_addr", maps: &[], reads_client: true },
    KeyExpression { expression: "$binary_remote_addr", maps: &[], reads_client: true },
    KeyExpression { expression: "$remote_addr:$remote_port$uri", maps: &[], reads_client: true },
];

/// One expression at random (`client`: whether those reading the client's address may be drawn).
pub fn random(rng: &mut impl rand::Rng, client: bool) -> KeyExpression {
    let from: Vec<&KeyExpression> = EXPRESSIONS.iter().filter(|e| client || !e.reads_client).collect();
    *from[rng.random_range(0..from.len())]
}

/// The variables `expression` reads, through its maps too (lower-case names without `$`), sorted.
pub fn variables(e: &KeyExpression) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let text = format!("{} {}", e.expression, e.maps.concat());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' {
            let rest = text[i + 1..].trim_start_matches('{');
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && !name.chars().all(|c| c.is_ascii_digit()) {
                names.push(name.to_ascii_lowercase());
            }
        }
        i += 1;
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_read_through_maps() {
        let e = EXPRESSIONS.iter().find(|e| e.expression == "$tenant").unwrap();
        assert_eq!(variables(e), ["arg_user", "http_x_tenant", "region", "tenant"]);
        let e = EXPRESSIONS.iter().find(|e| e.expression.starts_with("${cookie_sid}")).unwrap();
        assert_eq!(variables(e), ["arg_user", "cookie_sid"]);
    }

    #[test]
    fn containers_never_draw_client_addresses() {
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(1);
        use rand::SeedableRng;
        for _ in 0..200 {
            assert!(!random(&mut rng, false).reads_client);
        }
        assert!((0..200).any(|_| random(&mut rng, true).reads_client));
    }
}
