#!/usr/bin/env bash
# The .deb on a clean Debian 12: debootstraps a minimal bookworm root, installs the package there
# with apt (which must resolve every Depends from Debian alone), and runs the installed programs
# inside it: --help of each, and a greedy answer of the shared stories260K model from kvdesk-cli.
# Needs root and the network (deb.debian.org), so it is run by hand, not by CTest or CI:
#   tests/packaging/check_clean_debian_install.sh BUILD_DIR [ROOT_DIR]
# BUILD_DIR's package is made with cpack first; ROOT_DIR (default: a new temporary folder) is
# reused when it already holds a debootstrapped root.
set -euo pipefail
build="$(cd "${1:?usage: check_clean_debian_install.sh BUILD_DIR [ROOT_DIR]}" && pwd)"
root="${2:-$(mktemp -d "${TMPDIR:-/tmp}/kvdesk-bookworm.XXXXXX")}"
models="$(cd "$(dirname "$0")/../../../shared/models" && pwd)"
fail() { echo "check_clean_debian_install: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
[ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/kvdesk_*_amd64.deb | head -n 1)
cp "$deb" "$root/tmp/kvdesk.deb"
cp "$models/stories260K.gguf" "$root/tmp/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /bin/bash -c "$1"; }
in_root "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/kvdesk.deb >/dev/null" ||
  fail "apt could not install $(basename "$deb") on a clean bookworm"
for p in kvdesk kvdesk-cli kvdesk-bench; do
  in_root "$p --help >/dev/null" || fail "$p --help failed in the clean root"
  in_root "ldd /usr/bin/$p | grep 'not found'" && fail "$p needs a library the clean root lacks"
done
answer=$(in_root "kvdesk-cli generate -m /tmp/stories260K.gguf -p 'Once upon a time' -n 8 --temp 0 2>/dev/null")
[ -n "$answer" ] || fail "kvdesk-cli generate printed nothing in the clean root"
echo "$(basename "$deb"): installed with apt on a clean bookworm root ($root); the programs run: $answer"
