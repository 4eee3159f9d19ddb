#!/usr/bin/env bash
# Installs Ajv 8.18.0, the JSON Schema validator the published Kimi Code CLI (2.1.0) bundles for
# tool arguments, idempotently into $DIR, for the schema oracle test (tests/kimi/schema_oracle.rs).
# Usage: tests/kimi/ajv/setup.sh [DIR]   (DIR defaults to target/ajv-oracle)
# Prints the path of $DIR/node_modules. Runs on the `node` and `npm` on PATH (any Node >= 16).
# Exit status: 0 ready; 75 npm or its registry is unreachable (the test then skips, saying so);
# anything else is a real failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dir=${1:-$root/target/ajv-oracle}
version=8.18.0

command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "ajv oracle: no node and npm on PATH" >&2; exit 75; }

installed() {
  [ "$(cd "$1" 2>/dev/null && node -p 'require("ajv/package.json").version' 2>/dev/null)" = "$version" ]
}

if ! installed "$dir"; then
  tmp="$dir.tmp"
  log=$(mktemp)
  rm -rf "$tmp"
  mkdir -p "$tmp"
  printf '{"name":"ajv-oracle","version":"0.0.0","private":true}\n' >"$tmp/package.json"
  if ! (cd "$tmp" && npm install --silent --no-audit --no-fund --ignore-scripts "ajv@$version") >"$log" 2>&1; then
    if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network' "$log"; then
      echo "ajv oracle: npm registry unreachable: $(tail -n 3 "$log")" >&2
      exit 75
    fi
    echo "ajv oracle: installing ajv@$version failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$tmp" "$dir"
  rm -f "$log"
fi
echo "$dir/node_modules"
