#!/usr/bin/env bash
# Extra Codex rollouts for ds4tui's tests (w12): rate limits, a fork, an archived session.
#   W=/tmp/w12-agents DEPS=/tmp/w12-agents/deps bash tests/agent-oracle/run_codex_extra.sh   (as root)
# Runs the real Codex CLI 0.171.0 against fake_openai.py inside `unshare -n` (loopback only).
# Outputs $W/out-extra/{sessions,archived_sessions}/... and cli-output/.
set -eu
W=${W:-/tmp/w12-agents}
D=$(cd "$(dirname "$0")" && pwd)
DEPS=${DEPS:-$W/deps}
export W D CODEX=$DEPS/node_modules/.bin/codex
rm -rf "$W/cx-home" "$W/proj-codex" "$W/logs-extra" "$W/out-extra"
mkdir -p "$W/cx-home" "$W/proj-codex" "$W/logs-extra" "$W/home"
unshare -n bash -c 'ip link set lo up; bash "$D/run_codex_extra_inner.sh"'
OUT=$W/out-extra
mkdir -p "$OUT"
cp -r "$W/cx-home/sessions" "$OUT/" 2>/dev/null || true
cp -r "$W/cx-home/archived_sessions" "$OUT/" 2>/dev/null || true
cp -r "$W/logs-extra" "$OUT/cli-output"
find "$OUT" -name '*.jsonl' | sort
