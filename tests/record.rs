//! Cassette version 2 (one recorded session per file) and `sim record`, the recording proxy:
//! the format's round trip and every error it names, each record mode, scrubbing, truncation,
//! an upstream that is down or resets mid-stream, bounds, and the real Letta Code CLI recorded
//! against `sim serve`.

use loopsim::cassette::{
    Answer, Body, BodyEnd, Cassette, CassetteErrorKind, EndKind, Exchange, Layer,
    RECORDING_VERSION, RecordedRequest, RecordedResponse, Recording, RecordingHeader, ResponseBody,
    TimedFrame,
};
use loopsim::wire::provider::StreamFormat;
use loopsim::wire::sse::{SseEvent, SseFrame};
use proptest::prelude::*;
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// The format

fn sample() -> Recording {
    let header = RecordingHeader {
        layer: Layer::Provider,
        recorder: "test".into(),
        source: "http://127.0.0.1:9".into(),
        format: Some(StreamFormat::Anthropic),
        note: Some("hand-built".into()),
    };
    let json_x = Exchange::new(
        0,
        "GET",
        "/v1/models?limit=2",
        RecordedRequest {
            headers: vec![("accept".into(), "application/json".into())],
            body: Body::Empty,
        },
        RecordedResponse::Answered(Answer {
            t_ms: 3,
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: ResponseBody::Whole(Body::Json(json!({"data": [{"id": "m1"}]}))),
            end: BodyEnd {
                t_ms: 4,
                kind: EndKind::Clean,
                by_client: false,
            },
        }),
    );
    let frames = vec![
        TimedFrame {
            t_ms: 0,
            frame: SseFrame::Event(SseEvent::named(
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1"}   }"#,
            )),
        },
        TimedFrame {
            t_ms: 7,
            frame: SseFrame::Comment("keepalive".into()),
        },
        TimedFrame {
            t_ms: 9,
            frame: SseFrame::Event(SseEvent::named(
                "message_stop",
                r#"{"type":"message_stop"}"#,
            )),
        },
    ];
    let sse_x = Exchange::new(
        5,
        "POST",
        "/v1/messages",
        RecordedRequest {
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Json(json!({"model": "claude", "stream": true,
                "metadata": {"user_id": "45e8bd2b-7c1e-410c-9994-dc3ea6da61a5"}})),
        },
        RecordedResponse::Answered(Answer {
            t_ms: 120,
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: ResponseBody::Sse(frames),
            end: BodyEnd {
                t_ms: 9,
                kind: EndKind::Reset,
                by_client: true,
            },
        }),
    );
    let failed = Exchange::new(
        6,
        "POST",
        "/v1/messages",
        RecordedRequest {
            headers: vec![],
            body: Body::Binary(vec![0xff, 0x00, 0x7f]),
        },
        RecordedResponse::Failed {
            t_ms: 1,
            error: "cannot connect to upstream http://127.0.0.1:9: connection refused".into(),
        },
    );
    let text_x = Exchange::new(
        8,
        "POST",
        "/echo",
        RecordedRequest {
            headers: vec![],
            body: Body::Text("plain words".into()),
        },
        RecordedResponse::Answered(Answer {
            t_ms: 0,
            status: 404,
            headers: vec![],
            body: ResponseBody::Whole(Body::Empty),
            end: BodyEnd {
                t_ms: 0,
                kind: EndKind::Clean,
                by_client: false,
            },
        }),
    );
    Recording::new(header, vec![json_x, sse_x, failed, text_x], 200, "sample").unwrap()
}

fn err_of(text: &str) -> loopsim::cassette::CassetteError {
    Recording::parse(text, "cassettes/x.jsonl").unwrap_err()
}

/// The sample's text with line `n` (1-based) passed through `f` as JSON.
fn edit_line(n: usize, f: impl FnOnce(&mut serde_json::Value)) -> String {
    let text = sample().to_jsonl();
    let mut f = Some(f);
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            if i + 1 == n {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                (f.take().unwrap())(&mut v);
                format!("{v}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

#[test]
fn v2_round_trips_byte_for_byte() {
    let r = sample();
    let text = r.to_jsonl();
    let again = Recording::parse(&text, "again").unwrap();
    assert_eq!(again, r);
    assert_eq!(again.to_jsonl(), text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[0],
        r#"{"loopsim_cassette":2,"layer":"provider","recorder":"test","source":"http://127.0.0.1:9","format":"anthropic","note":"hand-built"}"#
    );
    assert!(lines[1].starts_with(r#"{"n":1,"t":0,"method":"GET","path":"/v1/models?limit=2","request":{"headers":[["accept","application/json"]]},"response":{"t":3,"status":200,"#), "{}", lines[1]);
    // JSON bodies are JSON, not strings; SSE data keeps its exact bytes (padding included).
    assert!(lines[1].contains(r#""body":{"json":{"data":[{"id":"m1"}]}}"#));
    assert!(lines[2].contains(r#"{"t":0,"event":"message_start","data":"{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}   }"}"#));
    assert!(lines[2].contains(r#""end":{"t":9,"end":"reset","by":"client"}"#));
    assert!(lines[3].contains(r#""body":{"base64":"/wB/"}"#));
    assert!(lines[3].contains(r#""response":{"t":1,"failed":"cannot connect"#));
    assert!(lines[4].contains(r#""body":{"text":"plain words"}"#));
    assert_eq!(lines[5], r#"{"t":200,"end":"complete","exchanges":4}"#);
    // The key masks the volatile user id.
    let key = &r.exchanges()[1].key;
    assert_eq!(
        (key.method.as_str(), key.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert!(
        key.body.starts_with("sha256:") && key.body.len() == 71,
        "{}",
        key.body
    );
    let other = Exchange::new(
        0,
        "POST",
        "/v1/messages",
        RecordedRequest {
            headers: vec![],
            body: Body::Json(json!({"stream": true, "model": "claude",
                "metadata": {"user_id": "00000000-0000-4000-8000-000000000000"}})),
        },
        RecordedResponse::Failed {
            t_ms: 0,
            error: "x".into(),
        },
    );
    assert_eq!(other.key, *key);
}

#[test]
fn v2_errors_name_file_line_and_key() {
    let cases: Vec<(String, &str)> = vec![
        (
            edit_line(1, |v| v["loopsim_cassette"] = json!(3)),
            "cassettes/x.jsonl:1: unknown cassette version 3 (this build reads versions 1 and 2)",
        ),
        (
            edit_line(1, |v| v["layer"] = json!("server")),
            r#"cassettes/x.jsonl:1: key `layer`: unknown layer "server" (this build reads "letta", "provider")"#,
        ),
        (
            edit_line(1, |v| v["format"] = json!("cohere")),
            r#"cassettes/x.jsonl:1: key `format`: unknown provider format "cohere" (this build reads "anthropic", "openai_chat", "openai_responses", "gemini")"#,
        ),
        (
            edit_line(1, |v| v["started_at"] = json!("2026-01-01")),
            "cassettes/x.jsonl:1: key `started_at`: unknown key",
        ),
        (
            edit_line(1, |v| {
                v.as_object_mut().unwrap().remove("recorder");
            }),
            "cassettes/x.jsonl:1: key `recorder`: missing",
        ),
        (
            edit_line(2, |v| v["response"]["colour"] = json!(1)),
            "cassettes/x.jsonl:2: key `response.colour`: unknown key",
        ),
        (
            edit_line(3, |v| v["response"]["sse"][1]["t"] = json!(-1)),
            "cassettes/x.jsonl:3: key `response.sse[1].t`: expected a non-negative integer, found `-1`",
        ),
        (
            edit_line(3, |v| v["response"]["sse"][2]["t"] = json!(1)),
            "cassettes/x.jsonl:3: key `response.sse[2].t`: time 1 is earlier than the previous frame's 7 (times must not decrease)",
        ),
        (
            edit_line(3, |v| {
                v["response"]["sse"][1] = json!({"t": 7, "comment": "a\nb"})
            }),
            "cassettes/x.jsonl:3: key `response.sse[1]`: `comment` contains a line break, which SSE cannot carry",
        ),
        (
            edit_line(3, |v| v["response"]["end"]["end"] = json!("eof")),
            r#"cassettes/x.jsonl:3: key `response.end.end`: unknown end "eof" (expected "clean", "reset" or "stall")"#,
        ),
        (
            edit_line(3, |v| {
                v["request"]["body"]["json"]["model"] = json!("other")
            }),
            "cassettes/x.jsonl:3: key `key.body`: does not match the request",
        ),
        (
            edit_line(3, |v| v["n"] = json!(7)),
            "cassettes/x.jsonl:3: key `n`: exchange number 7, expected 2",
        ),
        (
            edit_line(4, |v| v["request"]["body"] = json!({"base64": "!!!!"})),
            "cassettes/x.jsonl:4: key `request.body.base64`: invalid base64 character '!' at 0",
        ),
        (
            edit_line(4, |v| v["t"] = json!(1)),
            "cassettes/x.jsonl:4: key `t`: time 1 is earlier than the previous line's 5",
        ),
        (
            edit_line(5, |v| v["response"]["status"] = json!(42)),
            "cassettes/x.jsonl:5: key `response.status`: `status` 42 is not an HTTP status (100-599)",
        ),
        (
            edit_line(6, |v| v["exchanges"] = json!(9)),
            "cassettes/x.jsonl:6: key `exchanges`: the end line counts 9 exchanges, the file holds 4",
        ),
    ];
    for (text, want) in cases {
        let e = err_of(&text);
        assert!(e.to_string().starts_with(want), "want {want}\n got {e}");
    }
    assert_eq!(
        err_of(&edit_line(1, |v| v["loopsim_cassette"] = json!(3))).kind,
        CassetteErrorKind::Version
    );
    let text = format!("{}{}\n", sample().to_jsonl(), r#"{"t":1}"#);
    let e = err_of(&text);
    assert_eq!(e.kind, CassetteErrorKind::AfterEnd);
    assert_eq!(e.line, Some(7));
}

#[test]
fn a_recording_without_its_end_line_is_truncated() {
    let text = sample().to_jsonl();
    let lines: Vec<&str> = text.lines().collect();
    for keep in 1..lines.len() {
        let cut: String = lines[..keep].iter().map(|l| format!("{l}\n")).collect();
        let e = err_of(&cut);
        assert_eq!(e.kind, CassetteErrorKind::Truncated, "{keep}: {e}");
        assert_eq!(
            e.to_string(),
            format!(
                "cassettes/x.jsonl: truncated: no end line after line {keep} (the recording did not finish)"
            )
        );
    }
    // A line cut in the middle is an error at that line.
    let half = &text[..text.len() - 20];
    let e = err_of(half);
    assert_eq!(e.line, Some(6), "{e}");
    assert!(Recording::parse("", "e").is_err());
}

#[test]
fn version_1_files_are_read_strictly_and_lifted() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/cassettes/provider/anthropic_text_end_turn.jsonl"
    );
    let v1 = Cassette::load(path).unwrap();
    let r = Recording::load(path).unwrap();
    assert_eq!(r.header().layer, Layer::Provider);
    assert_eq!(r.header().format, Some(StreamFormat::Anthropic));
    assert_eq!(r.exchanges().len(), 1);
    assert_eq!(r.exchanges()[0].path, "/v1/messages");
    // Back to a stream: the same frames and end.
    let back = r.stream(1).unwrap();
    assert_eq!(back.frames(), v1.frames());
    assert_eq!(back.end(), v1.end());
    // Strict: a v1 error is a v1 error.
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace(r#""t":90,"end":"clean""#, r#""t":90,"end":"eof""#);
    let e = Recording::parse(&text, "v1").unwrap_err();
    assert!(e.to_string().contains(r#"unknown end "eof""#), "{e}");
    // A saved one-exchange v2 recording loads as a stream cassette (scenario responses).
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lifted.jsonl");
    r.save(&out).unwrap();
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .starts_with(r#"{"loopsim_cassette":2,"#)
    );
    let c = Cassette::load(&out).unwrap();
    assert_eq!(c.frames(), v1.frames());
    assert_eq!(c.provider_events().unwrap(), v1.provider_events().unwrap());
    // One of several exchanges is named.
    let s = sample();
    s.save(&out).unwrap();
    let e = Cassette::load(&out).unwrap_err();
    assert!(e.to_string().contains("a recording of 4 exchanges"), "{e}");
    assert_eq!(s.stream(2).unwrap().frames().len(), 3);
    assert!(
        s.stream(3)
            .unwrap_err()
            .to_string()
            .contains("has no response")
    );
    assert_eq!(RECORDING_VERSION, 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn garbled_recordings_never_panic(cut in 0usize..2000, byte in any::<u8>(), at in 0usize..2000) {
        let mut bytes = sample().to_jsonl().into_bytes();
        let at = at % bytes.len();
        bytes[at] = byte;
        bytes.truncate(cut.min(bytes.len()));
        let text = String::from_utf8_lossy(&bytes);
        let _ = Recording::parse(&text, "g");
    }
}
