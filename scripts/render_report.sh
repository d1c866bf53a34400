#!/usr/bin/env bash
# Screenshot a page of the topiclake report with headless Chromium, to check it renders.
#
#   scripts/render_report.sh [PAGE.html] [OUT.png] [WIDTHxHEIGHT]
#
# PAGE defaults to warehouse/_topiclake/report/index.html; OUT to PAGE with .png in
# place of .html, written beside the page; the window to 1400x2000. The page opens from
# the file system, and Chromium is kept off the network, as a reader's browser would be
# with no connection.
set -euo pipefail

page="${1:-warehouse/_topiclake/report/index.html}"
window="${3:-1400,2000}"
window="${window/x/,}"

if [[ ! -f "$page" ]]; then
  echo "render_report.sh: no page at $page; write one with \`topiclake report\` first" >&2
  exit 2
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "render_report.sh: chromium is not installed; on Debian or Ubuntu:" >&2
  echo "  apt-get update && apt-get install -y chromium" >&2
  exit 2
fi

abs="$(cd "$(dirname "$page")" && pwd)/$(basename "$page")"
url="file://$abs"
if command -v python3 >/dev/null; then  # percent-encode spaces and the like
  url="$(python3 -c 'import pathlib, sys; print(pathlib.Path(sys.argv[1]).as_uri())' "$abs")"
fi
out="${2:-${abs%.html}.png}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT

"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --window-size="$window" --hide-scrollbars \
  --screenshot="$out" "$url" >/dev/null 2>&1 || {
    echo "render_report.sh: chromium failed to render $abs" >&2
    exit 1
  }
[[ -s "$out" ]] || { echo "render_report.sh: no screenshot was written to $out" >&2; exit 1; }
echo "$out"
