// VERA bootstrap plugin for OpenCode, written by `vera connect` to .vera/opencode/ and listed
// by path in the project's opencode.json. It imports no package (so OpenCode installs nothing
// for it) and lives outside .opencode/, where OpenCode installs its plugin SDK from npm.
// Once per session it runs the stateless VERA hook (sanitized Git metadata only, no MCP call)
// and appends its one tagged line to the first user message. It never reads or forwards the
// prompt, never calls VERA's MCP server and never changes permissions; a failure or a slow
// hook only means no line (fail open). At OpenCode's start it also asks `vera mcp-token` for
// the vera server's token, so one that ended while OpenCode was closed is replaced, and
// adds OpenCode's own VERA skill folder (.vera/opencode/skills, absolute, so a session
// started in a subfolder finds it too).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";

const API_URL = __VERA_API_URL__;
const TIMEOUT_MS = 5000;
const seen = new Set();
// OpenCode orders parts by id and rejects a part whose id does not start with "prt".
const partId = () =>
  "prt_" + Date.now().toString(16).padStart(12, "0") + randomBytes(7).toString("hex");

function runHook(root, directory) {
  return new Promise((resolve) => {
    const script = path.join(root, ".vera", "opencode", "vera_hook.py");
    let out = "";
    let child;
    try {
      child = spawn("python3", [script, "session-start", "--runtime", "opencode", "--api-url", API_URL], {
        cwd: directory, stdio: ["pipe", "pipe", "ignore"], timeout: TIMEOUT_MS,
      });
    } catch {
      return resolve(null);
    }
    child.on("error", () => resolve(null));
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.on("close", () => {
      try {
        resolve(JSON.parse(out).hookSpecificOutput.additionalContext);
      } catch {
        resolve(null);
      }
    });
    child.stdin.end(JSON.stringify({ cwd: directory }));
  });
}

// `vera mcp-token --runtime opencode`: OpenCode's own MCP token for this checkout, minted
// again when it ends soon; null when it fails (OpenCode then keeps the token it read from
// .vera/opencode/mcp-token).
function freshToken(root) {
  return new Promise((resolve) => {
    let out = "";
    let child;
    try {
      child = spawn("vera", ["mcp-token", "--runtime", "opencode"], { cwd: root, stdio: ["ignore", "pipe", "ignore"],
        timeout: TIMEOUT_MS * 2 });
    } catch {
      return resolve(null);
    }
    child.on("error", () => resolve(null));
    child.stdout.on("data", (chunk) => { out += chunk; });
    child.on("close", (code) => resolve(code === 0 && out.trim() ? out.trim() : null));
  });
}

export const VeraBootstrap = async ({ directory, worktree }) => ({
  // Runs before OpenCode connects its MCP servers: the vera server's header gets a fresh
  // token instead of one that ended while OpenCode was closed.
  config: async (config) => {
    if (!config) return;
    const root = worktree || directory;
    config.skills = config.skills || {};
    config.skills.paths = [...(config.skills.paths || []),
      path.join(root, ".vera", "opencode", "skills")];
    const headers = config.mcp?.vera?.headers;
    if (!headers?.Authorization) return;
    const token = await freshToken(root);
    if (token) headers.Authorization = `Bearer ${token}`;
  },
  "chat.message": async (input, output) => {
    if (seen.has(input.sessionID)) return;
    seen.add(input.sessionID);
    const line = await runHook(worktree || directory, directory);
    if (!line) return;
    output.parts.push({
      id: partId(), sessionID: input.sessionID, messageID: output.message.id,
      type: "text", synthetic: true, text: line,
    });
  },
});
