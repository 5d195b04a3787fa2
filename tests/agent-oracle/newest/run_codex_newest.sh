#!/usr/bin/env bash
# ds4tui scenario driver for the agent-oracle (copy into the oracle folder; run by run.sh inside the
# namespace): Codex's newest release on a project with AGENTS.md, an attached image (-i), view_image,
# parallel calls (MULTI-TOOL), web search, apply_patch and a fork.
set -u
W=${W:-/tmp/agents}
D=$(cd "$(dirname "$0")" && pwd)
CODEX=${CODEX:-$W/deps/node_modules/.bin/codex}
PORT=${CX_PORT:-8776}
P=$W/proj-codex-new
LOGDIR=$W/logs
CH=$W/codex-home
mkdir -p "$LOGDIR" "$P" "$W/home" "$CH"
printf 'alpha\nbeta\ngamma\n' > "$P/notes.txt"
printf 'print("hello")\n' > "$P/hello.py"
python3 "$D/make_pic.py" "$P/pic.png"
cat > "$P/AGENTS.md" <<'MD'
# Agent notes

This scratch project keeps its data in notes.txt (one word per line). Answer briefly and
name the files you touch.
MD
cat > "$CH/config.toml" <<CFG
model = "${CODEX_MODEL:-gpt-5-codex}"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
model_context_window = 200000
model_reasoning_summary = "auto"
web_search = "live"

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
log_user_prompt = false
CFG
rm -f "$LOGDIR/fake_openai_new.jsonl"
python3 "$D/fake_openai.py" "$PORT" "$LOGDIR/fake_openai_new.jsonl" > "$LOGDIR/fake_openai_new.out" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null' EXIT
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
export CODEX_HOME=$CH HOME=$W/home FAKE_OPENAI_API_KEY=sk-fake NO_COLOR=1 RUST_LOG=${RUST_LOG:-warn}
unset OPENAI_API_KEY OPENAI_BASE_URL 2>/dev/null
cd "$P"
cx() {  # cx NAME ARGS...
  local name=$1; shift
  echo "== codex $name: $*" >&2
  timeout 180 "$CODEX" "$@" < /dev/null > "$LOGDIR/codex-$name.out" 2> "$LOGDIR/codex-$name.err"
  echo "   rc=$? $(tail -c 200 "$LOGDIR/codex-$name.out")" >&2
}
cx n1-list exec --skip-git-repo-check "LIST-FILES: what files are in this directory?"
cx n2-multi exec --skip-git-repo-check resume --last "MULTI-TOOL: count the lines of notes.txt and hello.py"
cx n3-image exec --skip-git-repo-check resume --last -i pic.png "READ-IMAGE: what is in the attached image?"
cx n4-view exec --skip-git-repo-check resume --last "VIEW-IMAGE: look at pic.png"
cx n5-web exec --skip-git-repo-check resume --last "WEB-SEARCH: what do alpha, beta and gamma mean?"
cx n6-patch exec --skip-git-repo-check resume --last "APPLY-PATCH: make hello.py print hello, world"
MAIN=$(find "$CH/sessions" -name 'rollout-*.jsonl' | sort | head -1)
MID=$(head -1 "$MAIN" | python3 -c "import json,sys; print(json.load(sys.stdin)['payload']['id'])")
echo "   main $MID" >&2
cx n7-fork exec --skip-git-repo-check fork "$MID" "THINK-ONLY: in the fork, what is 17 times 3?"
kill $SP 2>/dev/null
