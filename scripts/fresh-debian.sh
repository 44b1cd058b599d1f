#!/bin/bash
# The README's `make test` as a newcomer meets it: in a fresh Debian 12
# root (mmdebstrap's minbase with git, ca-certificates and make), on a
# clone of the commit under test, as root, with HUTCH_MUST_WORK=1. This is
# what CI runs (.ci/run); `make test-fresh` runs it too.
#
# The root gets the machine's own package-registry setup and nothing else
# from the host: /etc/apt's sources and apt.conf.d, the CA certificates,
# /etc/npmrc, resolv.conf. Those belong to the machine (a user's fresh
# machine reaches its registries its own way), the rest is the project's
# to install. The host's apt archive cache is shown inside so that packages
# are fetched once per machine, not once per run, and so are a compiler
# cache and npm's (/var/cache/hutch-ci): both are keyed by what they hold
# (ccache by the preprocessed source, the compiler and its flags; npm by
# each package's integrity hash), so a warm one can make a build quicker
# but never a different one.
#
# The root is entered with its own mount and pid namespaces and pivot_root,
# not chroot: the kernel refuses user namespaces to a chrooted process, and
# the suite makes sandboxes. /sys (cgroups), /dev (loop devices, kvm) and
# the network are the host's, as they would be on a machine of its own.
#
# Prints each phase's time, ends with the suite's "N passed, N failed" line,
# exits with make test's status (125 when the root could not be made), and
# removes its root, mounts and processes however it ends.
#
#   scripts/fresh-debian.sh [SUITE]      (default bookworm)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
suite=${1:-bookworm}
die() { echo "fresh-debian: $*" >&2; exit 125; }

# --- inside: the new mount and pid namespaces, before pivot_root -----------
if [ "${1:-}" = --enter ]; then
  root=$2
  set -e
  mount --make-rprivate /
  mount --bind "$root" "$root" # pivot_root wants a mount point
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
  mkdir -p "$root/var/cache/apt/archives"
  mount --bind /var/cache/apt/archives "$root/var/cache/apt/archives"
  mkdir -p "$root/root/.cache/ccache" "$root/root/.npm"
  mount --bind /var/cache/hutch-ci/ccache "$root/root/.cache/ccache"
  mount --bind /var/cache/hutch-ci/npm "$root/root/.npm"
  cd "$root"
  mkdir -p .oldroot
  pivot_root . .oldroot
  cd /
  umount -l /.oldroot
  rmdir /.oldroot
  set +e
  # A clean environment: nothing of the caller's shell comes in.
  exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM=dumb HUTCH_MUST_WORK=1 CI="${CI:-}" \
    /bin/bash -c '
      cd /ci/main || exit 125
      t() { local s=$SECONDS; "$@"; local r=$?; echo "fresh-debian: $* took $((SECONDS - s)) s" >&2; return $r; }
      t ./scripts/deps.sh --test || exit 125
      t make >/dev/null || exit 125
      t make test'
fi

# --- outside -----------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap, namespaces, the sandboxes)"
missing=""
for p in mmdebstrap git; do
  command -v "$p" >/dev/null || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "fresh-debian: installing$missing" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $missing >/dev/null; } ||
    die "cannot install$missing"
fi
commit=$(git -C "$top" rev-parse HEAD) || die "$top is not a git checkout"
[ -z "$(git -C "$top" status --porcelain --untracked-files=no)" ] ||
  echo "fresh-debian: uncommitted changes in $top are not tested (only $commit is)" >&2

mkdir -p /var/cache/hutch-ci/ccache /var/cache/hutch-ci/npm || die "cannot make /var/cache/hutch-ci"
work=$(mktemp -d /tmp/hutch-fresh.XXXXXX) || die "cannot make a directory in /tmp"
root=$work/root
inner=
cgroups_before=$(find /sys/fs/cgroup -mindepth 2 -maxdepth 4 -type d -path '*/hutch/*' 2>/dev/null | sort)

# Whatever ends the run: its processes go (the pid namespace dies with its
# first process), then the cgroups its sandboxes left (rmdir only takes an
# empty one), then the root. Every mount was made in a namespace of its
# own, so none can outlive it; rm stays on one filesystem all the same, so
# a mount that did would not be followed into.
cleanup() {
  local status=$? left
  trap - EXIT INT TERM HUP
  if [ -n "$inner" ]; then
    kill -TERM "$inner" 2>/dev/null
    sleep 1
    kill -KILL "$inner" 2>/dev/null
    wait "$inner" 2>/dev/null
  fi
  [ -n "${tailer:-}" ] && kill "$tailer" 2>/dev/null
  find /sys/fs/cgroup -mindepth 2 -maxdepth 4 -type d -path '*/hutch/*' 2>/dev/null | sort |
    comm -13 <(echo "$cgroups_before") - | sort -r | xargs -r rmdir 2>/dev/null
  left=$(findmnt -rn -o TARGET | grep -F "$work" || true)
  if [ -n "$left" ]; then
    echo "fresh-debian: still mounted, not removed: $left" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  if [ -n "${summary:-}" ]; then
    echo "$summary"
  elif [ "$status" -ge 128 ]; then
    echo "fresh-debian: interrupted; the root and its processes are gone"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

elapsed() { echo "fresh-debian: $1 took $((SECONDS - $2)) s"; }

# The root, with the host's archive cache bound in for the downloads (in a
# mount namespace of mmdebstrap's own: the bind cannot outlive it).
start=$SECONDS
aptopts=() sources=()
for f in /etc/apt/apt.conf.d/*; do [ -f "$f" ] && aptopts+=("--aptopt=$f"); done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || die "this machine has no apt sources to make the root from"
unshare --mount --propagation private -- mmdebstrap --variant=minbase \
  --include=git,ca-certificates,make "${aptopts[@]}" \
  --skip=essential/unlink --skip=download/empty \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives" && mount --bind /var/cache/apt/archives "$1/var/cache/apt/archives"' \
  --customize-hook='umount "$1/var/cache/apt/archives"' \
  "$suite" "$root" "${sources[@]}" >"$work/mmdebstrap.log" 2>&1 ||
  { tail -n 20 "$work/mmdebstrap.log" >&2; die "mmdebstrap could not make the root"; }
elapsed "the root ($suite, minbase)" "$start"

# The machine's registry setup, as a user's machine has its own.
start=$SECONDS
rm -f "$root"/etc/apt/sources.list.d/* "$root/etc/apt/sources.list"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
  /etc/apt/apt.conf.d/*; do
  [ -f "$f" ] && cp "$f" "$root$f"
done
mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
[ -f /etc/npmrc ] && cp /etc/npmrc "$root/etc/npmrc"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# What a Debian install writes for itself (minbase has no /etc/hosts).
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"

# The commit under test, with ../shared beside it as CI has it.
mkdir -p "$root/ci"
git clone -q "$top" "$root/ci/main" && git -C "$root/ci/main" checkout -q --detach "$commit" ||
  die "cannot clone $top at $commit"
[ -d "$top/../shared" ] && cp -a "$top/../shared" "$root/ci/shared"
elapsed "registry setup and clone of $commit" "$start"

# In: its own mount and pid namespaces; --kill-child takes the whole pid
# namespace down if unshare itself is killed.
start=$SECONDS
unshare --mount --pid --fork --kill-child=KILL --propagation private -- \
  "$top/scripts/fresh-debian.sh" --enter "$root" >"$work/log" 2>&1 &
inner=$!
tail --pid="$inner" -n +1 -f "$work/log" &
tailer=$!
wait "$inner"
status=$?
inner=
wait "$tailer"
elapsed "make test in the root, with its packages and builds" "$start"
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$work/log" | tail -n 1)
[ -n "$summary" ] || summary="0 passed, 1 failed"
exit "$status"
