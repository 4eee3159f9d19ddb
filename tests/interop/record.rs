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

// ---------------------------------------------------------------------------------------------
// The recording proxy

pub(crate) mod proxy {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full, StreamBody};
    use hyper::body::Frame;
    use hyper::{Request, Response, StatusCode};
    use hyper_util::rt::TokioIo;
    use loopsim::cassette::scrub::Scrubber;
    use loopsim::cassette::{
        Body, CassetteErrorKind, EndKind, Layer, RecordedResponse, Recording, ResponseBody,
    };
    use loopsim::harness::record::{RecordMode, RecordOptions, Recorder};
    use loopsim::model::port::http::{Body as HttpBody, full};
    use serde_json::{Value, json};
    use tokio::sync::Notify;

    pub fn tmp(name: &str) -> PathBuf {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        let _ = std::fs::remove_file(&p);
        let mut partial = p.as_os_str().to_owned();
        partial.push(".partial");
        let _ = std::fs::remove_file(PathBuf::from(partial));
        p
    }

    /// Secrets planted by the fake upstream and the test client; none may reach a cassette.
    pub const SECRETS: [&str; 14] = [
        "sk-ant-api03-PLANTEDheaderAAAAAAAAAAAA",
        "PLANTED-x-api-key-value",
        "PLANTED-cookie-value",
        "PLANTED-set-cookie-value",
        "AIzaPLANTEDqueryKey0123456789abcdefghijk",
        "PLANTED-json-api-key",
        "PLANTED-nested-client-secret",
        "PLANTED-access-token-in-array",
        "PLANTEDbearerInText123456",
        "PLANTED-response-session-token",
        "PLANTED-sse-refresh-token",
        "sk-proj-PLANTEDinSseText0123456789",
        "PLANTED-custom-header",
        "PLANTED-custom-json-path",
    ];

    /// A request the fake upstream received: its URI and headers.
    pub type Seen = (String, Vec<(String, String)>);

    /// The fake upstream: a few routes, a hit counter, and a gate the SSE route waits on
    /// before its last frame (so a test can prove the proxy streams).
    pub struct Upstream {
        pub addr: SocketAddr,
        pub hits: Arc<AtomicU64>,
        pub gate: Arc<Notify>,
        pub seen: Arc<Mutex<Vec<Seen>>>,
    }

    fn sse_body(
        frames: Vec<(u64, String)>,
        then: &'static str,
        gate: Option<Arc<Notify>>,
    ) -> HttpBody {
        let st = (frames.into_iter(), false, gate);
        let s = futures::stream::unfold(st, move |(mut it, done, gate)| async move {
            if done {
                return None;
            }
            match it.next() {
                Some((delay, text)) => {
                    if delay == u64::MAX {
                        if let Some(g) = &gate {
                            g.notified().await;
                        }
                    } else if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    Some((Ok(Frame::data(Bytes::from(text))), (it, false, gate)))
                }
                None => match then {
                    "reset" => Some((
                        {
                            // Long enough for the last frame to reach the peer first.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Err(std::io::Error::new(
                                std::io::ErrorKind::ConnectionReset,
                                "planned reset",
                            ))
                        },
                        (it, true, gate),
                    )),
                    "reset_now" => Some((
                        Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "planned reset",
                        )),
                        (it, true, gate),
                    )),
                    "stall" => {
                        std::future::pending::<()>().await;
                        None
                    }
                    _ => None,
                },
            }
        });
        StreamBody::new(s).boxed()
    }

    async fn route(req: Request<hyper::body::Incoming>, gate: Arc<Notify>) -> Response<HttpBody> {
        let path = req.uri().path().to_string();
        let sse = |body| {
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(body)
                .unwrap()
        };
        match path.as_str() {
            "/json" => Response::builder()
                .header("content-type", "application/json")
                .header("set-cookie", "sid=PLANTED-set-cookie-value; HttpOnly")
                .body(full(
                    json!({"ok": true, "session_token": "PLANTED-response-session-token", "n": 1})
                        .to_string(),
                ))
                .unwrap(),
            "/echo" => {
                let b = req.into_body().collect().await.unwrap().to_bytes();
                Response::builder().body(full(b)).unwrap()
            }
            "/sse" => sse(sse_body(
                vec![
                    (0, "event: a\ndata: {\"type\":\"a\",\"refresh_token\":\"PLANTED-sse-refresh-token\"}\n\n".into()),
                    (20, ": keepalive\n\n".into()),
                    (20, "data: {\"text\":\"key sk-proj-PLANTEDinSseText0123456789 here\"}   \n\n".into()),
                    (u64::MAX, "data: [DONE]\n\n".into()),
                ],
                "clean",
                Some(gate),
            )),
            "/reset" => sse(sse_body(
                vec![(0, "data: {\"n\":1}\n\n".into()), (10, "data: {\"n\":2}\n\n".into())],
                "reset",
                None,
            )),
            "/stall" => sse(sse_body(vec![(0, "data: {\"n\":1}\n\n".into())], "stall", None)),
            "/bin" => Response::builder()
                .header("content-type", "application/octet-stream")
                .body(full(vec![0xffu8, 0xfe, 0x00, 0x41]))
                .unwrap(),
            "/big" => Response::builder()
                .body(full(vec![b'x'; 300_000]))
                .unwrap(),
            "/many" => {
                let frames = (0..2000).map(|i| (0, format!("data: {{\"i\":{i}}}\n\n"))).collect();
                sse(sse_body(frames, "clean", None))
            }
            _ => Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(full("no such route"))
                .unwrap(),
        }
    }

    impl Upstream {
        pub async fn start() -> Upstream {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let hits = Arc::new(AtomicU64::new(0));
            let gate = Arc::new(Notify::new());
            let seen = Arc::new(Mutex::new(Vec::new()));
            let (h, g, s) = (hits.clone(), gate.clone(), seen.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (h, g, s) = (h.clone(), g.clone(), s.clone());
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(
                            move |req: Request<hyper::body::Incoming>| {
                                h.fetch_add(1, Ordering::SeqCst);
                                s.lock().unwrap().push((
                                    req.uri().to_string(),
                                    req.headers()
                                        .iter()
                                        .map(|(k, v)| {
                                            (k.to_string(), v.to_str().unwrap_or("").to_string())
                                        })
                                        .collect(),
                                ));
                                let g = g.clone();
                                async move { Ok::<_, Infallible>(route(req, g).await) }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            });
            Upstream {
                addr,
                hits,
                gate,
                seen,
            }
        }

        pub fn url(&self) -> String {
            format!("http://{}", self.addr)
        }
    }

    /// What a client got.
    pub struct Got {
        pub status: u16,
        pub headers: hyper::HeaderMap,
        pub body: Vec<u8>,
        /// The body ended with an error (a reset).
        pub error: Option<String>,
    }

    impl Got {
        pub fn json(&self) -> Value {
            serde_json::from_slice(&self.body).unwrap_or(Value::Null)
        }
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.body).into_owned()
        }
    }

    /// Sends a request and returns the response head with its body stream.
    pub async fn open(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Response<hyper::body::Incoming> {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string());
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        sender
            .send_request(b.body(Full::new(Bytes::from(body))).unwrap())
            .await
            .unwrap()
    }

    pub async fn send(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Got {
        let resp = open(addr, method, path, headers, body).await;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut b = resp.into_body();
        let mut body = Vec::new();
        let mut error = None;
        while let Some(f) = b.frame().await {
            match f {
                Ok(f) => {
                    if let Ok(d) = f.into_data() {
                        body.extend_from_slice(&d);
                    }
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        Got {
            status,
            headers,
            body,
            error,
        }
    }

    pub async fn recorder(up: &str, out: &std::path::Path, mode: RecordMode) -> Recorder {
        let mut o = RecordOptions::new(Layer::Provider, up, out);
        o.mode = mode;
        Recorder::start(o).await.unwrap()
    }

    /// Records one GET /json and one streamed POST /sse in mode `all`.
    async fn record_basic(out: &std::path::Path) -> Upstream {
        let up = Upstream::start().await;
        let rec = recorder(&up.url(), out, RecordMode::All).await;
        let g = send(rec.addr(), "GET", "/json", &[], vec![]).await;
        assert_eq!(g.status, 200);
        let gate = up.gate.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            gate.notify_one();
        });
        let g = send(
            rec.addr(),
            "POST",
            "/sse",
            &[("content-type", "application/json")],
            br#"{"q":1}"#.to_vec(),
        )
        .await;
        assert!(g.text().ends_with("data: [DONE]\n\n"), "{}", g.text());
        rec.stop().await.unwrap();
        up
    }

    #[tokio::test]
    async fn mode_all_streams_frame_by_frame_and_records_in_request_order() {
        let out = tmp("all.jsonl");
        let up = Upstream::start().await;
        let rec = recorder(&up.url(), &out, RecordMode::All).await;
        let ready = rec.ready_line();
        assert_eq!(ready["mode"], "all");
        assert!(
            ready["writing"]
                .as_str()
                .unwrap()
                .ends_with("all.jsonl.partial")
        );
        // The SSE stream: the client reads the first frames before the upstream sends its last
        // (the upstream waits for the gate, which only this client opens): nothing is buffered.
        let resp = open(rec.addr(), "POST", "/sse", &[], vec![]).await;
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("sk-proj-") {
            let f = tokio::time::timeout(Duration::from_secs(5), body.frame())
                .await
                .expect("a frame before the gate opens")
                .unwrap()
                .unwrap();
            got.extend_from_slice(&f.into_data().unwrap());
        }
        // A second request starts while the stream is open, and finishes first.
        let g = send(rec.addr(), "GET", "/json", &[], vec![]).await;
        assert_eq!(g.json()["ok"], true);
        // What the client sees is what the upstream sent, secrets and all (only the file is
        // scrubbed).
        assert_eq!(g.json()["session_token"], "PLANTED-response-session-token");
        up.gate.notify_one();
        while let Some(f) = body.frame().await {
            got.extend_from_slice(&f.unwrap().into_data().unwrap());
        }
        assert!(String::from_utf8_lossy(&got).ends_with("data: [DONE]\n\n"));
        let summary = rec.stop().await.unwrap();
        assert_eq!((summary.exchanges, summary.recorded), (2, 2));
        let r = Recording::load(&out).unwrap();
        assert_eq!(r.header().recorder, "sim record (mode all)");
        assert_eq!(r.header().source, up.url());
        let xs = r.exchanges();
        // Request-start order: the stream first, though it ended last.
        assert_eq!(
            (xs[0].path.as_str(), xs[1].path.as_str()),
            ("/sse", "/json")
        );
        assert!(xs[0].t_ms <= xs[1].t_ms);
        let a = xs[0].answer().unwrap();
        let ResponseBody::Sse(frames) = &a.body else {
            panic!("frames")
        };
        assert_eq!(frames.len(), 4);
        assert_eq!(a.end.kind, EndKind::Clean);
        // The last frame waited for the gate: its offset shows it.
        assert!(frames[3].t_ms >= frames[2].t_ms);
        // Unscrubbed data keeps its bytes (the trailing padding).
        assert_eq!(
            frames[2].frame.as_event().unwrap().data,
            "{\"text\":\"key [scrubbed] here\"}   "
        );
        let b = xs[1].answer().unwrap();
        assert!(matches!(&b.body, ResponseBody::Whole(Body::Json(v)) if v["n"] == 1));
        assert!(!std::path::Path::new(&format!("{}.partial", out.display())).exists());
    }

    #[tokio::test]
    async fn mode_once_records_then_only_replays() {
        let out = tmp("once.jsonl");
        let up = Upstream::start().await;
        let rec = recorder(&up.url(), &out, RecordMode::Once).await;
        assert_eq!(
            send(rec.addr(), "GET", "/json", &[], vec![]).await.status,
            200
        );
        assert_eq!(
            send(rec.addr(), "GET", "/reset", &[], vec![]).await.status,
            200
        );
        rec.stop().await.unwrap();
        let recorded = Recording::load(&out).unwrap();
        let hits = up.hits.load(std::sync::atomic::Ordering::SeqCst);
        // Now the cassette exists: answers come from it, the upstream is not asked.
        let rec = recorder(&up.url(), &out, RecordMode::Once).await;
        assert_eq!(rec.ready_line()["forwards"], false);
        let g = send(rec.addr(), "GET", "/json", &[], vec![]).await;
        assert_eq!(g.status, 200);
        assert_eq!(g.json()["session_token"], "[scrubbed]");
        // The same request again: each recorded exchange answers once.
        let g = send(rec.addr(), "GET", "/json", &[], vec![]).await;
        assert_eq!(g.status, 501);
        let msg = g.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("no recorded exchange answers GET /json; nearest is exchange 1 (GET /json, line 2 of"), "{msg}");
        assert!(msg.contains("already played"), "{msg}");
        let g = send(rec.addr(), "GET", "/jsonx", &[], vec![]).await;
        assert_eq!(g.status, 501);
        assert!(
            g.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("the path differs (/json)")
        );
        rec.stop().await.unwrap();
        assert_eq!(
            up.hits.load(std::sync::atomic::Ordering::SeqCst),
            hits,
            "nothing forwarded"
        );
        assert_eq!(
            Recording::load(&out).unwrap(),
            recorded,
            "the cassette is not rewritten"
        );
    }

    #[tokio::test]
    async fn mode_new_episodes_replays_matches_and_appends_the_rest() {
        let out = tmp("episodes.jsonl");
        let up = record_basic(&out).await;
        let before = Recording::load(&out).unwrap();
        let hits = up.hits.load(std::sync::atomic::Ordering::SeqCst);
        let rec = recorder(&up.url(), &out, RecordMode::NewEpisodes).await;
        // Matched: replayed, frames at their offsets.
        let g = send(rec.addr(), "POST", "/sse", &[], br#"{"q":1}"#.to_vec()).await;
        assert!(g.text().contains("[scrubbed]"), "{}", g.text());
        assert_eq!(up.hits.load(std::sync::atomic::Ordering::SeqCst), hits);
        // Not recorded: forwarded and appended.
        let g = send(rec.addr(), "POST", "/echo", &[], b"hello".to_vec()).await;
        assert_eq!(g.text(), "hello");
        assert_eq!(up.hits.load(std::sync::atomic::Ordering::SeqCst), hits + 1);
        let s = rec.stop().await.unwrap();
        assert_eq!((s.exchanges, s.recorded, s.replayed), (3, 1, 1));
        let after = Recording::load(&out).unwrap();
        assert_eq!(&after.exchanges()[..2], before.exchanges());
        let new = &after.exchanges()[2];
        assert_eq!(new.path, "/echo");
        assert!(
            new.t_ms >= before.end_t_ms(),
            "appended after the kept session"
        );
        assert!(matches!(new.request.body, Body::Text(ref t) if t == "hello"));
    }

    #[tokio::test]
    async fn mode_none_refuses_what_it_does_not_hold_naming_the_nearest() {
        let out = tmp("none.jsonl");
        let up = record_basic(&out).await;
        let hits = up.hits.load(std::sync::atomic::Ordering::SeqCst);
        let rec = recorder(&up.url(), &out, RecordMode::None).await;
        let g = send(rec.addr(), "POST", "/sse", &[], br#"{"q":2}"#.to_vec()).await;
        // Same method and path, another body: vcrpy's default matching (method + URI) answers.
        assert_eq!(g.status, 200);
        let g = send(rec.addr(), "POST", "/json", &[], vec![]).await;
        assert_eq!(g.status, 501);
        assert_eq!(g.headers["x-loopsim-record"], "1");
        let m = g.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.starts_with("sim record (mode none): no recorded exchange answers POST /json; nearest is exchange 1 (GET /json, line 2"), "{m}");
        assert!(m.contains("the method differs (GET)"), "{m}");
        let g = send(rec.addr(), "POST", "/ss", &[], vec![]).await;
        let m = g.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            m.contains("nearest is exchange 2 (POST /sse, line 3"),
            "{m}"
        );
        rec.stop().await.unwrap();
        assert_eq!(up.hits.load(std::sync::atomic::Ordering::SeqCst), hits);
        // With body matching on, the other body is a miss that names where it differs.
        let mut o = RecordOptions::new(Layer::Provider, &up.url(), &out);
        o.mode = RecordMode::None;
        o.match_on = loopsim::cassette::matching::MatchOn::MethodPathBody;
        let rec = Recorder::start(o).await.unwrap();
        let g = send(rec.addr(), "POST", "/sse", &[], br#"{"q":2}"#.to_vec()).await;
        assert_eq!(g.status, 501);
        assert!(
            g.json()["error"]["message"]
                .as_str()
                .unwrap()
                .ends_with("the body differs at q"),
            "{}",
            g.text()
        );
        rec.stop().await.unwrap();
        // No cassette at all: an error before listening.
        let e = match Recorder::start(RecordOptions {
            mode: RecordMode::None,
            ..RecordOptions::new(Layer::Provider, &up.url(), tmp("missing.jsonl"))
        })
        .await
        {
            Err(e) => e,
            Ok(_) => panic!("mode none without a cassette"),
        };
        assert!(
            e.to_string()
                .contains("mode none answers from an existing cassette"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn secrets_planted_everywhere_never_reach_the_cassette() {
        let out = tmp("secrets.jsonl");
        let up = Upstream::start().await;
        let mut o = RecordOptions::new(Layer::Provider, &up.url(), &out);
        o.scrubber = Scrubber::new(&["x-custom-auth".into()], &["metadata.email".into()]).unwrap();
        let rec = Recorder::start(o).await.unwrap();
        let body = json!({
            "api_key": "PLANTED-json-api-key",
            "nested": {"deeper": [{"client_secret": "PLANTED-nested-client-secret"}]},
            "list": [{"access_token": "PLANTED-access-token-in-array"}],
            "messages": [{"content": "my header is Bearer PLANTEDbearerInText123456 ok"}],
            "metadata": {"email": "PLANTED-custom-json-path"},
            "max_tokens": 1024,
        });
        let headers = [
            (
                "authorization",
                "Bearer sk-ant-api03-PLANTEDheaderAAAAAAAAAAAA",
            ),
            ("x-api-key", "PLANTED-x-api-key-value"),
            ("cookie", "session=PLANTED-cookie-value"),
            ("x-custom-auth", "PLANTED-custom-header"),
            ("content-type", "application/json"),
        ];
        let q = "/echo?alt=sse&key=AIzaPLANTEDqueryKey0123456789abcdefghijk";
        let g = send(
            rec.addr(),
            "POST",
            q,
            &headers,
            body.to_string().into_bytes(),
        )
        .await;
        // Forwarded unchanged: the upstream saw the real values.
        assert_eq!(g.json()["api_key"], "PLANTED-json-api-key");
        let seen = up.seen.lock().unwrap().clone();
        assert!(seen[0].0.contains("AIzaPLANTED"));
        assert!(
            seen[0]
                .1
                .iter()
                .any(|(k, v)| k == "x-api-key" && v == "PLANTED-x-api-key-value")
        );
        let _ = send(rec.addr(), "GET", "/json", &headers, vec![]).await;
        up.gate.notify_one();
        let gate = up.gate.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            gate.notify_one();
        });
        let _ = send(
            rec.addr(),
            "POST",
            "/sse",
            &headers,
            body.to_string().into_bytes(),
        )
        .await;
        let _ = send(
            rec.addr(),
            "POST",
            "/echo",
            &[],
            b"plain text with Bearer PLANTEDbearerInText123456".to_vec(),
        )
        .await;
        rec.stop().await.unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        for s in super::proxy::SECRETS {
            assert!(!text.contains(s), "{s} leaked into the cassette:\n{text}");
            assert!(!text.contains("PLANTED"), "a planted value leaked:\n{text}");
        }
        assert!(
            text.contains(r#"["authorization","Bearer [scrubbed]"]"#),
            "{text}"
        );
        assert!(text.contains("&key=[scrubbed]"), "{text}");
        assert!(text.contains(r#""max_tokens":1024"#), "{text}");
        // The scrubbed cassette still reads, and its keys are of the scrubbed bodies.
        let r = Recording::load(&out).unwrap();
        assert_eq!(r.exchanges().len(), 4);
    }

    #[test]
    fn a_recorder_that_dies_leaves_a_truncated_partial_file_and_no_cassette() {
        let out = tmp("crash.jsonl");
        let out2 = out.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let up = Upstream::start().await;
                let rec = recorder(&up.url(), &out2, RecordMode::All).await;
                assert_eq!(
                    send(rec.addr(), "GET", "/json", &[], vec![]).await.status,
                    200
                );
                // No stop: the runtime (and the recorder with it) is dropped, as in a crash.
                std::mem::forget(rec);
            });
        })
        .join()
        .unwrap();
        assert!(!out.exists(), "nothing at --out until the session ends");
        let partial = PathBuf::from(format!("{}.partial", out.display()));
        let e = Recording::load(&partial).unwrap_err();
        assert_eq!(e.kind, CassetteErrorKind::Truncated, "{e}");
        assert!(
            e.to_string()
                .ends_with("truncated: no end line after line 2 (the recording did not finish)"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn an_upstream_that_is_down_gets_a_502_naming_it() {
        let out = tmp("down.jsonl");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let rec = recorder(&url, &out, RecordMode::All).await;
        let g = send(rec.addr(), "GET", "/v1/models", &[], vec![]).await;
        assert_eq!(g.status, 502);
        let m = g.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            m.starts_with(&format!("sim record: cannot connect to upstream {url}: ")),
            "{m}"
        );
        let s = rec.stop().await.unwrap();
        assert_eq!(s.failed, 1);
        let r = Recording::load(&out).unwrap();
        match &r.exchanges()[0].response {
            RecordedResponse::Failed { error, .. } => assert!(error.contains(&url), "{error}"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_reset_mid_stream_is_recorded_and_passed_on() {
        let out = tmp("reset.jsonl");
        let up = Upstream::start().await;
        let rec = recorder(&up.url(), &out, RecordMode::All).await;
        let g = send(rec.addr(), "GET", "/reset", &[], vec![]).await;
        assert_eq!(g.status, 200);
        assert!(g.error.is_some(), "the client sees the reset: {}", g.text());
        assert_eq!(g.text(), "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n");
        rec.stop().await.unwrap();
        let r = Recording::load(&out).unwrap();
        let a = r.exchanges()[0].answer().unwrap();
        assert_eq!((a.end.kind, a.end.by_client), (EndKind::Reset, false));
        let ResponseBody::Sse(frames) = &a.body else {
            panic!()
        };
        assert_eq!(frames.len(), 2);
        // Replayed, the client sees the same: two frames, then the reset.
        let rec = recorder(&up.url(), &out, RecordMode::None).await;
        let g = send(rec.addr(), "GET", "/reset", &[], vec![]).await;
        assert_eq!(g.text(), "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n");
        assert!(g.error.is_some());
        rec.stop().await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_goes_away_and_a_stream_open_at_the_stop() {
        let out = tmp("gone.jsonl");
        let up = Upstream::start().await;
        let rec = recorder(&up.url(), &out, RecordMode::All).await;
        let resp = open(rec.addr(), "GET", "/stall", &[], vec![]).await;
        let mut body = resp.into_body();
        body.frame().await.unwrap().unwrap();
        drop(body);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let resp = open(rec.addr(), "GET", "/stall", &[], vec![]).await;
        let mut body2 = resp.into_body();
        body2.frame().await.unwrap().unwrap();
        rec.stop().await.unwrap();
        let r = Recording::load(&out).unwrap();
        let a = r.exchanges()[0].answer().unwrap();
        assert_eq!((a.end.kind, a.end.by_client), (EndKind::Reset, true));
        let b = r.exchanges()[1].answer().unwrap();
        assert_eq!(b.end.kind, EndKind::Stall);
    }

    /// The proxy's own cost: a 2,000-frame SSE response straight from the upstream and through
    /// `sim record`, time to first byte and time per frame, as ratios. Prints; asserts nothing
    /// about time (docs/record-replay.md quotes a run).
    #[tokio::test]
    async fn bench_proxy_cost_on_a_2000_frame_stream() {
        async fn measure(addr: SocketAddr) -> (Duration, Duration, usize) {
            let start = std::time::Instant::now();
            let resp = open(addr, "GET", "/many", &[], vec![]).await;
            let mut body = resp.into_body();
            let mut ttfb = None;
            let mut bytes = 0;
            while let Some(f) = body.frame().await {
                let d = f.unwrap().into_data().unwrap();
                ttfb.get_or_insert_with(|| start.elapsed());
                bytes += d.len();
            }
            (ttfb.unwrap(), start.elapsed(), bytes)
        }
        // The upstream and the recorder each on a thread and runtime of their own, as in real
        // use, so the client's timings are not the scheduling of one shared thread.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let up = Upstream::start().await;
                tx.send(up.addr).unwrap();
                std::future::pending::<()>().await;
            });
        });
        let up_addr: SocketAddr = rx.recv().unwrap();
        let out = tmp("bench.jsonl");
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let out2 = out.clone();
        let rec_thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let rec = recorder(&format!("http://{up_addr}"), &out2, RecordMode::All).await;
                tx.send(rec.addr()).unwrap();
                let _ = stop_rx.await;
                rec.stop().await.unwrap();
            });
        });
        let rec_addr: SocketAddr = rx.recv().unwrap();
        const RUNS: u32 = 7;
        let mut direct = (Duration::ZERO, Duration::ZERO);
        let mut proxied = (Duration::ZERO, Duration::ZERO);
        for i in 0..RUNS + 1 {
            let d = measure(up_addr).await;
            let p = measure(rec_addr).await;
            assert_eq!(d.2, p.2, "the same bytes through the proxy");
            if i > 0 {
                // The first run of each warms connections and allocations.
                direct = (direct.0 + d.0, direct.1 + d.1);
                proxied = (proxied.0 + p.0, proxied.1 + p.1);
            }
        }
        stop_tx.send(()).unwrap();
        rec_thread.join().unwrap();
        let r = Recording::load(&out).unwrap();
        let ResponseBody::Sse(frames) = &r.exchanges()[0].answer().unwrap().body else {
            panic!()
        };
        assert_eq!(frames.len(), 2000);
        let per = |d: Duration| d.as_secs_f64() * 1e6 / (RUNS as f64 * 2000.0);
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / RUNS as f64;
        println!(
            "bench: 2000-frame SSE response, mean of {RUNS} runs\n\
             time to first byte   direct {:.3} ms   through sim record {:.3} ms   ratio {:.2}x\n\
             time per frame       direct {:.2} us   through sim record {:.2} us   ratio {:.2}x\n\
             added per frame      {:.2} us",
            ms(direct.0),
            ms(proxied.0),
            proxied.0.as_secs_f64() / direct.0.as_secs_f64(),
            per(direct.1),
            per(proxied.1),
            proxied.1.as_secs_f64() / direct.1.as_secs_f64(),
            per(proxied.1) - per(direct.1),
        );
    }

    #[tokio::test]
    async fn binary_bodies_and_the_size_bound() {
        let out = tmp("bin.jsonl");
        let up = Upstream::start().await;
        let mut o = RecordOptions::new(Layer::Provider, &up.url(), &out);
        o.max_body = 200_000;
        let rec = Recorder::start(o).await.unwrap();
        let g = send(rec.addr(), "POST", "/echo", &[], vec![0x80, 0x81, 0xff]).await;
        assert_eq!(g.body, vec![0x80, 0x81, 0xff]);
        let g = send(rec.addr(), "GET", "/bin", &[], vec![]).await;
        assert_eq!(g.body, vec![0xff, 0xfe, 0x00, 0x41]);
        let g = send(rec.addr(), "POST", "/echo", &[], vec![b'y'; 250_000]).await;
        assert_eq!(g.status, 413);
        assert!(
            g.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("over the recording bound of 200000 bytes")
        );
        let g = send(rec.addr(), "GET", "/big", &[], vec![]).await;
        assert!(
            g.error.is_some(),
            "the client's connection is reset at the bound"
        );
        let s = rec.stop().await.unwrap();
        assert_eq!((s.recorded, s.failed), (2, 2));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains(r#""body":{"base64":"gIH/"}"#), "{text}");
        let r = Recording::load(&out).unwrap();
        let x = &r.exchanges()[1];
        assert!(
            matches!(&x.answer().unwrap().body, ResponseBody::Whole(Body::Binary(b)) if b == &[0xff, 0xfe, 0x00, 0x41])
        );
        for (i, want) in [
            (2, "request body is over the recording bound"),
            (
                3,
                "response body (status 200) is over the recording bound of 200000 bytes",
            ),
        ] {
            match &r.exchanges()[i].response {
                RecordedResponse::Failed { error, .. } => assert!(error.contains(want), "{error}"),
                other => panic!("{other:?}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A provider stream: loopsim's fake provider serving a Gemini recording, through `sim record`

#[tokio::test]
async fn the_fake_provider_serves_gemini_and_sim_record_records_it_back() {
    use std::sync::{Arc, Mutex};

    use loopsim::harness::env::{AddressBook, TcpEnv};
    use loopsim::harness::record::{RecordOptions, Recorder};
    use loopsim::harness::trace::Trace;
    use loopsim::model::port::inject::NoFaults;
    use loopsim::model::provider::{ProviderState, StreamConfig, StreamResponse, run_streams};

    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/cassettes/provider/vcr/gemini/pydanticai_function_call_thought_signature.jsonl"
    );
    let original = Recording::load(path).unwrap();
    let responses = (1..=2)
        .map(|n| StreamResponse::from_recording(&format!("gemini#{n}"), &original, n).unwrap())
        .collect();
    let book = AddressBook::new();
    let env = TcpEnv::new("provider", Trace::new(), 0, book.clone());
    tokio::spawn(run_streams(
        env,
        Arc::new(StreamConfig {
            port: 9000,
            responses,
            hooks: Arc::new(NoFaults),
        }),
        Arc::new(Mutex::new(ProviderState::default())),
    ));
    let provider = loop {
        if let Some(a) = book.get("provider:9000") {
            break a;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let out = proxy::tmp("gemini.jsonl");
    let mut o = RecordOptions::new(Layer::Provider, &format!("http://{provider}"), &out);
    o.format = Some(StreamFormat::Gemini);
    let rec = Recorder::start(o).await.unwrap();
    for x in original.exchanges() {
        let Body::Json(body) = &x.request.body else {
            panic!("a JSON request")
        };
        let g = proxy::send(
            rec.addr(),
            "POST",
            &x.path,
            &[("content-type", "application/json")],
            body.to_string().into_bytes(),
        )
        .await;
        assert_eq!(g.status, 200, "{}", g.text());
        assert!(
            g.text().starts_with("data: {\"candidates\""),
            "{}",
            g.text()
        );
    }
    rec.stop().await.unwrap();
    let recorded = Recording::load(&out).unwrap();
    assert_eq!(recorded.header().format, Some(StreamFormat::Gemini));
    for n in 1..=2 {
        assert_eq!(
            recorded.provider_events(n).unwrap(),
            original.provider_events(n).unwrap(),
            "exchange {n}"
        );
        assert_eq!(
            recorded.exchanges()[n - 1].key,
            original.exchanges()[n - 1].key
        );
    }
    // A request on another API's path is refused by name.
    let g = proxy::send(
        provider,
        "POST",
        "/v1/chat/completions",
        &[],
        b"{}".to_vec(),
    )
    .await;
    assert!(g.status >= 400, "{}", g.text());
}

// ---------------------------------------------------------------------------------------------
// The real Letta Code CLI, recorded against `sim serve` (tests/interop/setup.sh installs it)

use crate::clients as common;

mod real_cli {
    use std::net::SocketAddr;

    use loopsim::cassette::{Layer, Recording, ResponseBody};
    use loopsim::harness::record::{RecordMode, RecordOptions, RecordSummary, Recorder};

    use super::common::{self, Served, run_cli, setup};

    const PROMPT: &str = "Please run the marker command.";
    const MODEL: &str = "zai/gpt-4o-mini";

    /// A recorder on a thread of its own; send on the channel to stop it.
    fn spawn(
        opts: RecordOptions,
    ) -> (
        SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<RecordSummary>,
    ) {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let h = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let rec = Recorder::start(opts).await.unwrap();
                addr_tx.send(rec.addr()).unwrap();
                let _ = stop_rx.await;
                rec.stop().await.unwrap()
            })
        });
        (addr_rx.recv().unwrap(), stop_tx, h)
    }

    fn through(served: &Served, addr: SocketAddr, dir: &str) -> Served {
        let dir = served.dir.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        Served {
            ready: served.ready.clone(),
            base_url: format!("http://{addr}"),
            log: served.log.clone(),
            dir,
        }
    }

    fn assert_turn_succeeded(run: &common::CliRun) {
        let r = run.result();
        assert_eq!(
            r["subtype"], "success",
            "stdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        );
        assert_eq!(r["num_turns"], 2, "stdout:\n{}", run.stdout);
        assert_eq!(r["result"], "Done. Tool said: e2e-ok");
        assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    }

    #[test]
    fn the_real_cli_against_sim_serve_through_sim_record_then_against_the_cassette_alone() {
        let Some(cli) = setup() else { return };
        let served = Served::start("tests/interop/fresh.toml", "record-letta", 1);
        let out = served.dir.join("letta.jsonl");
        let mut opts = RecordOptions::new(Layer::Letta, &served.base_url, &out);
        opts.mode = RecordMode::All;
        let (addr, stop, h) = spawn(opts);
        let run = run_cli(
            &cli,
            &through(&served, addr, "recorded"),
            &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
            |_| {},
        );
        assert_turn_succeeded(&run);
        stop.send(()).unwrap();
        let summary = h.join().unwrap();
        let r = Recording::load(&out).unwrap();
        assert_eq!(r.header().layer, Layer::Letta);
        // Every request the server logged went through the recorder, none failed.
        let logged = served.requests();
        assert_eq!(r.exchanges().len(), logged.len(), "{summary:?}");
        assert_eq!(summary.failed, 0);
        let mut a: Vec<String> = r
            .exchanges()
            .iter()
            .map(|x| format!("{} {}", x.method, x.path))
            .collect();
        let mut b: Vec<String> = logged
            .iter()
            .map(|l| {
                format!(
                    "{} {}",
                    l["method"].as_str().unwrap(),
                    l["path"].as_str().unwrap()
                )
            })
            .collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // The two sends: SSE answers, the first ending at requires_approval, the continuation
        // carrying the tool's result.
        let sends: Vec<_> = r
            .exchanges()
            .iter()
            .filter(|x| x.method == "POST" && x.path.ends_with("/messages"))
            .collect();
        assert_eq!(sends.len(), 2);
        for s in &sends {
            let ResponseBody::Sse(frames) = &s.answer().unwrap().body else {
                panic!("{} answered without SSE", s.path)
            };
            assert_eq!(
                frames.last().unwrap().frame.as_event().unwrap().data,
                "[DONE]"
            );
        }
        let ResponseBody::Sse(first) = &sends[0].answer().unwrap().body else {
            unreachable!()
        };
        assert!(first.iter().any(|f| {
            f.frame
                .as_event()
                .is_some_and(|e| e.data.contains("requires_approval"))
        }));
        let loopsim::cassette::Body::Json(cont) = &sends[1].request.body else {
            panic!()
        };
        assert_eq!(
            cont["messages"][0]["approvals"][0]["tool_call_id"],
            "call_fake0001"
        );
        assert!(
            sends[0]
                .request
                .headers
                .iter()
                .any(|(k, v)| k == "user-agent" && v.starts_with("letta-code/"))
        );

        // The same CLI run, answered by the cassette alone (mode none, the server not asked).
        let before = served.requests().len();
        let mut opts = RecordOptions::new(Layer::Letta, &served.base_url, &out);
        opts.mode = RecordMode::None;
        let (addr, stop, h) = spawn(opts);
        let run = run_cli(
            &cli,
            &through(&served, addr, "replayed"),
            &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
            |_| {},
        );
        stop.send(()).unwrap();
        let summary = h.join().unwrap();
        assert_turn_succeeded(&run);
        assert_eq!(
            served.requests().len(),
            before,
            "nothing reached the server"
        );
        println!(
            "replayed {} exchanges to the real CLI, refused {}",
            summary.replayed, summary.refused
        );
        assert_eq!(
            (summary.replayed, summary.refused),
            (r.exchanges().len() as u64, 0),
            "{summary:?}"
        );
    }
}
