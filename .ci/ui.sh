#!/usr/bin/env bash
# memoir ui in a real browser: Playwright for Python (PyPI, pinned in
# crates/memoir-server/tests/ui/requirements.txt) drives Debian's `chromium`
# headless (never a browser of Playwright's own), and axe-core (npm, pinned)
# checks accessibility. The tests import a small history into a temp store,
# start `memoir ui` and walk every view; screenshots go to $UI_ARTEFACTS
# (default: a temp directory, printed). Builds nothing: it uses
# target/debug/memoir, which `cargo test` builds (like .ci/mcp.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export MEMOIR_BIN="${MEMOIR_BIN:-$TARGET/debug/memoir}"
[ -x "$MEMOIR_BIN" ] || { echo "ui.sh: $MEMOIR_BIN missing (run cargo test first)"; exit 1; }
AXE_VERSION=4.14.1

# Debian's Chromium (idempotent: skipped when present).
if [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
export CHROMIUM=/usr/bin/chromium

# A cached venv and axe-core, reused while the pins are unchanged.
CACHE="${MEMOIR_UI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memoir-ui-tests}"
REQS=crates/memoir-server/tests/ui/requirements.txt
STAMP="$(sha256sum "$REQS" | cut -c1-16)-axe$AXE_VERSION"
VENV="$CACHE/venv-$STAMP"
if [ ! -x "$VENV/bin/pytest" ]; then
  echo "== installing playwright + pytest (pip) and axe-core (npm)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  # The Python package only: its browsers are never downloaded.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQS"
fi
AXE_DIR="$CACHE/axe-$AXE_VERSION"
if [ ! -f "$AXE_DIR/node_modules/axe-core/axe.min.js" ]; then
  mkdir -p "$AXE_DIR"
  (cd "$AXE_DIR" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund "axe-core@$AXE_VERSION" >/dev/null)
fi
export AXE_JS="$AXE_DIR/node_modules/axe-core/axe.min.js"

export UI_ARTEFACTS="${UI_ARTEFACTS:-$(mktemp -d -t memoir-ui-shots-XXXXXX)}"
echo "== memoir ui: browser tests (screenshots in $UI_ARTEFACTS)"
(cd crates/memoir-server/tests/ui && "$VENV/bin/python" -m pytest -q -p no:cacheprovider .)
echo "memoir ui: screenshots in $UI_ARTEFACTS"
