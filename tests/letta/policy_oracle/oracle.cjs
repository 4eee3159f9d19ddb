// The published Letta Code CLI's own retry and recovery policy, loaded from its bundle for the
// policy oracle test (tests/letta/policy_oracle.rs). The bundle (letta.js) is one script; this
// takes the three source files the policy lives in (src/cli/helpers/zai-errors.ts,
// src/cli/helpers/error-formatter.ts, src/agent/turn-recovery-policy.ts, and
// src/utils/conversation-busy-error.ts for the display's busy test) out of it, as the
// bundler wrote them, and runs them in a context of their own. What those files call in other
// files of the bundle is stubbed: each module initialiser with a no-op, `buildChatWebUrl` and
// `randomUUID` with a constant. Their outputs do not depend on those.
//
// Usage: node oracle.cjs LETTA_JS < cases.jsonl > verdicts.jsonl
// A case is {"fn": "<function name>", "args": [...]}; a verdict {"value": <return value>}.
// `__patternLists` answers the policy's string pattern lists.
"use strict";
const fs = require("fs");
const vm = require("vm");
const readline = require("readline");

const bundle = fs.readFileSync(process.argv[2], "utf8");

// Every part of the bundle the bundler marked as coming from `path` (a file may be split).
function section(path) {
  const marker = `\n// ${path}\n`;
  const parts = [];
  for (let start = bundle.indexOf(marker); start >= 0; start = bundle.indexOf(marker, start + 1)) {
    const end = bundle.indexOf("\n// src/", start + marker.length);
    parts.push(bundle.slice(start, end < 0 ? undefined : end));
  }
  if (parts.length === 0) throw new Error(`the bundle has no section ${path}`);
  return parts.join("\n");
}

let code = [
  "src/utils/conversation-busy-error.ts",
  "src/cli/helpers/zai-errors.ts",
  "src/cli/helpers/error-formatter.ts",
  "src/agent/turn-recovery-policy.ts",
]
  .map(section)
  .join("\n")
  .replace(/^import .*$/gm, "");

const defined = new Set(
  [...code.matchAll(/(?:function|var|let|const)\s+([A-Za-z_$][\w$]*)/g)].map((m) => m[1]),
);
for (const m of code.matchAll(/(?:^|,)\s*([A-Za-z_$][\w$]*)\s*=/gm)) defined.add(m[1]);
const stubs = [...new Set([...code.matchAll(/\b(init_[\w$]+)\b/g)].map((m) => m[1]))]
  .filter((name) => !defined.has(name))
  .map((name) => `function ${name}() {}`);
const prelude = [
  "var __esm = (fn) => { let done = false; return () => { if (!done) { done = true; fn(); } }; };",
  "var buildChatWebUrl = (path) => 'https://app.letta.com' + path;",
  ...["randomUUID", "randomUUID2", "randomUUID3", "randomUUID4", "randomUUID5", "randomUUID6", "randomUUID7"]
    .map((name) => `var ${name} = () => '00000000-0000-4000-8000-000000000000';`),
  ...stubs,
].join("\n");

const context = vm.createContext({});
vm.runInContext(`${prelude}\n${code}\ninit_turn_recovery_policy();`, context, {
  filename: "letta.js (policy sections)",
});
// The clock `parseRetryAfterHeaderMs` dates an HTTP-date Retry-After against: the test's NOW.
const NOW = 1796000000000;
vm.runInContext(`Date.now = () => ${NOW};`, context);

// Every string pattern list of the policy, for the test to build its details from.
context.__patternLists = () =>
  vm.runInContext(
    `[CONVERSATION_BUSY_DETAIL_FRAGMENTS, RETRYABLE_PROVIDER_DETAIL_PATTERNS,
      NON_RETRYABLE_PROVIDER_DETAIL_PATTERNS, NON_RETRYABLE_RUN_ERROR_TYPES,
      NON_RETRYABLE_429_REASONS, NON_RETRYABLE_QUOTA_DETAIL_PATTERNS,
      [INVALID_TOOL_CALL_IDS_FRAGMENT, APPROVAL_PENDING_DETAIL_FRAGMENT,
       EMPTY_RESPONSE_DETAIL_FRAGMENT, CHATGPT_USAGE_LIMIT_FRAGMENT]]`,
    context,
  );

const out = [];
readline
  .createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    if (line.trim() === "") return;
    const { fn, args } = JSON.parse(line);
    const f = context[fn];
    if (typeof f !== "function") throw new Error(`the policy sections define no function ${fn}`);
    const value = f(...args);
    out.push(JSON.stringify({ value: value === undefined ? null : value }));
  })
  .on("close", () => process.stdout.write(out.join("\n") + "\n"));
