//! `sim record`: a recording reverse proxy. It listens on loopback, forwards every request to
//! the upstream unchanged, streams every response back as it arrives (frame by frame, never
//! buffered) and writes what went through as a version 2 cassette (docs/cassette.md), scrubbed,
//! as the session goes. Record modes are vcrpy's: `all`, `once`, `new_episodes`, `none`
//! (docs/record-replay.md).
//!
//! Real time on purpose: this module records the real world, so the offsets it writes are read
//! from the real clock (`tokio::time::Instant` on a runtime that is never paused). It is never
//! part of a simulation and no simulated run reads anything it measures. All clock reads of the
//! recorder are in this file.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

use super::scenario::InputError;
use crate::cassette::matching::{self, MatchOn};
use crate::cassette::scrub::Scrubber;
use crate::cassette::{
    Answer, Body, BodyEnd, EndKind, Exchange, Layer, RecordedRequest, RecordedResponse, Recording,
    RecordingFile, RecordingHeader, ResponseBody, TimedFrame,
};
use crate::model::port::http::{self as port_http, error_chain};
use crate::wire::provider::StreamFormat;
use crate::wire::sse::{SseDecoder, SseFrame, encode_frame};

mod forward;
mod session;
use self::forward::*;
pub use self::session::*;

/// The default bound on one request or response body the recorder keeps (64 MiB).
pub const DEFAULT_MAX_BODY: usize = 64 << 20;

/// How long the recorder waits for an upstream response head before it gives up on a request
/// (the Letta SDK's own request timeout is 10 minutes).
const HEAD_TIMEOUT: Duration = Duration::from_secs(600);

/// How long [`Recorder::stop`] waits for exchanges still in flight to be written.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// vcrpy's record modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordMode {
    /// Record when the cassette does not exist; when it does, answer from it only and refuse
    /// every request it does not hold.
    Once,
    /// Answer what the cassette holds, forward and record the rest (appended to it).
    NewEpisodes,
    /// Forward and record everything; never answer from the cassette (it is replaced).
    All,
    /// Answer from the cassette only; never forward, never write.
    None,
}

impl RecordMode {
    pub const NAMES: [&'static str; 4] = ["once", "new_episodes", "all", "none"];

    pub fn as_str(self) -> &'static str {
        match self {
            RecordMode::Once => "once",
            RecordMode::NewEpisodes => "new_episodes",
            RecordMode::All => "all",
            RecordMode::None => "none",
        }
    }

    pub fn from_name(name: &str) -> Option<RecordMode> {
        [
            RecordMode::Once,
            RecordMode::NewEpisodes,
            RecordMode::All,
            RecordMode::None,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }
}

/// What `sim record` is asked to do.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub layer: Layer,
    /// The upstream base URL, `http://host:port[/base]`; request paths are appended to it.
    pub upstream: String,
    /// The cassette. Written as `<out>.partial` while recording, renamed when the session ends.
    pub out: PathBuf,
    pub listen: SocketAddr,
    pub mode: RecordMode,
    pub scrubber: Scrubber,
    /// The provider stream format written in the header (provider layer).
    pub format: Option<StreamFormat>,
    pub note: Option<String>,
    /// Bound on one request or response body, in bytes.
    pub max_body: usize,
    /// Whether a recorded exchange must match the body hash too (default: method and path,
    /// preferring a body match).
    pub match_on: MatchOn,
}

impl RecordOptions {
    /// The defaults for everything but the layer, upstream and output.
    pub fn new(layer: Layer, upstream: &str, out: impl Into<PathBuf>) -> RecordOptions {
        RecordOptions {
            layer,
            upstream: upstream.to_string(),
            out: out.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            mode: RecordMode::All,
            scrubber: Scrubber::default(),
            format: None,
            note: None,
            max_body: DEFAULT_MAX_BODY,
            match_on: MatchOn::MethodPath,
        }
    }
}

/// What a session did, printed when it ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// The cassette written, when the mode writes one.
    pub written: Option<PathBuf>,
    /// Exchanges in the cassette written (including those kept from before, in new_episodes).
    pub exchanges: u64,
    /// Requests forwarded and recorded in this session.
    pub recorded: u64,
    /// Requests answered from the cassette.
    pub replayed: u64,
    /// Requests refused: no recorded exchange answers them and the mode does not forward.
    pub refused: u64,
    /// Requests recorded as failed (upstream unreachable, over the bound, stopped first).
    pub failed: u64,
}

impl RecordSummary {
    pub fn to_json(&self) -> Value {
        json!({
            "stopped": true,
            "cassette": self.written.as_ref().map(|p| p.display().to_string()),
            "exchanges": self.exchanges,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "refused": self.refused,
            "failed": self.failed,
        })
    }
}

/// The upstream, parsed once.
#[derive(Debug, Clone)]
struct Upstream {
    url: String,
    authority: String,
    base: String,
}

fn parse_upstream(url: &str) -> Result<Upstream, String> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => {
            return Err(format!(
                "{url:?}: scheme {other:?} is not supported (this build forwards plain http; put a TLS-terminating proxy of your own in between for https)"
            ));
        }
        None => {
            return Err(format!("{url:?}: no scheme (expected http://host:port)"));
        }
    }
    let authority = uri
        .authority()
        .ok_or_else(|| format!("{url:?}: no host"))?
        .to_string();
    if uri.query().is_some() {
        return Err(format!("{url:?}: a base URL has no query"));
    }
    Ok(Upstream {
        url: url.trim_end_matches('/').to_string(),
        authority,
        base: uri.path().trim_end_matches('/').to_string(),
    })
}

/// Headers that describe one hop, never forwarded (RFC 9110 §7.6.1) and never recorded.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn forwardable(name: &str) -> bool {
    !HOP_BY_HOP.contains(&name) && name != "host"
}

/// Recorded headers: forwardable ones, without `content-length` (a replay frames its own body).
fn recordable(headers: &hyper::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| forwardable(k.as_str()) && k.as_str() != "content-length")
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// The order in which exchanges are written: by request start, each as soon as it and all
/// before it are done.
struct Writer {
    file: Option<RecordingFile>,
    /// The next sequence number to hand out (one per request, in arrival order).
    assigned: u64,
    /// The next sequence number to write.
    next: u64,
    /// Finished exchanges waiting for an earlier one; `None` for a request that is not
    /// recorded (answered from the cassette, refused).
    pending: BTreeMap<u64, Option<Exchange>>,
    /// Added to request offsets (new_episodes appends after the kept session's end).
    offset_ms: u64,
    error: Option<String>,
}

#[derive(Default)]
struct Counts {
    recorded: u64,
    replayed: u64,
    refused: u64,
    failed: u64,
}

struct Shared {
    opts: RecordOptions,
    upstream: Upstream,
    scrubber: Scrubber,
    start: Instant,
    /// The cassette's exchanges, for the modes that answer from it.
    recorded: Vec<Exchange>,
    played: Mutex<Vec<bool>>,
    /// Answer matching requests from `recorded`.
    replay: bool,
    /// Forward (and record) requests the cassette does not answer.
    forward: bool,
    writer: Mutex<Writer>,
    written: Notify,
    counts: Mutex<Counts>,
    shutdown: watch::Receiver<bool>,
}

fn ms_since(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

impl Shared {
    /// A sequence number and start offset for a request that just arrived. Taken together
    /// under one lock, so offsets never decrease in sequence order.
    fn begin(&self) -> (u64, u64) {
        let mut w = self.writer.lock().unwrap();
        let seq = w.assigned;
        w.assigned += 1;
        (seq, ms_since(self.start))
    }

    /// Hands over request `seq`'s exchange (or `None` when it is not recorded) and writes
    /// every exchange that is now next in line.
    fn complete(&self, seq: u64, x: Option<Exchange>) {
        {
            let mut counts = self.counts.lock().unwrap();
            match &x {
                Some(x) if matches!(x.response, RecordedResponse::Failed { .. }) => {
                    counts.failed += 1
                }
                Some(_) => counts.recorded += 1,
                None => {}
            }
        }
        let mut w = self.writer.lock().unwrap();
        w.pending.insert(seq, x);
        loop {
            let next = w.next;
            let Some(item) = w.pending.remove(&next) else {
                break;
            };
            w.next += 1;
            if let Some(mut x) = item {
                x.t_ms += w.offset_ms;
                let result = match w.file.as_mut() {
                    Some(f) => f.append(&x).map_err(|e| e.to_string()),
                    None => Ok(()),
                };
                if let Err(e) = result
                    && w.error.is_none()
                {
                    w.error = Some(e);
                }
            }
        }
        drop(w);
        self.written.notify_waiters();
    }

    fn count(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.counts.lock().unwrap());
    }

    fn stopping(&self) -> bool {
        *self.shutdown.borrow()
    }
}

/// A running recorder.
pub struct Recorder {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<tokio::task::JoinSet<()>>,
    partial: Option<PathBuf>,
}

fn partial_path(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

fn input_error(file: &Path, message: String) -> InputError {
    InputError {
        file: file.display().to_string(),
        line: None,
        column: None,
        message,
    }
}

impl Recorder {
    /// Checks the options, reads the cassette when the mode answers from it, opens the
    /// cassette being written, and starts listening.
    pub async fn start(opts: RecordOptions) -> Result<Recorder, InputError> {
        let upstream = parse_upstream(&opts.upstream).map_err(|m| InputError {
            file: "--upstream".into(),
            line: None,
            column: None,
            message: m,
        })?;
        if opts.format.is_some() && opts.layer != Layer::Provider {
            return Err(input_error(
                &opts.out,
                "--format names a provider stream format; it needs --layer provider".into(),
            ));
        }
        let existing = if opts.out.exists() && opts.mode != RecordMode::All {
            let r = Recording::load(&opts.out).map_err(|e| InputError {
                file: e.origin.clone(),
                line: e.line,
                column: None,
                message: format!(
                    "{} (mode {} reads the existing cassette)",
                    e.message,
                    opts.mode.as_str()
                ),
            })?;
            if r.header().layer != opts.layer {
                return Err(input_error(
                    &opts.out,
                    format!(
                        "the cassette records the {} layer, not {} (--layer)",
                        r.header().layer.as_str(),
                        opts.layer.as_str()
                    ),
                ));
            }
            Some(r)
        } else {
            None
        };
        let (replay, forward, write) = match (opts.mode, &existing) {
            (RecordMode::All, _) | (RecordMode::Once | RecordMode::NewEpisodes, None) => {
                (false, true, true)
            }
            (RecordMode::Once, Some(_)) | (RecordMode::None, Some(_)) => (true, false, false),
            (RecordMode::NewEpisodes, Some(_)) => (true, true, true),
            (RecordMode::None, None) => {
                return Err(input_error(
                    &opts.out,
                    "mode none answers from an existing cassette, and there is none here".into(),
                ));
            }
        };
        let partial = write.then(|| partial_path(&opts.out));
        let mut offset_ms = 0;
        let file = match &partial {
            None => None,
            Some(p) => {
                let header = match &existing {
                    Some(r) => r.header().clone(),
                    None => RecordingHeader {
                        layer: opts.layer,
                        recorder: format!("sim record (mode {})", opts.mode.as_str()),
                        source: upstream.url.clone(),
                        format: opts.format,
                        note: opts.note.clone(),
                    },
                };
                let mut f = RecordingFile::create(p, &header)
                    .map_err(|e| input_error(p, e.message.clone()))?;
                if let Some(r) = &existing {
                    for x in r.exchanges() {
                        f.append(x).map_err(|e| input_error(p, e.message.clone()))?;
                    }
                    offset_ms = r.end_t_ms();
                }
                Some(f)
            }
        };
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|e| {
                input_error(&opts.out, format!("cannot listen on {}: {e}", opts.listen))
            })?;
        let addr = listener
            .local_addr()
            .map_err(|e| input_error(&opts.out, format!("cannot read the bound address: {e}")))?;
        let recorded: Vec<Exchange> = existing.map(|r| r.exchanges().to_vec()).unwrap_or_default();
        let (tx, rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            scrubber: opts.scrubber.clone(),
            upstream,
            // The session's time zero: every offset in the cassette is measured from here. The
            // recorder proxies real traffic in real time; it never runs inside a simulation.
            start: Instant::now(),
            played: Mutex::new(vec![false; recorded.len()]),
            recorded,
            replay,
            forward,
            writer: Mutex::new(Writer {
                file,
                assigned: 0,
                next: 0,
                pending: BTreeMap::new(),
                offset_ms,
                error: None,
            }),
            written: Notify::new(),
            counts: Mutex::new(Counts::default()),
            shutdown: rx,
            opts,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Recorder {
            addr,
            shared,
            shutdown: tx,
            accept,
            partial,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The line `sim record` prints once it listens.
    pub fn ready_line(&self) -> Value {
        let o = &self.shared.opts;
        json!({
            "listening": self.addr.to_string(),
            "base_url": format!("http://{}", self.addr),
            "upstream": self.shared.upstream.url,
            "layer": o.layer.as_str(),
            "mode": o.mode.as_str(),
            "cassette": o.out.display().to_string(),
            "writing": self.partial.as_ref().map(|p| p.display().to_string()),
            "answers_from_cassette": self.shared.replay,
            "forwards": self.shared.forward,
        })
    }

    /// Ends the session: stops accepting, ends every exchange still in flight (an open body as
    /// `stall`, a request still waiting for its head as failed), writes the end line and
    /// renames `<out>.partial` to `<out>`.
    pub async fn stop(self) -> Result<RecordSummary, InputError> {
        let _ = self.shutdown.send(true);
        // Real time: how long a live proxy waits for its streams to end; no simulation here.
        let deadline = Instant::now() + STOP_WAIT;
        loop {
            let notified = self.shared.written.notified();
            {
                let w = self.shared.writer.lock().unwrap();
                if w.next >= w.assigned {
                    break;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        let end_ms = ms_since(self.shared.start);
        // Connections still open (a stalled stream being replayed, an idle keep-alive) close.
        if let Ok(mut tasks) = self.accept.await {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        let (file, offset, unfinished, error) = {
            let mut w = self.shared.writer.lock().unwrap();
            (
                w.file.take(),
                w.offset_ms,
                w.assigned - w.next,
                w.error.take(),
            )
        };
        let counts = {
            let c = self.shared.counts.lock().unwrap();
            (c.recorded, c.replayed, c.refused, c.failed)
        };
        let out = self.shared.opts.out.clone();
        let mut summary = RecordSummary {
            written: None,
            exchanges: 0,
            recorded: counts.0,
            replayed: counts.1,
            refused: counts.2,
            failed: counts.3,
        };
        if let Some(e) = error {
            return Err(input_error(
                &out,
                format!("the recording could not be written: {e}"),
            ));
        }
        if unfinished > 0 {
            return Err(input_error(
                &out,
                format!(
                    "{unfinished} exchanges were still in flight {} s after the stop; the partial cassette is left unfinished",
                    STOP_WAIT.as_secs()
                ),
            ));
        }
        if let (Some(f), Some(partial)) = (file, self.partial) {
            summary.exchanges = f.written();
            f.finish(offset + end_ms)
                .map_err(|e| input_error(&partial, e.message.clone()))?;
            std::fs::rename(&partial, &out).map_err(|e| {
                input_error(&out, format!("cannot rename {}: {e}", partial.display()))
            })?;
            summary.written = Some(out);
        }
        Ok(summary)
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
) -> tokio::task::JoinSet<()> {
    let mut tasks = tokio::task::JoinSet::new();
    let mut shutdown = shared.shutdown.clone();
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = shared.clone();
                tasks.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(shared, req).await) }
                    });
                    // The peer going away mid-response is recorded by the exchange itself.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .auto_date_header(false)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
    tasks
}
