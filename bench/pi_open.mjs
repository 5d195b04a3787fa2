// Pi's own cold open of a session, for bench/bench_cold.py: `SessionManager.open(FILE)` (reads
// and parses every line) then `buildSessionContext()`; prints the context's message count.
//
// Usage: node bench/pi_open.mjs SESSION.jsonl [PI_PACKAGE_DIR]
// PI_PACKAGE_DIR defaults to <repo>/.cache/pi/node_modules/@earendil-works/pi-coding-agent
// (scripts/install_pi.sh installs it there). SessionManager.open() may write to the file (a
// newline after a partial last line; v1/v2 rewrites): pass a COPY.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [file, packageArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node bench/pi_open.mjs SESSION.jsonl [PI_PACKAGE_DIR]");
  process.exit(2);
}
const packageDir = resolve(
  packageArg || join(here, "..", ".cache", "pi", "node_modules", "@earendil-works", "pi-coding-agent"),
);
const pi = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);
const manager = pi.SessionManager.open(resolve(file));
const context = manager.buildSessionContext();
process.stdout.write(`${context.messages.length}\n`);
