#!/usr/bin/env bash
# Installs what the interop tests need, idempotently:
#   - the published Letta Code CLI (@letta-ai/letta-code, default 0.32.18) into $DIR/letta-code
#   - the official Python SDK (letta-client, PyPI) for python3
# Usage: tests/interop/setup.sh [DIR]   (DIR defaults to target/interop)
# Exit status: 0 ready; 75 a package registry is unreachable (the tests then skip, saying so);
# anything else is a real failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-$root/target/interop}
version=${LETTA_CODE_VERSION:-0.32.18}
mkdir -p "$dir"

unreachable() { echo "interop setup: $1 registry unreachable: $2" >&2; exit 75; }

if [ ! -f "$dir/letta-code/letta.js" ]; then
  log=$(mktemp)
  shared="$root/../shared/tools/install-letta-code.sh"
  if [ -x "$shared" ]; then
    bash "$shared" "$dir/letta-code.tmp" "$version" >"$log" 2>&1
  else
    # The same steps as ../shared/tools/install-letta-code.sh: `npm install` of the package
    # fails on one pinned dependency the registry does not serve, and the bundle only needs
    # `ws` at run time, so unpack the package and install ws beside it.
    (
      set -e
      work=$(mktemp -d)
      trap 'rm -rf "$work"' EXIT
      (cd "$work" && npm pack --silent "@letta-ai/letta-code@$version" >/dev/null)
      tar -xzf "$work"/letta-ai-letta-code-*.tgz -C "$work"
      mkdir -p "$dir/letta-code.tmp"
      cp -a "$work/package/." "$dir/letta-code.tmp/"
      d="$dir/letta-code.tmp"
      mv "$d/package.json" "$d/package.json.orig"
      printf '{"name":"letta-code-runtime","version":"0.0.0","private":true}\n' >"$d/package.json"
      (cd "$d" && npm install --silent --no-save --no-audit --no-fund ws@8 >/dev/null)
      mv "$d/package.json.orig" "$d/package.json"
      node "$d/letta.js" --version
    ) >"$log" 2>&1
  fi
  status=$?
  if [ $status -ne 0 ]; then
    if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network' "$log"; then
      unreachable npm "$(tail -n 3 "$log")"
    fi
    echo "interop setup: installing @letta-ai/letta-code@$version failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  rm -rf "$dir/letta-code"
  mv "$dir/letta-code.tmp" "$dir/letta-code"
  rm -f "$log"
fi

if ! python3 -c 'import letta_client' 2>/dev/null; then
  log=$(mktemp)
  if ! python3 -m pip install --quiet --disable-pip-version-check letta-client >"$log" 2>&1; then
    if grep -qiE 'Failed to establish|NewConnectionError|Temporary failure in name resolution|Network is unreachable|ConnectTimeout|Max retries exceeded' "$log"; then
      unreachable PyPI "$(tail -n 3 "$log")"
    fi
    echo "interop setup: pip install letta-client failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  rm -f "$log"
fi
echo "$dir/letta-code/letta.js"
