#!/usr/bin/env bash
# Installs the test-only JavaScript references of package.json (beside this script) into
# DIR/node_modules with npm, once per package.json: the tests that compare kvdesk with them
# depend on this one (the ctest fixture npm_references), and fail, not skip, when it fails.
set -euo pipefail
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v npm >/dev/null || { echo "npm not found: install Node.js and npm (assets/install-packages.sh)" >&2; exit 1; }
mkdir -p "$dir"
if [[ -d $dir/node_modules ]] && cmp -s "$here/package.json" "$dir/package.json"; then exit 0; fi
cp "$here/package.json" "$dir/package.json"
cd "$dir"
npm install --no-audit --no-fund --loglevel=error
