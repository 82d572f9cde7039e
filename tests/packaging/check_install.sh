#!/usr/bin/env bash
# What a user of a built tree gets: installs it into a temporary prefix and packs it with
# cpack -G DEB, then checks the files are in place, the menu entry is valid, the programs start,
# and the .deb's Depends is assets/packaging/runtime-packages.txt and covers every library the
# binaries link. Any problem fails the check.
# Usage: tests/packaging/check_install.sh BUILD_DIR
set -euo pipefail

fail() {
  echo "check_install: $*" >&2
  exit 1
}

[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
for tool in cmake cpack dpkg-deb dpkg-query desktop-file-validate readelf ldd; do
  command -v "$tool" >/dev/null ||
    fail "$tool not found: install the packages of assets/apt-packages.txt (desktop-file-utils, dpkg, binutils, libc-bin)"
done
[[ -f $build/CMakeCache.txt ]] || fail "$build is not a CMake build tree"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

gui=0
case $(sed -n 's/^KVDESK_BUILD_APP:BOOL=//p' "$build/CMakeCache.txt" | tr '[:lower:]' '[:upper:]') in
  ON | 1 | TRUE | YES | Y) gui=1 ;;
esac

# Installed paths, relative to the prefix.
files=(bin/kvdesk-cli bin/kvdesk-bench share/man/man1/kvdesk-cli.1 share/man/man1/kvdesk-bench.1
       share/kvdesk/tinystories_sample.txt)
programs=(kvdesk-cli kvdesk-bench)
if ((gui)); then
  files+=(bin/kvdesk share/man/man1/kvdesk.1 share/applications/kvdesk.desktop
          share/icons/hicolor/scalable/apps/kvdesk.svg)
  for size in 16 32 48 64 128 256; do files+=("share/icons/hicolor/${size}x${size}/apps/kvdesk.png"); done
  programs+=(kvdesk)
fi

# The Depends the list gives for this build: "gui" packages only with kvdesk.
packages=()
while read -r name tag; do
  [[ -z $name || $name == \#* ]] && continue
  [[ $tag == gui ]] && ((!gui)) && continue
  packages+=("$name")
done <"$source_dir/assets/packaging/runtime-packages.txt"
expected_depends=$(printf '%s, ' "${packages[@]}")
expected_depends=${expected_depends%, }

# 1. cmake --install: the files, the menu entry, the programs.
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install $build failed"; }
for f in "${files[@]}"; do
  [[ -s $prefix/$f ]] || fail "cmake --install did not install $f"
done
for p in "${programs[@]}"; do
  [[ -x $prefix/bin/$p ]] || fail "installed bin/$p is not executable"
done
if ((gui)); then
  report=$(desktop-file-validate "$prefix/share/applications/kvdesk.desktop" 2>&1) ||
    fail "desktop-file-validate rejects kvdesk.desktop: $report"
  [[ -z $report ]] || fail "desktop-file-validate reports on kvdesk.desktop: $report"
fi
for p in "${programs[@]}"; do
  "$prefix/bin/$p" --help >/dev/null || fail "installed $p --help exited with $?"
done

# 2. cpack -G DEB: the package's fields and contents.
(cd "$build" && cpack -G DEB -B "$work/deb") >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed in $build"; }
debs=("$work"/deb/*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "cpack -G DEB made ${#debs[@]} .deb files, not one"
deb=${debs[0]}
info=$(dpkg-deb -I "$deb")
grep -qx ' Package: kvdesk' <<<"$info" || fail "dpkg-deb -I shows no 'Package: kvdesk':"$'\n'"$info"
grep -q '^ Depends: ' <<<"$info" || fail "dpkg-deb -I shows no Depends line:"$'\n'"$info"
depends=$(dpkg-deb -f "$deb" Depends)
[[ $depends == "$expected_depends" ]] ||
  fail "the .deb's Depends is '$depends'; assets/packaging/runtime-packages.txt gives '$expected_depends'"
for pkg in "${packages[@]}"; do
  [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null) == ii* ]] ||
    fail "$pkg (assets/packaging/runtime-packages.txt) is not an installed Debian package here"
done
contents=$(dpkg-deb -c "$deb" | awk '{print $NF}')
for f in "${files[@]}"; do
  grep -qxF "./usr/$f" <<<"$contents" || fail "the .deb lacks /usr/$f"
done
dpkg-deb -x "$deb" "$work/root"
"$work/root/usr/bin/kvdesk-cli" --help >/dev/null || fail "kvdesk-cli --help from the .deb exited with $?"

# 3. Depends against the binaries: each library a program links (NEEDED) belongs to a listed
# package, and each listed package is linked, fonts aside and libglx0 aside (GLFW opens
# libGLX.so.0 with dlopen when it makes the window's GLX context, so no program names it).
# A CUDA build links NVIDIA's runtime statically, so nothing outside Debian is linked either way.
owner() {  # the package owning a library; ldd may give /lib for a file dpkg lists under /usr/lib (merged /usr)
  local path out
  for path in "$1" "$(readlink -f "$1")" "/usr$1" "${1#/usr}"; do
    if out=$(dpkg-query -S "$path" 2>/dev/null); then
      out=${out%%$'\n'*}
      out=${out%%:*}
      echo "${out%%,*}"
      return 0
    fi
  done
  return 1
}
declare -A linked=()
for p in "${programs[@]}"; do
  bin=$prefix/bin/$p
  loaded=$(ldd "$bin")
  while read -r soname; do
    path=$(awk -v s="$soname" '$1 == s && $2 == "=>" { print $3; exit }
                               substr($1, length($1) - length(s)) == "/" s { print $1; exit }' <<<"$loaded")
    [[ $path == /* ]] || fail "$p links $soname, which the dynamic loader does not find"
    if pkg=$(owner "$path"); then
      [[ " ${packages[*]} " == *" $pkg "* ]] ||
        fail "$p links $soname from $pkg, which assets/packaging/runtime-packages.txt does not list"
      linked[$pkg]=1
    else
      fail "$p links $soname ($path), which no Debian package provides"
    fi
  done < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
done
for pkg in "${packages[@]}"; do
  [[ -n ${linked[$pkg]:-} || $pkg == fonts-* || $pkg == libglx0 ]] ||
    fail "assets/packaging/runtime-packages.txt lists $pkg, which no installed program links"
done

echo "$(basename "$deb"): $(stat -c %s "$deb") bytes ($(du -h "$deb" | cut -f1))"
echo "Depends: $depends"
