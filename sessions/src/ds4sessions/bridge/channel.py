"""The ds4tui bridge: steer a running Pi through a Pi extension instead of writing the file.

A Pi that has a session open keeps it in memory; an entry another process appends is not seen
until the session is reopened. The bridge extension (`ds4sessions/bridge/ds4tui-bridge.ts`, installed into
`<agentDir>/extensions/`) runs inside Pi and applies ds4tui's commands through Pi's own API, so
Pi itself appends the entries and its next request carries the change. See docs/bridge.md.

Channel, per session: `<agentDir>/ds4tui/<session-id>/`

- `inbox.jsonl` (ds4tui appends): `{"v": 1, "id", "kind": "pin"|"unpin"|"collapse"|"compact",
  "args", "leafId", "time", "deadline"}` (times in Unix ms);
- `outbox.jsonl` (the bridge appends): `{"v": 1, "id", "kind", "status":
  "applied"|"refused"|"failed", "reason", "entryIds", "leafBefore", "leafAfter", "time"}`;
- `heartbeat.json` (the bridge rewrites about once a second): `{"v": 1, "pid", "sessionId",
  "sessionFile", "leafId", "idle", "mode", "processed", "pending", "time", "timeMs"}`;
- `requests.jsonl` (the bridge appends, one line per provider request): time, provider/model,
  cache retention, system-prompt and tool-schema chars-v1 token estimates and SHA-256 hashes,
  per-message chars-v1 tokens and DS4 fingerprints (`ds4core.cache_policy.message_fingerprint`
  of the message as stored);
- `<command-id>.private.json` (ds4tui writes, mode 0600): a command's text arguments (the
  collapse summary, compaction instructions), named in the command's `args.privateFile` with its `args.privateSha256`;
  the bridge deletes it once it has answered the command (ds4tui, when the command times out).

No message content stays in the channel.

Commands apply only while the agent is idle, in inbox order, each once, and only when Pi's leaf
is still the `leafId` ds4tui saw; a command not started by its `deadline` is refused.

This module is the bridge's public face; the work is split by job: `install` (the extension
file), `status` (channel folder, heartbeat, live/stale), `commands` (inbox/outbox protocol and
the steering actions), `requests` (request metadata and prefix comparison).
"""

from __future__ import annotations

from ds4sessions.bridge.commands import (
    KINDS,
    PROTOCOL_VERSION,
    BridgeTimeout,
    BridgeUnavailable,
    Command,
    CommandResult,
    bridge_collapse,
    bridge_compact,
    bridge_pin,
    collapse_args,
    pin_label,
    read_results,
    send_command,
    submit,
    wait_result,
)
from ds4sessions.bridge.install import (
    EXTENSION_FILE,
    InstallResult,
    extension_source,
    install,
    installed_path,
    purge_channels,
    uninstall,
)
from ds4sessions.bridge.requests import RequestMessage, RequestMeta, prefix_change, read_requests
from ds4sessions.bridge.status import (
    STALE_SECONDS,
    BridgeStatus,
    Heartbeat,
    _pid_alive,
    channel_dir,
    read_heartbeat,
    status,
)

__all__ = [
    "EXTENSION_FILE", "KINDS", "PROTOCOL_VERSION", "STALE_SECONDS", "BridgeStatus", "BridgeTimeout",
    "BridgeUnavailable", "Command", "CommandResult", "Heartbeat", "InstallResult", "RequestMessage",
    "RequestMeta", "_pid_alive", "bridge_collapse", "bridge_compact", "bridge_pin", "channel_dir",
    "collapse_args", "extension_source", "install", "installed_path", "pin_label", "prefix_change",
    "purge_channels", "read_heartbeat", "read_requests", "read_results", "send_command", "status", "submit", "uninstall",
    "wait_result",
]
