#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium` package) for the HTML report's browser test,
# idempotently. Prints the browser's path on stdout.
# Exit status: 0 ready; 75 the package archive is unreachable or installing is not allowed here
# (the test then skips, saying so); anything else is a real failure.
set -uo pipefail
for b in "${CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -n "$b" ] && [ -x "$b" ]; then echo "$b"; exit 0; fi
done
if ! command -v apt-get >/dev/null; then
  echo "browser setup: no apt-get to install chromium with" >&2; exit 75
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
    echo "browser setup: chromium is not installed and installing it needs root" >&2; exit 75
  fi
fi
log=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
# Another installer (a second test binary, the machine's own updates) may hold dpkg's lock:
# wait for it rather than fail.
apt=(apt-get -o DPkg::Lock::Timeout=600)
if ! { $sudo "${apt[@]}" install -y --no-install-recommends chromium >"$log" 2>&1 ||
       { $sudo "${apt[@]}" update >>"$log" 2>&1 &&
         $sudo "${apt[@]}" install -y --no-install-recommends chromium >>"$log" 2>&1; }; }; then
  if grep -qiE 'Temporary failure|Could not resolve|Failed to fetch|Unable to connect|Could not connect' "$log"; then
    echo "browser setup: the Debian archive is unreachable: $(tail -n 2 "$log")" >&2; exit 75
  fi
  echo "browser setup: installing chromium failed:" >&2; cat "$log" >&2; exit 1
fi
rm -f "$log"
echo /usr/bin/chromium
