//! The official Python SDK (`letta-client` from PyPI, installed by tests/interop/setup.sh)
//! streams from `sim serve`: every chunk our server sends parses into the SDK's
//! documented chunk classes, an in-band `event: error` surfaces as its documented
//! `APIStatusError` (status 200, body = the error frame, reference B.6), a deliberate 409
//! reaches the caller as `ConflictError` after one request (`x-should-retry: false`), and the
//! run object and replay read back. Skips, saying why, only when a registry is unreachable.

use std::process::Command;

use super::clients::{Served, setup};
use crate::common::repo;
use serde_json::Value;

#[test]
fn python_sdk_streams_a_turn_and_sees_every_documented_chunk_type() {
    if setup().is_none() {
        return;
    }
    let served = Served::start("scenarios/letta/approval_turn.toml", "sdk", 1);
    let agent = served.ready["agent_id"].as_str().unwrap().to_string();
    let out = Command::new("python3")
        .arg(repo().join("tests/interop/sdk_stream.py"))
        .arg(&served.base_url)
        .arg(&agent)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sdk_stream.py failed:\n{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");

    // 1. The turn: ping (seq 1, with run_id), token deltas, approval request deltas, then
    //    stop_reason and usage without seq_id/run_id, each as the SDK's own class.
    let turn = v["turn"].as_array().unwrap();
    assert_eq!(turn[0][0], "LettaPing");
    assert_eq!(turn[0][2], 1);
    assert!(turn[0][3].as_str().unwrap().starts_with("run-"));
    let classes: Vec<&str> = turn.iter().map(|c| c[0].as_str().unwrap()).collect();
    assert_eq!(
        &classes[classes.len() - 2..],
        ["LettaStopReason", "LettaUsageStatistics"]
    );
    assert_eq!(
        v["documented"],
        serde_json::json!([
            "ApprovalRequestMessage",
            "AssistantMessage",
            "LettaPing",
            "LettaStopReason",
            "LettaUsageStatistics"
        ])
    );
    for (i, c) in turn.iter().enumerate().take(turn.len() - 2) {
        assert_eq!(
            c[2],
            i as u64 + 1,
            "seq ids count from 1 without gaps: {turn:?}"
        );
    }

    // 2. The in-band pending-approval error: stop_reason first, then APIStatusError.
    let e = &v["pending_error"];
    assert_eq!(e["raised"], true, "{e}");
    assert_eq!(e["class"], "APIStatusError");
    assert_eq!(e["status"], 200);
    assert_eq!(e["body"]["message_type"], "error_message");
    assert_eq!(e["body"]["error_type"], "internal_error");
    assert!(
        e["body"]["message"]
            .as_str()
            .unwrap()
            .contains("waiting for approval on a tool call")
    );
    assert_eq!(
        e["seen"],
        serde_json::json!(["LettaPing", "LettaStopReason"])
    );

    // 3. The 409: ConflictError after exactly one request.
    assert_eq!(v["conflict"]["raised"], true);
    assert_eq!(v["conflict"]["status"], 409);
    let sends: Vec<Value> = served.sends();
    assert_eq!(
        sends.iter().filter(|s| s["status"] == 409).count(),
        1,
        "the SDK did not retry the deliberate 409"
    );

    // 4-5. The continuation ends the turn; the run reads back; the replay starts after seq 2.
    let cont = v["continuation"].as_array().unwrap();
    assert_eq!(cont[cont.len() - 2][1], "stop_reason");
    assert_eq!(v["run"]["status"], "completed");
    assert_eq!(v["run"]["stop_reason"], "end_turn");
    let replay = v["replay"].as_array().unwrap();
    assert_eq!(replay[0][2], 3, "replay starts after starting_after=2");
    assert_eq!(replay.len(), cont.len() - 2);
}
