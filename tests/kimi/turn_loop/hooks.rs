//! `hooks.e2e.test.ts` (kimi-loop.md §7.5): hook safety points.

use std::sync::{Arc, Mutex};

use loopsim::model::kimi::turn_loop::hooks::{
    AfterStepDecision, AuthorizeDecision, BeforeStepDecision, ContinueDecision, PrepareDecision,
};
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

fn batch_ab() -> Vec<Script> {
    vec![
        tool_use(
            vec![
                call("echo", json!({"text": "a"}), "tc-a"),
                call("echo", json!({"text": "b"}), "tc-b"),
            ],
            usage(1, 1),
        ),
        end_turn("done", usage(1, 1)),
    ]
}

fn one(call_: ToolCall) -> Vec<Script> {
    vec![
        tool_use(vec![call_], usage(1, 1)),
        end_turn("done", usage(1, 1)),
    ]
}

/// §7.5 #1
#[tokio::test(start_paused = true)]
async fn before_step_returning_nothing_lets_the_step_run() {
    let counter = Counter::default();
    let seen = counter.clone();
    let hooks = TestHooks {
        before: Some(Box::new(move |_| {
            seen.bump();
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]).hooks(hooks);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(counter.get(), 1);
}

/// §7.5 #2
#[tokio::test(start_paused = true)]
async fn before_step_block_fails_the_turn_with_its_reason() {
    let hooks = TestHooks {
        before: Some(Box::new(|_| {
            Ok(Some(BeforeStepDecision {
                block: true,
                reason: Some("policy says no".into()),
            }))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]).hooks(hooks);
    let error = rig.run().await.unwrap_err();
    assert_eq!(error.message(), "policy says no");
    assert_eq!(rig.llm.call_count(), 0);
    assert_eq!(rig.transcript.count("step.begin"), 0);
    assert_eq!(
        rig.sink.interrupted()[0].reason,
        events::InterruptReason::Error
    );
}

/// §4.6: a block without a reason reads `Step <N> was blocked`.
#[tokio::test(start_paused = true)]
async fn before_step_block_without_reason_names_the_step() {
    let hooks = TestHooks {
        before: Some(Box::new(|_| {
            Ok(Some(BeforeStepDecision {
                block: true,
                reason: None,
            }))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![]).hooks(hooks);
    assert_eq!(rig.run().await.unwrap_err().message(), "Step 1 was blocked");
}

/// §7.5 #3
#[tokio::test(start_paused = true)]
async fn before_step_error_is_rethrown() {
    let hooks = TestHooks {
        before: Some(Box::new(|_| Err(LoopError::plain("hook crashed")))),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]).hooks(hooks);
    assert_eq!(rig.run().await.unwrap_err().message(), "hook crashed");
    assert_eq!(rig.llm.call_count(), 0);
}

/// §7.5 #4
#[tokio::test(start_paused = true)]
async fn before_step_context_carries_turn_step_signal_and_llm() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let hooks = TestHooks {
        before: Some(Box::new(move |ctx| {
            sink.lock().unwrap().push((
                ctx.turn_id.to_owned(),
                ctx.step_number,
                ctx.signal.aborted(),
                ctx.llm.model_name().to_owned(),
            ));
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let mut rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.input.turn_id = "turn-foo".into();
    rig.run().await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("turn-foo".to_owned(), 1, false, "fake-model".to_owned()),
            ("turn-foo".to_owned(), 2, false, "fake-model".to_owned()),
        ]
    );
}

/// §7.5 #5
#[tokio::test(start_paused = true)]
async fn after_step_sees_the_effective_reason_and_step_usage() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let hooks = TestHooks {
        after_step: Some(Box::new(move |ctx| {
            sink.lock().unwrap().push((
                ctx.stop_reason,
                ctx.step.step_number,
                ctx.usage.input_other,
                ctx.usage.output,
            ));
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![end_turn("x", usage(1, 2))]).hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(StepStopReason::EndTurn, 1, 1, 2)]
    );
    assert_eq!(rig.sink.count("step.end"), 1);
}

/// §7.5 #6
#[tokio::test(start_paused = true)]
async fn after_step_errors_are_swallowed() {
    let counter = Counter::default();
    let seen = counter.clone();
    let hooks = TestHooks {
        after_step: Some(Box::new(move |_| {
            seen.bump();
            Err(LoopError::plain("observer crashed"))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))]).hooks(hooks);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(counter.get(), 1);
}

/// §4.1 item 4: `afterStep` stop-turn turns a `tool_use` step into `end_turn`, while
/// `step.end` keeps `tool_use`.
#[tokio::test(start_paused = true)]
async fn after_step_stop_turn_ends_a_tool_step() {
    let executions = Executions::default();
    let hooks = TestHooks {
        after_step: Some(Box::new(|_| {
            Ok(Some(AfterStepDecision { stop_turn: true }))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::EndTurn);
    assert_eq!(rig.llm.call_count(), 1);
    assert_eq!(
        rig.transcript.step_ends()[0].finish_reason,
        StepStopReason::ToolUse
    );
}

fn batch_ids_hook(
    seen: &Arc<Mutex<Vec<Vec<String>>>>,
) -> impl Fn(&[ToolCall]) + Send + Sync + use<> {
    let seen = seen.clone();
    move |calls: &[ToolCall]| {
        seen.lock()
            .unwrap()
            .push(calls.iter().map(|c| c.id.clone()).collect())
    }
}

/// §7.5 #7
#[tokio::test(start_paused = true)]
async fn prepare_hook_sees_the_whole_batch() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = batch_ids_hook(&seen);
    let hooks = TestHooks {
        prepare: Some(Box::new(move |ctx| {
            record(ctx.tool_calls);
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(batch_ab())
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![vec!["tc-a", "tc-b"], vec!["tc-a", "tc-b"]]
    );
}

/// §7.5 #8
#[tokio::test(start_paused = true)]
async fn prepare_hook_block_produces_an_error_result() {
    let hooks = TestHooks {
        prepare: Some(Box::new(|_| {
            Ok(Some(PrepareDecision {
                block: true,
                reason: Some("forbidden".into()),
                ..PrepareDecision::default()
            }))
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    for result in [
        rig.transcript.result_for("tc-1"),
        rig.sink.live_result("tc-1"),
    ] {
        assert!(result.result.is_error);
        assert!(text_of(&result).contains("forbidden"));
    }
}

/// §7.5 #9
#[tokio::test(start_paused = true)]
async fn prepare_hook_rewrites_args() {
    let hooks = TestHooks {
        prepare: Some(Box::new(|_| {
            Ok(Some(PrepareDecision {
                updated_args: Some(json!({"text": "rewritten"})),
                ..PrepareDecision::default()
            }))
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(executions.all()[0].args, json!({"text": "rewritten"}));
    assert_eq!(
        rig.transcript.tool_calls()[0].args,
        json!({"text": "rewritten"})
    );
    let live_args: Vec<_> = rig
        .sink
        .recorded()
        .into_iter()
        .filter_map(|e| match e {
            LoopRecordedEvent::ToolCall(c) => Some(c.args),
            _ => None,
        })
        .collect();
    assert_eq!(live_args, vec![json!({"text": "rewritten"})]);
}

/// §7.5 #10
#[tokio::test(start_paused = true)]
async fn rewritten_args_are_revalidated() {
    let hooks = TestHooks {
        prepare: Some(Box::new(|_| {
            Ok(Some(PrepareDecision {
                updated_args: Some(json!({"text": 123})),
                ..PrepareDecision::default()
            }))
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    let result = rig.transcript.result_for("tc-1");
    assert!(result.result.is_error);
    assert!(text_of(&result).contains("after prepareToolExecution hook"));
    assert_eq!(
        text_of(&result),
        "Invalid args for tool \"echo\" after prepareToolExecution hook: /text must be string"
    );
}

/// §7.5 #11
#[tokio::test(start_paused = true)]
async fn throwing_prepare_hook_becomes_an_error_result() {
    let hooks = TestHooks {
        prepare: Some(Box::new(|_| {
            Err(LoopError::plain("prepareToolExecution crashed"))
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(executions.count(), 0);
    assert!(
        text_of(&rig.transcript.result_for("tc-1"))
            .to_lowercase()
            .contains("preparetoolexecution")
    );
}

/// §7.5 #12
#[tokio::test(start_paused = true)]
async fn authorize_hook_sees_the_whole_batch() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = batch_ids_hook(&seen);
    let hooks = TestHooks {
        authorize: Some(Box::new(move |ctx| {
            record(ctx.tool.tool_calls);
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(batch_ab())
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![vec!["tc-a", "tc-b"], vec!["tc-a", "tc-b"]]
    );
}

/// §9.5 (#643): a policy can block a call because of what else is in the batch.
#[tokio::test(start_paused = true)]
async fn authorize_hook_can_block_on_batch_size() {
    let hooks = TestHooks {
        authorize: Some(Box::new(|ctx| {
            Ok(
                (ctx.tool.tool_calls.len() > 1 && ctx.tool.tool_call.id == "tc-a").then(|| {
                    AuthorizeDecision {
                        block: true,
                        reason: Some("must run alone".into()),
                        ..AuthorizeDecision::default()
                    }
                }),
            )
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(batch_ab())
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(executions.ids(), vec!["tc-b"]);
    assert_eq!(
        text_of(&rig.transcript.result_for("tc-a")),
        "must run alone"
    );
}

/// §4.6: a throwing authorize hook blocks with a fixed text.
#[tokio::test(start_paused = true)]
async fn throwing_authorize_hook_blocks_the_call() {
    let hooks = TestHooks {
        authorize: Some(Box::new(|_| Err(LoopError::plain("policy down")))),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 0);
    assert_eq!(
        text_of(&rig.transcript.result_for("tc-1")),
        "authorizeToolExecution hook failed for \"echo\": policy down"
    );
}

/// §7.5 #13
#[tokio::test(start_paused = true)]
async fn description_is_computed_from_rewritten_args() {
    let hooks = TestHooks {
        prepare: Some(Box::new(|_| {
            Ok(Some(PrepareDecision {
                updated_args: Some(json!({"text": "rewritten"})),
                ..PrepareDecision::default()
            }))
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo_with(&executions, None, Some("Echoing <text>"))])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(
        rig.transcript.tool_calls()[0].description.as_deref(),
        Some("Echoing rewritten")
    );
}

/// §7.5 #14
#[tokio::test(start_paused = true)]
async fn resolve_execution_error_is_reported() {
    let tool = TestTool::arc("desc", any_object(), |_| {
        Err(LoopError::plain("description crashed"))
    });
    let rig = Rig::new(one(call("desc", json!({}), "tc-1"))).tools(vec![tool]);
    rig.run().await.unwrap();
    let text = text_of(&rig.transcript.result_for("tc-1"));
    assert!(text.contains("failed to resolve execution"));
    assert_eq!(
        text,
        "Tool \"desc\" failed to resolve execution: description crashed"
    );
    assert!(
        rig.log
            .entries()
            .iter()
            .any(|e| e.message == "tool execution setup failed")
    );
}

/// §7.5 #15
#[tokio::test(start_paused = true)]
async fn path_security_error_result_is_exact() {
    let tool = TestTool::arc("guarded", any_object(), |_| {
        Err(LoopError::named("PathSecurityError", "path policy denied"))
    });
    let rig = Rig::new(one(call("guarded", json!({}), "tc-1"))).tools(vec![tool]);
    rig.run().await.unwrap();
    let encoded = serde_json::to_value(rig.transcript.result_for("tc-1").result).unwrap();
    assert_eq!(
        encoded,
        json!({"isError": true, "output": "path policy denied"})
    );
}

/// §7.5 #16
#[tokio::test(start_paused = true)]
async fn resolve_execution_may_return_an_error_result() {
    let tool = TestTool::arc("resolved", any_object(), |_| {
        Ok(ToolExecution::Error(
            json!({"isError": true, "output": "resolved error"}),
        ))
    });
    let rig = Rig::new(one(call("resolved", json!({}), "tc-1"))).tools(vec![tool]);
    rig.run().await.unwrap();
    let encoded = serde_json::to_value(rig.transcript.result_for("tc-1").result).unwrap();
    assert_eq!(
        encoded,
        json!({"isError": true, "output": "resolved error"})
    );
}

/// §7.5 #17
#[tokio::test(start_paused = true)]
async fn finalize_hook_replaces_the_result() {
    let hooks = TestHooks {
        finalize: Some(Box::new(|_| Ok(Some(json!({"output": "redacted"}))))),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "secret"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(executions.count(), 1);
    assert_eq!(text_of(&rig.transcript.result_for("tc-1")), "redacted");
    assert_eq!(text_of(&rig.sink.live_result("tc-1")), "redacted");
}

/// §7.5 #18
#[tokio::test(start_paused = true)]
async fn throwing_finalize_hook_never_persists_raw_output() {
    let hooks = TestHooks {
        finalize: Some(Box::new(|_| Err(LoopError::plain("finalizer down")))),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "secret"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    rig.run().await.unwrap();
    let recorded = rig.transcript.result_for("tc-1");
    assert!(recorded.result.is_error);
    assert!(!text_of(&recorded).contains("secret"));
    assert!(rig.sink.live_result("tc-1").result.is_error);
}

/// §7.5 #19
#[tokio::test(start_paused = true)]
async fn finalize_hook_runs_for_failed_tools() {
    let counter = Counter::default();
    let seen = counter.clone();
    let hooks = TestHooks {
        finalize: Some(Box::new(move |_| {
            seen.bump();
            Ok(None)
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("fail", json!({}), "tc-1")))
        .tools(vec![fail(&executions, "tool blew up")])
        .hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(counter.get(), 1);
    assert!(rig.sink.live_result("tc-1").result.is_error);
}

/// §7.5 #20
#[tokio::test(start_paused = true)]
async fn finalize_hook_runs_for_preflight_rejections() {
    let counter = Counter::default();
    let seen = counter.clone();
    let hooks = TestHooks {
        finalize: Some(Box::new(move |ctx| {
            seen.bump();
            assert!(ctx.tool.tool.is_none());
            let text = ctx.result.output.as_text().unwrap_or_default().to_owned();
            Ok(Some(
                json!({"output": format!("finalized: {text}"), "isError": ctx.result.is_error}),
            ))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(one(call("ghost", json!({}), "tc-1"))).hooks(hooks);
    rig.run().await.unwrap();
    assert_eq!(counter.get(), 1);
    assert!(text_of(&rig.transcript.result_for("tc-1")).contains("finalized:"));
    assert!(text_of(&rig.sink.live_result("tc-1")).contains("finalized:"));
}

/// §4.3: a finalize hook can add stop-turn (it cannot clear it).
#[tokio::test(start_paused = true)]
async fn finalize_hook_can_add_stop_turn() {
    let hooks = TestHooks {
        finalize: Some(Box::new(|_| {
            Ok(Some(json!({"output": "stop here", "stopTurn": true})))
        })),
        ..TestHooks::default()
    };
    let executions = Executions::default();
    let rig = Rig::new(one(call("echo", json!({"text": "x"}), "tc-1")))
        .tools(vec![echo(&executions)])
        .hooks(hooks);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::EndTurn);
    assert_eq!(rig.llm.call_count(), 1);
    assert_eq!(
        rig.transcript.step_ends()[0].finish_reason,
        StepStopReason::EndTurn
    );
}

fn continue_hooks(answers: Vec<Option<bool>>, counter: &Counter) -> TestHooks {
    let answers = Mutex::new(answers.into_iter());
    let seen = counter.clone();
    TestHooks {
        should_continue: Some(Box::new(move |_| {
            seen.bump();
            let answer = answers.lock().unwrap().next().flatten();
            Ok(answer.map(|continue_turn| ContinueDecision { continue_turn }))
        })),
        ..TestHooks::default()
    }
}

/// §7.5 #21
#[tokio::test(start_paused = true)]
async fn should_continue_false_stops() {
    let counter = Counter::default();
    let rig = Rig::new(vec![end_turn("x", usage(1, 1))])
        .hooks(continue_hooks(vec![Some(false)], &counter));
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(counter.get(), 1);
}

/// §7.5 #22
#[tokio::test(start_paused = true)]
async fn should_continue_true_runs_another_step() {
    let counter = Counter::default();
    let rig = Rig::new(vec![end_turn("x", usage(1, 1)), end_turn("y", usage(1, 1))])
        .hooks(continue_hooks(vec![Some(true), Some(false)], &counter));
    let result = rig.run().await.unwrap();
    assert_eq!(rig.llm.call_count(), 2);
    assert_eq!(result.steps, 2);
    assert_eq!(result.stop_reason, TurnStopReason::EndTurn);
}

/// §7.5 #23
#[tokio::test(start_paused = true)]
async fn should_continue_returning_nothing_stops() {
    let counter = Counter::default();
    let rig =
        Rig::new(vec![end_turn("x", usage(1, 1))]).hooks(continue_hooks(vec![None], &counter));
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(counter.get(), 1);
}

/// §7.5 #24
#[tokio::test(start_paused = true)]
async fn should_continue_is_not_consulted_between_tool_steps() {
    let counter = Counter::default();
    let executions = Executions::default();
    let rig = Rig::new(vec![
        tool_use(vec![call("echo", json!({"text": "1"}), "a")], usage(1, 1)),
        tool_use(vec![call("echo", json!({"text": "2"}), "b")], usage(1, 1)),
        end_turn("x", usage(1, 1)),
    ])
    .tools(vec![echo(&executions)])
    .hooks(continue_hooks(vec![None], &counter));
    rig.run().await.unwrap();
    assert_eq!(counter.get(), 1);
}

/// §3.3 D: continuing past the last allowed step raises max-steps.
#[tokio::test(start_paused = true)]
async fn continuing_past_max_steps_raises_max_steps() {
    let counter = Counter::default();
    let mut rig = Rig::new(vec![end_turn("x", usage(1, 1)), end_turn("y", usage(1, 1))])
        .hooks(continue_hooks(vec![Some(true), Some(true)], &counter));
    rig.input.max_steps = Some(1);
    let error = rig.run().await.unwrap_err();
    assert_eq!(error.code(), Some("loop.max_steps_exceeded"));
    assert_eq!(rig.llm.call_count(), 1);
}

/// §2.5: the stopped-step context carries this step's usage and the terminal reason.
#[tokio::test(start_paused = true)]
async fn should_continue_sees_the_step_usage() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let answers = Mutex::new(vec![true, false].into_iter());
    let hooks = TestHooks {
        should_continue: Some(Box::new(move |ctx| {
            sink.lock().unwrap().push((
                ctx.usage.input_other,
                ctx.usage.output,
                ctx.stop_reason,
                ctx.step.step_number,
            ));
            Ok(answers
                .lock()
                .unwrap()
                .next()
                .map(|continue_turn| ContinueDecision { continue_turn }))
        })),
        ..TestHooks::default()
    };
    let rig = Rig::new(vec![
        end_turn("x", usage(1, 2)),
        raw_response(vec![], vec![], Some(FinishReason::Truncated), usage(3, 4)),
    ])
    .hooks(hooks);
    let result = rig.run().await.unwrap();
    assert_eq!(result.stop_reason, TurnStopReason::MaxTokens);
    use loopsim::model::kimi::turn_loop::types::TerminalStopReason;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (1, 2, TerminalStopReason::EndTurn, 1),
            (3, 4, TerminalStopReason::MaxTokens, 2)
        ]
    );
}
