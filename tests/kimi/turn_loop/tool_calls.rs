//! `tool-call.e2e.test.ts` (kimi-loop.md §7.4): tool preparation, description, result
//! finalisation, scheduling inside a batch, and unexecuted calls after an abnormal step end.

use std::sync::Arc;

use loopsim::model::kimi::turn_loop::events::{LoopLiveOnlyEvent, ToolUpdate, ToolUpdateKind};
use loopsim::model::kimi::turn_loop::hooks::PrepareDecision;
use loopsim::model::kimi::turn_loop::log::LogLevel;
use loopsim::model::kimi::turn_loop::*;
use serde_json::{Value, json};

use super::util::*;

fn one_call_then_end(call: ToolCall) -> Vec<Script> {
    vec![
        tool_use(vec![call], usage(1, 1)),
        end_turn("done", usage(1, 1)),
    ]
}

/// §7.4 #1
#[tokio::test(start_paused = true)]
async fn echo_call_is_executed_once_and_recorded() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call(
        "echo",
        json!({"text": "hi"}),
        "tc-1",
    )))
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    assert_eq!(executions.ids(), vec!["tc-1"]);
    assert_eq!(rig.sink.tool_call_ids(), vec!["tc-1"]);
    assert_eq!(rig.sink.tool_result_ids(), vec!["tc-1"]);
    let result = rig.transcript.result_for("tc-1").result;
    assert_eq!(result.text(), Some("hi"));
    assert!(!result.is_error);
}

/// §7.4 #2
#[tokio::test(start_paused = true)]
async fn note_side_channel_is_persisted() {
    let executions = Executions::default();
    let tool = returns(
        "blocks",
        &executions,
        json!({"output": "payload", "note": "<system>meta for the model</system>"}),
    );
    let rig = Rig::new(one_call_then_end(call("blocks", json!({}), "tc-1"))).tools(vec![tool]);
    rig.run().await.unwrap();
    let result = rig.transcript.result_for("tc-1").result;
    assert_eq!(result.text(), Some("payload"));
    assert_eq!(
        result.note.as_deref(),
        Some("<system>meta for the model</system>")
    );
}

/// §7.4 #3 (§9.8, #1437)
#[tokio::test(start_paused = true)]
async fn malformed_notes_are_dropped() {
    let notes = [Value::Null, json!(42), json!({"text": "x"}), json!("")];
    for (index, note) in notes.into_iter().enumerate() {
        let executions = Executions::default();
        let tool = returns(
            "blocks",
            &executions,
            json!({"output": format!("payload-{index}"), "note": note}),
        );
        let rig = Rig::new(one_call_then_end(call("blocks", json!({}), "tc"))).tools(vec![tool]);
        rig.run().await.unwrap();
        let record = rig.transcript.result_for("tc");
        assert_eq!(
            record.result.text(),
            Some(format!("payload-{index}").as_str())
        );
        assert!(!record.result.is_error);
        let encoded = serde_json::to_value(&record).unwrap();
        assert!(
            encoded["result"].get("note").is_none(),
            "note kept for case {index}"
        );
    }
}

/// §7.4 #4
#[tokio::test(start_paused = true)]
async fn record_step_usage_stop_turn_runs_no_tools_and_writes_no_tool_records() {
    let executions = Executions::default();
    let mut rig = Rig::new(vec![tool_use(
        vec![call("echo", json!({"text": "x"}), "tc-1")],
        usage(1, 1),
    )])
    .tools(vec![echo(&executions)]);
    rig.input.record_step_usage = Some(Arc::new(|_usage| {
        Box::pin(async { Ok(Some(input::StepUsageDecision { stop_turn: true })) })
    }));
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::EndTurn);
    assert_eq!(rig.llm.call_count(), 1);
    assert_eq!(executions.count(), 0);
    assert_eq!(rig.transcript.count("tool.call"), 0);
    assert_eq!(rig.transcript.count("tool.result"), 0);
}

fn stop_success(executions: &Executions) -> Arc<dyn ExecutableTool> {
    let executions = executions.clone();
    TestTool::arc("stop-success", any_object(), move |_args| {
        let executions = executions.clone();
        Ok(ToolExecution::Runnable(
            RunnableToolExecution::new("stop-success", move |ctx| {
                executions.push(Execution {
                    id: ctx.tool_call_id,
                    turn_id: ctx.turn_id,
                    args: json!({}),
                });
                Box::pin(async { Ok(json!({"output": "stopped", "stopTurn": true})) })
            })
            .stopping_batch(),
        ))
    })
}

/// §7.4 #5 (§4.4)
#[tokio::test(start_paused = true)]
async fn stop_batch_after_this_skips_later_calls_and_ends_turn() {
    let stops = Executions::default();
    let echoes = Executions::default();
    let rig = Rig::new(vec![tool_use(
        vec![
            call("stop-success", json!({}), "tc-stop"),
            call("echo", json!({"text": "x"}), "tc-echo"),
        ],
        usage(1, 1),
    )])
    .tools(vec![stop_success(&stops), echo(&echoes)]);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::EndTurn);
    assert_eq!(stops.count(), 1);
    assert_eq!(echoes.count(), 0);
    assert_eq!(rig.sink.tool_call_ids(), vec!["tc-stop", "tc-echo"]);
    assert_eq!(rig.sink.tool_result_ids(), vec!["tc-stop", "tc-echo"]);
    let results = rig.transcript.tool_results();
    assert_eq!(
        serde_json::to_value(&results[0].result).unwrap(),
        json!({"output": "stopped"})
    );
    assert!(results[1].result.is_error);
    assert!(text_of(&results[1]).contains("skipped"));
    assert_eq!(
        rig.transcript.step_ends()[0].finish_reason,
        StepStopReason::EndTurn
    );
}

/// §7.4 #6
#[tokio::test(start_paused = true)]
async fn execute_sees_call_id_turn_id_and_captured_args() {
    let executions = Executions::default();
    let mut rig = Rig::new(one_call_then_end(call(
        "echo",
        json!({"text": "inputs"}),
        "tc-99",
    )))
    .tools(vec![echo(&executions)]);
    rig.input.turn_id = "turn-XYZ".to_owned();
    rig.run().await.unwrap();
    assert_eq!(
        executions.all(),
        vec![Execution {
            id: "tc-99".into(),
            turn_id: "turn-XYZ".into(),
            args: json!({"text": "inputs"})
        }]
    );
}

/// §7.4 #7
#[tokio::test(start_paused = true)]
async fn unknown_tool_gets_not_found_error_with_parsed_args() {
    let rig = Rig::new(one_call_then_end(call("ghost", json!({"x": 1}), "tc-g")));
    rig.run().await.unwrap();
    assert_eq!(rig.transcript.count("tool.call"), 1);
    assert_eq!(rig.transcript.count("tool.result"), 1);
    let result = rig.transcript.result_for("tc-g");
    assert!(result.result.is_error);
    assert!(text_of(&result).to_lowercase().contains("not found"));
    assert_eq!(text_of(&result), "Tool \"ghost\" not found");
    assert_eq!(rig.transcript.tool_calls()[0].args, json!({"x": 1}));
}

/// §7.4 #8
#[tokio::test(start_paused = true)]
async fn schema_violation_is_reported_without_executing() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call(
        "strict",
        json!({"value": "NOT_A_NUMBER"}),
        "tc-s",
    )))
    .tools(vec![strict(&executions)]);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    let result = rig.transcript.result_for("tc-s");
    assert!(result.result.is_error);
    assert!(text_of(&result).to_lowercase().contains("invalid args"));
    assert_eq!(
        text_of(&result),
        "Invalid args for tool \"strict\": /value must be number"
    );
}

/// §7.4 #9 (§9.4, #1209)
#[tokio::test(start_paused = true)]
async fn broken_json_becomes_empty_args_and_fails_required_schema() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(ToolCall::raw(
        "tc-j",
        "echo",
        Some("{}{"),
    )))
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    let text = text_of(&rig.transcript.result_for("tc-j"));
    assert!(text.contains("Invalid args"));
    assert!(text.contains("must have required property 'text'"));
    assert!(!text.contains("malformed JSON in arguments"));
    assert!(!text.contains("Expected arguments schema:"));
}

/// §7.4 #10
#[tokio::test(start_paused = true)]
async fn trailing_comma_json_is_not_repaired() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(ToolCall::raw(
        "tc-j",
        "echo",
        Some("{\"text\":\"hi\",}"),
    )))
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    let text = text_of(&rig.transcript.result_for("tc-j"));
    assert!(text.contains("Invalid args"));
    assert!(text.contains("must have required property 'text'"));
}

/// §9.4 sharp edge: truncated JSON for a schema without `required` runs the tool with `{}`.
#[tokio::test(start_paused = true)]
async fn broken_json_runs_a_tool_whose_schema_accepts_empty_args() {
    let executions = Executions::default();
    let tool = returns("lenient", &executions, json!({"output": "ran"}));
    let rig = Rig::new(one_call_then_end(ToolCall::raw(
        "tc-l",
        "lenient",
        Some("{\"path\": \"/a"),
    )))
    .tools(vec![tool]);
    rig.run().await.unwrap();
    assert_eq!(executions.all()[0].args, json!({}));
    assert_eq!(rig.transcript.tool_calls()[0].args, json!({}));
    assert_eq!(text_of(&rig.transcript.result_for("tc-l")), "ran");
}

/// §7.4 #11
#[tokio::test(start_paused = true)]
async fn failing_tool_reports_its_message() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call("fail", json!({}), "tc-1")))
        .tools(vec![fail(&executions, "boom")]);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 1);
    let result = rig.transcript.result_for("tc-1");
    assert!(result.result.is_error);
    assert_eq!(text_of(&result), "Tool \"fail\" failed: boom");
}

/// §7.4 #12
#[tokio::test(start_paused = true)]
async fn failing_tool_logs_a_warning_with_tool_and_call() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call("fail", json!({}), "tc-1")))
        .tools(vec![fail(&executions, "boom")]);
    rig.run().await.unwrap();
    let entry = rig
        .log
        .entries()
        .into_iter()
        .find(|entry| entry.message == "tool execution failed")
        .expect("warn log");
    assert_eq!(entry.level, LogLevel::Warn);
    assert_eq!(entry.payload["toolName"], "fail");
    assert_eq!(entry.payload["toolCallId"], "tc-1");
    assert_eq!(entry.payload["error"]["message"], "boom");
}

/// §7.4 #13 (§9.1, #83)
#[tokio::test(start_paused = true)]
async fn undefined_result_is_coerced_to_an_error() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call("undef", json!({}), "tc-U"))).tools(vec![returns(
        "undef",
        &executions,
        Value::Null,
    )]);
    rig.run().await.unwrap();
    assert_eq!(rig.sink.tool_result_ids(), rig.sink.tool_call_ids());
    let result = rig.transcript.result_for("tc-U");
    assert!(result.result.is_error);
    assert!(text_of(&result).contains("Tool \"undef\" returned no result"));
}

/// §7.4 #14
#[tokio::test(start_paused = true)]
async fn empty_object_result_is_a_malformed_output_error() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call("empty", json!({}), "tc-E"))).tools(vec![returns(
        "empty",
        &executions,
        json!({}),
    )]);
    rig.run().await.unwrap();
    assert_eq!(rig.transcript.count("tool.result"), 1);
    let result = rig.transcript.result_for("tc-E");
    assert!(result.result.is_error);
    assert!(text_of(&result).contains("missing or malformed \"output\" field"));
}

/// §9.1: primitives are coerced with their JS `typeof`.
#[tokio::test(start_paused = true)]
async fn primitive_results_name_their_type() {
    for (value, kind) in [
        (json!(42), "number"),
        (json!("x"), "string"),
        (json!(true), "boolean"),
    ] {
        let executions = Executions::default();
        let rig = Rig::new(one_call_then_end(call("prim", json!({}), "tc-P")))
            .tools(vec![returns("prim", &executions, value)]);
        rig.run().await.unwrap();
        let text = text_of(&rig.transcript.result_for("tc-P"));
        assert_eq!(
            text,
            format!("Tool \"prim\" returned a {kind} instead of a tool result.")
        );
    }
}

/// §7.4 #15
#[tokio::test(start_paused = true)]
async fn bad_result_does_not_disturb_its_neighbours() {
    let undef = Executions::default();
    let echoes = Executions::default();
    let rig = Rig::new(one_call_then_end_many(vec![
        call("undef", json!({}), "tc-U"),
        call("echo", json!({"text": "1"}), "tc-E1"),
        call("echo", json!({"text": "2"}), "tc-E2"),
    ]))
    .tools(vec![returns("undef", &undef, Value::Null), echo(&echoes)]);
    rig.run().await.unwrap();
    let mut calls = rig.sink.tool_call_ids();
    let mut results = rig.sink.tool_result_ids();
    calls.sort();
    results.sort();
    assert_eq!(calls, vec!["tc-E1", "tc-E2", "tc-U"]);
    assert_eq!(results, calls);
    assert!(rig.transcript.result_for("tc-U").result.is_error);
    assert!(!rig.transcript.result_for("tc-E1").result.is_error);
}

fn one_call_then_end_many(calls: Vec<ToolCall>) -> Vec<Script> {
    vec![tool_use(calls, usage(1, 1)), end_turn("done", usage(1, 1))]
}

/// §7.4 #16
#[tokio::test(start_paused = true)]
async fn finalize_hook_returning_empty_object_is_coerced() {
    let executions = Executions::default();
    let hooks = TestHooks {
        finalize: Some(Box::new(|_ctx| Ok(Some(json!({}))))),
        ..TestHooks::default()
    };
    let rig = Rig::new(one_call_then_end(call(
        "echo",
        json!({"text": "x"}),
        "tc-1",
    )))
    .tools(vec![echo(&executions)])
    .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(rig.transcript.count("tool.result"), 1);
    let result = rig.transcript.result_for("tc-1");
    assert!(result.result.is_error);
    assert!(text_of(&result).contains("missing or malformed \"output\" field"));
}

/// §7.4 #17
#[tokio::test(start_paused = true)]
async fn failing_prepare_hook_writes_no_log() {
    let executions = Executions::default();
    let hooks = TestHooks {
        prepare: Some(Box::new(|_ctx| Err(LoopError::plain("hook exploded")))),
        ..TestHooks::default()
    };
    let rig = Rig::new(one_call_then_end(call(
        "echo",
        json!({"text": "x"}),
        "tc-1",
    )))
    .tools(vec![echo(&executions)])
    .hooks(hooks);
    rig.run().await.unwrap();
    assert!(
        !rig.log
            .entries()
            .iter()
            .any(|e| e.message.contains("prepareToolExecution hook failed"))
    );
    assert_eq!(
        text_of(&rig.transcript.result_for("tc-1")),
        "prepareToolExecution hook failed for \"echo\": hook exploded"
    );
}

fn path_security(message: &'static str) -> Arc<dyn ExecutableTool> {
    TestTool::arc("guarded", any_object(), move |_args| {
        Err(LoopError::named("PathSecurityError", message))
    })
}

/// §7.4 #18
#[tokio::test(start_paused = true)]
async fn path_security_error_is_reported_verbatim_without_setup_log() {
    let rig = Rig::new(one_call_then_end(call("guarded", json!({}), "tc-1")))
        .tools(vec![path_security("Path is outside workspace.")]);
    rig.run().await.unwrap();
    let result = rig.transcript.result_for("tc-1");
    assert!(result.result.is_error);
    assert_eq!(text_of(&result), "Path is outside workspace.");
    assert!(
        !rig.log
            .entries()
            .iter()
            .any(|e| e.message == "tool execution setup failed")
    );
}

/// §7.4 #19
#[tokio::test(start_paused = true)]
async fn progress_updates_are_published_live() {
    let updates = vec![
        ToolUpdate::text(ToolUpdateKind::Stdout, "a"),
        ToolUpdate::progress(25.0),
        ToolUpdate::progress(75.0),
    ];
    let rig = Rig::new(one_call_then_end(call("progress", json!({}), "tc-1")))
        .tools(vec![progress(updates, None)]);
    rig.run().await.unwrap();
    let progress: Vec<_> = rig
        .sink
        .live_only()
        .into_iter()
        .filter_map(|event| match event {
            LoopLiveOnlyEvent::ToolProgress(event) => Some(event),
            _ => None,
        })
        .collect();
    assert_eq!(progress.len(), 3);
    assert!(progress.iter().all(|event| event.tool_call_id == "tc-1"));
    let kinds: Vec<_> = progress.iter().map(|event| event.update.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ToolUpdateKind::Stdout,
            ToolUpdateKind::Progress,
            ToolUpdateKind::Progress
        ]
    );
}

/// §7.4 #20
#[tokio::test(start_paused = true)]
async fn serialised_tools_run_and_record_in_provider_order() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end_many(vec![
        call("echo", json!({"text": "1"}), "tc-1"),
        call("echo", json!({"text": "2"}), "tc-2"),
        call("echo", json!({"text": "3"}), "tc-3"),
    ]))
    .tools(vec![echo(&executions)]);
    rig.run().await.unwrap();
    assert_eq!(executions.ids(), vec!["tc-1", "tc-2", "tc-3"]);
    let recorded: Vec<_> = rig
        .transcript
        .tool_results()
        .into_iter()
        .map(|r| r.tool_call_id)
        .collect();
    assert_eq!(recorded, vec!["tc-1", "tc-2", "tc-3"]);
    assert_eq!(rig.sink.tool_call_ids(), vec!["tc-1", "tc-2", "tc-3"]);
}

/// §7.4 #21
#[tokio::test(start_paused = true)]
async fn non_conflicting_tools_overlap_and_results_keep_provider_order() {
    let gate_a = Arc::new(Gate::default());
    let gate_b = Arc::new(Gate::default());
    let rig = Rig::new(one_call_then_end_many(vec![
        call("gate-a", json!({}), "tc-a"),
        call("gate-b", json!({}), "tc-b"),
    ]))
    .tools(vec![
        gated(
            "gate-a",
            &gate_a,
            Some(ToolAccesses::read_file("/test/gate-a")),
        ),
        gated(
            "gate-b",
            &gate_b,
            Some(ToolAccesses::read_file("/test/gate-b")),
        ),
    ]);
    let (result, ()) = tokio::join!(rig.run(), async {
        gate_a.started.wait().await;
        gate_b.started.wait().await;
        assert!(gate_a.started.is_set() && gate_b.started.is_set());
        gate_b.released.set();
        settle().await;
        gate_a.released.set();
    });
    result.unwrap();
    let recorded: Vec<_> = rig
        .transcript
        .tool_results()
        .into_iter()
        .map(|r| r.tool_call_id)
        .collect();
    assert_eq!(recorded, vec!["tc-a", "tc-b"]);
    assert_eq!(rig.sink.tool_call_ids(), vec!["tc-a", "tc-b"]);
    assert_eq!(rig.sink.tool_result_ids(), vec!["tc-a", "tc-b"]);
}

/// §7.4 #22
#[tokio::test(start_paused = true)]
async fn default_all_accesses_serialise_tools() {
    let gate_a = Arc::new(Gate::default());
    let gate_b = Arc::new(Gate::default());
    let rig = Rig::new(one_call_then_end_many(vec![
        call("gate-a", json!({}), "tc-a"),
        call("gate-b", json!({}), "tc-b"),
    ]))
    .tools(vec![
        gated("gate-a", &gate_a, None),
        gated("gate-b", &gate_b, None),
    ]);
    let (result, ()) = tokio::join!(rig.run(), async {
        gate_a.started.wait().await;
        settle().await;
        assert!(!gate_b.started.is_set(), "b started while a holds `all`");
        gate_a.released.set();
        gate_b.started.wait().await;
        gate_b.released.set();
    });
    result.unwrap();
    let recorded: Vec<_> = rig
        .transcript
        .tool_results()
        .into_iter()
        .map(|r| r.tool_call_id)
        .collect();
    assert_eq!(recorded, vec!["tc-a", "tc-b"]);
}

/// §7.4 #23 (§5.2 example 12)
#[tokio::test(start_paused = true)]
async fn accesses_come_from_post_hook_args() {
    let gates = PathGates::new(&["tc-a", "tc-b"]);
    let hooks = TestHooks {
        prepare: Some(Box::new(|ctx| {
            Ok((ctx.tool_call.id == "tc-b").then(|| PrepareDecision {
                updated_args: Some(json!({"path": "/repo/a.ts"})),
                ..PrepareDecision::default()
            }))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(one_call_then_end_many(vec![
        call("path-gated", json!({"path": "/repo/a.ts"}), "tc-a"),
        call("path-gated", json!({"path": "/repo/b.ts"}), "tc-b"),
    ]))
    .tools(vec![path_gated(&gates)])
    .hooks(hooks);
    let (result, ()) = tokio::join!(rig.run(), async {
        gates.gate("tc-a").started.wait().await;
        settle().await;
        assert!(!gates.gate("tc-b").started.is_set());
        gates.gate("tc-a").released.set();
        gates.gate("tc-b").started.wait().await;
        gates.gate("tc-b").released.set();
    });
    result.unwrap();
    let recorded: Vec<_> = rig
        .transcript
        .tool_results()
        .into_iter()
        .map(|r| r.tool_call_id)
        .collect();
    assert_eq!(recorded, vec!["tc-a", "tc-b"]);
    let paths = gates.paths.lock().unwrap().clone();
    assert!(paths.iter().all(|(_, path)| path == "/repo/a.ts"));
}

/// §7.4 #24 (§5.2 example 8 through the loop)
#[tokio::test(start_paused = true)]
async fn a_later_non_conflicting_call_overtakes_a_blocked_one() {
    let gates = PathGates::new(&["tc-a-1", "tc-a-2", "tc-b"]);
    let rig = Rig::new(one_call_then_end_many(vec![
        call("path-gated", json!({"path": "/repo/a.ts"}), "tc-a-1"),
        call("path-gated", json!({"path": "/repo/a.ts"}), "tc-a-2"),
        call("path-gated", json!({"path": "/repo/b.ts"}), "tc-b"),
    ]))
    .tools(vec![path_gated(&gates)]);
    let started = |id: &str| gates.gate(id).started.is_set();
    let (result, ()) = tokio::join!(rig.run(), async {
        gates.gate("tc-b").started.wait().await;
        settle().await;
        assert!(started("tc-a-1") && started("tc-b") && !started("tc-a-2"));
        gates.gate("tc-b").released.set();
        settle().await;
        assert!(!started("tc-a-2"));
        gates.gate("tc-a-1").released.set();
        gates.gate("tc-a-2").started.wait().await;
        gates.gate("tc-a-2").released.set();
    });
    result.unwrap();
    let recorded: Vec<_> = rig
        .transcript
        .tool_results()
        .into_iter()
        .map(|r| r.tool_call_id)
        .collect();
    assert_eq!(recorded, vec!["tc-a-1", "tc-a-2", "tc-b"]);
}

async fn media_result(output: Value) -> (ToolOutput, ToolOutput) {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end(call("blocks", json!({}), "tc-m"))).tools(vec![returns(
        "blocks",
        &executions,
        json!({"output": output}),
    )]);
    rig.run().await.unwrap();
    (
        rig.transcript.result_for("tc-m").result.output,
        rig.sink.live_result("tc-m").result.output,
    )
}

fn parts(output: ToolOutput) -> Vec<ContentPart> {
    match output {
        ToolOutput::Parts(parts) => parts,
        ToolOutput::Text(text) => panic!("expected parts, got text {text:?}"),
    }
}

/// §7.4 #25
#[tokio::test(start_paused = true)]
async fn text_and_image_output_stays_an_array() {
    let image = json!({"type": "image_url", "imageUrl": {"url": "data:image/png;base64,AAAA"}});
    let (recorded, live) =
        media_result(json!([{"type": "text", "text": "see image:"}, image])).await;
    for output in [recorded, live] {
        let parts = parts(output);
        assert!(parts.iter().any(|p| matches!(p, ContentPart::Text { .. })));
        assert!(
            parts
                .iter()
                .any(|p| matches!(p, ContentPart::ImageUrl { .. }))
        );
    }
}

/// §7.4 #26
#[tokio::test(start_paused = true)]
async fn image_only_output_gets_a_text_companion() {
    let image = json!({"type": "image_url", "imageUrl": {"url": "data:image/png;base64,AAAA"}});
    let (recorded, _) = media_result(json!([image])).await;
    let parts = parts(recorded);
    assert_eq!(
        parts[0],
        ContentPart::text("Tool returned non-text content.")
    );
    assert!(matches!(parts[1], ContentPart::ImageUrl { .. }));
}

/// §7.4 #27
#[tokio::test(start_paused = true)]
async fn several_images_are_all_kept() {
    let one = json!({"type": "image_url", "imageUrl": {"url": "data:image/png;base64,AAAA"}});
    let two = json!({"type": "image_url", "imageUrl": {"url": "data:image/png;base64,BBBB"}});
    let (recorded, _) = media_result(json!([one, two])).await;
    let parts = parts(recorded);
    assert_eq!(parts.len(), 3);
    assert_eq!(parts.iter().filter(|p| p.is_media()).count(), 2);
}

/// §7.4 #28
#[tokio::test(start_paused = true)]
async fn audio_output_is_kept() {
    let audio = json!({"type": "audio_url", "audioUrl": {"url": "data:audio/wav;base64,AAAA"}});
    let (recorded, _) = media_result(json!([audio])).await;
    assert!(
        parts(recorded)
            .iter()
            .any(|p| matches!(p, ContentPart::AudioUrl { .. }))
    );
}

/// §7.4 #29
#[tokio::test(start_paused = true)]
async fn remote_image_output_is_kept() {
    let image = json!({"type": "image_url", "imageUrl": {"url": "https://example.invalid/a.png"}});
    let (recorded, _) = media_result(json!([image])).await;
    assert!(
        parts(recorded)
            .iter()
            .any(|p| matches!(p, ContentPart::ImageUrl { .. }))
    );
}

/// §4.3: a text-only array is flattened; think parts are dropped.
#[tokio::test(start_paused = true)]
async fn text_only_array_output_is_flattened_without_think_parts() {
    let (recorded, _) = media_result(json!([
        {"type": "text", "text": "a"},
        {"type": "think", "think": "hidden"},
        {"type": "text", "text": "b"}
    ]))
    .await;
    assert_eq!(recorded, ToolOutput::Text("ab".to_owned()));
    let (empty, _) = media_result(json!([])).await;
    assert_eq!(empty, ToolOutput::Text("Tool output is empty.".to_owned()));
}

/// §9.7 (#1062): `truncated:true` is persisted; `false` is dropped.
#[tokio::test(start_paused = true)]
async fn truncated_flag_survives_normalisation() {
    for (flag, expected) in [(true, true), (false, false)] {
        let executions = Executions::default();
        let rig =
            Rig::new(one_call_then_end(call("blocks", json!({}), "tc-t"))).tools(vec![returns(
                "blocks",
                &executions,
                json!({"output": "part", "truncated": flag}),
            )]);
        rig.run().await.unwrap();
        let encoded = serde_json::to_value(rig.transcript.result_for("tc-t").result).unwrap();
        assert_eq!(encoded.get("truncated").is_some(), expected);
    }
}

/// §7.4 #30
#[tokio::test(start_paused = true)]
async fn mixed_batch_gets_one_result_per_call() {
    let executions = Executions::default();
    let rig = Rig::new(one_call_then_end_many(vec![
        call("echo", json!({"text": "ok"}), "tc-good"),
        call("fail", json!({}), "tc-fail"),
        call("strict", json!({"value": "oops"}), "tc-bad-args"),
        call("ghost", json!({}), "tc-missing"),
    ]))
    .tools(vec![
        echo(&executions),
        fail(&executions, "tool blew up"),
        strict(&executions),
    ]);
    rig.run().await.unwrap();
    let mut calls = rig.sink.tool_call_ids();
    let mut results = rig.sink.tool_result_ids();
    calls.sort();
    results.sort();
    assert_eq!(
        calls,
        vec!["tc-bad-args", "tc-fail", "tc-good", "tc-missing"]
    );
    assert_eq!(results, calls);
}

const UNEXECUTED: &str = "This tool call was not executed: the model response ended before tool execution could start (the provider stream was interrupted). Do not assume the tool ran \u{2014} re-issue the call if it is still needed.";

/// §7.4 #31
#[tokio::test(start_paused = true)]
async fn paused_response_records_unexecuted_calls() {
    let executions = Executions::default();
    let rig = Rig::new(vec![response(
        vec![ContentPart::think("thinking")],
        vec![call("echo", json!({"text": "hi"}), "tc-1")],
        StepStopReason::Paused,
    )])
    .tools(vec![echo(&executions)]);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Paused);
    assert_eq!(executions.count(), 0);
    let calls = rig.transcript.tool_calls();
    assert_eq!(
        (calls[0].tool_call_id.as_str(), calls[0].name.as_str()),
        ("tc-1", "echo")
    );
    assert_eq!(calls[0].args, json!({"text": "hi"}));
    let result = rig.transcript.result_for("tc-1");
    assert!(result.result.is_error);
    assert!(text_of(&result).contains("not executed"));
    assert_eq!(text_of(&result), UNEXECUTED);
    assert_eq!(rig.sink.tool_call_ids(), vec!["tc-1"]);
    assert_eq!(rig.sink.tool_result_ids(), vec!["tc-1"]);
    assert_eq!(
        rig.transcript.step_ends()[0].finish_reason,
        StepStopReason::Paused
    );
}

/// §7.4 #32
#[tokio::test(start_paused = true)]
async fn unexecuted_call_with_broken_args_records_empty_args() {
    let rig = Rig::new(vec![raw_response(
        vec![ContentPart::Think {
            think: String::new(),
            encrypted: Some("sig".into()),
        }],
        vec![ToolCall::raw(
            "tc-1",
            "echo",
            Some("{\"text\":\"unterminated"),
        )],
        Some(FinishReason::Paused),
        usage(1, 1),
    )]);
    rig.run().await.unwrap();
    assert_eq!(rig.transcript.tool_calls()[0].args, json!({}));
    assert!(rig.transcript.result_for("tc-1").result.is_error);
}

/// §7.4 #33
#[tokio::test(start_paused = true)]
async fn other_reason_with_calls_records_them_as_unexecuted() {
    let executions = Executions::default();
    let rig = Rig::new(vec![response(
        vec![ContentPart::text("")],
        vec![call("echo", json!({"text": "x"}), "tc-ovl")],
        StepStopReason::Unknown,
    )])
    .tools(vec![echo(&executions)]);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::Unknown);
    assert_eq!(executions.count(), 0);
    assert_eq!(rig.transcript.tool_calls().len(), 1);
    assert!(rig.transcript.result_for("tc-ovl").result.is_error);
}

/// §7.4 #34
#[tokio::test(start_paused = true)]
async fn truncated_response_with_calls_records_them_as_unexecuted() {
    let executions = Executions::default();
    let rig = Rig::new(vec![response(
        vec![ContentPart::text("partial answer")],
        vec![call("echo", json!({"text": "x"}), "tc-max")],
        StepStopReason::MaxTokens,
    )])
    .tools(vec![echo(&executions)]);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::MaxTokens);
    assert_eq!(executions.count(), 0);
    assert_eq!(rig.transcript.tool_calls()[0].tool_call_id, "tc-max");
    assert!(rig.transcript.result_for("tc-max").result.is_error);
}

/// §7.4 #35 (§3.3 B′: call/result pairs interleave)
#[tokio::test(start_paused = true)]
async fn unexecuted_calls_keep_provider_order_and_interleave() {
    let rig = Rig::new(vec![response(
        vec![],
        vec![
            call("echo", json!({"text": "a"}), "tc-a"),
            call("ghost", json!({}), "tc-b"),
        ],
        StepStopReason::Paused,
    )]);
    rig.run().await.unwrap();
    let calls: Vec<_> = rig
        .transcript
        .tool_calls()
        .into_iter()
        .map(|c| c.tool_call_id)
        .collect();
    let results: Vec<_> = rig
        .transcript
        .tool_results()
        .into_iter()
        .map(|r| r.tool_call_id)
        .collect();
    assert_eq!(calls, vec!["tc-a", "tc-b"]);
    assert_eq!(results, vec!["tc-a", "tc-b"]);
    assert_eq!(
        rig.transcript.kinds(),
        vec![
            "step.begin",
            "tool.call",
            "tool.result",
            "tool.call",
            "tool.result",
            "step.end"
        ]
    );
}

/// §7.4 #36
#[tokio::test(start_paused = true)]
async fn plain_end_turn_writes_no_tool_records() {
    let rig = Rig::new(vec![end_turn("hello", usage(1, 1))]);
    rig.run().await.unwrap();
    assert_eq!(rig.transcript.count("tool.call"), 0);
    assert_eq!(rig.transcript.count("tool.result"), 0);
}

/// §9.16 (#1369): the tool table is built after `beforeStep`, so a tool removed there is
/// unknown to the step.
#[tokio::test(start_paused = true)]
async fn tool_table_is_built_after_before_step() {
    let executions = Executions::default();
    let echo_tool = echo(&executions);
    let removed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = removed.clone();
    let hooks = TestHooks {
        before: Some(Box::new(move |_ctx| {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let mut rig = Rig::new(one_call_then_end(call(
        "echo",
        json!({"text": "x"}),
        "tc-1",
    )))
    .hooks(hooks);
    let table_flag = removed.clone();
    rig.input.build_tools = Some(Arc::new(move || {
        if table_flag.load(std::sync::atomic::Ordering::SeqCst) {
            vec![]
        } else {
            vec![echo_tool.clone()]
        }
    }));
    rig.input.describe_missing_tool = Some(Arc::new(|name| Some(format!("{name} was unloaded"))));
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    assert_eq!(
        text_of(&rig.transcript.result_for("tc-1")),
        "echo was unloaded"
    );
    assert!(rig.llm.calls()[0].tools.is_empty());
}
