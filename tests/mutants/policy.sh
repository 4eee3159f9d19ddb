#!/usr/bin/env bash
# Mutation score of the Letta client's retry and recovery policy
# (src/model/letta/client/policy/: classifiers, provider_errors, retry_decisions, pre_stream,
# delays; docs/finding-power.md, "The policy against the published client"): every
# cargo-mutants mutant of those files, judged once by the policy's unit tests alone and once by
# them plus the policy oracle's calls (tests/letta/policy_oracle.rs: generated questions with
# the answers of the published Letta Code CLI 0.32.18's own functions).
#
#   bash tests/mutants/policy.sh [DETAILS]   (DETAILS defaults to 3000, the test's own count)
#
# The policy depends on nothing in the crate but src/wire/letta.rs, so both are copied into a
# crate of its own under target/mutants/policy-oracle/, where a mutant builds in seconds: about
# 10 minutes for both runs on 2 cores. Needs node and npm (the CLI is installed by
# tests/interop/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
details=${1:-3000}
source tests/mutants/crate-mutants.sh
crate_work policy-oracle
mkdir -p "$crate/src/model/letta/client" "$crate/src/wire" "$crate/tests/policy_oracle"
LOOPSIM_POLICY_ORACLE_CASES=$details LOOPSIM_POLICY_ORACLE_DUMP=$crate/tests/calls.jsonl \
  oracle_dump "$crate/tests/calls.jsonl" --test letta policy_oracle

cp src/wire/letta.rs "$crate/src/wire/letta.rs"
cp src/model/letta/client/policy.rs "$crate/src/model/letta/client/policy.rs"
cp -r src/model/letta/client/policy "$crate/src/model/letta/client/policy"
cp tests/letta/policy_oracle/dispatch.rs "$crate/tests/policy_oracle/dispatch.rs"
crate_manifest policy-oracle-mutants serde serde_json regex
cat > "$crate/src/lib.rs" <<'RUST'
#![allow(dead_code)]
pub mod wire {
    pub mod letta;
}
pub mod model {
    pub mod letta {
        pub mod client {
            pub mod policy;
        }
    }
}
RUST
cat > "$crate/tests/oracle.rs" <<'RUST'
//! Every dumped call: the port's answer must be the client's.
use policy_oracle_mutants::model::letta::client::policy;
use policy_oracle_mutants::wire::letta::StopReason;
use serde_json::{Value, json};

include!("policy_oracle/dispatch.rs");

#[test]
fn every_call_is_answered_as_the_client_answers_it() {
    for line in include_str!("calls.jsonl").lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        assert_eq!(model_answer(&case["call"]), case["cli"], "{line}");
    }
}
RUST

files=(classifiers provider_errors retry_decisions pre_stream delays)
file_args=()
for f in "${files[@]}"; do file_args+=(--file "src/model/letta/client/policy/$f.rs"); done
crate_mutants unit-tests "${file_args[@]}" --cargo-test-arg=--lib
crate_mutants unit-tests-and-cli "${file_args[@]}"
echo "missed by the unit tests alone: $work/unit-tests/mutants.out/missed.txt"
echo "missed with the client oracle:  $work/unit-tests-and-cli/mutants.out/missed.txt"
