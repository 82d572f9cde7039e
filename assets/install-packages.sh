#!/usr/bin/env bash
# Installs what kvdesk builds and tests with, all from Debian's packages: the list in
# assets/apt-packages.txt, plus Node.js and npm for the test-only JavaScript references
# (tests/npm). Node.js is installed only where no `npm` is on the PATH already: a machine with
# NodeSource's nodejs (which bundles npm and conflicts with Debian's npm package) keeps it.
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
packages=()
while read -r package; do
  [[ -n "$package" ]] && packages+=("$package")
done < apt-packages.txt
command -v npm >/dev/null || packages+=(nodejs npm)
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
