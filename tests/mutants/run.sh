#!/usr/bin/env bash
# Mutation testing of the reference models (docs/finding-power.md).
#
#   bash tests/mutants/run.sh [SHARD] [SEEDS]
#
# Installs cargo-mutants when it is missing, then mutates src/model/letta/client,
# src/model/letta/server and src/model/kimi/turn_loop one mutant at a time and runs, against
# each, the lib's unit tests, among them `finding_power_sweeps_of_the_bundled_scenarios_pass`
# (every bundled scenario over SEEDS seeds, default 100, as written, with swarm plans, guided,
# and the Letta ones guided again with the published client's profile), and the models' own suites `tests/letta` and `tests/kimi` (about 25 s more per
# mutant). A mutant is caught when any of those fails. SHARD (default 1/40, round-robin) picks a
# reproducible sample of the mutants; `1/1` is all of them (about 3,000: days on 2 cores, see
# docs/finding-power.md). Results go to target/mutants/<shard>/mutants.out; the table of
# docs/finding-power.md comes from `python3 tests/mutants/summarize.py target/mutants/<shard>`.
set -euo pipefail
cd "$(dirname "$0")/../.."
shard=${1:-1/40}
seeds=${2:-100}
if ! command -v cargo-mutants > /dev/null; then
  cargo install --locked cargo-mutants@27.1.0
fi
out="target/mutants/${shard//\//-of-}"
mkdir -p "$out"
export LOOPSIM_FINDING_POWER_SEEDS=$seeds
# In place: one mutant at a time in this tree, built incrementally (each test run sweeps on
# two threads). Do not edit the tree while it runs: cargo-mutants restores each file after.
cargo mutants --shard "$shard" --sharding round-robin \
  --file 'src/model/letta/client/**/*.rs' --file 'src/model/letta/server/**/*.rs' \
  --file 'src/model/kimi/turn_loop/**/*.rs' \
  --in-place --output "$out" --timeout 600 --build-timeout 900 \
  --cargo-test-arg=--lib --cargo-test-arg=--test=letta --cargo-test-arg=--test=kimi \
  -- -- --nocapture || true
python3 tests/mutants/summarize.py "$out"
