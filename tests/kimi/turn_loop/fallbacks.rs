//! `tool-exchange-fallback.e2e.test.ts` (kimi-loop.md §7.13): the one-shot strict and media
//! projection resends of §4.7.

use loopsim::model::kimi::turn_loop::errors::StatusClass;
use loopsim::model::kimi::turn_loop::llm::Projection;
use loopsim::model::kimi::turn_loop::*;
use serde_json::json;

use super::util::*;

fn counted(text: &'static str, counter: &Counter) -> input::MessageBuilder {
    let counter = counter.clone();
    message_builder(move || {
        counter.bump();
        vec![Message::user(text)]
    })
}

fn status(code: u16, message: &str) -> Script {
    Script::Fail(LoopError::Provider(ProviderError::status(code, message)))
}

fn too_large() -> LoopError {
    LoopError::Provider(ProviderError::status_class(
        413,
        StatusClass::RequestTooLarge,
        "Request exceeds the maximum size",
    ))
}

fn seen_texts(rig: &Rig) -> Vec<String> {
    rig.llm
        .calls()
        .iter()
        .map(|call| match &call.messages[0].content[0] {
            ContentPart::Text { text } => text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn projections(rig: &Rig) -> Vec<Option<Projection>> {
    rig.llm
        .calls()
        .iter()
        .map(|call| call.fields.projection)
        .collect()
}

struct Strict {
    rig: Rig,
    strict: Counter,
}

fn strict_rig(first: Script) -> Strict {
    let strict = Counter::default();
    let mut rig = Rig::new(vec![first, end_turn("ok", usage(1, 1))]);
    rig.input.build_messages_strict = Some(counted("strict projection", &strict));
    Strict { rig, strict }
}

async fn assert_strict_resend(message: &str) {
    let Strict { rig, strict } = strict_rig(status(400, message));
    assert_eq!(
        rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(rig.llm.call_count(), 2);
    assert_eq!(strict.get(), 1);
    assert_eq!(
        seen_texts(&rig),
        vec!["normal projection", "strict projection"]
    );
    assert_eq!(
        rig.llm.calls()[1].messages,
        vec![Message::user("strict projection")]
    );
    assert_eq!(projections(&rig), vec![None, Some(Projection::Strict)]);
}

/// §7.13 #1 (§9.9)
#[tokio::test(start_paused = true)]
async fn tool_use_without_tool_result_gets_one_strict_resend() {
    assert_strict_resend("messages.142: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1").await;
}

/// §7.13 #2
#[tokio::test(start_paused = true)]
async fn missing_tool_call_id_gets_one_strict_resend() {
    assert_strict_resend("400 tool_call_id  is not found").await;
}

/// §7.13 #3
#[tokio::test(start_paused = true)]
async fn orphan_tool_role_gets_one_strict_resend() {
    assert_strict_resend(
        "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
    )
    .await;
}

/// §7.13 #4
#[tokio::test(start_paused = true)]
async fn unrelated_400_gets_no_resend() {
    let Strict { rig, strict } = strict_rig(status(400, "Bad request"));
    assert_eq!(rig.run().await.unwrap_err().message(), "Bad request");
    assert_eq!(rig.llm.call_count(), 1);
    assert_eq!(strict.get(), 0);
}

/// §7.13 #5
#[tokio::test(start_paused = true)]
async fn failing_strict_resend_propagates_after_two_calls() {
    let adjacency =
        "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after";
    let error = LoopError::Provider(ProviderError::status(400, adjacency));
    let strict = Counter::default();
    let mut rig = Rig::new(vec![
        Script::Fail(error.clone()),
        Script::Fail(error.clone()),
        Script::Fail(error.clone()),
    ]);
    rig.input.build_messages_strict = Some(counted("strict projection", &strict));
    assert_eq!(rig.run().await.unwrap_err(), error);
    assert_eq!(rig.llm.call_count(), 2);
    assert_eq!(strict.get(), 1);
}

/// §4.7: the strict projection is not sticky.
#[tokio::test(start_paused = true)]
async fn strict_projection_is_not_sticky() {
    let executions = Executions::default();
    let strict = Counter::default();
    let mut rig = Rig::new(vec![
        status(400, "roles must alternate between user and assistant"),
        tool_use(
            vec![call("echo", json!({"text": "x"}), "tc-1")],
            usage(1, 1),
        ),
        end_turn("ok", usage(1, 1)),
    ])
    .tools(vec![echo(&executions)]);
    rig.input.build_messages_strict = Some(counted("strict projection", &strict));
    rig.run().await.unwrap();
    assert_eq!(
        seen_texts(&rig),
        vec![
            "normal projection",
            "strict projection",
            "normal projection"
        ]
    );
}

struct Media {
    rig: Rig,
    normal: Counter,
    degraded: Counter,
    strict: Counter,
    stripped: Counter,
}

fn media_rig(script: Vec<Script>, with_stripped: bool) -> Media {
    let (normal, degraded, strict, stripped) = (
        Counter::default(),
        Counter::default(),
        Counter::default(),
        Counter::default(),
    );
    let executions = Executions::default();
    let mut rig = Rig::new(script).tools(vec![echo(&executions)]);
    rig.input.build_messages = counted("normal projection", &normal);
    rig.input.build_messages_media_degraded = Some(counted("degraded projection", &degraded));
    rig.input.build_messages_strict = Some(counted("strict projection", &strict));
    if with_stripped {
        rig.input.build_messages_media_stripped = Some(counted("stripped projection", &stripped));
    }
    Media {
        rig,
        normal,
        degraded,
        strict,
        stripped,
    }
}

fn echo_step(id: &str) -> Script {
    tool_use(vec![call("echo", json!({"text": "x"}), id)], usage(1, 1))
}

/// §7.13 #6 (§9.10)
#[tokio::test(start_paused = true)]
async fn request_too_large_resends_degraded_once() {
    let media = media_rig(
        vec![Script::Fail(too_large()), end_turn("ok", usage(1, 1))],
        false,
    );
    assert_eq!(
        media.rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(media.rig.llm.call_count(), 2);
    assert_eq!(media.degraded.get(), 1);
    assert_eq!(media.strict.get(), 0);
    assert_eq!(
        seen_texts(&media.rig),
        vec!["normal projection", "degraded projection"]
    );
}

/// §7.13 #7
#[tokio::test(start_paused = true)]
async fn plain_413_status_is_not_request_too_large() {
    let media = media_rig(vec![status(413, "Request failed")], false);
    assert_eq!(
        media.rig.run().await.unwrap_err().message(),
        "Request failed"
    );
    assert_eq!(media.rig.llm.call_count(), 1);
    assert_eq!(media.degraded.get(), 0);
}

/// §7.13 #8
#[tokio::test(start_paused = true)]
async fn degraded_resend_failing_again_without_stripped_propagates() {
    let media = media_rig(
        vec![
            Script::Fail(too_large()),
            Script::Fail(too_large()),
            Script::Fail(too_large()),
        ],
        false,
    );
    assert_eq!(media.rig.run().await.unwrap_err(), too_large());
    assert_eq!(media.rig.llm.call_count(), 2);
    assert_eq!(media.degraded.get(), 1);
}

/// §7.13 #9
#[tokio::test(start_paused = true)]
async fn sticky_stripped_step_rethrows_a_later_413() {
    let media = media_rig(
        vec![
            Script::Fail(too_large()),
            Script::Fail(too_large()),
            echo_step("tc-stripped"),
            Script::Fail(too_large()),
        ],
        true,
    );
    assert_eq!(media.rig.run().await.unwrap_err(), too_large());
    assert_eq!(media.rig.llm.call_count(), 4);
    assert_eq!(
        seen_texts(&media.rig),
        vec![
            "normal projection",
            "degraded projection",
            "stripped projection",
            "stripped projection"
        ]
    );
    assert_eq!(projections(&media.rig)[3], Some(Projection::MediaStripped));
    assert_eq!(media.rig.transcript.count("tool.result"), 1);
}

/// §7.13 #10
#[tokio::test(start_paused = true)]
async fn sticky_degraded_step_moves_on_to_stripped() {
    let media = media_rig(
        vec![
            Script::Fail(too_large()),
            echo_step("tc-1"),
            Script::Fail(too_large()),
            end_turn("ok", usage(1, 1)),
        ],
        true,
    );
    assert_eq!(
        media.rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(media.rig.llm.call_count(), 4);
    assert_eq!(
        seen_texts(&media.rig),
        vec![
            "normal projection",
            "degraded projection",
            "degraded projection",
            "stripped projection"
        ]
    );
    let projections = projections(&media.rig);
    assert_eq!(projections[2], Some(Projection::MediaDegraded));
    assert_eq!(projections[3], Some(Projection::MediaStripped));
    assert_eq!(media.rig.transcript.count("tool.result"), 1);
}

/// §7.13 #11
#[tokio::test(start_paused = true)]
async fn image_format_error_on_degraded_resend_goes_stripped() {
    let media = media_rig(
        vec![
            Script::Fail(too_large()),
            status(400, "unsupported image format"),
            end_turn("ok", usage(1, 1)),
        ],
        true,
    );
    assert_eq!(
        media.rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(media.rig.llm.call_count(), 3);
    assert_eq!(
        seen_texts(&media.rig),
        vec![
            "normal projection",
            "degraded projection",
            "stripped projection"
        ]
    );
    assert_eq!(
        projections(&media.rig),
        vec![
            None,
            Some(Projection::MediaDegraded),
            Some(Projection::MediaStripped)
        ]
    );
}

/// §7.13 #12
#[tokio::test(start_paused = true)]
async fn every_level_failing_stops_after_three_attempts() {
    let media = media_rig(
        vec![
            Script::Fail(too_large()),
            Script::Fail(too_large()),
            Script::Fail(too_large()),
            Script::Fail(too_large()),
        ],
        true,
    );
    assert_eq!(media.rig.run().await.unwrap_err(), too_large());
    assert_eq!(media.rig.llm.call_count(), 3);
    assert_eq!(media.stripped.get(), 1);
}

/// §7.13 #13
#[tokio::test(start_paused = true)]
async fn degraded_projection_is_sticky_for_the_turn() {
    let media = media_rig(
        vec![
            Script::Fail(too_large()),
            echo_step("tc-1"),
            end_turn("ok", usage(1, 1)),
        ],
        false,
    );
    assert_eq!(
        media.rig.run().await.unwrap().stop_reason,
        TurnStopReason::EndTurn
    );
    assert_eq!(media.rig.llm.call_count(), 3);
    assert_eq!(
        seen_texts(&media.rig)[1..],
        ["degraded projection", "degraded projection"]
    );
    assert_eq!(media.normal.get(), 1);
    assert_eq!(media.degraded.get(), 2);
    assert_eq!(media.rig.transcript.count("tool.result"), 1);
}

/// §4.7 item 2: an image-format 400 on the normal projection goes straight to stripped.
#[tokio::test(start_paused = true)]
async fn image_format_error_goes_stripped_directly() {
    let media = media_rig(
        vec![
            status(400, "Could not process image"),
            end_turn("ok", usage(1, 1)),
        ],
        true,
    );
    media.rig.run().await.unwrap();
    assert_eq!(
        seen_texts(&media.rig),
        vec!["normal projection", "stripped projection"]
    );
    assert_eq!(media.degraded.get(), 0);
}
