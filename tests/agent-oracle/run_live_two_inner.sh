#!/usr/bin/env bash
# Inner part of run_live_two.sh (inside the network namespace): both fakes, then the two agents'
# turns interleaved, $PAUSE seconds apart.
set -u
SHARED=${SHARED_ORACLE:-/work/shared/tools/agent-oracle}
L=$W/logs
printf 'alpha\nbeta\ngamma\n' > "$W/proj-claude/notes.txt"
printf 'alpha\nbeta\ngamma\n' > "$W/proj-codex/notes.txt"
cat > "$W/codex-home/config.toml" <<CFG
model = "gpt-5-codex"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
model_context_window = 200000
model_reasoning_summary = "auto"
[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:8769/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
[features]
plugins = false
[analytics]
enabled = false
[feedback]
enabled = false
[otel]
exporter = "none"
CFG
FAKE_PROJECT_DIR=$W/proj-claude python3 "$SHARED/fake_anthropic.py" 8768 "$L/fake_anthropic.jsonl" > "$L/fa.out" 2>&1 &
A=$!
python3 "$SHARED/fake_openai.py" 8769 "$L/fake_openai.jsonl" > "$L/fo.out" 2>&1 &
O=$!
trap 'kill $A $O 2>/dev/null' EXIT
for port in 8768 8769; do
  for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
done

cc() {  # cc NAME ARGS...: one Claude Code turn
  local name=$1; shift
  ( cd "$W/proj-claude" && env ANTHROPIC_BASE_URL=http://127.0.0.1:8768 ANTHROPIC_API_KEY=sk-fake \
      CLAUDE_CONFIG_DIR=$W/cc-home HOME=$W/home DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
      DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1 \
      CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 CLAUDE_CODE_ENABLE_TELEMETRY=0 IS_SANDBOX=1 \
      timeout 180 "$CLAUDE" "$@" --dangerously-skip-permissions > "$L/claude-$name.out" 2> "$L/claude-$name.err"
    echo "$(date +%T) claude $name rc=$?" >&2 )
}
cx() {  # cx NAME ARGS...: one Codex turn
  local name=$1; shift
  ( cd "$W/proj-codex" && env CODEX_HOME=$W/codex-home HOME=$W/home FAKE_OPENAI_API_KEY=sk-fake NO_COLOR=1 RUST_LOG=warn \
      timeout 180 "$CODEX" "$@" < /dev/null > "$L/codex-$name.out" 2> "$L/codex-$name.err"
    echo "$(date +%T) codex $name rc=$?" >&2 )
}

cc 1 -p "LIST-FILES: what files are in this project?" --output-format json & C=$!
cx 1 exec --skip-git-repo-check "LIST-FILES: what files are in this directory?" & X=$!
wait $C $X
SID=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['session_id'])" "$L/claude-1.out")
sleep "$PAUSE"
cc 2 -p "READ-NOTES: show me notes.txt" --resume "$SID" --output-format json & C=$!
cx 2 exec --skip-git-repo-check resume --last "READ-NOTES: show me notes.txt" & X=$!
wait $C $X
sleep "$PAUSE"
cc 3 -p "THINK-ONLY: what is 17 times 3?" --resume "$SID" --output-format json & C=$!
cx 3 exec --skip-git-repo-check resume --last "THINK-ONLY: what is 17 times 3?" & X=$!
wait $C $X
sleep "$PAUSE"
cc 4 -p "THINK-ONLY: and 18 times 3?" --resume "$SID" --output-format json & C=$!
cx 4 exec --skip-git-repo-check resume --last "THINK-ONLY: and 18 times 3?" & X=$!
wait $C $X
