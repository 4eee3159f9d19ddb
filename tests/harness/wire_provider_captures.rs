//! The provider decoders against every real (and synthetic) capture in ../shared/captures.
//! PROVENANCE.md there describes each file; the spot checks below quote its facts.

use std::path::Path;

use crate::common::{captures, provider_captures, sse_captures};
use loopsim::wire::provider::{
    ProviderDecoder, ProviderEvent, ProviderFormat, ProviderStop, ProviderUsage,
    ToolCallAccumulator, decode_stream,
};
use loopsim::wire::sse::{SseDecoder, SseFrame, decode_all, encode_frame};
use proptest::prelude::*;

fn read(rel: &str) -> Vec<u8> {
    let p = captures().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn decode(rel: &str) -> Vec<ProviderEvent> {
    let format = if rel.starts_with("anthropic/") {
        ProviderFormat::Anthropic
    } else {
        ProviderFormat::OpenAiChat
    };
    decode_stream(format, &decode_all(&read(rel))).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn text(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn thinking(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ThinkingDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn stops(events: &[ProviderEvent]) -> Vec<(ProviderStop, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Stop { reason, raw } => Some((reason.clone(), raw.clone())),
            _ => None,
        })
        .collect()
}

fn usage(events: &[ProviderEvent]) -> ProviderUsage {
    let mut total = ProviderUsage::default();
    for e in events {
        if let ProviderEvent::Usage(u) = e {
            total.merge_from(u);
        }
    }
    total
}

fn has_tool_events(events: &[ProviderEvent]) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            ProviderEvent::ToolCallStart { .. }
                | ProviderEvent::ToolCallArgsDelta { .. }
                | ProviderEvent::ToolCallEnd { .. }
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Every capture

#[test]
fn every_provider_capture_decodes_and_is_detected() {
    for (format, path) in provider_captures() {
        let frames = decode_all(&std::fs::read(&path).unwrap());
        assert_eq!(
            ProviderFormat::detect(&frames),
            Some(format),
            "{}",
            path.display()
        );
        let events =
            decode_stream(format, &frames).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            matches!(events.first(), Some(ProviderEvent::MessageStart { .. })),
            "{}",
            path.display()
        );
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Done),
            "{}",
            path.display()
        );
        check_event_grammar(&path, &events);
    }
}

/// Properties every decoded stream has: no empty fragments, tool events only for started calls,
/// at most one end per call, nothing after `Done` but more `Done`s.
fn check_event_grammar(path: &Path, events: &[ProviderEvent]) {
    let mut open: Vec<u32> = Vec::new();
    let mut done = false;
    for e in events {
        let here = format!("{}: {e:?}", path.display());
        assert!(!done, "event after Done: {here}");
        match e {
            ProviderEvent::TextDelta { text, .. } | ProviderEvent::ThinkingDelta { text, .. } => {
                assert!(!text.is_empty(), "{here}")
            }
            ProviderEvent::ToolCallStart { index, id, name } => {
                assert!(!open.contains(index), "{here}");
                assert!(!id.is_empty() && !name.is_empty(), "{here}");
                open.push(*index);
            }
            ProviderEvent::ToolCallArgsDelta { index, delta } => {
                assert!(open.contains(index) && !delta.is_empty(), "{here}")
            }
            ProviderEvent::ToolCallEnd { index } => {
                assert!(open.contains(index), "{here}");
                open.retain(|i| i != index);
            }
            ProviderEvent::Done => done = true,
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Anthropic spot checks

#[test]
fn anthropic_tool_use_split_partial_json_exact_events() {
    let events = decode("anthropic/sdkpy_tool_use_split_partial_json.sse");
    let start_usage = ProviderUsage {
        input_tokens: Some(377),
        cache_read_tokens: Some(0),
        cache_write_tokens: Some(0),
        ..ProviderUsage::default()
    };
    let args = |s: &str| ProviderEvent::ToolCallArgsDelta {
        index: 1,
        delta: s.into(),
    };
    let expected = vec![
        ProviderEvent::MessageStart {
            id: Some("msg_019Q1hrJbZG26Fb9BQhrkHEr".into()),
            model: Some("claude-sonnet-4-20250514".into()),
        },
        ProviderEvent::Usage(start_usage),
        ProviderEvent::TextDelta {
            index: 0,
            text: "I".into(),
        },
        ProviderEvent::TextDelta {
            index: 0,
            text: "'ll check the current weather in Paris for you.".into(),
        },
        ProviderEvent::ToolCallStart {
            index: 1,
            id: "toolu_01NRLabsLyVHZPKxbKvkfSMn".into(),
            name: "get_weather".into(),
        },
        // The leading "" fragment is skipped; the rest pass verbatim.
        args("{\"locati"),
        args("on\": \"P"),
        args("ar"),
        args("is\"}"),
        ProviderEvent::ToolCallEnd { index: 1 },
        ProviderEvent::Stop {
            reason: ProviderStop::ToolUse,
            raw: "tool_use".into(),
        },
        ProviderEvent::Usage(ProviderUsage {
            output_tokens: Some(65),
            ..ProviderUsage::default()
        }),
        ProviderEvent::Done,
    ];
    assert_eq!(events, expected);
    let calls = ToolCallAccumulator::from_events(&events).into_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "toolu_01NRLabsLyVHZPKxbKvkfSMn");
    assert_eq!(calls[0].arguments, r#"{"location": "Paris"}"#);
    assert!(calls[0].complete);
}

#[test]
fn anthropic_truncated_tool_json_leaves_call_incomplete() {
    let events = decode("anthropic/sdkpy_max_tokens_truncated_tool_json_no_block_stop.sse");
    let calls = ToolCallAccumulator::from_events(&events).into_calls();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        (call.index, call.id.as_str(), call.name.as_str()),
        (1, "toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file")
    );
    assert!(
        !call.complete,
        "no content_block_stop: the call must stay open"
    );
    assert!(call.arguments.starts_with("{\"filename\": \"taxes.txt\""));
    assert!(call.arguments.ends_with("\n\"Filing taxes"));
    assert!(serde_json::from_str::<serde_json::Value>(&call.arguments).is_err());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ProviderEvent::ToolCallEnd { .. }))
    );
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::MaxTokens, "max_tokens".to_string())]
    );
    assert_eq!(usage(&events).output_tokens, Some(124));
    assert_eq!(usage(&events).input_tokens, Some(450));
}

#[test]
fn anthropic_basic_text_end_turn() {
    let events = decode("anthropic/sdkpy_basic_text_no_trailing_newline.sse");
    assert_eq!(text(&events), "Hello there!");
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::EndTurn, "end_turn".to_string())]
    );
    let u = usage(&events);
    assert_eq!((u.input_tokens, u.output_tokens), (Some(11), Some(6)));
    // The file has no trailing newline: message_stop is still delivered.
    assert_eq!(events.last(), Some(&ProviderEvent::Done));
}

#[test]
fn anthropic_refusal_and_unknown_fields() {
    let events = decode("anthropic/sdkpy_refusal_empty_text_block.sse");
    assert_eq!(text(&events), "");
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::Refusal, "refusal".to_string())]
    );
    assert_eq!(usage(&events).output_tokens, Some(0));

    let events = decode("anthropic/sdkpy_synthetic_unknown_extra_fields.sse");
    assert_eq!(text(&events), "Hello!");
    assert_eq!(usage(&events).output_tokens, Some(3));
}

#[test]
fn anthropic_out_of_order_block_index_is_accepted() {
    // Block indices are keys, not positions: a lone block 1 is not an error.
    let events = decode("anthropic/sdkpy_synthetic_out_of_order_block_index.sse");
    assert_eq!(
        events,
        vec![
            ProviderEvent::MessageStart {
                id: Some("msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK".into()),
                model: Some("claude-3-opus-latest".into()),
            },
            ProviderEvent::Usage(ProviderUsage {
                input_tokens: Some(11),
                ..ProviderUsage::default()
            }),
            ProviderEvent::Done,
        ]
    );
}

#[test]
fn anthropic_thinking_signature_and_redacted() {
    let events = decode("anthropic/pydanticai_thinking_signature_text.sse");
    let th = thinking(&events);
    assert!(th.starts_with("This is a straightforward question about pedestrian safety."));
    assert!(th.ends_with("help prevent accidents."));
    assert!(
        !th.contains("EvMC"),
        "signature_delta must not leak into thinking"
    );
    assert!(text(&events).starts_with("Here are the basic steps"));
    // 14 thinking_deltas, the last one empty.
    let n = events
        .iter()
        .filter(|e| matches!(e, ProviderEvent::ThinkingDelta { index: 0, .. }))
        .count();
    assert_eq!(n, 13);
    assert_eq!(usage(&events).output_tokens, Some(282));

    let events = decode("anthropic/pydanticai_redacted_thinking.sse");
    assert_eq!(thinking(&events), "");
    assert!(text(&events).starts_with("I notice that you've sent what"));
    assert!(events.iter().all(|e| match e {
        ProviderEvent::TextDelta { index, .. } => *index == 2,
        _ => true,
    }));

    let events = decode("anthropic/sdkpy_synthetic_thinking_signature_refusal.sse");
    assert!(thinking(&events).contains("benign general knowledge — definitions"));
    assert_eq!(text(&events), "Hi");
    assert_eq!(usage(&events).reasoning_tokens, Some(67));
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::Refusal, "refusal".to_string())]
    );
}

#[test]
fn anthropic_server_side_tools_are_not_client_tool_calls() {
    for rel in [
        "anthropic/pydanticai_mcp_tool_use_thinking.sse",
        "anthropic/pydanticai_server_tool_code_execution_thinking.sse",
        "anthropic/pydanticai_web_search_citations_no_ping.sse",
        "anthropic/sdkpy_synthetic_server_tool_use_web_search_refusal.sse",
    ] {
        let events = decode(rel);
        assert!(!has_tool_events(&events), "{rel}");
        assert!(!text(&events).is_empty(), "{rel}");
    }
    let events = decode("anthropic/pydanticai_mcp_tool_use_thinking.sse");
    assert!(text(&events).starts_with("**Pydantic-AI** is a framework"));
    assert!(thinking(&events).starts_with("The user is asking about the pydantic/pydantic-ai"));
    let events = decode("anthropic/pydanticai_web_search_citations_no_ping.sse");
    let u = usage(&events);
    assert_eq!((u.input_tokens, u.output_tokens), (Some(31772), Some(644)));
    let events = decode("anthropic/pydanticai_server_tool_code_execution_thinking.sse");
    assert!(text(&events).contains("1️⃣"));
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat spot checks

#[test]
fn openai_parallel_tool_calls() {
    let events = decode("openai_chat/parallel_tool_calls_split_args_usage_done.sse");
    let calls = ToolCallAccumulator::from_events(&events).into_calls();
    let got: Vec<(u32, &str, &str, &str, bool)> = calls
        .iter()
        .map(|c| {
            (
                c.index,
                c.id.as_str(),
                c.name.as_str(),
                c.arguments.as_str(),
                c.complete,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                0,
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                r#"{"city": "Edinburgh", "country": "GB", "units": "c"}"#,
                true
            ),
            (
                1,
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                r#"{"ticker": "AAPL", "exchange": "NASDAQ"}"#,
                true
            ),
        ]
    );
    // Both calls end at finish_reason, in order, then Stop, usage, [DONE].
    let tail: Vec<&ProviderEvent> = events.iter().rev().take(5).rev().collect();
    assert_eq!(
        tail,
        vec![
            &ProviderEvent::ToolCallEnd { index: 0 },
            &ProviderEvent::ToolCallEnd { index: 1 },
            &ProviderEvent::Stop {
                reason: ProviderStop::ToolUse,
                raw: "tool_calls".into()
            },
            &ProviderEvent::Usage(ProviderUsage {
                input_tokens: Some(149),
                output_tokens: Some(60),
                reasoning_tokens: Some(0),
                ..ProviderUsage::default()
            }),
            &ProviderEvent::Done,
        ]
    );
    assert_eq!(text(&events), "");
}

#[test]
fn openai_single_tool_call() {
    let events = decode("openai_chat/single_tool_call_nonstrict.sse");
    let calls = ToolCallAccumulator::from_events(&events).into_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].id, "call_4XzlGBLtUe9dy3GVNV4jhq7h");
    assert!(serde_json::from_str::<serde_json::Value>(&calls[0].arguments).is_ok());
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::ToolUse, "tool_calls".to_string())]
    );
    assert_eq!(usage(&events).input_tokens, Some(44));
}

#[test]
fn openai_finish_length() {
    let events = decode("openai_chat/finish_length_max_tokens_1.sse");
    assert_eq!(text(&events), "{\"");
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::MaxTokens, "length".to_string())]
    );
    let u = usage(&events);
    assert_eq!((u.input_tokens, u.output_tokens), (Some(79), Some(1)));
}

#[test]
fn openai_plain_text_and_refusal() {
    let events = decode("openai_chat/plain_text_stop_usage_done.sse");
    assert!(text(&events).starts_with("I'm unable to provide real-time weather updates."));
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::EndTurn, "stop".to_string())]
    );
    let u = usage(&events);
    assert_eq!((u.input_tokens, u.output_tokens), (Some(14), Some(30)));

    let events = decode("openai_chat/refusal_stream.sse");
    assert_eq!(
        text(&events),
        "I'm sorry, I can't assist with that request."
    );
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::Refusal, "stop".to_string())]
    );

    let events = decode("openai_chat/pydanticai_gpt5_obfuscation_field_moderation.sse");
    assert_eq!(text(&events), "Paris.");
    assert_eq!(usage(&events).output_tokens, Some(11));
}

#[test]
fn openai_openrouter_keepalives_and_midstream_error() {
    let rel = "openai_chat/openrouter_comment_keepalives_error_chunk_midstream.sse";
    let frames = decode_all(&read(rel));
    let comments = frames
        .iter()
        .filter(|f| matches!(f, SseFrame::Comment(c) if c == "OPENROUTER PROCESSING"))
        .count();
    assert_eq!(comments, 17);
    let events = decode(rel);
    assert_eq!(
        thinking(&events),
        "We need to respond to a greeting. The user"
    );
    assert_eq!(text(&events), "");
    // finish_reason `length` is repeated; it counts once.
    assert_eq!(
        stops(&events),
        vec![(ProviderStop::MaxTokens, "length".to_string())]
    );
    let n = events.len();
    assert_eq!(
        events[n - 2],
        ProviderEvent::Error {
            error_type: "400".into(),
            message: "Token limit reached".into()
        }
    );
    assert_eq!(events[n - 1], ProviderEvent::Done);
    let u = usage(&events);
    assert_eq!((u.input_tokens, u.output_tokens), (Some(43), Some(10)));
}

#[test]
fn openai_n3_uses_choice_zero_only() {
    let rel = "openai_chat/n3_multiple_choices_interleaved.sse";
    // Independently collect choice 0's content from the raw chunks.
    let mut want = String::new();
    let mut other = String::new();
    for f in decode_all(&read(rel)) {
        let Some(ev) = f.as_event() else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev.data) else {
            continue;
        };
        for c in v["choices"].as_array().into_iter().flatten() {
            let s = c["delta"]["content"].as_str().unwrap_or("");
            if c["index"] == 0 {
                want.push_str(s);
            } else {
                other.push_str(s);
            }
        }
    }
    assert!(!other.is_empty());
    let events = decode(rel);
    assert_eq!(text(&events), want);
    assert_eq!(stops(&events).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Framing: re-chunking, SSE round trip, the formats we only frame

fn frames_in_pieces(bytes: &[u8], cuts: &[usize]) -> Vec<SseFrame> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut dec = SseDecoder::new();
    let mut frames = Vec::new();
    let mut at = 0;
    for c in cuts {
        frames.extend(dec.push(&bytes[at..c]));
        at = c;
    }
    frames.extend(dec.push(&bytes[at..]));
    frames.extend(dec.finish());
    frames
}

/// Feeds frames to the decoder as they complete, the way the server model will.
fn stream_events(format: ProviderFormat, bytes: &[u8], cuts: &[usize]) -> Vec<ProviderEvent> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    let mut sse = SseDecoder::new();
    let mut dec = ProviderDecoder::new(format);
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts {
        for f in sse.push(&bytes[at..c]) {
            out.extend(dec.on_frame(&f).unwrap());
        }
        at = c;
    }
    for f in sse.finish() {
        out.extend(dec.on_frame(&f).unwrap());
    }
    out.extend(dec.finish());
    out
}

#[test]
fn one_byte_at_a_time_matches_whole_body() {
    for (format, path) in provider_captures() {
        let bytes = std::fs::read(&path).unwrap();
        let cuts: Vec<usize> = (0..bytes.len()).collect();
        let whole = decode_stream(format, &decode_all(&bytes)).unwrap();
        assert_eq!(
            stream_events(format, &bytes, &cuts),
            whole,
            "{}",
            path.display()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rechunking_never_changes_events(
        pick in any::<prop::sample::Index>(),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let files = provider_captures();
        let (format, path) = &files[pick.index(files.len())];
        let bytes = std::fs::read(path).unwrap();
        let whole_frames = decode_all(&bytes);
        prop_assert_eq!(&frames_in_pieces(&bytes, &cuts), &whole_frames);
        let whole = decode_stream(*format, &whole_frames).unwrap();
        prop_assert_eq!(stream_events(*format, &bytes, &cuts), whole);
    }
}

#[test]
fn encode_decode_round_trips_every_capture() {
    for dir in ["anthropic", "openai_chat", "openai_responses", "gemini"] {
        for path in sse_captures(dir) {
            let frames = decode_all(&std::fs::read(&path).unwrap());
            let encoded: String = frames.iter().map(encode_frame).collect();
            assert_eq!(decode_all(encoded.as_bytes()), frames, "{}", path.display());
        }
    }
}

#[test]
fn responses_and_gemini_captures_are_well_formed_sse() {
    for path in sse_captures("openai_responses") {
        let frames = decode_all(&std::fs::read(&path).unwrap());
        assert!(frames.len() > 3, "{}", path.display());
        assert_eq!(ProviderFormat::detect(&frames), None, "{}", path.display());
        for f in &frames {
            let ev = f.as_event().expect("no comments in Responses captures");
            let v: serde_json::Value = serde_json::from_str(&ev.data)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // The event name repeats the JSON type.
            assert_eq!(
                ev.event.as_deref(),
                v["type"].as_str(),
                "{}",
                path.display()
            );
        }
        let last = frames.last().unwrap().as_event().unwrap();
        assert_eq!(last.event.as_deref(), Some("response.completed"));
    }
    for path in sse_captures("gemini") {
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.windows(4).any(|w| w == b"\r\n\r\n"), "CRLF framing");
        let frames = decode_all(&bytes);
        assert_eq!(ProviderFormat::detect(&frames), None, "{}", path.display());
        for f in &frames {
            let ev = f.as_event().unwrap();
            assert_eq!(ev.event, None);
            assert!(!ev.data.contains('\r'), "CR must not leak into data");
            serde_json::from_str::<serde_json::Value>(&ev.data)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        let last: serde_json::Value =
            serde_json::from_str(&frames.last().unwrap().as_event().unwrap().data).unwrap();
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    }
}

#[test]
fn malformed_data_is_an_error_naming_frame_and_event() {
    let mut frames = decode_all(&read("anthropic/sdkpy_basic_text_no_trailing_newline.sse"));
    if let SseFrame::Event(ev) = &mut frames[4] {
        ev.data.truncate(ev.data.len() - 3);
    }
    let err = decode_stream(ProviderFormat::Anthropic, &frames).unwrap_err();
    assert_eq!(err.frame, Some(5));
    assert_eq!(err.event, "content_block_delta");
    let msg = err.to_string();
    assert!(
        msg.starts_with("anthropic stream, frame 5, event `content_block_delta`: malformed data:"),
        "{msg}"
    );

    let mut frames = decode_all(&read("openai_chat/plain_text_stop_usage_done.sse"));
    frames[1] = SseFrame::Event(loopsim::wire::sse::SseEvent::data("{\"choices\": 7}"));
    let err = decode_stream(ProviderFormat::OpenAiChat, &frames).unwrap_err();
    assert_eq!(err.frame, Some(2));
    assert!(err.detail.contains("invalid type"), "{err}");
}
