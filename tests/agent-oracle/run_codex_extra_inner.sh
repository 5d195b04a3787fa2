#!/usr/bin/env bash
# Inner part of run_codex_extra.sh (inside the network namespace).
set -u
PORT=8767
P=$W/proj-codex
CH=$W/cx-home
L=$W/logs-extra
printf 'alpha\nbeta\ngamma\n' > "$P/notes.txt"
cat > "$CH/config.toml" <<CFG
model = "gpt-5-codex"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
model_context_window = 200000
model_reasoning_summary = "auto"
[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:$PORT/v1"
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
FAKE_RATE_LIMITS=1 python3 "$D/fake_openai.py" "$PORT" "$L/fake_openai.jsonl" > "$L/fake.out" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null' EXIT
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
export CODEX_HOME=$CH HOME=$W/home FAKE_OPENAI_API_KEY=sk-fake NO_COLOR=1 RUST_LOG=warn
cd "$P"
cx() { local name=$1; shift; echo "== codex $name: $*" >&2
  timeout 120 "$CODEX" "$@" < /dev/null > "$L/codex-$name.out" 2> "$L/codex-$name.err"; echo "   rc=$?" >&2; }
cx 1-list exec --skip-git-repo-check "LIST-FILES: what files are in this directory?"
cx 2-read exec --skip-git-repo-check resume --last "READ-NOTES: show me notes.txt"
PARENT=$(find "$CH/sessions" -name 'rollout-*.jsonl' | sort | head -1)
PID=$(head -1 "$PARENT" | python3 -c "import json,sys; print(json.load(sys.stdin)['payload']['id'])")
echo "   parent $PID" >&2
cx 3-fork exec --skip-git-repo-check fork "$PID" "THINK-ONLY: in the fork, what is 17 times 3?"
cx 4-compact exec --skip-git-repo-check resume "$PID" "/compact"
# a separate short session, then archived
cx 5-other exec --skip-git-repo-check "THINK-ONLY: a session to archive"
OTHER=$(ls -t $(find "$CH/sessions" -name 'rollout-*.jsonl') | head -1)
OID=$(head -1 "$OTHER" | python3 -c "import json,sys; print(json.load(sys.stdin)['payload']['id'])")
cx 6-archive archive "$OID"
