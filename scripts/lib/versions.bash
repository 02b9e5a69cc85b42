# scripts/lib/versions.bash: the provisioned nginx builds, read from nginx/versions (one line each:
# RELEASE SUITE PACKAGE). Sourced by scripts/provision-nginx (and through it scripts/provision-nginx-musl)
# and scripts/build-images; the calling script defines die().

VERSIONS_FILE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../nginx" && pwd -P)/versions

# Every line of nginx/versions without comments: "RELEASE SUITE PACKAGE".
versions_lines() {
  sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$VERSIONS_FILE" | awk '{ print $1, $2, $3 }'
}

# Every suite, oldest release first.
versions_suites() {
  versions_lines | awk '{ print $2 }'
}

# One release per suite, for defaults: the RELEASE column (N.N.x kept as written).
versions_releases() {
  versions_lines | awk '{ print $1 }'
}

# The suite of an argument: a RELEASE of the list (N.N.x matches any patch of N.N, and N.N itself), or a
# SUITE name.
version_suite() {
  local arg=$1 release suite _pkg
  while read -r release suite _pkg; do
    if [[ $arg == "$suite" || $arg == "$release" ]] ||
      [[ $release == *.x && ($arg == "${release%.x}" || $arg =~ ^${release%.x}\.[0-9]+$) ]]; then
      echo "$suite"
      return
    fi
  done < <(versions_lines)
  die "unknown version '$1' (expected one of: $(versions_lines | awk '{ printf "%s%s or %s", sep, $1, $2; sep = ", " }'); see nginx/versions)"
}

# The RELEASE column of a suite (N.N.N, or N.N.x as written).
version_release() {
  local release
  release=$(versions_lines | awk -v s="$1" '$2 == s { print $1 }')
  [[ -n $release ]] || die "suite '$1' is not in nginx/versions"
  echo "$release"
}

# The release a suite must serve, as an extended regex (N.N.x -> N\.N\.[0-9]+).
expected_upstream() {
  local release
  release=$(version_release "$1") || exit 1
  release=${release//./\\.}
  echo "${release/%\\.x/\\.[0-9]+}"
}

# Whether a suite's release is MIN (N.N.N) or later; an N.N.x release counts as N.N.0.
version_at_least() {
  local release
  release=$(version_release "$1") || exit 1
  printf '%s\n' "$2" "${release/%.x/.0}" | sort -V -C
}

# The binary package that holds /usr/sbin/nginx in a suite.
version_package() {
  local pkg
  pkg=$(versions_lines | awk -v s="$1" '$2 == s { print $3 }')
  [[ -n $pkg ]] || die "suite '$1' is not in nginx/versions"
  echo "$pkg"
}
