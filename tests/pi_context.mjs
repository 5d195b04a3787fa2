// Print what the real Pi builds from a session file, as JSON on stdout:
// {leafId, sessionName, model, thinkingLevel, branchEntryIds, contextEntryIds, labels,
//  messages, llmMessages, messageCount} (the shape of shared/sessions-pi/<name>.context.json).
//
// Usage: node tests/pi_context.mjs SESSION.jsonl [PI_PACKAGE_DIR] [KEEP_RECENT_TOKENS[,KEEP...]]
// With KEEP_RECENT_TOKENS (comma-separated values allowed), also `compactions`: for each value,
// what Pi's prepareCompaction(branch, {keepRecentTokens}) returns ({firstKeptEntryId,
// tokensBefore, isSplitTurn, readFiles, modifiedFiles, summarizeCount, prefixCount,
// previousSummary}), or null ("Nothing to compact").
// PI_PACKAGE_DIR defaults to <repo>/.cache/pi/node_modules/@earendil-works/pi-coding-agent
// (scripts/install_pi.sh installs it there).
//
// WARNING: SessionManager.open() may write to the file (it appends a newline after a partial
// last line and rewrites v1/v2 files). Always pass a COPY.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [file, packageArg, keepArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node tests/pi_context.mjs SESSION.jsonl [PI_PACKAGE_DIR]");
  process.exit(2);
}
const packageDir = resolve(
  packageArg || join(here, "..", ".cache", "pi", "node_modules", "@earendil-works", "pi-coding-agent"),
);
const pi = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);

const manager = pi.SessionManager.open(resolve(file));
const projection = manager.buildSessionProjection();
const context = manager.buildSessionContext();
const labels = {};
for (const entry of manager.getEntries()) {
  const label = manager.getLabel(entry.id);
  if (label !== undefined) labels[entry.id] = label;
}
const result = {
  leafId: manager.getLeafId(),
  sessionName: manager.getSessionName() ?? null,
  model: context.model ?? null,
  thinkingLevel: context.thinkingLevel,
  branchEntryIds: manager.getBranch().map((entry) => entry.id),
  contextEntryIds: projection.entries.map((entry) => entry.sourceEntry.id),
  labels,
  messages: context.messages,
  llmMessages: pi.convertToLlm(context.messages),
  messageCount: context.messages.length,
};
if (keepArg !== undefined) {
  const compaction = await import(pathToFileURL(join(packageDir, "dist", "core", "compaction", "compaction.js")).href);
  result.compactions = {};
  for (const keep of keepArg.split(",")) {
  const settings = { ...compaction.DEFAULT_COMPACTION_SETTINGS, keepRecentTokens: Number(keep) };
  const prep = compaction.prepareCompaction(manager.getBranch(), settings);
  result.compactions[keep] = prep
    ? {
        firstKeptEntryId: prep.firstKeptEntryId,
        tokensBefore: prep.tokensBefore,
        isSplitTurn: prep.isSplitTurn,
        readFiles: [...prep.fileOps.read].filter((f) => !prep.fileOps.edited.has(f) && !prep.fileOps.written.has(f)).sort(),
        modifiedFiles: [...new Set([...prep.fileOps.edited, ...prep.fileOps.written])].sort(),
        summarizeCount: prep.messagesToSummarize.length,
        prefixCount: prep.turnPrefixMessages.length,
        previousSummary: prep.previousSummary ?? null,
      }
    : null;
  }
}
process.stdout.write(JSON.stringify(result));
