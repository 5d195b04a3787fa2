/**
 * ds4tui bridge: lets ds4tui steer a running Pi through Pi's own API.
 *
 * Channel (one folder per session): <agentDir>/ds4tui/<session-id>/
 *   inbox.jsonl     commands written by ds4tui, one JSON object a line:
 *                   {v, id, kind: "pin"|"unpin"|"collapse"|"compact", args, leafId, time, deadline}
 *   outbox.jsonl    results written here, one a line:
 *                   {v, id, kind, status: "applied"|"refused"|"failed", reason, entryIds,
 *                    leafBefore, leafAfter, time}
 *   heartbeat.json  {v, bridge, pid, sessionId, sessionFile, leafId, idle, processed, time, timeMs}
 *   requests.jsonl  one metadata line per provider request (no message content)
 *   <id>.private.json  a command's text arguments (a collapse summary), when it has any: named by
 *                   the command's `args.privateFile` and checked against `args.privateSha256`;
 *                   deleted as soon as the command is answered
 *
 * Commands are applied only while the agent is idle, in inbox order, each once (ids already in
 * the outbox are skipped), and only when Pi's leaf still equals the leaf the user saw. Pins are
 * `pi.setLabel`, a collapse is `ctx.navigateTree(anchor, {summarize: true})` with the summary
 * ds4tui computed (handed to Pi in `session_before_tree`, so no model is called), a compaction is
 * `ctx.compact({customInstructions})`. Pi appends every entry itself.
 *
 * Session-changing calls need a command context, so the poller dispatches the internal command
 * `/ds4tui-bridge-apply` through `pi.sendUserMessage(..., {expandPromptTemplates: true})`.
 *
 * Nothing the bridge writes contains message content: only ids, kinds, reasons, token estimates
 * and SHA-256 fingerprints; the one file with text (a command's private arguments) is removed
 * once the command is answered.
 */
import { createHash } from "node:crypto";
import { appendFileSync, chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { getAgentDir, type ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { getCurrentSystemPrompt, getCurrentTools } from "@earendil-works/pi-ai";

const BRIDGE_VERSION = 1;
const POLL_MS = 250;
const HEARTBEAT_MS = 1000;
const REDISPATCH_MS = 5000;
const APPLY_COMMAND = "ds4tui-bridge-apply";
const KINDS = new Set(["pin", "unpin", "collapse", "compact"]);

type Command = {
  v?: number;
  id: string;
  kind: string;
  args?: Record<string, any>;
  leafId?: string | null;
  time?: number;
  deadline?: number;
};

type Result = {
  status: "applied" | "refused" | "failed";
  reason: string;
  entryIds?: string[];
};

// --- chars-v1 token estimates and DS4 fingerprints (ds4core.estimate / ds4core.cache_policy) ---

function textTokens(s: string): number {
  return s ? Math.ceil(s.length / 4) : 0;
}

function jsonOrText(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "";
  } catch {
    return String(value);
  }
}

function contentTokens(content: unknown): number {
  if (typeof content === "string") return textTokens(content);
  if (!Array.isArray(content)) return textTokens(jsonOrText(content));
  let total = 0;
  for (const block of content as any[]) {
    if (block === null || typeof block !== "object" || Array.isArray(block)) {
      total += textTokens(jsonOrText(block));
      continue;
    }
    if (block.type === "image") total += 1024;
    else if (block.type === "text" && typeof block.text === "string") total += textTokens(block.text);
    else if (block.type === "thinking" && typeof block.thinking === "string") total += textTokens(block.thinking);
    else if (block.type === "toolCall")
      total += textTokens((typeof block.name === "string" ? block.name : "") + jsonOrText(block.arguments));
    else total += textTokens(jsonOrText(block));
    total += 4;
  }
  return total;
}

/** DS4 chars-v1 `message_tokens` (spec §1.2). */
function messageTokens(msg: any): number {
  if (msg === null || typeof msg !== "object" || Array.isArray(msg)) return textTokens(jsonOrText(msg)) + 8;
  let total = 8;
  if (typeof msg.role === "string") total += textTokens(msg.role);
  if ("content" in msg) total += contentTokens(msg.content);
  for (const key of ["summary", "command", "output", "toolName"]) {
    if (typeof msg[key] === "string") total += textTokens(msg[key]);
  }
  return total;
}

function stableNormalize(value: any): any {
  if (value === undefined) return "[undefined]";
  if (typeof value === "function") return "[function]";
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  if (value instanceof Uint8Array) return `[bytes:${value.length}]`;
  if (Array.isArray(value)) return value.map(stableNormalize);
  if (value !== null && typeof value === "object") {
    const out: Record<string, any> = {};
    for (const key of Object.keys(value).sort()) out[key] = stableNormalize(value[key]);
    return out;
  }
  return value;
}

/** DS4's `stableStringify`: keys sorted recursively, then JSON.stringify. */
function stableStringify(value: unknown): string {
  return JSON.stringify(stableNormalize(value));
}

function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** Fingerprint of a message as it is stored in the session file (JSON round trip first, so
 * in-memory `undefined` fields do not count): equals `ds4core.cache_policy.message_fingerprint`
 * of the same message read back from the file. */
function messageFingerprint(msg: unknown): string {
  const stored = JSON.parse(JSON.stringify(msg) ?? "null");
  return sha256(stableStringify(stored));
}

function toolTokens(tool: any): number {
  const definition = { name: tool?.name, description: tool?.description, parameters: tool?.parameters };
  return textTokens(stableStringify(definition)) + 12;
}

// --- channel files ---

function isoNow(): string {
  return new Date().toISOString();
}

// Channel files: 0600, never through a planted symlink (O_NOFOLLOW); the folder is 0700 (issue 13).
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const READ_FLAGS = constants.O_RDONLY | NOFOLLOW | (constants.O_NONBLOCK ?? 0);

function writeJsonAtomic(path: string, value: unknown): void {
  const tmp = `${path}.${process.pid}.tmp`;
  rmSync(tmp, { force: true });
  writeFileSync(tmp, JSON.stringify(value) + "\n", { mode: 0o600, flag: constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NOFOLLOW });
  renameSync(tmp, path);
}

function appendLine(path: string, value: unknown): void {
  appendFileSync(path, JSON.stringify(value) + "\n", { mode: 0o600, flag: constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | NOFOLLOW });
}

class Channel {
  readonly dir: string;
  readonly inbox: string;
  readonly outbox: string;
  readonly heartbeat: string;
  readonly requests: string;
  private offset = 0;
  private partial = "";
  readonly processed = new Set<string>();
  readonly queue: Command[] = [];

  constructor(agentDir: string, sessionId: string) {
    this.dir = join(agentDir, "ds4tui", sessionId);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(join(agentDir, "ds4tui"), 0o700);
    chmodSync(this.dir, 0o700);
    this.inbox = join(this.dir, "inbox.jsonl");
    this.outbox = join(this.dir, "outbox.jsonl");
    this.heartbeat = join(this.dir, "heartbeat.json");
    this.requests = join(this.dir, "requests.jsonl");
    if (existsSync(this.outbox)) {
      for (const line of readFileSync(this.outbox, { encoding: "utf8", flag: READ_FLAGS }).split("\n")) {
        try {
          const rec = JSON.parse(line);
          if (typeof rec?.id === "string") this.processed.add(rec.id);
        } catch {
          // a torn or empty line
        }
      }
    }
  }

  /** Read new complete inbox lines; queue commands not yet processed or queued. */
  poll(): void {
    if (!existsSync(this.inbox)) return;
    const size = statSync(this.inbox).size;
    if (size < this.offset) {
      this.offset = 0; // the inbox was truncated or replaced: read it again (processed ids still apply)
      this.partial = "";
    }
    if (size === this.offset) return;
    const fd = openSync(this.inbox, READ_FLAGS);
    let text: string;
    try {
      const buffer = Buffer.alloc(size - this.offset);
      const got = readSync(fd, buffer, 0, buffer.length, this.offset);
      this.offset += got;
      text = this.partial + buffer.subarray(0, got).toString("utf8");
    } finally {
      closeSync(fd);
    }
    const lines = text.split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.trim()) continue;
      let cmd: any;
      try {
        cmd = JSON.parse(line);
      } catch {
        continue; // not a command; ds4tui writes whole lines, so this is foreign input
      }
      if (typeof cmd?.id !== "string" || this.processed.has(cmd.id)) continue;
      if (this.queue.some((q) => q.id === cmd.id)) continue;
      this.queue.push(cmd as Command);
    }
  }

  /** The command's private arguments (e.g. a collapse summary), checked against their hash. */
  readPrivate(cmd: Command): Record<string, any> {
    const name = cmd.args?.privateFile;
    if (name === undefined) return {};
    const path = join(this.dir, basename(String(name)));
    const text = readFileSync(path, { encoding: "utf8", flag: READ_FLAGS });
    if (sha256(text) !== cmd.args?.privateSha256) throw new Error(`${basename(path)} does not match its hash`);
    return JSON.parse(text);
  }

  dropPrivate(cmd: Command): void {
    const name = cmd.args?.privateFile;
    if (name !== undefined) rmSync(join(this.dir, basename(String(name))), { force: true });
  }

  answer(cmd: Command, result: Result, leafBefore: string | null, leafAfter: string | null): void {
    this.processed.add(cmd.id);
    appendLine(this.outbox, {
      v: BRIDGE_VERSION,
      id: cmd.id,
      kind: cmd.kind,
      status: result.status,
      reason: result.reason,
      entryIds: result.entryIds ?? [],
      leafBefore,
      leafAfter,
      time: isoNow(),
    });
  }
}

export default function ds4tuiBridge(pi: ExtensionAPI) {
  let channel: Channel | undefined;
  let ctxRef: any;
  let timer: ReturnType<typeof setInterval> | undefined;
  let lastBeat = 0;
  let applying = false;
  let dispatchedAt = 0;
  let requestSeq = 0;
  let lastTranscript: any[] | undefined;
  let pendingTree: { anchorId: string; summary: string; details: unknown; spanEntryIds?: string[] } | undefined;
  let treeRefusal: string | undefined;

  const leafOf = (ctx: any): string | null => ctx.sessionManager.getLeafId() ?? null;

  const beat = (ctx: any) => {
    if (!channel) return;
    lastBeat = Date.now();
    const now = new Date(lastBeat);
    writeJsonAtomic(channel.heartbeat, {
      v: BRIDGE_VERSION,
      bridge: "ds4tui-bridge",
      pid: process.pid,
      sessionId: ctx.sessionManager.getSessionId(),
      sessionFile: ctx.sessionManager.getSessionFile() ?? null,
      leafId: leafOf(ctx),
      idle: ctx.isIdle(),
      mode: ctx.mode,
      processed: channel.processed.size,
      pending: channel.queue.length,
      time: now.toISOString(),
      timeMs: lastBeat,
    });
  };

  const tick = () => {
    const ctx = ctxRef;
    if (!channel || !ctx) return;
    try {
      channel.poll();
      if (Date.now() - lastBeat >= HEARTBEAT_MS) beat(ctx);
      const waiting = Date.now() - dispatchedAt < REDISPATCH_MS; // a dispatch is on its way
      if (channel.queue.length > 0 && !applying && !waiting && ctx.isIdle()) {
        dispatchedAt = Date.now();
        pi.sendUserMessage(`/${APPLY_COMMAND}`, { expandPromptTemplates: true });
      }
    } catch (err) {
      // never let the poller throw into Pi; the next tick retries
      console.error(`ds4tui-bridge: ${err instanceof Error ? err.message : String(err)}`);
    }
  };

  const stop = () => {
    if (timer) clearInterval(timer);
    timer = undefined;
    channel = undefined;
    ctxRef = undefined;
  };

  pi.on("session_start", async (_event, ctx) => {
    stop();
    ctxRef = ctx;
    channel = new Channel(getAgentDir(), ctx.sessionManager.getSessionId());
    beat(ctx);
    timer = setInterval(tick, POLL_MS);
    timer.unref?.();
  });

  pi.on("session_shutdown", async () => {
    stop();
  });

  // If the apply command ever fails to dispatch as a command, never let its text reach the model.
  pi.on("input", async (event) => {
    if (event.text.trim() === `/${APPLY_COMMAND}`) return { action: "handled" };
    return { action: "continue" };
  });

  pi.registerCommand(APPLY_COMMAND, {
    description: "Apply pending ds4tui steering commands (internal to the ds4tui bridge)",
    handler: async (_args, ctx) => {
      dispatchedAt = 0;
      const ch = channel;
      if (applying || !ch) return;
      applying = true;
      try {
        while (ch.queue.length > 0) {
          await ctx.waitForIdle();
          const cmd = ch.queue.shift()!;
          if (ch.processed.has(cmd.id)) continue;
          const before = leafOf(ctx);
          let result: Result;
          try {
            result = await apply(cmd, ch, ctx);
          } catch (err) {
            result = { status: "failed", reason: err instanceof Error ? err.message : String(err) };
          }
          ch.answer(cmd, result, before, leafOf(ctx));
          ch.dropPrivate(cmd);
          beat(ctx);
        }
      } finally {
        applying = false;
      }
    },
  });

  /** Ids of entries present now but not in `before`, in file order. */
  const appendedSince = (ctx: any, before: Set<string>): string[] =>
    ctx.sessionManager.getEntries().map((e: any) => e.id).filter((id: string) => !before.has(id));

  async function apply(cmd: Command, ch: Channel, ctx: any): Promise<Result> {
    if (!KINDS.has(cmd.kind)) return { status: "refused", reason: `unknown command kind ${JSON.stringify(cmd.kind)}` };
    if (typeof cmd.deadline === "number" && Date.now() > cmd.deadline)
      return { status: "refused", reason: "expired: ds4tui stopped waiting for this command before it could run" };
    if (!ctx.isIdle()) return { status: "refused", reason: "the agent is busy (a turn is running)" };
    const leaf = leafOf(ctx);
    if (cmd.leafId !== undefined && cmd.leafId !== leaf)
      return { status: "refused", reason: `leaf changed: you saw ${cmd.leafId}, Pi is at ${leaf}` };
    const args = { ...(cmd.args ?? {}), ...ch.readPrivate(cmd) };
    const sm = ctx.sessionManager;
    const before = new Set<string>(sm.getEntries().map((e: any) => e.id));

    if (cmd.kind === "pin" || cmd.kind === "unpin") {
      const target = args.targetId;
      if (typeof target !== "string" || !sm.getEntry(target)) return { status: "refused", reason: `no entry ${target}` };
      const label = typeof args.label === "string" && args.label.trim() ? args.label : undefined;
      if (cmd.kind === "pin" && label === undefined) return { status: "refused", reason: "pin needs a label" };
      if (sm.getLabel(target) === label) return { status: "refused", reason: `entry ${target} already has that label` };
      pi.setLabel(target, label);
      const what = label ? `labelled ${target}` : `cleared the label of ${target}`;
      return { status: "applied", reason: what, entryIds: appendedSince(ctx, before) };
    }

    if (cmd.kind === "collapse") {
      const anchor = args.anchorId;
      if (typeof anchor !== "string" || !sm.getEntry(anchor)) return { status: "refused", reason: `no anchor entry ${anchor}` };
      if (typeof args.summary !== "string" || !args.summary) return { status: "refused", reason: "collapse needs ds4tui's summary" };
      const target = sm.getEntry(anchor);
      if ((target.type === "message" && target.message?.role === "user") || target.type === "custom_message")
        return { status: "refused", reason: `anchor ${anchor} is a prompt: Pi would move the leaf before it` };
      pendingTree = {
        anchorId: anchor,
        summary: args.summary,
        details: args.details ?? {},
        spanEntryIds: Array.isArray(args.spanEntryIds) ? args.spanEntryIds : undefined,
      };
      try {
        const outcome = await ctx.navigateTree(anchor, { summarize: true });
        if (outcome?.cancelled) return { status: "refused", reason: treeRefusal ?? "Pi cancelled the tree move" };
      } finally {
        pendingTree = undefined;
        treeRefusal = undefined;
      }
      const ids = appendedSince(ctx, before);
      if (ids.length === 0) return { status: "failed", reason: "Pi appended no branch summary" };
      return { status: "applied", reason: `branch summary at ${anchor}`, entryIds: ids };
    }

    // compact
    const instructions = typeof args.instructions === "string" && args.instructions.trim() ? args.instructions : undefined;
    await new Promise<void>((resolve, reject) => {
      ctx.compact({ customInstructions: instructions, onComplete: () => resolve(), onError: (e: Error) => reject(e) });
    });
    const ids = appendedSince(ctx, before);
    return { status: "applied", reason: "compacted", entryIds: ids };
  }

  pi.on("session_before_tree", async (event) => {
    const pending = pendingTree;
    if (!pending) return undefined; // the user's own /tree: not ours
    const prep: any = event.preparation;
    if (prep.targetId !== pending.anchorId || !prep.userWantsSummary) {
      treeRefusal = `Pi prepared a different tree move (${prep.targetId})`;
      return { cancel: true };
    }
    if (pending.spanEntryIds) {
      const ids = (prep.entriesToSummarize ?? []).map((e: any) => e.id);
      const want = pending.spanEntryIds;
      if (ids.length !== want.length || ids.some((id: string, i: number) => id !== want[i])) {
        treeRefusal = `the span changed: Pi would summarise ${ids.length} entries, ds4tui planned ${want.length}`;
        return { cancel: true };
      }
    }
    return { summary: { summary: pending.summary, details: pending.details } };
  });

  // --- request metadata ---

  pi.on("context_with_system", async (event) => {
    lastTranscript = event.messages;
    return undefined;
  });

  pi.on("before_provider_request", async (event, ctx) => {
    if (!channel) return undefined;
    try {
      const messages = lastTranscript ?? [];
      lastTranscript = undefined;
      const system = getCurrentSystemPrompt(messages as any);
      const tools = getCurrentTools(messages as any);
      const toolJson = tools.map((t: any) => stableStringify({ name: t.name, description: t.description, parameters: t.parameters }));
      const payload: any = event.payload ?? {};
      const model: any = ctx.model ?? {};
      requestSeq += 1;
      appendLine(channel.requests, {
        v: BRIDGE_VERSION,
        seq: requestSeq,
        time: isoNow(),
        sessionId: ctx.sessionManager.getSessionId(),
        leafId: leafOf(ctx),
        provider: model.provider ?? null,
        model: model.id ?? null,
        api: model.api ?? null,
        cacheRetention: cacheRetention(payload),
        system: { tokens: system ? textTokens(system) + 8 : 0, hash: sha256(system ?? "") },
        tools: {
          count: tools.length,
          names: tools.map((t: any) => t.name),
          tokens: tools.reduce((sum: number, t: any) => sum + toolTokens(t), 0),
          hash: sha256(JSON.stringify(toolJson)),
        },
        messages: messages.map((m: any) => ({ role: m?.role ?? null, tokens: messageTokens(m), fp: messageFingerprint(m) })),
        payload: { bytes: Buffer.byteLength(JSON.stringify(payload) ?? "", "utf8"), hash: sha256(JSON.stringify(payload) ?? "") },
      });
    } catch (err) {
      console.error(`ds4tui-bridge: request metadata: ${err instanceof Error ? err.message : String(err)}`);
    }
    return undefined;
  });
}

/** "long" when the payload asks for extended retention (Anthropic `cache_control.ttl: "1h"`,
 * OpenAI `prompt_cache_retention: "24h"`) or PI_CACHE_RETENTION=long (Pi's switch, see
 * docs/environment-variables.md), else "short". */
function cacheRetention(payload: any): "short" | "long" {
  const text = JSON.stringify(payload) ?? "";
  if (text.includes('"ttl":"1h"') || payload?.prompt_cache_retention === "24h") return "long";
  return process.env.PI_CACHE_RETENTION === "long" ? "long" : "short";
}
