#!/usr/bin/env bash
# How often the sweeps find one mutant (docs/finding-power.md, "detection rate").
#
#   bash tests/mutants/rate.sh DIFF [SEEDS]
#
# DIFF is a mutant as cargo-mutants writes it (`target/mutants/<shard>/mutants.out/diff/*.diff`).
# Applies it to this tree, builds `sim`, runs the bundled scenarios of the mutated system
# (src/model/letta: scenarios/letta; src/model/kimi: scenarios/kimi) over seeds 0..SEEDS
# (default 100) as written, then swept with swarm plans and again guided, prints one line per
# way, and reverts the diff whatever happens. A line reads `swarm 157 of 5500 (first seed 2)`:
# failing runs, runs, and the lowest seed that failed.
#
# Each mutant costs one incremental release build of `sim` (about 3 minutes on 2 cores) plus
# the two sweeps (under a minute). Run it in a worktree of its own if you edit this one.
set -euo pipefail
cd "$(dirname "$0")/../.."
diff=${1:?usage: tests/mutants/rate.sh DIFF [SEEDS]}
seeds=${2:-100}
file=$(sed -n '1s/^--- //p' "$diff")
case "$file" in
  *src/model/letta/*) scenarios=(scenarios/letta/*.toml) ;;
  *src/model/kimi/*) scenarios=(scenarios/kimi/*.toml) ;;
  *) echo "rate.sh: $diff does not mutate src/model/letta or src/model/kimi" >&2; exit 2 ;;
esac
patch -s -p0 "$file" < "$diff"
trap 'patch -s -R -p0 "$file" < "$diff"' EXIT
trap 'exit 130' INT TERM
cargo build --release -q -p sim
for way in plain swarm guided; do
  flag=()
  [ "$way" = plain ] || flag=("--$way")
  ./target/release/sim explore "${scenarios[@]}" "${flag[@]}" --seeds "0..$seeds" --jobs 2 \
    --format json 2> /dev/null | python3 -c '
import json, sys
way = sys.argv[1]
report = json.load(sys.stdin)
failing = [f["seed"] for f in report["failures"]]
first = f" (first seed {min(failing)})" if failing else ""
runs = report["runs"]
print(f"{way} {len(failing)} of {runs}{first}")
' "$way" || true
done
