#!/usr/bin/env bash
# Mutation score of the agent loop's tool-argument validator, src/model/kimi/turn_loop/schema.rs
# (docs/finding-power.md, "The validator against Ajv"): every cargo-mutants mutant of the file,
# judged once by the file's unit tests alone and once by them plus the Ajv oracle's cases
# (tests/kimi/schema_oracle.rs: generated schemas and instances with the verdicts of Ajv 8.18.0,
# the validator the published Kimi Code CLI bundles).
#
#   bash tests/mutants/schema.sh [CASES]     (CASES defaults to 4000, the test's own count)
#
# The file has no dependency inside the crate, so it is copied into a crate of its own under
# target/mutants/schema-oracle/, where a mutant builds in seconds: about 5 minutes for both
# runs on 2 cores. Needs node and npm (the oracle's Ajv is installed by tests/kimi/ajv/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-4000}
source tests/mutants/crate-mutants.sh
crate_work schema-oracle
mkdir -p "$crate/src"
LOOPSIM_SCHEMA_ORACLE_CASES=$cases LOOPSIM_SCHEMA_ORACLE_DUMP=$crate/tests/cases.jsonl \
  oracle_dump "$crate/tests/cases.jsonl" --test kimi schema_oracle

cp src/model/kimi/turn_loop/schema.rs "$crate/src/schema.rs"
crate_manifest schema-oracle-mutants serde_json
echo 'pub mod schema;' > "$crate/src/lib.rs"
cat > "$crate/tests/oracle.rs" <<'RUST'
//! Every dumped case: the validator's text must be Ajv's.
use schema_oracle_mutants::schema::validation_text;
use serde_json::Value;

#[test]
fn every_case_is_worded_as_ajv_words_it() {
    let cases = include_str!("cases.jsonl");
    for line in cases.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        let ajv = case["ajv"]["text"].as_str().map(str::to_owned);
        assert_eq!(validation_text(&case["schema"], &case["instance"]), ajv, "{line}");
    }
}
RUST

crate_mutants unit-tests --file src/schema.rs --cargo-test-arg=--lib
crate_mutants unit-tests-and-ajv --file src/schema.rs
echo "missed by the unit tests alone: $work/unit-tests/mutants.out/missed.txt"
echo "missed with the Ajv oracle:     $work/unit-tests-and-ajv/mutants.out/missed.txt"
