//! `sim import`: raw SSE captures, vcrpy YAML cassettes and Letta end-to-end recordings as
//! version 2 cassettes; the committed imports of the shared captures equal fresh imports; what a
//! cassette cannot represent is an error naming it.

use std::path::{Path, PathBuf};

use loopsim::cassette::scrub::Scrubber;
use loopsim::cassette::{
    Body, CassetteErrorKind, ImportKind, Layer, RECORDING_IMPORTS, Recording, ResponseBody,
    import_bytes, import_file,
};
use loopsim::wire::provider::StreamFormat;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn captures() -> PathBuf {
    repo().join("../shared/captures")
}

fn import(kind: ImportKind, text: &str) -> Result<Recording, loopsim::cassette::CassetteError> {
    import_bytes(kind, text.as_bytes(), "x", None, &Scrubber::default())
}

/// The committed imports are exactly what importing their captures gives today. Run with
/// `LOOPSIM_BLESS_CASSETTES=1` to rewrite them after a deliberate format or import change.
#[test]
fn committed_imports_equal_fresh_imports() {
    let bless = std::env::var_os("LOOPSIM_BLESS_CASSETTES").is_some();
    for imp in RECORDING_IMPORTS {
        let fresh = imp
            .import(&captures())
            .unwrap_or_else(|e| panic!("{}: {e}", imp.capture))
            .to_jsonl();
        let path = repo().join(imp.cassette);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (bless with LOOPSIM_BLESS_CASSETTES=1)",
                imp.cassette
            )
        });
        assert!(
            committed == fresh,
            "{} differs from a fresh import of {} (bless with LOOPSIM_BLESS_CASSETTES=1)",
            imp.cassette,
            imp.capture
        );
        let r = Recording::parse(&committed, imp.cassette).unwrap();
        assert_eq!(r.to_jsonl(), committed);
        assert_eq!(
            r.header().source,
            format!("shared/captures/{}", imp.capture)
        );
    }
    // Every letta_e2e recording, vcrpy cassette and Gemini / Responses stream is there.
    let count = |dir: &str, suffix: &str| {
        std::fs::read_dir(captures().join(dir))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(suffix)
            })
            .count()
    };
    let yaml: usize = ["anthropic", "gemini", "openai_chat", "openai_responses"]
        .iter()
        .map(|d| count(d, ".cassette.yaml"))
        .sum();
    let want = count("letta_e2e", ".exchanges.jsonl")
        + yaml
        + count("gemini", ".sse")
        + count("openai_responses", ".sse");
    assert_eq!(RECORDING_IMPORTS.len(), want);
}

#[test]
fn a_letta_e2e_recording_keeps_order_offsets_and_frames() {
    let path = captures().join("letta_e2e/e_busy_conversation_409.exchanges.jsonl");
    let (kind, stem, r) = import_file(&path, None, &Scrubber::default()).unwrap();
    assert_eq!(
        (kind, stem.as_str()),
        (ImportKind::LettaE2e, "e_busy_conversation_409")
    );
    assert_eq!(r.header().layer, Layer::Letta);
    let raw: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(r.exchanges().len(), raw.len());
    assert_eq!(r.exchanges()[0].t_ms, 0);
    // The setup's slow turn, then the CLI's 409, the attach by otid (404 after the server's
    // ~1.76 s of polling), ten seconds' back-off, the same otid again.
    let posts: Vec<_> = r
        .exchanges()
        .iter()
        .filter(|x| x.method == "POST" && x.path.ends_with("/messages"))
        .collect();
    let statuses: Vec<u16> = posts.iter().map(|x| x.answer().unwrap().status).collect();
    assert_eq!(statuses, vec![200, 409, 409, 200, 200]);
    assert!(
        posts[2].t_ms - posts[1].t_ms >= 10_000,
        "{} {}",
        posts[1].t_ms,
        posts[2].t_ms
    );
    let attach = r
        .exchanges()
        .iter()
        .find(|x| x.path.ends_with("/stream"))
        .unwrap();
    assert_eq!(attach.answer().unwrap().status, 404);
    assert!(attach.answer().unwrap().t_ms >= 1700);
    // SSE frames: as many as recorded, offsets from the response head.
    for (x, raw) in r.exchanges().iter().zip(&raw) {
        match (&x.answer().unwrap().body, raw.get("sse_frames")) {
            (ResponseBody::Sse(frames), Some(rf)) => {
                let rf = rf.as_array().unwrap();
                assert_eq!(frames.len(), rf.len());
                for (f, r) in frames.iter().zip(rf) {
                    assert_eq!(f.t_ms, r["ms"].as_f64().unwrap().round() as u64);
                }
            }
            (ResponseBody::Whole(b), None) => match raw["response_body"] {
                serde_json::Value::Null => assert_eq!(*b, Body::Empty),
                ref v => assert_eq!(*b, Body::Json(v.clone())),
            },
            _ => panic!("{}: body kind differs", x.path),
        }
    }
    // The 409 keeps the server's detail verbatim.
    let ResponseBody::Whole(Body::Json(conflict)) = &posts[1].answer().unwrap().body else {
        panic!("the 409 has a JSON body")
    };
    assert!(
        conflict["detail"]
            .as_str()
            .unwrap()
            .starts_with("CONFLICT: Cannot send a new message: Another request")
    );
}

#[test]
fn a_vcrpy_cassette_becomes_one_exchange_per_interaction() {
    let path = captures().join("gemini/pydanticai_function_call_thought_signature.cassette.yaml");
    let (kind, stem, r) = import_file(&path, None, &Scrubber::default()).unwrap();
    assert_eq!(
        (kind, stem.as_str()),
        (
            ImportKind::VcrYaml,
            "pydanticai_function_call_thought_signature"
        )
    );
    assert_eq!(r.header().format, Some(StreamFormat::Gemini));
    assert_eq!(r.exchanges().len(), 2);
    let x = &r.exchanges()[0];
    assert_eq!(x.method, "POST");
    assert_eq!(
        x.path,
        "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    );
    assert!(matches!(&x.request.body, Body::Json(v) if v["tools"].is_array()));
    let ResponseBody::Sse(frames) = &x.answer().unwrap().body else {
        panic!()
    };
    // The same frames as the raw capture of that interaction.
    let raw = loopsim::wire::sse::decode_all(
        &std::fs::read(captures().join("gemini/pydanticai_function_call_thought_signature.sse"))
            .unwrap(),
    );
    let got: Vec<_> = frames.iter().map(|f| f.frame.clone()).collect();
    assert_eq!(got, raw);
    assert!(r.exchanges()[1].t_ms >= x.answer().unwrap().end.t_ms);
    assert!(
        r.header()
            .note
            .as_deref()
            .unwrap()
            .contains("https://generativelanguage.googleapis.com")
    );
}

#[test]
fn a_raw_sse_capture_becomes_one_provider_exchange() {
    let path = captures().join("openai_responses/pydanticai_function_call_args_delta.sse");
    let (_, _, r) = import_file(&path, None, &Scrubber::default()).unwrap();
    assert_eq!(r.header().format, Some(StreamFormat::OpenAiResponses));
    let x = &r.exchanges()[0];
    assert_eq!(
        (x.method.as_str(), x.path.as_str()),
        ("POST", "/v1/responses")
    );
    let e = import(ImportKind::Sse, "data: {\"x\":1}\n\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "x: cannot tell which provider format this stream is (pass --format)"
    );
    let r = import_bytes(
        ImportKind::Sse,
        b"data: {\"x\":1}\n\n",
        "x",
        Some(StreamFormat::Gemini),
        &Scrubber::default(),
    )
    .unwrap();
    assert_eq!(r.header().format, Some(StreamFormat::Gemini));
    let e = import_bytes(
        ImportKind::Sse,
        b"data: \xff\n\n",
        "x",
        None,
        &Scrubber::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Encoding);
}

const VCR: &str = "interactions:
- request:
    headers:
      authorization:
      - Bearer sk-ant-api03-NOTREALbutSHAPED01234
      host:
      - api.anthropic.com
    method: POST
    parsed_body:
      model: m
    uri: https://api.anthropic.com/v1/messages
  response:
    body:
      string: '{\"ok\": true}'
    headers:
      content-type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
";

#[test]
fn vcrpy_imports_are_scrubbed_and_refuse_what_they_cannot_keep() {
    let r = import(ImportKind::VcrYaml, VCR).unwrap();
    let text = r.to_jsonl();
    assert!(!text.contains("NOTREAL"), "{text}");
    assert!(
        text.contains(r#"["authorization","Bearer [scrubbed]"]"#),
        "{text}"
    );
    let cases = [
        (
            VCR.replace("version: 1", "version: 2"),
            "x: `version`: vcrpy cassette version 2 (this import reads version 1)",
        ),
        (
            VCR.replace("    method: POST", "    method: POST\n    extra: 1"),
            "x: `interactions[0].request.extra`: unknown key",
        ),
        (
            VCR.replace("message: OK", "message: Fine"),
            "x: `interactions[0].response.status.message`: reason \"Fine\" is not the standard one for 200 (OK)",
        ),
        (
            VCR.replace("string: '{\"ok\": true}'", "string: !!binary aGk="),
            "x:14: tag !!binary is not accepted",
        ),
        (
            VCR.replace("      model: m", "      model: &a m\n      other: *a"),
            "x:10: anchors are not accepted",
        ),
        (
            "!!python/object/apply:os.system [\"true\"]".to_string(),
            "x:1: tag !!python/object/apply:os.system is not accepted",
        ),
        ("interactions: [".to_string(), "x:2: not YAML"),
    ];
    for (text, want) in cases {
        let e = import(ImportKind::VcrYaml, &text).unwrap_err();
        assert!(e.to_string().starts_with(want), "want {want}\n got {e}");
    }
    // A billion-laughs document is refused at its first anchor, never expanded.
    let bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n";
    assert!(
        import(ImportKind::VcrYaml, bomb)
            .unwrap_err()
            .to_string()
            .contains("anchors are not accepted")
    );
    // The size bound.
    let big = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("big.cassette.yaml");
    std::fs::write(
        &big,
        vec![b'#'; (loopsim::cassette::MAX_IMPORT_BYTES + 1) as usize],
    )
    .unwrap();
    let e = import_file(&big, None, &Scrubber::default()).unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Size);
    assert!(
        e.to_string().contains("is over the 33554432-byte bound"),
        "{e}"
    );
    let e = import_file(Path::new("notes.txt"), None, &Scrubber::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("notes.txt: unknown kind of recording"),
        "{e}"
    );
}

#[test]
fn letta_e2e_imports_refuse_what_they_cannot_keep() {
    let line =
        std::fs::read_to_string(captures().join("letta_e2e/a_fresh_unrestricted.exchanges.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        f(&mut v);
        format!("{v}\n")
    };
    let cases: Vec<(String, &str)> = vec![
        (
            edit(&|v| v["colour"] = "red".into()),
            "x:1: key `colour`: unknown key; it cannot be kept",
        ),
        (
            edit(&|v| v["reason"] = "Fine".into()),
            "x:1: `reason`: reason \"Fine\" is not the standard one for 200 (OK)",
        ),
        (
            edit(&|v| v["body_end"] = "reset".into()),
            "x:1: key `body_end`: Some(\"reset\"): only \"eof\"",
        ),
        (
            edit(&|v| v["sse_trailing"] = "data: x".into()),
            "x:1: key `sse_trailing`: bytes after the last complete frame cannot be kept",
        ),
        (
            edit(&|v| v["synthesized"] = true.into()),
            "x:1: key `synthesized`: an answer the recording proxy made up",
        ),
        (
            format!("{line}\n{line}\n"),
            "x:2: key `seq`: 1 after 1 (records are numbered in arrival order)",
        ),
        (
            edit(&|v| v["t_start"] = "yesterday".into()),
            "x:1: key `t_start`: expected an ISO-8601 time",
        ),
        ("not json\n".into(), "x:1: not JSON"),
    ];
    for (text, want) in cases {
        let e = import(ImportKind::LettaE2e, &text).unwrap_err();
        assert!(e.to_string().starts_with(want), "want {want}\n got {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// The Gemini and OpenAI Responses decoders, over the committed imports of their captures

mod decoders {
    use loopsim::cassette::{RECORDING_IMPORTS, Recording};
    use loopsim::wire::provider::{
        ProviderEvent, ProviderStop, ProviderUsage, StreamFormat, ToolCallAccumulator,
        decode_stream,
    };
    use loopsim::wire::sse::{SseEvent, SseFrame, decode_all};

    fn committed(capture: &str) -> Recording {
        let imp = RECORDING_IMPORTS
            .iter()
            .find(|i| i.capture == capture)
            .unwrap();
        Recording::load(super::repo().join(imp.cassette)).unwrap()
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

    fn thinking(events: &[ProviderEvent]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, ProviderEvent::ThinkingDelta { .. }))
            .count()
    }

    fn stop(events: &[ProviderEvent]) -> (ProviderStop, String) {
        events
            .iter()
            .find_map(|e| match e {
                ProviderEvent::Stop { reason, raw } => Some((reason.clone(), raw.clone())),
                _ => None,
            })
            .expect("a Stop")
    }

    #[test]
    fn every_committed_gemini_and_responses_stream_decodes_and_ends() {
        for imp in RECORDING_IMPORTS {
            let r = Recording::load(super::repo().join(imp.cassette)).unwrap();
            for n in 1..=r.exchanges().len() {
                let Some(f) = r.stream_format(n) else {
                    continue;
                };
                if !matches!(f, StreamFormat::Gemini | StreamFormat::OpenAiResponses) {
                    continue;
                }
                let events = r
                    .provider_events(n)
                    .unwrap_or_else(|e| panic!("{}: {e}", imp.cassette));
                assert!(
                    matches!(events.first(), Some(ProviderEvent::MessageStart { .. })),
                    "{}",
                    imp.cassette
                );
                assert_eq!(
                    events.last(),
                    Some(&ProviderEvent::Done),
                    "{}",
                    imp.cassette
                );
                // Every tool call is complete and its arguments are JSON.
                for call in ToolCallAccumulator::from_events(&events).into_calls() {
                    assert!(call.complete, "{}: {call:?}", imp.cassette);
                    serde_json::from_str::<serde_json::Value>(&call.arguments).unwrap();
                }
            }
        }
    }

    #[test]
    fn gemini_text_function_calls_and_thinking() {
        let r = committed("gemini/pydanticai_plain_text_crlf.sse");
        let ev = r.provider_events(1).unwrap();
        assert_eq!(
            ev[0],
            ProviderEvent::MessageStart {
                id: Some("w1peaMz6INOvnvgPgYfPiQY".into()),
                model: Some("gemini-2.0-flash-exp".into())
            }
        );
        assert_eq!(text(&ev), "The capital of France is Paris.\n");
        assert!(ev.contains(&ProviderEvent::Usage(ProviderUsage {
            input_tokens: Some(13),
            output_tokens: Some(8),
            ..ProviderUsage::default()
        })));
        assert_eq!(stop(&ev), (ProviderStop::EndTurn, "STOP".into()));

        let r = committed("gemini/pydanticai_function_call_thought_signature.cassette.yaml");
        let ev = r.provider_events(1).unwrap();
        let calls = ToolCallAccumulator::from_events(&ev).into_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (
                calls[0].name.as_str(),
                calls[0].arguments.as_str(),
                calls[0].id.as_str()
            ),
            ("get_country", "{}", "")
        );
        assert_eq!(stop(&ev), (ProviderStop::ToolUse, "STOP".into()));
        let u = ev
            .iter()
            .find_map(|e| match e {
                ProviderEvent::Usage(u) => Some(u.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(u.reasoning_tokens, Some(202));
        // The second interaction answers after the tool result.
        let ev = r.provider_events(2).unwrap();
        assert!(
            text(&ev).starts_with("The capital of Mexico"),
            "{}",
            text(&ev)
        );

        let r = committed("gemini/pydanticai_thinking_parts.sse");
        let ev = r.provider_events(1).unwrap();
        assert_eq!(thinking(&ev), 4);
        assert!(text(&ev).starts_with("This is a great question!"));
    }

    #[test]
    fn responses_function_call_reasoning_and_text() {
        let r = committed("openai_responses/pydanticai_function_call_args_delta.sse");
        let ev = r.provider_events(1).unwrap();
        assert_eq!(
            ev[0],
            ProviderEvent::MessageStart {
                id: Some("resp_67e554a155508191900ee113293c4c830794405d35281ae2".into()),
                model: Some("gpt-4o-2024-08-06".into())
            }
        );
        let calls = ToolCallAccumulator::from_events(&ev).into_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "call_kL0PCQV7M2WMoVX8V8OtYSAL");
        assert_eq!(calls[0].name, "get_capital");
        assert_eq!(calls[0].arguments, r#"{"country":"France"}"#);
        assert_eq!(stop(&ev), (ProviderStop::ToolUse, "completed".into()));

        let r = committed("openai_responses/pydanticai_output_text_after_tool.sse");
        let ev = r.provider_events(1).unwrap();
        assert_eq!(text(&ev), "The capital of France is Paris.");
        assert_eq!(stop(&ev), (ProviderStop::EndTurn, "completed".into()));

        let r = committed(
            "openai_responses/pydanticai_reasoning_encrypted_then_function_call_usage.sse",
        );
        let ev = r.provider_events(1).unwrap();
        let calls = ToolCallAccumulator::from_events(&ev).into_calls();
        assert_eq!(
            (calls[0].index, calls[0].arguments.as_str()),
            (1, r#"{"result":6666}"#)
        );
        let u = ev
            .iter()
            .find_map(|e| match e {
                ProviderEvent::Usage(u) => Some(u.clone()),
                _ => None,
            })
            .unwrap();
        assert!(
            u.input_tokens.is_some() && u.reasoning_tokens.is_some(),
            "{u:?}"
        );

        let r = committed("openai_responses/pydanticai_reasoning_summary_text.sse");
        assert!(thinking(&r.provider_events(1).unwrap()) > 100);
        let r = committed("openai_responses/pydanticai_background_mode_queued.sse");
        assert_eq!(text(&r.provider_events(1).unwrap()), "2 + 2 equals 4.");
    }

    #[test]
    fn responses_error_then_failed_and_gemini_errors() {
        // vercel's capture is one JSON payload per line; on the wire each is an event named by
        // its type.
        let text = std::fs::read_to_string(
            super::captures()
                .join("openai_responses/vercel_error_event_then_response_failed.chunks.jsonl"),
        )
        .unwrap();
        let frames: Vec<SseFrame> = text
            .lines()
            .map(|l| {
                let ty = serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string();
                SseFrame::Event(SseEvent::named(ty, l))
            })
            .collect();
        let ev = decode_stream(StreamFormat::OpenAiResponses, &frames).unwrap();
        let errors: Vec<&ProviderEvent> = ev
            .iter()
            .filter(|e| matches!(e, ProviderEvent::Error { .. }))
            .collect();
        assert_eq!(errors.len(), 2);
        assert!(
            matches!(errors[0], ProviderEvent::Error { error_type, .. } if error_type == "insufficient_quota"),
            "{errors:?}"
        );
        assert_eq!(ev.last(), Some(&ProviderEvent::Done));

        let body = "data: {\"error\": {\"code\": 429, \"message\": \"Resource has been exhausted\", \"status\": \"RESOURCE_EXHAUSTED\"}}\r\n\r\n";
        let ev = decode_stream(StreamFormat::Gemini, &decode_all(body.as_bytes())).unwrap();
        assert_eq!(
            ev,
            vec![ProviderEvent::Error {
                error_type: "RESOURCE_EXHAUSTED".into(),
                message: "Resource has been exhausted".into()
            }]
        );
        let body = "data: {\"promptFeedback\": {\"blockReason\": \"SAFETY\"}}\r\n\r\n";
        let ev = decode_stream(StreamFormat::Gemini, &decode_all(body.as_bytes())).unwrap();
        assert!(ev.contains(&ProviderEvent::Stop {
            reason: ProviderStop::Refusal,
            raw: "SAFETY".into()
        }));
        let e = decode_stream(
            StreamFormat::Gemini,
            &decode_all(b"data: {\"candidates\": [\r\n\r\n"),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("gemini stream, frame 1, event `chunk`: malformed data:"),
            "{e}"
        );
        let e = decode_stream(
            StreamFormat::OpenAiResponses,
            &decode_all(b"data: {\"x\":1}\n\n"),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "openai_responses stream, frame 1, event `data`: no `type` field"
        );
        // A stream cut before its end has no Stop.
        let mut frames = decode_all(
            &std::fs::read(super::captures().join("gemini/pydanticai_plain_text_crlf.sse"))
                .unwrap(),
        );
        frames.pop();
        let ev = decode_stream(StreamFormat::Gemini, &frames).unwrap();
        assert!(
            !ev.iter()
                .any(|e| matches!(e, ProviderEvent::Stop { .. } | ProviderEvent::Done))
        );
    }
}
