#!/usr/bin/env python3
"""Fake Anthropic Messages API for driving the real Claude Code CLI offline.

Usage: fake_anthropic.py PORT LOGFILE

Every request (method, path, headers subset, JSON body) is appended to LOGFILE as one JSON line.
Replies are scripted from the *content* of the request (stateless except for the cache model), so
re-running the same driver gives the same conversation:

  user text contains "LIST-FILES"   -> thinking + text + tool_use Bash {"command": "ls"}
  user text contains "READ-NOTES"   -> text + tool_use Read {notes.txt}      (cache write billed as 1h)
  user text contains "DELEGATE"     -> tool_use Task/Agent (subagent) whose prompt contains "SUBAGENT-COUNT"
  user text contains "SUBAGENT-COUNT" (subagent's own first turn) -> tool_use Bash {"command": "wc -l notes.txt"}
  user text contains "READ-BIG"     -> tool_use Read {big.txt} (grows the context; used for auto-compaction)
  user text contains "THINK-ONLY"   -> thinking + text, no tool
  user text contains "AFTER-COMPACT" -> text
  conversation-summary request      -> <analysis>..</analysis><summary>..</summary>
  last user block is a tool_result  -> text answer about that tool's output
  anything else                     -> short text (side requests such as titles)

/v1/messages/count_tokens answers len(json of [system, tools, messages]) // 4 (same formula).

Usage numbers: total prompt tokens = len(json of system+tools+messages) // 4.  A per-conversation
(prefix) cache is simulated: cache_read = tokens already written for the same prefix key,
cache_creation = the rest minus a small uncached tail (input_tokens).  READ-NOTES turns bill the
cache write as ephemeral_1h, all others as ephemeral_5m.
"""
import hashlib
import os
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
LOG = sys.argv[2] if len(sys.argv) > 2 else "/tmp/agents/fake_anthropic.log.jsonl"
LOCK = threading.Lock()
CACHE = {}  # prefix key -> tokens cached so far
COUNTER = [0]


def log(entry):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def det_id(prefix, seed, n=24):
    h = hashlib.sha256(seed.encode()).hexdigest()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    num = int(h, 16)
    out = ""
    for _ in range(n):
        num, r = divmod(num, len(alphabet))
        out += alphabet[r]
    return prefix + out


def blocks(content):
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content or []


def text_of(content):
    return "\n".join(b.get("text", "") for b in blocks(content) if b.get("type") == "text")


def system_text(body):
    s = body.get("system")
    if isinstance(s, str):
        return s
    return "\n".join(b.get("text", "") for b in (s or []))


def tool_names(body):
    return [t.get("name") for t in body.get("tools") or []]


def pick_agent_tool(body):
    names = tool_names(body)
    for n in ("Task", "Agent"):
        if n in names:
            return n
    return None


def usage_for(body, one_hour=False):
    msgs = body.get("messages") or []
    total = len(json.dumps([body.get("system"), body.get("tools"), msgs])) // 4
    # prefix key: system + first user message => one key per conversation/sidechain
    um = [m for m in msgs if m.get("role") == "user"]
    first = text_of(um[0]["content"])[:2000] if um else ""
    key = hashlib.sha256((system_text(body)[:4000] + "\x00" + first).encode()).hexdigest()
    tail = 3 + (total % 5)
    with LOCK:
        cached = CACHE.get(key, 0)
        cache_read = min(cached, max(total - tail, 0))
        creation = max(total - tail - cache_read, 0)
        CACHE[key] = cache_read + creation
    return {
        "input_tokens": tail,
        "cache_creation_input_tokens": creation,
        "cache_read_input_tokens": cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 0 if one_hour else creation,
            "ephemeral_1h_input_tokens": creation if one_hour else 0,
        },
        "output_tokens": 0,
        "service_tier": "standard",
    }


def script(body):
    """Return (list of content blocks, stop_reason, one_hour_cache)."""
    allmsgs = body.get("messages") or []
    # ignore mid-conversation role:"system" messages
    msgs = [m for m in allmsgs if m.get("role") in ("user", "assistant")]
    last = msgs[-1] if msgs else {"role": "user", "content": ""}
    lb = blocks(last.get("content"))
    utext = text_of(last.get("content"))
    sysmsg = system_text(body)
    has_tools = bool(body.get("tools"))

    # follow-up after a tool result
    if any(b.get("type") == "tool_result" for b in lb) and len(msgs) >= 2:
        prev = [b for b in blocks(msgs[-2].get("content")) if b.get("type") == "tool_use"]
        name = prev[-1]["name"] if prev else "?"
        inp = prev[-1].get("input", {}) if prev else {}
        if name == "Bash" and "wc" in inp.get("command", ""):
            return [{"type": "text", "text": "notes.txt has 3 lines."}], "end_turn", False
        if name == "Bash":
            return [{"type": "text", "text": "The project contains `notes.txt` and `hello.py`."}], "end_turn", False
        if name == "Read" and "big" in inp.get("file_path", ""):
            return [{"type": "text", "text": "big.txt is a long generated log (400 numbered lines)."}], "end_turn", False
        if name == "Read":
            return [{"type": "text", "text": "notes.txt says: alpha, beta, gamma (three lines)."}], "end_turn", False
        if name in ("Task", "Agent"):
            return [{"type": "text", "text": "The subagent reports that notes.txt has 3 lines."}], "end_turn", False
        return [{"type": "text", "text": "Done."}], "end_turn", False

    low = utext.lower()
    if "summary" in low and ("conversation" in low) and ("<summary>" in low or "detailed summary" in low or "summarize" in low):
        summ = ("<analysis>\nThe user asked to list files, read notes.txt, count its lines via a subagent, "
                "and reason about a number.\n</analysis>\n\n<summary>\n1. Primary Request and Intent: explore "
                "the scratch project (list files, read notes.txt, count lines).\n2. Key facts: files are notes.txt "
                "and hello.py; notes.txt has 3 lines: alpha, beta, gamma.\n3. Pending Tasks: none.\n4. Current Work: "
                "answered the last question.\n</summary>")
        return [{"type": "text", "text": summ}], "end_turn", False

    if "SUBAGENT-COUNT" in utext and has_tools:
        return [
            {"type": "text", "text": "I'll count the lines."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "wc -l notes.txt", "description": "Count lines in notes.txt"}},
        ], "tool_use", False
    if "LIST-FILES" in utext and has_tools:
        return [
            {"type": "thinking", "thinking": "The user wants the file list. I will run ls.", "signature": "c2lnLWxpc3QtZmlsZXM="},
            {"type": "text", "text": "Let me list the files."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "ls", "description": "List files in the project"}},
        ], "tool_use", False
    if "READ-NOTES" in utext and has_tools:
        import os
        cwd = os.environ.get("FAKE_PROJECT_DIR", "/tmp/agents/proj-claude")
        return [
            {"type": "text", "text": "Reading notes.txt."},
            {"type": "tool_use", "name": "Read", "input": {"file_path": cwd + "/notes.txt"}},
        ], "tool_use", True
    if "READ-BIG" in utext and has_tools:
        import os
        cwd = os.environ.get("FAKE_PROJECT_DIR", "/tmp/agents/proj-claude")
        return [
            {"type": "text", "text": "Reading big.txt."},
            {"type": "tool_use", "name": "Read", "input": {"file_path": cwd + "/big.txt"}},
        ], "tool_use", False
    if "DELEGATE" in utext and has_tools:
        agent = pick_agent_tool(body)
        if agent:
            return [
                {"type": "text", "text": "I'll delegate the counting to a subagent."},
                {"type": "tool_use", "name": agent, "input": {
                    "description": "Count lines in notes.txt",
                    "prompt": "SUBAGENT-COUNT: run `wc -l notes.txt` in the project directory and report the number of lines.",
                    "subagent_type": "general-purpose"}},
            ], "tool_use", False
    if "THINK-ONLY" in utext:
        return [
            {"type": "thinking", "thinking": "17 * 3 = 51. That is the answer.", "signature": "c2lnLXRoaW5rLW9ubHk="},
            {"type": "text", "text": "17 times 3 is 51."},
        ], "end_turn", False
    if "AFTER-COMPACT" in utext:
        return [{"type": "text", "text": "Still here after compaction: notes.txt has alpha, beta, gamma."}], "end_turn", False
    return [{"type": "text", "text": "OK."}], "end_turn", False


def materialize(content, seed):
    out = []
    for i, b in enumerate(content):
        b = dict(b)
        if b["type"] == "tool_use":
            b["id"] = det_id("toolu_01", seed + ":" + str(i))
        out.append(b)
    return out


def out_tokens(content):
    return max(1, len(json.dumps(content)) // 4)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except Exception:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("request-id", det_id("req_", str(time.time())))
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"method": "GET", "path": self.path, "headers": dict(self.headers)})
        if self.path.startswith("/v1/models"):
            return self._json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not found"}})

    def do_HEAD(self):
        log({"method": "HEAD", "path": self.path})
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        body = self._body()
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("x-api-key", "authorization")}
        log({"method": "POST", "path": self.path, "headers": hdrs, "body": body})
        path = self.path.split("?")[0]
        if path.endswith("/v1/messages/count_tokens"):
            b = body or {}
            n = len(json.dumps([b.get("system"), b.get("tools"), b.get("messages")])) // 4
            return self._json(200, {"input_tokens": n})
        if not path.endswith("/v1/messages"):
            return self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not found"}})
        with LOCK:
            COUNTER[0] += 1
            seq = COUNTER[0]
        content, stop, one_hour = script(body or {})
        # the response counter keeps ids unique when two requests look alike (e.g. after compaction)
        seed = "%d:" % seq + json.dumps((body or {}).get("messages"))[-4000:] + str(len((body or {}).get("messages") or []))
        content = materialize(content, seed)
        # thinking only when the request allows it? keep it always (CLI records what it gets)
        usage = usage_for(body or {}, one_hour)
        model = (body or {}).get("model", "claude-sonnet-4-5")
        msg_id = det_id("msg_01", seed + model)
        otok = out_tokens(content)
        diagnostics = None
        if os.environ.get("FAKE_CACHE_DIAGNOSTICS"):
            # ds4tui addition: the `cache-diagnosis-2026-04-07` beta's field (anthropics/claude-code
            # #87966), so we can see which Claude Code version persists it.
            miss = usage["cache_read_input_tokens"] == 0 and seq > 1
            diagnostics = {"cache_miss_reason": {"type": "messages_changed",
                                                 "cache_missed_input_tokens": usage["cache_creation_input_tokens"]}
                           if miss else None}
        log({"reply_to": seq, "msg_id": msg_id, "content": content, "stop": stop, "usage": usage,
             "diagnostics": diagnostics})
        if not (body or {}).get("stream"):
            u = dict(usage)
            u["output_tokens"] = otok
            return self._json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                                    "content": content, "stop_reason": stop, "stop_sequence": None, "usage": u,
                                    **({"diagnostics": diagnostics} if diagnostics is not None else {})})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()

        def ev(name, data):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
            self.wfile.flush()

        start_usage = dict(usage)
        start_usage["output_tokens"] = 1
        ev("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage,
            **({"diagnostics": diagnostics} if diagnostics is not None else {})}})
        ev("ping", {"type": "ping"})
        for i, b in enumerate(content):
            t = b["type"]
            if t == "text":
                ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                txt = b["text"]
                for j in range(0, len(txt), 40):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": txt[j:j + 40]}})
            elif t == "thinking":
                ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": b["thinking"]}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": b["signature"]}})
            elif t == "tool_use":
                ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                js = json.dumps(b["input"])
                for j in range(0, len(js), 30):
                    ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": js[j:j + 30]}})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                             "usage": {"output_tokens": otok}})
        ev("message_stop", {"type": "message_stop"})
        self.close_connection = True


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
    print("fake anthropic on", PORT, flush=True)
    srv.serve_forever()
