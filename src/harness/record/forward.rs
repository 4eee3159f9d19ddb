//! One exchange through the proxy: forwarding a request upstream, copying its response back
//! frame by frame while recording it, and answering from the cassette when the mode replays.

use super::*;

pub(crate) fn error_response(
    status: StatusCode,
    kind: &str,
    message: &str,
) -> Response<port_http::Body> {
    let mut r = port_http::json_response(
        status,
        &json!({"error": {"type": kind, "message": message}}),
    );
    r.headers_mut().insert(
        "x-loopsim-record",
        hyper::header::HeaderValue::from_static("1"),
    );
    r
}

pub(crate) fn reset(why: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, why.into())
}

/// What the recorder keeps of a request.
pub(crate) struct Draft {
    seq: u64,
    t_ms: u64,
    method: String,
    path: String,
    request: RecordedRequest,
}

impl Draft {
    fn finish(self, response: RecordedResponse) -> Exchange {
        Exchange::new(self.t_ms, self.method, self.path, self.request, response)
    }
}

pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Response<port_http::Body> {
    let (seq, t_ms) = shared.begin();
    // Real time in the live proxy: the recorded offsets are measured, not simulated.
    let arrived = Instant::now();
    let (parts, body) = req.into_parts();
    let method = parts.method.as_str().to_string();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let max = shared.opts.max_body;
    let mut shutdown = shared.shutdown.clone();
    let read = tokio::select! {
        biased;
        _ = shutdown.wait_for(|s| *s) => Err(None),
        r = http_body_util::Limited::new(body, max).collect() => r.map_err(Some),
    };
    let bytes = match read {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let over = e.as_ref().is_some_and(|e| {
                e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
            });
            let message = match &e {
                _ if over => format!(
                    "sim record: the request body is over the recording bound of {max} bytes (--max-body)"
                ),
                Some(e) => format!(
                    "sim record: the request body could not be read: {}",
                    error_chain(&**e)
                ),
                None => "sim record: the recording stopped before the request body arrived".into(),
            };
            let draft = Draft {
                seq,
                t_ms,
                method,
                path: shared.scrubber.path(&path),
                request: RecordedRequest {
                    headers: shared.scrubber.headers(&recordable(&parts.headers)),
                    body: Body::Empty,
                },
            };
            let seq = draft.seq;
            shared.complete(
                seq,
                Some(draft.finish(RecordedResponse::Failed {
                    t_ms: ms_since(arrived),
                    error: message.clone(),
                })),
            );
            let status = if over {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            return error_response(status, "loopsim_record_request_body", &message);
        }
    };
    let draft = Draft {
        seq,
        t_ms,
        method: method.clone(),
        path: shared.scrubber.path(&path),
        request: RecordedRequest {
            headers: shared.scrubber.headers(&recordable(&parts.headers)),
            body: shared.scrubber.body(Body::from_bytes(&bytes)),
        },
    };
    if shared.replay {
        let hit = {
            let mut played = shared.played.lock().unwrap();
            let hit = matching::find(
                &shared.recorded,
                &played,
                &draft.method,
                &draft.path,
                &draft.request.body,
                shared.opts.match_on,
            );
            if let Some(i) = hit {
                played[i] = true;
            }
            hit
        };
        if let Some(i) = hit {
            shared.complete(seq, None);
            shared.count(|c| c.replayed += 1);
            return replay_response(shared.clone(), i).await;
        }
        if !shared.forward {
            shared.complete(seq, None);
            shared.count(|c| c.refused += 1);
            let message = miss_message(&shared, &draft);
            return error_response(StatusCode::NOT_IMPLEMENTED, "loopsim_record_miss", &message);
        }
    }
    forward(shared, draft, parts, bytes, arrived).await
}

/// Names the recorded exchange nearest a request nothing answers, and how it differs.
pub(crate) fn miss_message(shared: &Shared, d: &Draft) -> String {
    let played = shared.played.lock().unwrap().clone();
    let head = format!(
        "sim record (mode {}): no recorded exchange answers {} {}",
        shared.opts.mode.as_str(),
        d.method,
        d.path
    );
    let Some(i) = matching::nearest(
        &shared.recorded,
        &played,
        &d.method,
        &d.path,
        &d.request.body,
    ) else {
        return format!(
            "{head}; the cassette {} holds no exchanges",
            shared.opts.out.display()
        );
    };
    let x = &shared.recorded[i];
    let how = if played[i] && x.method == d.method && x.path == d.path {
        "the same request, already played (each recorded exchange answers once)".to_string()
    } else if x.method != d.method {
        format!("the method differs ({})", x.method)
    } else if x.path != d.path {
        format!("the path differs ({})", x.path)
    } else {
        match (&x.request.body, &d.request.body) {
            (Body::Json(a), Body::Json(b)) => match matching::first_difference(a, b) {
                Some(at) => format!("the body differs at {at}"),
                None => "the body differs".into(),
            },
            _ => "the body differs".into(),
        }
    };
    format!(
        "{head}; nearest is exchange {} ({} {}, line {} of {}): {how}",
        i + 1,
        x.method,
        x.path,
        i + 2,
        shared.opts.out.display()
    )
}

/// Answers from recorded exchange `i`: the head after its recorded delay, then the body as
/// recorded (SSE frames at their offsets, then the recorded ending).
pub(crate) async fn replay_response(shared: Arc<Shared>, i: usize) -> Response<port_http::Body> {
    let x = shared.recorded[i].clone();
    let a = match &x.response {
        RecordedResponse::Failed { error, .. } => {
            return error_response(
                StatusCode::BAD_GATEWAY,
                "loopsim_record_replayed_failure",
                &format!("sim record: replaying a recorded failure: {error}"),
            );
        }
        RecordedResponse::Answered(a) => a.clone(),
    };
    tokio::time::sleep(Duration::from_millis(a.t_ms)).await;
    let mut b = Response::builder()
        .status(StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (k, v) in &a.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    let chunks: Vec<(u64, Bytes)> = match a.body {
        ResponseBody::Whole(body) if a.end.kind == EndKind::Clean && a.end.t_ms == 0 => {
            let body = port_http::full(body.to_bytes());
            return b.body(body).unwrap_or_else(|e| cannot_replay(i, e));
        }
        ResponseBody::Whole(body) => vec![(0, Bytes::from(body.to_bytes()))],
        ResponseBody::Sse(frames) => frames
            .iter()
            .map(|f| (f.t_ms, Bytes::from(encode_frame(&f.frame))))
            .collect(),
    };
    // `--mode none` answers a live client, paced in real time from the recorded offsets.
    b.body(replay_stream(chunks, a.end, Instant::now()))
        .unwrap_or_else(|e| cannot_replay(i, e))
}

pub(crate) fn cannot_replay(i: usize, e: hyper::http::Error) -> Response<port_http::Body> {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "loopsim_record_replay",
        &format!(
            "sim record: recorded exchange {} cannot be replayed: {e}",
            i + 1
        ),
    )
}

/// A body that yields recorded chunks at their offsets (ms from `start`), then ends as
/// recorded: closes, resets, or stays open.
pub(crate) fn replay_stream(
    chunks: Vec<(u64, Bytes)>,
    end: BodyEnd,
    start: Instant,
) -> port_http::Body {
    let st = (chunks.into_iter(), false);
    let stream = futures::stream::unfold(st, move |(mut chunks, done)| async move {
        if done {
            return None;
        }
        if let Some((t, bytes)) = chunks.next() {
            tokio::time::sleep_until(start + Duration::from_millis(t)).await;
            return Some((Ok(Frame::data(bytes)), (chunks, false)));
        }
        tokio::time::sleep_until(start + Duration::from_millis(end.t_ms)).await;
        match end.kind {
            EndKind::Clean => None,
            EndKind::Reset => Some((
                Err(reset("the recorded body ended with a reset")),
                (chunks, true),
            )),
            EndKind::Stall => {
                std::future::pending::<()>().await;
                None
            }
        }
    });
    StreamBody::new(stream).boxed()
}

/// Forwards a request upstream and streams the answer back while recording it.
pub(crate) async fn forward(
    shared: Arc<Shared>,
    draft: Draft,
    parts: hyper::http::request::Parts,
    bytes: Bytes,
    arrived: Instant,
) -> Response<port_http::Body> {
    let up = &shared.upstream;
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut b = Request::builder()
        .method(parts.method.clone())
        .uri(format!("{}{}", up.base, path))
        .header("host", up.authority.as_str());
    for (k, v) in parts.headers.iter() {
        if forwardable(k.as_str()) && k.as_str() != "content-length" {
            b = b.header(k, v);
        }
    }
    let request = match b.body(Full::new(bytes)) {
        Ok(r) => r,
        Err(e) => {
            let message = format!("sim record: the request cannot be forwarded: {e}");
            let seq = draft.seq;
            shared.complete(
                seq,
                Some(draft.finish(RecordedResponse::Failed {
                    t_ms: ms_since(arrived),
                    error: message.clone(),
                })),
            );
            return error_response(StatusCode::BAD_GATEWAY, "loopsim_record_forward", &message);
        }
    };
    let mut shutdown = shared.shutdown.clone();
    let head = async {
        let stream = tokio::net::TcpStream::connect(up.authority.as_str())
            .await
            .map_err(|e| format!("cannot connect to upstream {}: {e}", up.url))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("upstream {}: {}", up.url, error_chain(&e)))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender.send_request(request).await.map_err(|e| {
            format!(
                "upstream {} failed before its response head: {}",
                up.url,
                error_chain(&e)
            )
        })
    };
    let outcome = tokio::select! {
        biased;
        _ = shutdown.wait_for(|s| *s) => Err((StatusCode::SERVICE_UNAVAILABLE, "the recording stopped before the response head arrived".to_string())),
        r = tokio::time::timeout(HEAD_TIMEOUT, head) => match r {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(m)) => Err((StatusCode::BAD_GATEWAY, m)),
            Err(_) => Err((StatusCode::GATEWAY_TIMEOUT, format!("no response head from upstream {} within {} s", up.url, HEAD_TIMEOUT.as_secs()))),
        },
    };
    let resp = match outcome {
        Ok(r) => r,
        Err((status, m)) => {
            let message = format!("sim record: {m}");
            let seq = draft.seq;
            shared.complete(
                seq,
                Some(draft.finish(RecordedResponse::Failed {
                    t_ms: ms_since(arrived),
                    error: m,
                })),
            );
            return error_response(status, "loopsim_upstream_unreachable", &message);
        }
    };
    // Real time: the response head's arrival, the zero of its frames' recorded offsets.
    let head_at = Instant::now();
    let head_ms = head_at.duration_since(arrived).as_millis() as u64;
    let (rparts, upstream_body) = resp.into_parts();
    let mut out = Response::builder().status(rparts.status);
    for (k, v) in rparts.headers.iter() {
        if forwardable(k.as_str()) {
            out = out.header(k, v);
        }
    }
    let sse = rparts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    let head = ResponseHead {
        t_ms: head_ms,
        status: rparts.status.as_u16(),
        headers: shared.scrubber.headers(&recordable(&rparts.headers)),
        sse,
    };
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    tokio::spawn(pump(
        shared.clone(),
        draft,
        head,
        upstream_body,
        tx,
        head_at,
    ));
    let body = futures::stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((item, rx))
    });
    out.body(StreamBody::new(body).boxed()).unwrap_or_else(|e| {
        error_response(
            StatusCode::BAD_GATEWAY,
            "loopsim_record_forward",
            &format!("sim record: the upstream response head cannot be forwarded: {e}"),
        )
    })
}

pub(crate) struct ResponseHead {
    t_ms: u64,
    status: u16,
    headers: Vec<(String, String)>,
    sse: bool,
}

/// Copies the upstream body to the client as it arrives, and records it: SSE frames timed when
/// the bytes that complete them arrive, a whole body kept to the end. Ends on the upstream's
/// end (`clean`), an upstream error (`reset`; the client sees the same), the client going away
/// (`reset` by the client), the body bound, or the recording stopping (`stall`).
pub(crate) async fn pump(
    shared: Arc<Shared>,
    draft: Draft,
    head: ResponseHead,
    mut body: Incoming,
    tx: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    head_at: Instant,
) {
    let max = shared.opts.max_body;
    let mut shutdown = shared.shutdown.clone();
    let mut raw: Vec<u8> = Vec::new();
    let mut decoder = SseDecoder::new();
    let mut frames: Vec<TimedFrame> = Vec::new();
    let mut over = false;
    let end = loop {
        if shared.stopping() {
            break BodyEnd {
                t_ms: ms_since(head_at),
                kind: EndKind::Stall,
                by_client: false,
            };
        }
        let next = tokio::select! {
            biased;
            _ = shutdown.wait_for(|s| *s) => continue,
            _ = tx.closed() => {
                break BodyEnd {
                    t_ms: ms_since(head_at),
                    kind: EndKind::Reset,
                    by_client: true,
                };
            }
            f = body.frame() => f,
        };
        match next {
            None => {
                break BodyEnd {
                    t_ms: ms_since(head_at),
                    kind: EndKind::Clean,
                    by_client: false,
                };
            }
            Some(Err(e)) => {
                let why = format!("upstream {}: {}", shared.upstream.url, error_chain(&e));
                let _ = tx.send(Err(reset(why))).await;
                break BodyEnd {
                    t_ms: ms_since(head_at),
                    kind: EndKind::Reset,
                    by_client: false,
                };
            }
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if raw.len() + data.len() > max {
                    over = true;
                    let _ = tx
                        .send(Err(reset(format!(
                            "sim record: the response body is over the recording bound of {max} bytes"
                        ))))
                        .await;
                    break BodyEnd {
                        t_ms: ms_since(head_at),
                        kind: EndKind::Reset,
                        by_client: false,
                    };
                }
                let t = ms_since(head_at);
                if head.sse {
                    for f in decoder.push(&data) {
                        frames.push(TimedFrame { t_ms: t, frame: f });
                    }
                }
                raw.extend_from_slice(&data);
                let sent = tokio::select! {
                    biased;
                    _ = shutdown.wait_for(|s| *s) => Err(()),
                    r = tx.send(Ok(Frame::data(data))) => r.map_err(|_| ()),
                };
                if sent.is_err() {
                    if shared.stopping() {
                        continue;
                    }
                    break BodyEnd {
                        t_ms: ms_since(head_at),
                        kind: EndKind::Reset,
                        by_client: true,
                    };
                }
            }
        }
    };
    drop(tx);
    let seq = draft.seq;
    let response = if over {
        RecordedResponse::Failed {
            t_ms: head.t_ms + end.t_ms,
            error: format!(
                "the response body (status {}) is over the recording bound of {max} bytes; the client's connection was reset after {} bytes",
                head.status,
                raw.len()
            ),
        }
    } else {
        let body = if head.sse && std::str::from_utf8(&raw).is_ok() {
            if end.kind == EndKind::Clean {
                frames.extend(decoder.finish().into_iter().map(|f| TimedFrame {
                    t_ms: end.t_ms,
                    frame: f,
                }));
            }
            ResponseBody::Sse(
                frames
                    .into_iter()
                    .map(|f| scrub_frame(&shared.scrubber, f))
                    .collect(),
            )
        } else {
            // A whole body, or an SSE body that is not UTF-8 (its frames could not be kept
            // exactly as text): kept whole.
            ResponseBody::Whole(shared.scrubber.body(Body::from_bytes(&raw)))
        };
        RecordedResponse::Answered(Answer {
            t_ms: head.t_ms,
            status: head.status,
            headers: head.headers,
            body,
            end,
        })
    };
    shared.complete(seq, Some(draft.finish(response)));
}
