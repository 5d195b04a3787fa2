#!/usr/bin/env python3
"""Fake OpenAI Responses API (copy of /work/shared/tools/agent-oracle/fake_openai.py; adds
rate-limit headers when FAKE_RATE_LIMITS is set).

Fake OpenAI Responses API for driving the real Codex CLI offline.

Usage: fake_openai.py PORT LOGFILE

Logs every request (method, path, headers without auth, JSON body) to LOGFILE, one JSON line each.
Replies are scripted from the content of the request:

  last user text contains "LIST-FILES"  -> reasoning + function_call to the shell tool: ls
  last user text contains "READ-NOTES"  -> message + function_call to the shell tool: cat notes.txt
  last user text contains "THINK-ONLY"  -> reasoning + message
  last user text contains "DELEGATE"    -> function_call multi_agent_v1/spawn_agent (prompt "SUBAGENT-COUNT ..."),
                                           then wait_agent on the id it returns, then a message
  subagent's text contains "SUBAGENT-COUNT" -> shell call: wc -l notes.txt
  a summarization/compaction prompt     -> message with a fixed summary
  last input item is a function_call_output -> message describing the output
  anything else                         -> short message

usage: input_tokens = len(json of instructions+tools+input)//4; cached_tokens = what the same
prompt_cache_key had already sent (a simulated prefix cache); reasoning_tokens = len(reasoning)//4.
"""
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 8766
LOG = sys.argv[2] if len(sys.argv) > 2 else "/tmp/agents/fake_openai.log.jsonl"
LOCK = threading.Lock()
CACHE = {}
COUNTER = [0]


def log(entry):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def det(prefix, seed, n=32):
    return prefix + hashlib.sha256(seed.encode()).hexdigest()[:n]


def item_text(it):
    c = it.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(p.get("text", "") for p in (c or []) if isinstance(p, dict))


def tool_choice(body, cmd):
    """Return (name, arguments-json) for running shell command string cmd."""
    names = []
    for t in body.get("tools") or []:
        names.append(t.get("name") or (t.get("function") or {}).get("name"))
    if "shell_command" in names:
        return "shell_command", json.dumps({"command": cmd, "workdir": None} if False else {"command": cmd})
    if "exec_command" in names:
        return "exec_command", json.dumps({"cmd": cmd})
    if "shell" in names:
        return "shell", json.dumps({"command": ["bash", "-lc", cmd]})
    return (names[0] if names else "shell"), json.dumps({"command": ["bash", "-lc", cmd]})


def script(body):
    inp = body.get("input") or []
    if isinstance(inp, str):
        inp = [{"type": "message", "role": "user", "content": inp}]
    last = inp[-1] if inp else {}
    users = [it for it in inp if it.get("type", "message") == "message" and it.get("role") == "user"]
    utext = item_text(users[-1]) if users else ""
    out = []  # list of ("reasoning", text) / ("message", text) / ("call", name, args)
    if last.get("type") in ("function_call_output", "custom_tool_call_output"):
        calls = [it for it in inp if it.get("type") in ("function_call", "custom_tool_call")]
        args = calls[-1].get("arguments", "") if calls else ""
        cname = calls[-1].get("name", "") if calls else ""
        if cname == "spawn_agent":
            outs = last.get("output")
            txt = outs if isinstance(outs, str) else json.dumps(outs)
            aid = None
            try:
                o = json.loads(txt)
                aid = o.get("agent_id") or o.get("id") or o.get("target")
            except Exception:
                import re
                m = re.search(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', txt)
                aid = m.group(0) if m else txt.strip()
            return [("call", "wait_agent", json.dumps({"targets": [aid], "timeout_ms": 30000}), "multi_agent_v1")]
        if cname == "wait_agent":
            return [("message", "The subagent reports that notes.txt has 3 lines.")]
        if "wc -l" in args:
            return [("message", "notes.txt has 3 lines.")]
        if "cat" in args:
            return [("message", "notes.txt contains alpha, beta and gamma.")]
        return [("message", "The directory contains hello.py and notes.txt.")]
    if "<subagent_notification>" in utext:
        return [("message", "The subagent reports that notes.txt has 3 lines.")]
    low = utext.lower()
    if ("summary" in low or "summar" in low) and ("checkpoint" in low or "handoff" in low or "compact" in low or "context" in low) and "LIST-FILES" not in utext and "READ-NOTES" not in utext and "THINK-ONLY" not in utext and "AFTER-COMPACT" not in utext:
        return [("message", "Summary: the user listed the files (hello.py, notes.txt), read notes.txt "
                            "(alpha, beta, gamma) and asked for 17*3 = 51. Nothing is pending.")]
    if "SUBAGENT-COUNT" in utext:
        n, a = tool_choice(body, "wc -l notes.txt")
        return [("call", n, a)]
    if "DELEGATE" in utext:
        return [("message", "I'll delegate the counting to a subagent."),
                ("call", "spawn_agent", json.dumps({"message": "SUBAGENT-COUNT: run `wc -l notes.txt` in the current directory and report the number of lines."}), "multi_agent_v1")]
    if "LIST-FILES" in utext:
        n, a = tool_choice(body, "ls")
        return [("reasoning", "The user wants the file list; run ls."), ("call", n, a)]
    if "READ-NOTES" in utext:
        n, a = tool_choice(body, "cat notes.txt")
        return [("message", "Reading notes.txt."), ("call", n, a)]
    if "THINK-ONLY" in utext:
        return [("reasoning", "17 * 3 = 51."), ("message", "17 times 3 is 51.")]
    if "AFTER-COMPACT" in utext:
        return [("message", "After compaction I still know notes.txt holds alpha, beta, gamma.")]
    return [("message", "OK.")]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("content-encoding") == "zstd":
            return {"_zstd": len(raw)}
        try:
            return json.loads(raw) if raw else None
        except Exception:
            return {"_raw": raw.decode("utf-8", "replace")[:2000]}

    def _json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"method": "GET", "path": self.path, "headers": {k: v for k, v in self.headers.items() if k.lower() != "authorization"}})
        if self.path.split("?")[0].endswith("/models"):
            return self._json(200, {"object": "list", "data": [], "models": []})
        self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):
        body = self._body()
        hdrs = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        log({"method": "POST", "path": self.path, "headers": hdrs, "body": body})
        path = self.path.split("?")[0]
        if not path.endswith("/responses"):
            return self._json(404, {"error": {"message": "not found: " + path, "type": "invalid_request_error"}})
        body = body or {}
        with LOCK:
            COUNTER[0] += 1
            nreq = COUNTER[0]
        plan = script(body)
        seed = "%d:" % nreq + json.dumps(body.get("input"))[-4000:] + str(len(body.get("input") or []))
        rid = det("resp_", seed)
        model = body.get("model", "gpt-5-codex")
        total_in = len(json.dumps([body.get("instructions"), body.get("tools"), body.get("input")])) // 4
        key = body.get("prompt_cache_key") or hashlib.sha256((body.get("instructions") or "").encode()).hexdigest()
        with LOCK:
            prev = CACHE.get(key, 0)
            cached = min(prev, total_in)
            cached -= cached % 64  # cache hits come in blocks
            CACHE[key] = max(prev, total_in)
        items = []
        reasoning_tokens = 0
        for i, p in enumerate(plan):
            iid = seed + ":" + str(i)
            if p[0] == "reasoning":
                reasoning_tokens += max(1, len(p[1]) // 4) + 16
                items.append({"id": det("rs_", iid), "type": "reasoning",
                              "summary": [{"type": "summary_text", "text": "**Plan**\n\n" + p[1]}],
                              "encrypted_content": "ZmFrZS1lbmNyeXB0ZWQt" + hashlib.sha256(iid.encode()).hexdigest()[:16]})
            elif p[0] == "message":
                items.append({"id": det("msg_", iid), "type": "message", "status": "completed", "role": "assistant",
                              "content": [{"type": "output_text", "text": p[1], "annotations": []}]})
            else:
                fc = {"id": det("fc_", iid), "type": "function_call", "status": "completed",
                      "name": p[1], "arguments": p[2], "call_id": det("call_", iid, 24)}
                if len(p) > 3:
                    fc["namespace"] = p[3]
                items.append(fc)
        out_tokens = len(json.dumps(items)) // 4 + reasoning_tokens
        usage = {"input_tokens": total_in, "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                 "total_tokens": total_in + out_tokens}
        log({"reply": rid, "items": items, "usage": usage})
        resp = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "in_progress",
                "model": model, "output": [], "usage": None}
        if not body.get("stream"):
            resp.update(status="completed", output=items, usage=usage)
            return self._json(200, resp)
        self.send_response(200)
        if os.environ.get("FAKE_RATE_LIMITS"):
            # Codex reads its plan's usage windows from these headers (codex-rs/codex-api rate_limits.rs):
            # used % grows by 1.5 per request; 5 h primary and 7 d secondary windows, fixed reset times.
            self.send_header("x-codex-primary-used-percent", "%.1f" % (10 + 1.5 * nreq))
            self.send_header("x-codex-primary-window-minutes", "300")
            self.send_header("x-codex-primary-reset-at", "1796190000")
            self.send_header("x-codex-secondary-used-percent", "%.1f" % (40 + 0.5 * nreq))
            self.send_header("x-codex-secondary-window-minutes", "10080")
            self.send_header("x-codex-secondary-reset-at", "1796700000")
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        seq = [0]

        def ev(data):
            data = dict(data)
            data["sequence_number"] = seq[0]
            seq[0] += 1
            self.wfile.write(("event: %s\ndata: %s\n\n" % (data["type"], json.dumps(data))).encode())
            self.wfile.flush()

        ev({"type": "response.created", "response": resp})
        ev({"type": "response.in_progress", "response": resp})
        for oi, it in enumerate(items):
            if it["type"] == "message":
                start = dict(it, status="in_progress", content=[])
                ev({"type": "response.output_item.added", "output_index": oi, "item": start})
                ev({"type": "response.content_part.added", "item_id": it["id"], "output_index": oi, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}})
                txt = it["content"][0]["text"]
                for j in range(0, len(txt), 24):
                    ev({"type": "response.output_text.delta", "item_id": it["id"], "output_index": oi, "content_index": 0, "delta": txt[j:j + 24]})
                ev({"type": "response.output_text.done", "item_id": it["id"], "output_index": oi, "content_index": 0, "text": txt})
                ev({"type": "response.content_part.done", "item_id": it["id"], "output_index": oi, "content_index": 0,
                    "part": it["content"][0]})
            elif it["type"] == "reasoning":
                ev({"type": "response.output_item.added", "output_index": oi, "item": dict(it, summary=[])})
                st = it["summary"][0]["text"]
                ev({"type": "response.reasoning_summary_part.added", "item_id": it["id"], "output_index": oi, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""}})
                ev({"type": "response.reasoning_summary_text.delta", "item_id": it["id"], "output_index": oi, "summary_index": 0, "delta": st})
                ev({"type": "response.reasoning_summary_text.done", "item_id": it["id"], "output_index": oi, "summary_index": 0, "text": st})
                ev({"type": "response.reasoning_summary_part.done", "item_id": it["id"], "output_index": oi, "summary_index": 0,
                    "part": {"type": "summary_text", "text": st}})
            else:
                ev({"type": "response.output_item.added", "output_index": oi, "item": dict(it, status="in_progress", arguments="")})
                ev({"type": "response.function_call_arguments.delta", "item_id": it["id"], "output_index": oi, "delta": it["arguments"]})
                ev({"type": "response.function_call_arguments.done", "item_id": it["id"], "output_index": oi, "arguments": it["arguments"]})
            ev({"type": "response.output_item.done", "output_index": oi, "item": it})
        done = dict(resp, status="completed", output=items, usage=usage)
        ev({"type": "response.completed", "response": done})
        self.close_connection = True


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
    print("fake openai on", PORT, flush=True)
    srv.serve_forever()
