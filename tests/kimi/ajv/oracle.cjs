// The published Kimi Code CLI's tool-argument validation (agent-core-v2 args-validator, as
// bundled in @moonshot-ai/kimi-code 2.1.0), run on Ajv 8.18.0 for the schema oracle test.
// Reads JSON lines {"schema": ..., "instance": ...} on stdin; writes one JSON line per case:
// {"text": null} when the arguments pass, else {"text": "<joined errors>"}, or
// {"compile": "<message>"} when the schema does not compile. Like the CLI: draft-07 Ajv with
// strict:false and allErrors:true; required and additionalProperties get their own texts;
// any other error reads "<instancePath> <message>"; errors are joined with "; ".
// (The CLI also adds ajv-formats; the model's subset has no `format`, so it is left out.)
"use strict";
const Ajv = require("ajv").default;
const readline = require("readline");

const ajv = new Ajv({ strict: false, allErrors: true });

function formatValidationError(error) {
  if (error.keyword === "required" && "missingProperty" in error.params)
    return `must have required property '${String(error.params["missingProperty"])}'`;
  if (error.keyword === "additionalProperties" && "additionalProperty" in error.params)
    return `must NOT have additional property '${String(error.params["additionalProperty"])}'`;
  return `${error.instancePath ? `${error.instancePath} ` : ""}${error.message ?? "is invalid"}`;
}

function judge(schema, instance) {
  let validate;
  try {
    validate = ajv.compile(schema);
  } catch (e) {
    return { compile: String(e && e.message) };
  }
  if (validate(instance)) return { text: null };
  const errors = validate.errors ?? [];
  if (errors.length === 0) return { text: "Tool parameter validation failed" };
  return { text: errors.map(formatValidationError).join("; ") };
}

const out = [];
readline
  .createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    if (line.trim() === "") return;
    const { schema, instance } = JSON.parse(line);
    out.push(JSON.stringify(judge(schema, instance)));
  })
  .on("close", () => process.stdout.write(out.join("\n") + "\n"));
