//! `streaming.e2e.test.ts` (kimi-loop.md §7.9): wiring of the streaming callbacks.

use loopsim::model::kimi::turn_loop::events::{LoopLiveOnlyEvent, ToolCallDeltaEvent};
use loopsim::model::kimi::turn_loop::*;

use super::util::*;

fn rig_with(emits: Vec<Emit>) -> Rig {
    Rig::new(vec![with_emits(end_turn("", usage(1, 1)), emits)])
}

fn deltas(rig: &Rig, kind: &str) -> Vec<String> {
    rig.sink
        .live_only()
        .into_iter()
        .filter_map(|event| match event {
            LoopLiveOnlyEvent::TextDelta(d) if kind == "text" => Some(d.delta),
            LoopLiveOnlyEvent::ThinkingDelta(d) if kind == "think" => Some(d.delta),
            _ => None,
        })
        .collect()
}

fn recorded_parts(rig: &Rig) -> Vec<ContentPart> {
    rig.transcript
        .records()
        .into_iter()
        .filter_map(|e| match e {
            LoopRecordedEvent::ContentPart(p) => Some(p.part),
            _ => None,
        })
        .collect()
}

/// §7.9 #1
#[tokio::test(start_paused = true)]
async fn text_deltas_are_published() {
    let rig = rig_with(vec![
        Emit::TextDelta("hel".into()),
        Emit::TextDelta("lo".into()),
    ]);
    rig.run().await.unwrap();
    assert_eq!(deltas(&rig, "text"), vec!["hel", "lo"]);
}

/// §7.9 #2
#[tokio::test(start_paused = true)]
async fn think_deltas_are_published() {
    let rig = rig_with(vec![
        Emit::ThinkDelta("think...".into()),
        Emit::ThinkDelta("more".into()),
    ]);
    rig.run().await.unwrap();
    assert_eq!(deltas(&rig, "think"), vec!["think...", "more"]);
}

/// §7.9 #3
#[tokio::test(start_paused = true)]
async fn tool_call_deltas_are_published() {
    let rig = rig_with(vec![
        Emit::ToolCallDelta(ToolCallDeltaEvent {
            tool_call_id: "tc-1".into(),
            name: Some("echo".into()),
            arguments_part: Some("{\"text\":".into()),
        }),
        Emit::ToolCallDelta(ToolCallDeltaEvent {
            tool_call_id: "tc-1".into(),
            name: None,
            arguments_part: Some("\"hi\"}".into()),
        }),
    ]);
    rig.run().await.unwrap();
    let events: Vec<ToolCallDeltaEvent> = rig
        .sink
        .live_only()
        .into_iter()
        .filter_map(|e| match e {
            LoopLiveOnlyEvent::ToolCallDelta(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].tool_call_id, "tc-1");
    assert_eq!(events[0].name.as_deref(), Some("echo"));
    assert_eq!(events[0].arguments_part.as_deref(), Some("{\"text\":"));
    assert_eq!(events[1].arguments_part.as_deref(), Some("\"hi\"}"));
}

/// §7.9 #4
#[tokio::test(start_paused = true)]
async fn text_parts_are_recorded_and_linked_to_the_step() {
    let rig = rig_with(vec![
        Emit::Part(ContentPart::text("first paragraph")),
        Emit::Part(ContentPart::text("second paragraph")),
    ]);
    rig.run().await.unwrap();
    let expected = vec![
        ContentPart::text("first paragraph"),
        ContentPart::text("second paragraph"),
    ];
    assert_eq!(recorded_parts(&rig), expected);
    let live: Vec<ContentPart> = rig
        .sink
        .recorded()
        .into_iter()
        .filter_map(|e| match e {
            LoopRecordedEvent::ContentPart(p) => Some(p.part),
            _ => None,
        })
        .collect();
    assert_eq!(live, expected);
    let begin = &rig.transcript.step_begins()[0];
    for record in rig.transcript.records() {
        if let LoopRecordedEvent::ContentPart(part) = record {
            assert_eq!(part.step_uuid, begin.uuid);
            assert_ne!(part.uuid, begin.uuid);
        }
    }
}

/// §7.9 #5
#[tokio::test(start_paused = true)]
async fn think_part_signature_is_preserved() {
    let signed = ContentPart::Think {
        think: "reasoning".into(),
        encrypted: Some("sig-abc".into()),
    };
    let plain = ContentPart::think("plain reasoning");
    let rig = rig_with(vec![Emit::Part(signed.clone()), Emit::Part(plain.clone())]);
    rig.run().await.unwrap();
    assert_eq!(recorded_parts(&rig), vec![signed, plain]);
    let encoded = serde_json::to_value(&recorded_parts(&rig)[1]).unwrap();
    assert!(encoded.get("encrypted").is_none());
}

/// §7.9 #6
#[tokio::test(start_paused = true)]
async fn interleaved_parts_keep_their_order() {
    let rig = rig_with(vec![
        Emit::Part(ContentPart::think("first")),
        Emit::Part(ContentPart::text("middle")),
        Emit::Part(ContentPart::think("last")),
    ]);
    rig.run().await.unwrap();
    let kinds: Vec<&str> = recorded_parts(&rig)
        .iter()
        .map(|p| match p {
            ContentPart::Think { .. } => "think",
            ContentPart::Text { .. } => "text",
            _ => "media",
        })
        .collect();
    assert_eq!(kinds, vec!["think", "text", "think"]);
}

/// §7.9 #7
#[tokio::test(start_paused = true)]
async fn last_part_is_recorded_before_step_end() {
    let rig = rig_with(vec![
        Emit::Part(ContentPart::text("a")),
        Emit::Part(ContentPart::text("b")),
    ]);
    rig.run().await.unwrap();
    let kinds = rig.transcript.kinds();
    let last_part = kinds.iter().rposition(|k| *k == "content.part").unwrap();
    let end = kinds.iter().position(|k| *k == "step.end").unwrap();
    assert!(last_part < end);
}
