#!/usr/bin/env bash
# Renders kvdesk.svg to the hicolor PNG sizes in icons/ (kvdesk-SIZE.png), which are committed so
# that building and installing never need the renderer. Run it again after editing the SVG.
# Needs rsvg-convert, from the Debian package librsvg2-bin.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v rsvg-convert >/dev/null || { echo "rsvg-convert not found: apt-get install librsvg2-bin" >&2; exit 1; }
mkdir -p "$here/icons"
for size in 16 32 48 64 128 256; do
  rsvg-convert --width "$size" --height "$size" --format png "$here/kvdesk.svg" --output "$here/icons/kvdesk-$size.png"
done
