//! The real Letta Code CLI (`@letta-ai/letta-code` 0.32.18, installed by tests/interop/setup.sh)
//! driven headless against `sim serve`, through its six interop flows
//! (letta-tests-and-real-client.md B.3, B.5.1-B.5.5). Each test asserts on the CLI's stdout
//! events and on the server's request log. They skip, saying why, only when a package registry
//! is unreachable.
//!
//! Run just these: `cargo test --test interop cli::` (about half a minute; flow 3 waits the CLI's
//! 10 s busy back-off by design).

use super::clients::{CliRun, Served, run_cli, setup};
use serde_json::{Value, json};

/// The stale-approval denial the CLI sends (letta-protocol.md §3.11, verbatim).
const STALE_DENIAL: &str = "The agent harness automatically closed this stale pending tool call to recover from a client/server state desync: the server was still waiting on a result for it, but the harness had no matching tool execution in flight and no result was ever recorded. It was not denied by the user or a permissions policy. Re-issue the tool call if you still need it.";

const PROMPT: &str = "Please run the marker command.";
const MODEL: &str = "zai/gpt-4o-mini";

fn first_otid(send: &Value) -> String {
    send["body"]["messages"][0]["otid"]
        .as_str()
        .unwrap_or_else(|| panic!("no otid in {send}"))
        .to_string()
}

fn assert_success(run: &CliRun, turns: u64) {
    let r = run.result();
    assert_eq!(r["subtype"], "success", "stdout:\n{}", run.stdout);
    assert_eq!(r["num_turns"], turns, "stdout:\n{}", run.stdout);
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
}

/// The CLI ran Bash locally and sent its result back (the last send is the continuation).
fn assert_bash_round_trip(run: &CliRun, served: &Served) {
    let calls = run.messages("tool_call_message");
    assert!(
        calls.iter().any(|c| c["tool_call"]["name"] == "Bash"),
        "no Bash tool_call_message on stdout:\n{}",
        run.stdout
    );
    let sends = served.sends();
    let last = sends.last().expect("a send");
    let approval = &last["body"]["messages"][0];
    assert_eq!(approval["type"], "approval", "{last}");
    assert_eq!(approval["approvals"][0]["type"], "tool", "{last}");
    assert_eq!(approval["approvals"][0]["status"], "success", "{last}");
    assert_eq!(approval["approvals"][0]["tool_call_id"], "call_fake0001");
    assert_eq!(last["status"], 200);
}

/// Flow 1 (B.3): fresh start, one turn with one Bash approval, `result/success`.
#[test]
fn flow1_fresh_start_one_bash_approval() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/fresh.toml", "flow1", 1);
    let run = run_cli(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        |_| {},
    );
    assert_success(&run, 2);
    assert_bash_round_trip(&run, &served);
    let ret = run.messages("tool_return_message");
    assert_eq!(ret[0]["status"], "success");
    assert_eq!(ret[0]["tool_return"], "e2e-ok\n");
    assert_eq!(run.result()["result"], "Done. Tool said: e2e-ok");

    // The start-up sequence of captures/letta_e2e a: agent created, conversation created, the
    // three routes 0.16.8 lacks answered 404, then the two sends.
    let reqs = served.requests();
    let line = |r: &Value| {
        format!(
            "{} {}",
            r["method"].as_str().unwrap(),
            r["path"].as_str().unwrap()
        )
    };
    let lines: Vec<String> = reqs.iter().map(line).collect();
    assert_eq!(lines[0], "GET /v1/models/");
    assert!(lines.iter().any(|l| l == "POST /v1/agents/"), "{lines:#?}");
    let agent_id = reqs
        .iter()
        .find(|r| r["path"] == "/v1/agents/")
        .map(|_| run.result()["agent_id"].as_str().unwrap().to_string())
        .unwrap();
    assert!(agent_id.starts_with("agent-"));
    assert!(
        lines.contains(&format!("POST /v1/conversations/?agent_id={agent_id}")),
        "{lines:#?}"
    );
    for missing in ["secrets", "mcp-servers", "repositories"] {
        let r = reqs
            .iter()
            .find(|r| r["path"].as_str().unwrap().ends_with(missing))
            .unwrap_or_else(|| panic!("the CLI did not ask for {missing}: {lines:#?}"));
        assert_eq!(r["status"], 404);
    }
    let sends = served.sends();
    assert_eq!(sends.len(), 2, "{lines:#?}");
    let user = &sends[0]["body"];
    assert_eq!(user["messages"][0]["role"], "user");
    assert_eq!(user["background"], true);
    assert_eq!(user["include_pings"], true);
    assert!(
        user["client_tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "Bash")
    );
    println!("flow 1 took {:?}", run.elapsed);
}

/// Flow 2 (B.5.1): standard permission mode with an always-ask rule for Bash; the headless
/// denial reaches the server and the turn still succeeds.
#[test]
fn flow2_standard_mode_denial_reaches_the_server() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/fresh.toml", "flow2", 2);
    let run = run_cli(
        &cli,
        &served,
        &[
            "-p",
            PROMPT,
            "-m",
            MODEL,
            "--permission-mode",
            "standard",
            "--output-format",
            "stream-json",
        ],
        |work| {
            // `echo` is read-only and auto-allowed even in standard mode (captures/letta_e2e
            // b0), so the denial needs a rule (flow b).
            std::fs::create_dir_all(work.join(".letta")).unwrap();
            std::fs::write(
                work.join(".letta/settings.json"),
                r#"{"permissions":{"alwaysAsk":["Bash"]}}"#,
            )
            .unwrap();
        },
    );
    assert_success(&run, 2);
    let sends = served.sends();
    assert_eq!(sends.len(), 2);
    assert_eq!(
        sends[1]["body"]["messages"][0]["approvals"][0],
        json!({"type": "approval", "tool_call_id": "call_fake0001", "approve": false,
               "reason": "Tool requires approval (headless mode)"})
    );
    let ret = run.messages("tool_return_message");
    assert_eq!(ret[0]["status"], "error");
    assert!(
        ret[0]["tool_return"]
            .as_str()
            .unwrap()
            .contains("Error: request to call tool denied. User reason: Tool requires approval (headless mode)"),
        "{}",
        run.stdout
    );
}

/// Flow 3 (B.5.2): 409 busy on the first send: the CLI tries to attach by otid (404), waits
/// its 10 s back-off, then re-sends the same otid.
#[test]
fn flow3_busy_409_attach_by_otid_then_same_otid_resent() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/busy.toml", "flow3", 3);
    let run = run_cli(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        |_| {},
    );
    assert_success(&run, 2);
    let reqs = served.requests();
    let first = reqs
        .iter()
        .position(|r| r["method"] == "POST" && r["path"].as_str().unwrap().ends_with("/messages"))
        .unwrap();
    assert_eq!(reqs[first]["status"], 409);
    let otid = first_otid(&reqs[first]);
    let attach = reqs[first..]
        .iter()
        .find(|r| r["path"].as_str().unwrap().ends_with("/stream"))
        .expect("an attach attempt after the 409");
    assert_eq!(attach["method"], "POST");
    assert_eq!(attach["body"]["otid"], otid.as_str());
    assert_eq!(attach["body"]["starting_after"], 0);
    assert_eq!(attach["status"], 404);
    let retry = run.of_type("retry");
    assert_eq!(retry[0]["attempt"], 1, "{}", run.stdout);
    assert_eq!(retry[0]["delay_ms"], 10000);
    let sends = served.sends();
    assert_eq!(sends.len(), 3);
    assert_eq!(
        first_otid(&sends[1]),
        otid,
        "the re-send carries the same otid"
    );
    assert_eq!(sends[1]["status"], 200);
    assert_bash_round_trip(&run, &served);
}

/// Flow 4 (B.5.3): 409 approval pending on the first send: the CLI reads the pending approval,
/// sends the stale-approval denial alone, then the original message with its original otid.
#[test]
fn flow4_approval_pending_409_stale_denial_then_original_message() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/approval_pending.toml", "flow4", 4);
    let run = run_cli(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        |_| {},
    );
    let recovery = run.of_type("recovery");
    assert_eq!(
        recovery.first().map(|r| r["recovery_type"].clone()),
        Some(json!("approval_pending")),
        "{}",
        run.stdout
    );
    assert_success(&run, 2);
    let sends = served.sends();
    assert_eq!(sends[0]["status"], 409);
    let otid = first_otid(&sends[0]);
    let denial = &sends[1]["body"]["messages"];
    assert_eq!(denial.as_array().unwrap().len(), 1, "{denial}");
    assert_eq!(
        denial[0]["approvals"],
        json!([{"type": "approval", "tool_call_id": "toolu_stale_1", "approve": false,
                "reason": STALE_DENIAL}])
    );
    assert_eq!(sends[1]["status"], 200);
    assert_eq!(
        first_otid(&sends[2]),
        otid,
        "the original message keeps its otid"
    );
    assert_eq!(sends[2]["body"]["messages"][0]["role"], "user");
    // The CLI looked the pending approval up by message id: the answer is an array.
    assert!(
        served
            .requests()
            .iter()
            .any(|r| r["path"].as_str().unwrap().starts_with("/v1/messages/") && r["status"] == 200),
        "no GET /v1/messages/{{id}}"
    );
    assert_bash_round_trip(&run, &served);
}

/// Flow 5 (B.5.4): a stale approval already pending when the CLI starts with
/// `--conversation`: one POST carries the denial and the user message.
#[test]
fn flow5_stale_approval_at_startup_one_post_with_denial_and_message() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/stale_startup.toml", "flow5", 5);
    let conv = "conv-00000000-0000-4000-8000-0000000057a1";
    assert!(
        served.ready["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == conv)
    );
    let run = run_cli(
        &cli,
        &served,
        &[
            "-p",
            PROMPT,
            "--conversation",
            conv,
            "--output-format",
            "stream-json",
        ],
        |_| {},
    );
    assert_success(&run, 2);
    let sends = served.sends();
    assert_eq!(sends.len(), 2);
    assert_eq!(sends[0]["status"], 200, "no 409 needed");
    let msgs = sends[0]["body"]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[0]["type"], "approval");
    assert_eq!(
        msgs[0]["approvals"],
        json!([{"type": "approval", "tool_call_id": "toolu_stale_1", "approve": false,
                "reason": STALE_DENIAL}])
    );
    assert_eq!(msgs[1]["role"], "user");
    assert_bash_round_trip(&run, &served);
}

/// Flow 6 (B.5.5): the stream cut after its first chunk (the ping with run_id, seq_id 1): the
/// CLI resumes through the run stream with `starting_after: 1` and the turn completes.
#[test]
fn flow6_stream_cut_after_first_chunk_resumed_with_starting_after() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/cut.toml", "flow6", 6);
    let run = run_cli(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        |_| {},
    );
    assert_success(&run, 2);
    let reqs = served.requests();
    let resume = reqs
        .iter()
        .find(|r| {
            let p = r["path"].as_str().unwrap();
            p.starts_with("/v1/runs/run-") && p.ends_with("/stream")
        })
        .unwrap_or_else(|| panic!("no run-stream resume: {reqs:#?}"));
    assert_eq!(resume["body"]["starting_after"], 1);
    assert_eq!(resume["status"], 200);
    assert_eq!(served.sends().len(), 2, "resumed, not re-sent");
    assert_bash_round_trip(&run, &served);
}

/// Flow 7 (B.5.6): the stream cut after two frames while the run is still streaming, and every
/// resume answered 500. Headless, the CLI retries the run stream with the same cursor until its
/// budget is spent (20 attempts, letta-protocol.md §4.4), looking the run up after each failed
/// attempt, then gives the turn up: no second message send, an error result. Each attempt is
/// three POSTs: the SDK itself retries a 500 twice before the CLI sees the error (observed here;
/// the Stainless client's default `maxRetries: 2`).
#[test]
fn flow7_resume_failing_until_the_budget_is_spent() {
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/resume_failing.toml", "flow7", 7);
    let run = run_cli(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        |_| {},
    );
    let reqs = served.requests();
    let resumes: Vec<&Value> = reqs
        .iter()
        .filter(|r| {
            let p = r["path"].as_str().unwrap();
            p.starts_with("/v1/runs/run-") && p.ends_with("/stream")
        })
        .collect();
    assert_eq!(resumes.len(), 60, "resume POSTs: {reqs:#?}\n{}", run.stdout);
    let after_send: Vec<String> = reqs
        .iter()
        .skip_while(|r| !r["path"].as_str().unwrap().ends_with("/messages"))
        .skip(1)
        .map(|r| r["method"].as_str().unwrap().to_string())
        .collect();
    let pattern: Vec<&str> = ["POST", "POST", "POST", "GET"].repeat(20);
    assert_eq!(
        &after_send[..80],
        &pattern[..],
        "three POSTs then a run lookup, twenty times: {reqs:#?}"
    );
    for r in &resumes {
        assert_eq!(r["body"]["starting_after"], 2);
        assert_eq!(r["status"], 500);
    }
    assert_eq!(served.sends().len(), 1, "given up, not re-sent");
    // B.5.6: a few run lookups, then the still-running run is cancelled.
    let last = reqs.last().unwrap();
    assert!(
        last["path"].as_str().unwrap().ends_with("/messages/cancel"),
        "ends with the cancel: {reqs:#?}"
    );
    assert_eq!(
        last["body"]["run_ids"][0],
        resumes[0]["path"].as_str().unwrap()[9..].trim_end_matches("/stream")
    );
    assert!(
        run.stdout.contains("\"type\":\"error\"")
            && run.stdout.contains("\"stop_reason\":\"error\""),
        "the CLI reports an error:\n{}",
        run.stdout
    );
}

/// Response-state reuse (letta-protocol.md §10.1): the server offers a response before it stops
/// the run at requires_approval; the CLI, its Bash call auto-approved, names it in the
/// continuation's `X-Letta-Response-State`, and that header, as the server received it, passes
/// `response-state-reused`, the oracle the sweeps hold the client model to.
#[test]
fn the_cli_names_the_offered_response_in_its_approval_continuation() {
    use loopsim::harness::letta::response_state::response_state_reused;
    use loopsim::harness::trace::TraceEvent;
    use loopsim::model::port::observe::Observation;
    let Some(cli) = setup() else { return };
    let served = Served::start("tests/interop/response_state.toml", "response-state", 1);
    let run = run_cli(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        |_| {},
    );
    assert_success(&run, 2);
    assert_bash_round_trip(&run, &served);
    // The two events, read back off the trace lines `sim serve` wrote.
    let trace = std::fs::read_to_string(served.dir.join("trace.txt")).unwrap();
    let field = |line: &str, key: &str| -> String {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in {line}"))
            .trim_matches('"')
            .to_string()
    };
    let events: Vec<TraceEvent> = trace
        .lines()
        .filter_map(|line| {
            let obs = match line.split_whitespace().nth(2)? {
                "server_response_state" => Observation::ServerResponseState {
                    run_id: field(line, "run_id"),
                    response_id: field(line, "response_id"),
                },
                "server_response_state_header" => Observation::ServerResponseStateHeader {
                    method: field(line, "method"),
                    path: field(line, "path"),
                    header: field(line, "header"),
                },
                _ => return None,
            };
            Some(TraceEvent {
                t_ms: 0,
                host: "server".into(),
                obs,
            })
        })
        .collect();
    assert_eq!(events.len(), 2, "one offer, one header:\n{trace}");
    assert!(
        matches!(events[1].obs, Observation::ServerResponseStateHeader { .. }),
        "the header follows the offer:\n{trace}"
    );
    let found: Vec<String> = response_state_reused(&events)
        .into_iter()
        .map(|v| v.message)
        .collect();
    assert_eq!(found, Vec::<String>::new());
}
