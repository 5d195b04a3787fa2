#!/usr/bin/env bash
# ds4tui scenario driver for the agent-oracle (copy into the oracle folder; run by run.sh inside the
# namespace): Claude Code's newest release on a project with CLAUDE.md, a project skill, a custom agent,
# an MCP server reached through ToolSearch, an image read, Edit/Write, a 1 h cache write (READ-NOTES),
# `--model sonnet` and an interrupted turn; `/context` after each step (Claude Code's own answer).
set -u
W=${W:-/tmp/agents}
D=$(cd "$(dirname "$0")" && pwd)
CLAUDE=${CLAUDE:-$W/deps/node_modules/.bin/claude}
PORT=${CC_PORT:-8775}
P=$W/proj-claude-new
LOGDIR=$W/logs
mkdir -p "$LOGDIR" "$P/.claude/skills/notes-digest" "$P/.claude/agents" "$W/home" "$W/cc-home"
printf 'alpha\nbeta\ngamma\n' > "$P/notes.txt"
printf 'print("hello")\n' > "$P/hello.py"
python3 "$D/make_pic.py" "$P/pic.png"
cat > "$P/CLAUDE.md" <<'MD'
# Project notes

This scratch project keeps its data in notes.txt (one word per line). Answer briefly and
name the files you touch.
MD
cat > "$P/.claude/skills/notes-digest/SKILL.md" <<'MD'
---
name: notes-digest
description: Summarise notes.txt into a one-line digest of its words, in order.
---
Read notes.txt and answer with one line: "Digest: " followed by its words separated by commas.
MD
cat > "$P/.claude/agents/reviewer.md" <<'MD'
---
name: reviewer
description: Reviews a small Python file for style problems and answers with a short list.
tools: Read
---
You review Python files. Read the file you are given and list at most three style problems.
MD
MCP="{\"mcpServers\":{\"demo\":{\"command\":\"python3\",\"args\":[\"$D/mcp_demo_server.py\"]}}}"
rm -f "$LOGDIR/fake_anthropic_new.jsonl"
FAKE_PROJECT_DIR=$P python3 "$D/fake_anthropic.py" "$PORT" "$LOGDIR/fake_anthropic_new.jsonl" > "$LOGDIR/fake_anthropic_new.out" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null' EXIT
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done

export ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=sk-fake \
  CLAUDE_CONFIG_DIR=$W/cc-home HOME=$W/home \
  DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
  DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1 \
  CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 CLAUDE_CODE_ENABLE_TELEMETRY=0 \
  IS_SANDBOX=1
unset ANTHROPIC_AUTH_TOKEN CLAUDE_CODE_USE_BEDROCK CLAUDE_CODE_USE_VERTEX 2>/dev/null
cd "$P"

cc() {  # cc NAME ARGS...
  local name=$1; shift
  echo "== claude $name: $*" >&2
  timeout 180 "$CLAUDE" "$@" --dangerously-skip-permissions > "$LOGDIR/claude-$name.out" 2> "$LOGDIR/claude-$name.err"
  echo "   rc=$? $(head -c 200 "$LOGDIR/claude-$name.out")" >&2
}
ctx() {  # ctx NAME SID ARGS...: /context as JSON (its `result` is the text table, plus modelUsage / cost)
  local name=$1 sid=$2; shift 2
  cc "$name" -p "/context" --resume "$sid" --output-format json "$@"
}

# Session C: the project features, default model
cc c1-list -p "LIST-FILES: what files are in this project?" --mcp-config "$MCP" --output-format json
SIDC=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['session_id'])" "$LOGDIR/claude-c1-list.out")
echo "$SIDC" > "$LOGDIR/claude-session-c-id"
ctx c1x "$SIDC" --mcp-config "$MCP"
cc c2-mcp -p "MCP-CALL: count the words of 'alpha beta gamma delta' with the demo MCP tool" --resume "$SIDC" --mcp-config "$MCP" --output-format json
ctx c2x "$SIDC" --mcp-config "$MCP"
cc c3-image -p "READ-IMAGE: what does pic.png show?" --resume "$SIDC" --mcp-config "$MCP" --output-format json
ctx c3x "$SIDC" --mcp-config "$MCP"
cc c4-edit -p "EDIT-FILE: make hello.py print hello, world" --resume "$SIDC" --mcp-config "$MCP" --output-format json
cc c5-write -p "WRITE-FILE: write summary.md" --resume "$SIDC" --mcp-config "$MCP" --output-format json
ctx c5x "$SIDC" --mcp-config "$MCP"
cc c6-notes -p "READ-NOTES: show me notes.txt" --resume "$SIDC" --mcp-config "$MCP" --output-format json
cc c7-skill -p "SKILL-DIGEST: use the notes-digest skill" --resume "$SIDC" --mcp-config "$MCP" --output-format json
ctx c7x "$SIDC" --mcp-config "$MCP"

# Session D: --model sonnet, an interrupted streamed turn
cc d1-list -p "LIST-FILES: what files are here?" --model sonnet --output-format json
SIDD=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['session_id'])" "$LOGDIR/claude-d1-list.out")
echo "$SIDD" > "$LOGDIR/claude-session-d-id"
cc d2-think -p "THINK-ONLY: what is 17 times 3?" --resume "$SIDD" --model sonnet --output-format json
ctx d2x "$SIDD" --model sonnet
echo "== claude d3-interrupt" >&2
timeout 120 python3 "$D/cc_interrupt.py" "$LOGDIR/claude-d3-interrupt.out" 3 "$CLAUDE" --resume "$SIDD" --model sonnet \
  --dangerously-skip-permissions --prompt "SLOW-REPLY: tell me a long story" 2> "$LOGDIR/claude-d3-interrupt.err"
cc d4-after -p "AFTER-COMPACT: are you still there?" --resume "$SIDD" --model sonnet --output-format json
ctx d4x "$SIDD" --model sonnet
kill $SP 2>/dev/null
