#!/usr/bin/env bash
# Regenerate real Claude Code and Codex session files against local fake model servers.
#   W=/tmp/agents bash run.sh          (W defaults to /tmp/agents; everything but this folder's scripts goes there)
# Steps: install the two CLIs from npm into $W/deps (pinned versions, skipped when present), wipe the
# state folders, run both drivers inside a fresh network namespace (`unshare -n`, loopback only, so
# the CLIs cannot reach anything but the fake servers), then copy the session files to $W/out.
set -eu
W=${W:-/tmp/agents}
export W
D=$(cd "$(dirname "$0")" && pwd)
CC_VERSION=${CC_VERSION:-2.1.197}
CODEX_VERSION=${CODEX_VERSION:-0.171.0}

DEPS=${DEPS:-$W/deps}          # where the npm packages live (reuse another run's with DEPS=...)
mkdir -p "$DEPS"
if [ ! -x "$DEPS/node_modules/.bin/claude" ]; then
  (cd "$DEPS" && { [ -f package.json ] || npm init -y > /dev/null; } &&
   npm install --no-audit --no-fund "@anthropic-ai/claude-code@$CC_VERSION")
fi
export CLAUDE=$DEPS/node_modules/.bin/claude CODEX=$DEPS/node_modules/.bin/codex
"$CLAUDE" --version

rm -rf "$W/cc-home" "$W/codex-home" "$W/home" "$W/proj-claude" "$W/proj-codex" "$W/logs" "$W/out"
mkdir -p "$W/cc-home" "$W/codex-home" "$W/home" "$W/logs"

# A fresh mount namespace shows $W at /home/dev, so the sessions name /home/dev/proj-* and not this
# machine's folders; a fresh network namespace (loopback only) keeps every packet on the machine.
unshare -m -n bash -c "mount -t tmpfs none /home && mkdir /home/dev && mount --bind '$W' /home/dev &&
  ip link set lo up && export W=/home/dev && bash '$D/run_claude.sh'"

OUT=$W/out
mkdir -p "$OUT/claude" "$OUT/codex" "$OUT/claude/cli-output" "$OUT/codex/cli-output" "$OUT/requests"
# Claude Code: keep the projects/<escaped-cwd>/... layout (main sessions + <sessionId>/subagents/)
cp -r "$W/cc-home/projects" "$OUT/claude/"
cp "$W"/logs/claude-* "$OUT/claude/cli-output/"
cp "$W/logs/fake_anthropic.jsonl" "$OUT/requests/"
python3 "$D/describe.py" "$OUT" | tee "$OUT/MANIFEST.txt"
