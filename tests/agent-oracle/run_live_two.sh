#!/usr/bin/env bash
# Two real agents writing sessions at a human pace, for watching ds4tui's home screen live (issue 15).
#   W=/tmp/w15-live DEPS=/tmp/w15-live/deps PAUSE=8 [KEEP=1] bash tests/agent-oracle/run_live_two.sh   (as root)
# Claude Code 2.1.197 and Codex 0.171.0 (from $DEPS/node_modules/.bin) run side by side inside
# `unshare -n` (loopback only) against the shared fakes (fake_anthropic.py, fake_openai.py), one
# turn each every $PAUSE seconds. Their state goes to $W/cc-home and $W/codex-home (no mount
# namespace: the sessions name $W/proj-*), so ds4tui can watch them from outside:
#   CLAUDE_CONFIG_DIR=$W/cc-home CODEX_HOME=$W/codex-home PI_CODING_AGENT_DIR=$W/pi HOME=$W/home \
#   DS4TUI_STATE_DIR=$W/state DS4TUI_CACHE_RETENTION=codex=300 uv run ds4tui home --lead 290
set -eu
W=${W:-/tmp/w15-live}
D=$(cd "$(dirname "$0")" && pwd)
DEPS=${DEPS:-$W/deps}
export W D PAUSE=${PAUSE:-8} CLAUDE=$DEPS/node_modules/.bin/claude CODEX=$DEPS/node_modules/.bin/codex
[ "${KEEP:-0}" = 1 ] || rm -rf "$W/cc-home" "$W/codex-home" "$W/proj-claude" "$W/proj-codex" "$W/logs"   # KEEP=1: add to the last run's
mkdir -p "$W/cc-home" "$W/codex-home" "$W/proj-claude" "$W/proj-codex" "$W/logs" "$W/home" "$W/pi"
unshare -n bash -c 'ip link set lo up; bash "$D/run_live_two_inner.sh"'
find "$W/cc-home/projects" "$W/codex-home/sessions" -name '*.jsonl' | sort
