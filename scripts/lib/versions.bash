# scripts/lib/versions.bash: the provisioned builds, read from nginx/versions (nginx, one line each:
# RELEASE SUITE PACKAGE) and engines/versions (the other proxies, one line each: ENGINE RELEASE SUITE
# PACKAGE). Sourced by scripts/provision-nginx (and through it scripts/provision-nginx-musl),
# scripts/build-images and scripts/provision-engines; the calling script defines die().

VERSIONS_FILE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../nginx" && pwd -P)/versions
ENGINES_FILE=${VERSIONS_FILE%/nginx/versions}/engines/versions

# The lines of a list FILE without comments and blank lines: its first N columns, blank-separated.
list_lines() {
  sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$1" |
    awk -v n="$2" '{ line = $1; for (i = 2; i <= n; i++) line = line " " $i; print line }'
}

# Whether an argument names a RELEASE column: the same string, or, for N.N.x, N.N or any N.N.P.
release_names() {
  local arg=$1 release=$2
  [[ $arg == "$release" ]] ||
    [[ $release == *.x && ($arg == "${release%.x}" || $arg =~ ^${release%.x}\.[0-9]+$) ]]
}

# A RELEASE column as an extended regex over upstream versions (N.N.x -> N\.N\.[0-9]+).
release_regex() {
  local release=${1//./\\.}
  echo "${release/%\\.x/\\.[0-9]+}"
}

# ---------------------------------------------------------------------------
# nginx/versions

# Every line of nginx/versions without comments: "RELEASE SUITE PACKAGE".
versions_lines() {
  list_lines "$VERSIONS_FILE" 3
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
    if [[ $arg == "$suite" ]] || release_names "$arg" "$release"; then
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
  release_regex "$release"
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

# ---------------------------------------------------------------------------
# engines/versions

# Every line of engines/versions without comments: "ENGINE RELEASE SUITE PACKAGE".
engines_lines() {
  list_lines "$ENGINES_FILE" 4
}

# Dies on the first malformed line of engines/versions: not four columns, a RELEASE that is neither
# N.N.N nor N.N.x, or an engine listed twice for one suite or for overlapping releases (the trees are
# named <engine>-<release>, so two builds of one release would share a directory).
engines_check() {
  local line n=0 engine release suite pkg extra other o_release o_suite
  local -a seen=()
  local -A at=()
  [[ -r $ENGINES_FILE ]] || die "cannot read $ENGINES_FILE"
  while IFS= read -r line; do
    n=$((n + 1))
    read -r engine release suite pkg extra <<<"${line%%#*}"
    [[ -n $engine ]] || continue
    [[ -n $pkg && -z $extra ]] ||
      die "engines/versions:$n: expected 'ENGINE RELEASE SUITE PACKAGE', found '${line%%#*}'"
    [[ $release =~ ^[0-9]+\.[0-9]+\.([0-9]+|x)$ ]] ||
      die "engines/versions:$n: release '$release' is neither N.N.N nor N.N.x"
    for other in "${seen[@]}"; do
      [[ $other == "$engine "* ]] || continue
      read -r o_release o_suite <<<"${other#"$engine "}"
      [[ $suite != "$o_suite" ]] ||
        die "engines/versions:$n: $engine from $suite is already listed (line ${at[$engine $o_suite]})"
      if release_names "$release" "$o_release" || release_names "$o_release" "$release"; then
        die "engines/versions:$n: $engine $release overlaps $engine $o_release (line ${at[$engine $o_suite]})"
      fi
    done
    seen+=("$engine $release $suite")
    at["$engine $suite"]=$n
  done <"$ENGINES_FILE"
  ((${#seen[@]})) || die "engines/versions lists no build"
}

# Every engine of the list, in list order.
engines_names() {
  engines_lines | awk '!seen[$1]++ { print $1 }'
}

# The builds an argument names, one "ENGINE SUITE" line each, in list order: ENGINE (every build of it),
# ENGINE:SUITE, or ENGINE:RELEASE (N.N.x also matches N.N and N.N.P).
engine_builds() {
  local arg=$1 want=${1%%:*} which='' engine release suite _pkg found=''
  if [[ $arg == *:* ]]; then
    which=${arg#*:}
    [[ -n $which ]] || die "'$arg': a suite or release is missing after ':'"
  fi
  while read -r engine release suite _pkg; do
    [[ $engine == "$want" ]] || continue
    if [[ -z $which || $which == "$suite" ]] || release_names "$which" "$release"; then
      echo "$engine $suite"
      found=1
    fi
  done < <(engines_lines)
  [[ -n $found ]] ||
    die "unknown engine build '$arg' (expected ENGINE or ENGINE:SUITE or ENGINE:RELEASE, one of: $(engines_lines | awk '{ printf "%s%s:%s or %s:%s", sep, $1, $3, $1, $2; sep = ", " }'); see engines/versions)"
}

# One column of the line of ENGINE from SUITE: engine_column ENGINE SUITE N.
engine_column() {
  local value
  value=$(engines_lines | awk -v e="$1" -v s="$2" -v c="$3" '$1 == e && $3 == s { print $c }')
  [[ -n $value ]] || die "$1 from $2 is not in engines/versions"
  echo "$value"
}

# The RELEASE column of ENGINE from SUITE (N.N.N, or N.N.x as written).
engine_release() {
  engine_column "$1" "$2" 2
}

# The release ENGINE from SUITE must serve, as an extended regex (N.N.x -> N\.N\.[0-9]+).
engine_expected_upstream() {
  local release
  release=$(engine_release "$1" "$2") || exit 1
  release_regex "$release"
}

# The binary package of ENGINE in SUITE.
engine_package() {
  engine_column "$1" "$2" 4
}
