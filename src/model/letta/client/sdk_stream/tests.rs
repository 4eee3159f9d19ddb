//! The SDK's frame semantics (letta-protocol.md §1.1): named events dropped, nothing after
//! `[DONE]`, `event: error` and malformed JSON thrown, JSON the typed decoder rejects still a
//! chunk.

use super::*;

#[test]
fn sdk_frame_semantics() {
    use crate::wire::sse::decode_all;
    let body = b"data: {\"message_type\":\"ping\",\"id\":\"p\"}\n\n: comment\n\nevent: message\ndata: {\"message_type\":\"assistant_message\",\"id\":\"a\",\"content\":\"x\"}\n\ndata: [DONE]\n\nevent: error\ndata: {\"message\":\"after done\"}\n\n";
    let mut q = VecDeque::new();
    let mut sdk = SdkFrames::default();
    for f in decode_all(body) {
        sdk.on_frame(&f, &mut q);
    }
    // The named `message` event is dropped; nothing after [DONE] counts.
    assert_eq!(q.len(), 1);
    assert!(matches!(&q[0], SdkEvent::Chunk(c) if matches!(**c, LettaChunk::Ping(_))));

    let mut q = VecDeque::new();
    let mut sdk = SdkFrames::default();
    for f in decode_all(b"event: error\ndata: {\"message\":\"boom\",\"run_id\":\"r\"}\n\ndata: {\"message_type\":\"ping\"}\n\n") {
        sdk.on_frame(&f, &mut q);
    }
    assert_eq!(q.len(), 1, "the iterator stops at the throw");
    assert!(
        matches!(&q[0], SdkEvent::Thrown(t) if t.message == "boom" && t.kind == ThrownKind::ErrorEvent)
    );

    // Malformed JSON throws; a non-JSON error body keeps its raw text as the message.
    for (bytes, msg) in [
        (&b"data: {not json\n\n"[..], "Could not parse"),
        (&b"event: error\ndata: oops\n\n"[..], "oops"),
    ] {
        let mut q = VecDeque::new();
        let mut sdk = SdkFrames::default();
        for f in decode_all(bytes) {
            sdk.on_frame(&f, &mut q);
        }
        assert!(
            matches!(&q[0], SdkEvent::Thrown(t) if t.message.contains(msg)),
            "{q:?}"
        );
    }
}

#[test]
fn json_the_typed_decoder_rejects_is_still_a_chunk() {
    use crate::wire::sse::decode_all;
    // A real keepalive ping (captures/letta_server f3) and JSON that is no Letta chunk at all:
    // the SDK only JSON-parses, so neither throws.
    let body = b"data: {\"id\":\"ping-keepalive\",\"date\":null,\"message_type\":\"ping\",\"seq_id\":null}\n\ndata: {\"message_type\":\"assistant_message\",\"id\":7}\n\ndata: 42\n\n";
    let mut q = VecDeque::new();
    let mut sdk = SdkFrames::default();
    for f in decode_all(body) {
        sdk.on_frame(&f, &mut q);
    }
    assert_eq!(q.len(), 3, "{q:?}");
    assert!(
        matches!(&q[0], SdkEvent::Chunk(c) if matches!(**c, LettaChunk::Ping(_)) && c.seq_id().is_none())
    );
    assert!(matches!(&q[1], SdkEvent::Chunk(c) if matches!(**c, LettaChunk::Unknown(_))));
    assert!(matches!(&q[2], SdkEvent::Chunk(c) if matches!(**c, LettaChunk::Unknown(_))));
}

/// A throw's kind is how the client's stream read ended in the trace (`client_stream_end`): the
/// words docs/trace.md documents, which `approval-conflict-recovered` reads (`error-event`).
#[test]
fn thrown_kinds_are_the_traces_words() {
    let trace_doc = include_str!("../../../../../docs/trace.md");
    let row = trace_doc
        .lines()
        .find(|l| l.contains("`client_stream_end`"))
        .expect("docs/trace.md documents client_stream_end");
    for (kind, word) in [
        (ThrownKind::ErrorEvent, "error-event"),
        (ThrownKind::Parse, "parse-error"),
        (ThrownKind::Transport, "transport-error"),
    ] {
        assert_eq!(kind.as_str(), word);
        assert!(row.contains(&format!("`{word}`")), "{row}");
    }
}
