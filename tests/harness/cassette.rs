//! Cassette v1: round trips, imports of the shared captures, every error message, and a
//! no-panic property over garbled input.

use std::path::{Path, PathBuf};

use crate::common::{captures, provider_captures, repo};
use loopsim::cassette::{
    CASSETTE_VERSION, Cassette, CassetteErrorKind, CassetteHeader, DEFAULT_IMPORT_SPACING_MS,
    EndKind, Layer, PROVIDER_CAPTURE_IMPORTS, StreamEnd, TimedFrame,
};
use loopsim::wire::provider::{ProviderEvent, ProviderFormat, ProviderStop, decode_stream};
use loopsim::wire::sse::{SseEvent, SseFrame, decode_all};
use proptest::prelude::*;

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// A small valid cassette exercising every line kind.
const SMALL: &str = r#"{"loopsim_cassette":1,"layer":"provider","format":"openai_chat","source":"test","status":200,"content_type":"text/event-stream","note":"hand-written"}
{"t":0,"comment":"OPENROUTER PROCESSING"}
{"t":5,"data":"{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}"}
{"t":5,"event":"message","id":"7","retry":1500,"data":"{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"}
{"t":9,"data":"[DONE]"}
{"t":12,"end":"clean"}
"#;

fn err_of(text: &str) -> loopsim::cassette::CassetteError {
    Cassette::parse(text, "cassettes/x.jsonl").unwrap_err()
}

/// SMALL with line `n` (1-based) replaced.
fn with_line(n: usize, line: &str) -> String {
    SMALL
        .lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == n { line } else { l })
        .map(|l| format!("{l}\n"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Round trips and imports

#[test]
fn small_cassette_parses_and_round_trips() {
    let c = Cassette::parse(SMALL, "small").unwrap();
    assert_eq!(c.to_jsonl(), SMALL);
    assert_eq!(c.header().format, ProviderFormat::OpenAiChat);
    assert_eq!(c.header().note.as_deref(), Some("hand-written"));
    assert_eq!(c.frames().len(), 4);
    assert_eq!(
        c.frames()[0].frame,
        SseFrame::Comment("OPENROUTER PROCESSING".into())
    );
    assert_eq!(
        c.frames()[2].frame,
        SseFrame::Event(SseEvent {
            event: Some("message".into()),
            data: r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#.into(),
            id: Some("7".into()),
            retry: Some(1500),
        })
    );
    assert_eq!(
        c.end(),
        StreamEnd {
            t_ms: 12,
            kind: EndKind::Clean
        }
    );
    // The body re-decodes to the same frames.
    assert_eq!(decode_all(c.body().as_bytes()), c.sse_frames());
    let events = c.provider_events().unwrap();
    assert_eq!(
        events,
        vec![
            ProviderEvent::MessageStart {
                id: Some("c1".into()),
                model: None
            },
            ProviderEvent::TextDelta {
                index: 0,
                text: "hi".into()
            },
            ProviderEvent::Stop {
                reason: ProviderStop::EndTurn,
                raw: "stop".into()
            },
            ProviderEvent::Done,
        ]
    );
}

#[test]
fn save_load_is_byte_identical_for_committed_cassettes() {
    for imp in PROVIDER_CAPTURE_IMPORTS {
        let path = repo().join(imp.cassette);
        let bytes = std::fs::read_to_string(&path).unwrap();
        let c = Cassette::load(&path).unwrap();
        assert_eq!(c.to_jsonl(), bytes, "{}", imp.cassette);
        let out = tmp(&format!(
            "roundtrip_{}",
            path.file_name().unwrap().to_string_lossy()
        ));
        c.save(&out).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), bytes);
        assert_eq!(Cassette::load(&out).unwrap(), c);
    }
}

/// The committed cassettes are exactly what importing their captures gives today. Run with
/// `LOOPSIM_BLESS_CASSETTES=1` to rewrite them after a deliberate format or import change.
#[test]
fn committed_cassettes_equal_fresh_imports() {
    let bless = std::env::var_os("LOOPSIM_BLESS_CASSETTES").is_some();
    for imp in PROVIDER_CAPTURE_IMPORTS {
        let fresh = imp.import(&captures()).unwrap().to_jsonl();
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
        let c = Cassette::parse(&committed, imp.cassette).unwrap();
        assert_eq!(
            c.header().source,
            format!("shared/captures/{}", imp.capture)
        );
        assert!(c.header().note.as_deref().unwrap().contains(imp.upstream));
    }
}

#[test]
fn import_then_provider_events_equals_decoding_the_capture() {
    for (format, path) in provider_captures() {
        let bytes = std::fs::read(&path).unwrap();
        let c = Cassette::import_sse(&bytes, format, "x", DEFAULT_IMPORT_SPACING_MS);
        let raw = decode_all(&bytes);
        assert_eq!(c.sse_frames(), raw, "{}", path.display());
        assert_eq!(
            c.provider_events().unwrap(),
            decode_stream(format, &raw).unwrap(),
            "{}",
            path.display()
        );
        // And through text.
        let again = Cassette::parse(&c.to_jsonl(), "again").unwrap();
        assert_eq!(again, c, "{}", path.display());
        assert_eq!(again.to_jsonl(), c.to_jsonl());
    }
}

#[test]
fn import_assigns_deterministic_times() {
    let body = b"event: a\ndata: 1\n\n: keep\n\ndata: 2";
    let c = Cassette::import_sse(body, ProviderFormat::Anthropic, "mem", 10);
    let times: Vec<u64> = c.frames().iter().map(|f| f.t_ms).collect();
    assert_eq!(times, vec![0, 10, 20]);
    assert_eq!(
        c.end(),
        StreamEnd {
            t_ms: 30,
            kind: EndKind::Clean
        }
    );
    let h = c.header();
    assert_eq!(
        (
            h.layer,
            h.status,
            h.content_type.as_str(),
            h.source.as_str()
        ),
        (Layer::Provider, 200, "text/event-stream", "mem")
    );
    assert_eq!(h.note, None);
    let zero = Cassette::import_sse(body, ProviderFormat::Anthropic, "mem", 0);
    assert!(zero.frames().iter().all(|f| f.t_ms == 0));
    let empty = Cassette::import_sse(b"", ProviderFormat::OpenAiChat, "mem", 10);
    assert_eq!(
        empty.to_jsonl().lines().last().unwrap(),
        r#"{"t":0,"end":"clean"}"#
    );
    // Importing twice gives the same bytes.
    assert_eq!(
        c.to_jsonl(),
        Cassette::import_sse(body, ProviderFormat::Anthropic, "mem", 10).to_jsonl()
    );
}

#[test]
fn written_lines_have_the_documented_shape() {
    let imp = &PROVIDER_CAPTURE_IMPORTS[0];
    let text = std::fs::read_to_string(repo().join(imp.cassette)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with(
        r#"{"loopsim_cassette":1,"layer":"provider","format":"anthropic","source":"shared/captures/anthropic/sdkpy_tool_use_split_partial_json.sse","status":200,"content_type":"text/event-stream","note":"#
    ));
    assert!(
        lines[1]
            .starts_with(r#"{"t":0,"event":"message_start","data":"{\"type\":\"message_start\""#)
    );
    assert_eq!(*lines.last().unwrap(), r#"{"t":150,"end":"clean"}"#);
}

#[test]
fn end_kinds_and_crlf() {
    for kind in ["clean", "reset", "stall"] {
        let text = with_line(6, &format!(r#"{{"t":12,"end":"{kind}"}}"#));
        let c = Cassette::parse(&text, "k").unwrap();
        assert_eq!(c.end().kind.as_str(), kind);
        assert_eq!(c.to_jsonl(), text);
    }
    // A checkout that turned LF into CRLF still reads; no final newline is fine too.
    let crlf = SMALL.replace('\n', "\r\n");
    assert_eq!(
        Cassette::parse(&crlf, "crlf").unwrap(),
        Cassette::parse(SMALL, "lf").unwrap()
    );
    let trimmed = SMALL.trim_end();
    assert!(Cassette::parse(trimmed, "no-final-newline").is_ok());
}

// ---------------------------------------------------------------------------------------------
// Errors

#[test]
fn unknown_version_is_rejected_by_name() {
    let text = with_line(
        1,
        r#"{"loopsim_cassette":2,"layer":"provider","format":"anthropic","source":"s","status":200,"content_type":"text/event-stream"}"#,
    );
    let e = err_of(&text);
    assert_eq!(
        e.to_string(),
        "cassettes/x.jsonl:1: unknown cassette version 2 (this build reads version 1)"
    );
    assert_eq!(e.kind, CassetteErrorKind::Version);
    assert_eq!(CASSETTE_VERSION, 1);
    let e = err_of(&with_line(1, r#"{"loopsim_cassette":"1"}"#));
    assert_eq!(
        e.to_string(),
        r#"cassettes/x.jsonl:1: unknown cassette version "1" (this build reads version 1)"#
    );
}

#[test]
fn header_errors() {
    let cases = [
        (
            "not json",
            r#"cassettes/x.jsonl:1: expected a cassette header {"loopsim_cassette":1,...}: expected ident at line 1 column 2"#,
        ),
        (
            r#"{"t":0,"data":"x"}"#,
            r#"cassettes/x.jsonl:1: expected a cassette header {"loopsim_cassette":1,...}: no `loopsim_cassette` field"#,
        ),
        (
            r#"{"loopsim_cassette":1,"layer":"server","format":"anthropic","source":"s","status":200,"content_type":"c"}"#,
            r#"cassettes/x.jsonl:1: unknown layer "server" (this build reads "provider")"#,
        ),
        (
            r#"{"loopsim_cassette":1,"layer":"provider","format":"gemini","source":"s","status":200,"content_type":"c"}"#,
            r#"cassettes/x.jsonl:1: unknown provider format "gemini" (this build reads "anthropic", "openai_chat")"#,
        ),
        (
            r#"{"loopsim_cassette":1,"layer":"provider","format":"anthropic","source":"s","status":42,"content_type":"c"}"#,
            "cassettes/x.jsonl:1: `status` 42 is not an HTTP status (100-599)",
        ),
    ];
    for (line, want) in cases {
        let e = err_of(&with_line(1, line));
        assert_eq!(e.to_string(), want);
        assert_eq!(e.line, Some(1));
    }
    let e = err_of(&with_line(
        1,
        r#"{"loopsim_cassette":1,"layer":"provider","format":"anthropic","source":"s","status":200}"#,
    ));
    assert!(
        e.to_string()
            .starts_with("cassettes/x.jsonl:1: invalid header: missing field `content_type`"),
        "{e}"
    );
    let e = err_of(&with_line(
        1,
        r#"{"loopsim_cassette":1,"layer":"provider","format":"anthropic","source":"s","status":200,"content_type":"c","colour":"red"}"#,
    ));
    assert!(
        e.to_string()
            .starts_with("cassettes/x.jsonl:1: invalid header: unknown field `colour`"),
        "{e}"
    );
    let e = err_of("");
    assert!(
        e.to_string().starts_with("cassettes/x.jsonl:1: empty file"),
        "{e}"
    );
}

#[test]
fn line_errors_name_line_and_expectation() {
    let prefix =
        r#"cassettes/x.jsonl:3: expected a JSON object with "t" and one of data/comment/end"#;
    let cases = [
        (r#"{"t":0,"data":"x""#, ": EOF while parsing an object"),
        (r#"{"data":"x"}"#, ": missing field `t`"),
        (r#"{"t":-1,"data":"x"}"#, ": invalid value: integer `-1`"),
        (
            r#"{"t":1,"data":"x","colour":1}"#,
            ": unknown field `colour`",
        ),
        (
            r#"{"t":1,"data":"x","comment":"y"}"#,
            ": found data and comment",
        ),
        (r#"{"t":1,"event":"x"}"#, ": found none"),
        ("", ", found an empty line"),
        ("[1,2]", ", found an array"),
    ];
    for (line, want) in cases {
        let e = err_of(&with_line(3, line));
        let s = e.to_string();
        assert!(s.starts_with(&format!("{prefix}{want}")), "{line}: {s}");
        assert_eq!(e.kind, CassetteErrorKind::Line);
    }
    let cases = [
        (
            r#"{"t":1,"event":"x","comment":"y"}"#,
            "cassettes/x.jsonl:3: `event` is only allowed on a data line",
        ),
        (
            r#"{"t":1,"id":"1","retry":3,"end":"clean"}"#,
            "cassettes/x.jsonl:3: `id`, `retry` is only allowed on a data line",
        ),
        (
            r#"{"t":1,"comment":"a\nb"}"#,
            "cassettes/x.jsonl:3: `comment` contains a line break, which SSE cannot carry",
        ),
        (
            r#"{"t":1,"data":"a\rb"}"#,
            "cassettes/x.jsonl:3: `data` contains a carriage return, which SSE reads as a line end",
        ),
        (
            r#"{"t":1,"end":"eof"}"#,
            r#"cassettes/x.jsonl:3: unknown end "eof" (expected "clean", "reset" or "stall")"#,
        ),
    ];
    for (line, want) in cases {
        let e = err_of(&with_line(3, line));
        assert_eq!(e.to_string(), want, "{line}");
    }
}

#[test]
fn truncated_file_is_an_error() {
    let c = PROVIDER_CAPTURE_IMPORTS[0].import(&captures()).unwrap();
    let text = c.to_jsonl();
    let lines: Vec<&str> = text.lines().collect();
    let cut: String = lines[..14].iter().map(|l| format!("{l}\n")).collect();
    let e = err_of(&cut);
    assert_eq!(
        e.to_string(),
        "cassettes/x.jsonl: truncated: no end line after line 14"
    );
    assert_eq!(e.kind, CassetteErrorKind::Truncated);
    let e = err_of(lines[0]);
    assert_eq!(
        e.to_string(),
        "cassettes/x.jsonl: truncated: no end line after line 1"
    );
}

#[test]
fn times_must_not_decrease() {
    let e = err_of(&with_line(5, r#"{"t":4,"data":"[DONE]"}"#));
    assert_eq!(
        e.to_string(),
        "cassettes/x.jsonl:5: time 4 is earlier than the previous line's 5 (times must not decrease)"
    );
    assert_eq!(e.kind, CassetteErrorKind::Time);
    let e = err_of(&with_line(6, r#"{"t":8,"end":"stall"}"#));
    assert_eq!(e.line, Some(6));
    assert_eq!(e.kind, CassetteErrorKind::Time);
}

#[test]
fn nothing_may_follow_the_end_line() {
    let text = format!("{SMALL}{}\n", r#"{"t":20,"data":"late"}"#);
    let e = err_of(&text);
    assert_eq!(
        e.to_string(),
        "cassettes/x.jsonl:7: unexpected line after the end line (line 6)"
    );
    let e = err_of(&format!("{SMALL}\n"));
    assert_eq!(e.kind, CassetteErrorKind::AfterEnd);
}

#[test]
fn load_errors_name_the_file() {
    let missing = tmp("does-not-exist.jsonl");
    let e = Cassette::load(&missing).unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Io);
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read: ", missing.display())),
        "{e}"
    );
    let bad = tmp("not-utf8.jsonl");
    let mut bytes = SMALL.as_bytes().to_vec();
    let at = SMALL.find("hi").unwrap();
    bytes[at] = 0xff;
    std::fs::write(&bad, &bytes).unwrap();
    let e = Cassette::load(&bad).unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Encoding);
    assert_eq!(e.line, Some(3));
    assert!(e.to_string().contains(":3: not UTF-8"), "{e}");
}

#[test]
fn provider_decode_errors_point_at_the_cassette_line() {
    let text = with_line(3, r#"{"t":5,"data":"{\"choices\":"}"#);
    let c = Cassette::parse(&text, "cassettes/x.jsonl").unwrap();
    let e = c.provider_events().unwrap_err();
    assert_eq!(e.kind, CassetteErrorKind::Provider);
    assert!(
        e.to_string().starts_with(
            "cassettes/x.jsonl:3: openai_chat stream, event `chunk`: malformed data: EOF"
        ),
        "{e}"
    );
}

#[test]
fn new_checks_like_parse() {
    let header = CassetteHeader {
        layer: Layer::Provider,
        format: ProviderFormat::Anthropic,
        source: "mem".into(),
        status: 200,
        content_type: "text/event-stream".into(),
        note: None,
    };
    let frame = |t_ms, c: &str| TimedFrame {
        t_ms,
        frame: SseFrame::Comment(c.into()),
    };
    let end = StreamEnd {
        t_ms: 10,
        kind: EndKind::Reset,
    };
    let ok = Cassette::new(
        header.clone(),
        vec![frame(0, "a"), frame(10, "b")],
        end,
        "mem",
    )
    .unwrap();
    assert_eq!(Cassette::parse(&ok.to_jsonl(), "mem").unwrap(), ok);
    let e = Cassette::new(
        header.clone(),
        vec![frame(5, "a"), frame(1, "b")],
        end,
        "mem",
    )
    .unwrap_err();
    assert_eq!((e.line, e.kind), (Some(3), CassetteErrorKind::Time));
    let e = Cassette::new(header.clone(), vec![frame(0, "a\nb")], end, "mem").unwrap_err();
    assert_eq!((e.line, e.kind), (Some(2), CassetteErrorKind::Line));
    let late = StreamEnd {
        t_ms: 3,
        kind: EndKind::Stall,
    };
    let e = Cassette::new(header, vec![frame(5, "a")], late, "mem").unwrap_err();
    assert_eq!((e.line, e.kind), (Some(3), CassetteErrorKind::Time));
}

// ---------------------------------------------------------------------------------------------
// Never panics

#[test]
fn every_prefix_of_a_valid_cassette_is_ok_or_err() {
    let text = PROVIDER_CAPTURE_IMPORTS[1]
        .import(&captures())
        .unwrap()
        .to_jsonl();
    for (cut, _) in text.char_indices() {
        let prefix = &text[..cut];
        match Cassette::parse(prefix, "prefix") {
            Ok(c) => assert_eq!(c.to_jsonl().trim_end(), prefix.trim_end()),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    assert!(Cassette::parse(&text, "whole").is_ok());
}

fn arb_frame() -> impl Strategy<Value = SseFrame> {
    let text = "[^\r\n]{0,12}";
    prop_oneof![
        text.prop_map(SseFrame::Comment),
        (
            proptest::option::of(text),
            "[^\r]{0,20}",
            proptest::option::of("[^\r\n\0]{0,6}"),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(event, data, id, retry)| SseFrame::Event(SseEvent {
                event,
                data,
                id,
                retry
            })),
    ]
}

fn arb_cassette() -> impl Strategy<Value = Cassette> {
    (
        prop::collection::vec((0u64..50, arb_frame()), 0..12),
        0u64..50,
        prop::sample::select(EndKind::ALL.to_vec()),
        prop::sample::select(ProviderFormat::V1.to_vec()),
        proptest::option::of(".{0,10}"),
        ".{0,10}",
    )
        .prop_map(|(steps, tail, kind, format, note, source)| {
            let mut t = 0;
            let frames = steps
                .into_iter()
                .map(|(dt, frame)| {
                    t += dt;
                    TimedFrame { t_ms: t, frame }
                })
                .collect();
            let header = CassetteHeader {
                layer: Layer::Provider,
                format,
                source,
                status: 200,
                content_type: "text/event-stream".into(),
                note,
            };
            let end = StreamEnd {
                t_ms: t + tail,
                kind,
            };
            Cassette::new(header, frames, end, "arb").unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        let _ = Cassette::parse(&text, "random");
    }

    #[test]
    fn jsonish_lines_never_panic(lines in prop::collection::vec(
        prop_oneof![
            Just(SMALL.lines().next().unwrap().to_string()),
            r#"\{"t":[0-9]{1,3},"(data|comment|end|event|id|retry)":("[a-z]{0,4}"|[0-9]{1,3})\}"#,
            "[{}\":,a-z0-9 ]{0,30}",
        ],
        0..8,
    )) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        if let Ok(c) = Cassette::parse(&text, "jsonish") {
            prop_assert_eq!(Cassette::parse(&c.to_jsonl(), "again").unwrap(), c);
        }
    }

    #[test]
    fn garbled_cassette_never_panics(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<char>(), 0u8..3), 1..6),
    ) {
        let imp = &PROVIDER_CAPTURE_IMPORTS[pick.index(PROVIDER_CAPTURE_IMPORTS.len())];
        let mut chars: Vec<char> = imp.import(&captures()).unwrap().to_jsonl().chars().collect();
        for (at, ch, op) in edits {
            if chars.is_empty() {
                break;
            }
            let i = at.index(chars.len());
            match op {
                0 => chars[i] = ch,
                1 => { chars.remove(i); }
                _ => chars.insert(i, ch),
            }
        }
        let text: String = chars.into_iter().collect();
        if let Ok(c) = Cassette::parse(&text, "garbled") {
            let _ = c.provider_events();
        }
    }

    #[test]
    fn valid_cassettes_round_trip(c in arb_cassette()) {
        let text = c.to_jsonl();
        let back = Cassette::parse(&text, "rt").unwrap();
        prop_assert_eq!(&back, &c);
        prop_assert_eq!(back.to_jsonl(), text);
        prop_assert_eq!(decode_all(c.body().as_bytes()), c.sse_frames());
    }
}
