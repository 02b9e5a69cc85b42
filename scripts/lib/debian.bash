# scripts/lib/debian.bash: runnable trees from Debian's binary packages, without installing anything and
# without touching the system's apt state. Sourced by scripts/provision-nginx (and through it
# scripts/provision-nginx-musl) and scripts/provision-engines.
#
# The calling script sets REPO (the checkout, for shorter log lines) and CACHE (where the per-suite apt
# state and .debs live: $CACHE/<suite>/{apt,debs}), and defines log() and die().
#
#   apt_setup SUITE; apt_update SUITE      private apt state for SUITE (+ SUITE-security, except sid)
#   candidate_version PKG, debian_upstream DEBVER
#   package_closure SKIP PKG...            PKG... + the closure of their library Depends
#   download SUITE PKG...; extract_debs SUITE ROOT PACKAGES_TXT PKG...
#   needed_closure ROOT ELF...             every NEEDED library, resolved inside ROOT
#   write_loader_wrapper FILE BINARY COMMENT...
#   free_port, foreign_mappings PID DIR

ARCH=amd64
TRIPLET=x86_64-linux-gnu
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

sources_list() {
  local suite=$1 opts="[arch=$ARCH target=Packages signed-by=$KEYRING]"
  echo "deb $opts $MIRROR/debian $suite main"
  if [[ $suite != sid ]]; then
    echo "deb $opts $MIRROR/debian-security $suite-security main"
  fi
}

# ---------------------------------------------------------------------------
# Throw-away apt state under $CACHE/<suite>/apt.  The empty status file
# and empty preferences make the host's installed packages and pins irrelevant.
apt_setup() {
  local suite=$1
  APT_DIR=$CACHE/$suite/apt
  mkdir -p "$APT_DIR"/{sources.list.d,preferences.d,lists/partial,cache/archives/partial}
  sources_list "$suite" >"$APT_DIR/sources.list"
  : >"$APT_DIR/status"
  APT_OPTS=(
    -q
    -o "Dir::Etc::SourceList=$APT_DIR/sources.list"
    -o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d"
    -o "Dir::Etc::Preferences=$APT_DIR/preferences"
    -o "Dir::Etc::PreferencesParts=$APT_DIR/preferences.d"
    -o "Dir::State::Lists=$APT_DIR/lists"
    -o "Dir::State::status=$APT_DIR/status"
    -o "Dir::Cache=$APT_DIR/cache"
    -o "APT::Architecture=$ARCH"
    -o "APT::Architectures::=$ARCH"
  )
}

# apt-get update of the private state apt_setup made (the only step that needs the network besides
# download); its log stays in the state directory.
apt_update() {
  local suite=$1
  log "$suite: apt-get update (private state in ${APT_DIR#"$REPO"/})"
  apt-get "${APT_OPTS[@]}" update >"$APT_DIR/update.log" 2>&1 ||
    { cat "$APT_DIR/update.log" >&2; die "$suite: apt-get update failed"; }
}

# The candidate version of a package in the private state, or "(none)" / nothing.
candidate_version() {
  apt-cache "${APT_OPTS[@]}" policy "$1" | sed -n 's/^ *Candidate: //p'
}

# The upstream part of a Debian version: 1:2.6.12-1+deb12u4 -> 2.6.12.
debian_upstream() {
  local upstream=${1#*:}
  echo "${upstream%%-*}"
}

# Direct Depends/Pre-Depends of the given packages (first alternative; a
# virtual package resolves to its first provider), one name per line.
direct_deps() {
  apt-cache "${APT_OPTS[@]}" depends --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances "$@" |
    awk '
      /^ [ |](Pre)?Depends: / {
        bar = (substr($0, 2, 1) == "|")
        if (skip) { skip = bar; want = 0; next }   # later alternative: ignore
        skip = bar
        if ($2 ~ /^</) { want = 1; next }          # virtual: take 1st provider
        want = 0; print $2; next
      }
      /^    [^ ]/ { if (want) { print $1; want = 0 } next }
      { want = 0 }'
}

# The given packages + the closure of their shared-library Depends, one name per line, sorted.
# Only library packages are followed (lib*, zlib1g), never a daemon's -common package,
# iproute2 or debconf: we want binaries and .so files, not a system.  SKIP is an extended
# regex of library packages not to follow (empty: none).
package_closure() {
  local skip=$1
  shift
  local -A seen=()
  local queue=("$@") next p d
  while ((${#queue[@]})); do
    next=()
    for p in "${queue[@]}"; do [[ -n ${seen[$p]:-} ]] || { seen[$p]=1; next+=("$p"); }; done
    ((${#next[@]})) || break
    queue=()
    while read -r d; do
      [[ $d =~ ^(lib.*|zlib1g)$ && ! (-n $skip && $d =~ $skip) && -z ${seen[$d]:-} ]] && queue+=("$d")
    done < <(direct_deps "${next[@]}" | sort -u)
  done
  printf '%s\n' "${!seen[@]}" | sort
}

# Download the candidates of the given packages into $CACHE/<suite>/debs,
# reusing any cached .deb whose SHA256 still matches the index.
download() {
  local suite=$1 debs=$CACHE/$1/debs url file _size hash stale=()
  shift
  mkdir -p "$debs"
  while read -r url file _size hash; do
    if [[ -f $debs/$file ]] && echo "${hash#SHA256:}  $debs/$file" | sha256sum --status -c -; then
      continue
    fi
    stale+=("$(basename "${url//\'/}")")
  done < <(apt-get "${APT_OPTS[@]}" download --print-uris "$@")
  if ((${#stale[@]})); then
    log "$suite: downloading ${#stale[@]} package(s)"
    (cd "$debs" && apt-get "${APT_OPTS[@]}" -o APT::Sandbox::User=root download "$@" >/dev/null)
  else
    log "$suite: all .debs cached"
  fi
}

# dpkg -x the downloaded candidates of the given packages into ROOT, record `package=version` of each
# (sorted) in PACKAGES_TXT, then give ROOT the merged-/usr layout with relative symlinks.
extract_debs() {
  local suite=$1 root=$2 list=$3 deb file
  shift 3
  mkdir -p "$root"
  : >"$list"
  while read -r _ file _ _; do
    deb=$CACHE/$suite/debs/$file
    dpkg -x "$deb" "$root"
    dpkg-deb -f "$deb" Package Version | paste -sd' ' | awk '{ print $2 "=" $4 }' >>"$list"
  done < <(apt-get "${APT_OPTS[@]}" download --print-uris "$@")
  sort -o "$list" "$list"
  merge_usr "$root"
  relativize_links "$root"
}

# ---------------------------------------------------------------------------
# Tree helpers.

# bookworm-era packages put files under /lib and /lib64 while newer ones use
# /usr/lib: fold everything into /usr (merged-/usr, like a real system) so
# one library directory and one loader path serve every version.
merge_usr() {
  local root=$1 d
  for d in bin sbin lib lib64; do
    if [[ -d $root/$d && ! -L $root/$d ]]; then
      mkdir -p "$root/usr/$d"
      cp -a "$root/$d/." "$root/usr/$d/"
      rm -rf "${root:?}/$d"
    fi
    mkdir -p "$root/usr/$d"
    ln -sfn "usr/$d" "$root/$d"
  done
}

# Absolute symlinks (e.g. /lib64/ld-linux-x86-64.so.2 -> /lib/...) would point
# at the host: make them relative so they resolve inside the tree, both here
# and when the same files become an image's root.
relativize_links() {
  local root=$1 link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    ln -sfnr "$root$target" "$link"
  done < <(find "$root" -type l -lname '/*' -print0)
}

# Print the root-relative closure of NEEDED libraries for the given ELF files
# (plus the files themselves); fail listing every soname that is not found.
needed_closure() {
  local root=$1 f so lib d
  shift
  local -A seen=() missing=()
  local queue=("$@")
  local libdirs=("usr/lib/$TRIPLET" usr/lib)
  while ((${#queue[@]})); do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -n ${seen[$f]:-} ]] && continue
    seen[$f]=1
    while read -r so; do
      lib=
      for d in "${libdirs[@]}"; do
        [[ -e $root/$d/$so ]] && { lib=$d/$so; break; }
      done
      if [[ -n $lib ]]; then queue+=("$lib"); else missing[$so]="${missing[$so]:-}${missing[$so]:+, }$f"; fi
    done < <(readelf -dW "$root/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  if ((${#missing[@]})); then
    for so in "${!missing[@]}"; do log "unresolved NEEDED $so (needed by ${missing[$so]})"; done
    die "some shared libraries are not in the extracted packages"
  fi
  printf '%s\n' "${!seen[@]}" | sort
}

# The program interpreter an ELF file requests (/lib64/ld-linux-x86-64.so.2), or nothing (static).
elf_interpreter() {
  readelf -lW "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p'
}

# A /bin/sh wrapper FILE that runs the tree's BINARY (a path relative to FILE's root/) through the
# tree's own glibc loader and libraries and passes "$@" through; exec keeps the PID.  Every further
# argument is one comment line.
write_loader_wrapper() {
  local file=$1 binary=$2 line
  shift 2
  {
    echo '#!/bin/sh'
    for line in "$@"; do echo "# $line"; done
    cat <<EOF
here=\$(dirname -- "\$(readlink -f -- "\$0")")
exec "\$here/root/lib/$TRIPLET/ld-linux-x86-64.so.2" --inhibit-cache \\
  --library-path "\$here/root/usr/lib/$TRIPLET" \\
  "\$here/root/$binary" "\$@"
EOF
  } >"$file"
  chmod 755 "$file"
}

# ---------------------------------------------------------------------------
# Smoke-test helpers.

# A TCP port on 127.0.0.1 nobody listens on, below the ephemeral range.
free_port() {
  local p i
  for ((i = 0; i < 100; i++)); do
    p=$((20000 + RANDOM % 12000))
    grep -qi "$(printf ':%04X ' "$p")" /proc/net/tcp /proc/net/tcp6 2>/dev/null || { echo "$p"; return; }
  done
  die "no free port found"
}

# Every shared object process PID has mapped from outside DIR, one per line (nothing: all from the tree).
foreign_mappings() {
  awk '$6 ~ /\.so/ { print $6 }' "/proc/$1/maps" | sort -u | grep -v "^$2/root/" || true
}
