//! Minimal HTTP/1.1 plumbing shared by the models: an accept loop that serves a handler on any
//! [`Env`], and a one-request-per-connection client. hyper does the protocol work; this module
//! only fixes the settings that determinism needs (no `Date` header: it reads the wall clock,
//! turmoil-hyper-probe.md §4).

use std::convert::Infallible;
use std::future::Future;
use std::io;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::env::{Env, Listener};
use super::observe::Observation;

/// The response body type every model handler returns.
pub type Body = BoxBody<Bytes, io::Error>;

/// A complete body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A JSON response with the given status.
/// The `untyped_answer` observation for an answer to `method path` that names no content type
/// (every answer a real Letta server gives carries one), or `None`.
pub fn untyped_answer<B>(resp: &Response<B>, method: &str, path: &str) -> Option<Observation> {
    (!resp.headers().contains_key(hyper::header::CONTENT_TYPE)).then(|| {
        Observation::UntypedAnswer {
            method: method.into(),
            path: path.into(),
            status: resp.status().as_u16(),
        }
    })
}

pub fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(full(value.to_string()))
        .expect("static response parts are valid")
}

/// Serves `handler` on `port` forever. Each connection runs on its own task; tasks are joined
/// (never left frozen when the host's main future ends, turmoil-hyper-probe.md §6 pitfall 8).
pub async fn serve<E, H, F>(env: E, port: u16, handler: H) -> io::Result<()>
where
    E: Env,
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let mut listener = env.bind(port).await?;
    let mut tasks = env.spawner().set();
    loop {
        tokio::select! {
            biased;
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => {
                let stream = accepted?;
                let handler = handler.clone();
                tasks.spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let h = handler.clone();
                        async move { Ok::<_, Infallible>(h(req).await) }
                    });
                    // Errors here are the peer going away mid-response: nothing to report.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .auto_date_header(false)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

/// Why a client request failed before a response head arrived.
#[derive(Debug)]
pub enum ClientError {
    Connect(io::Error),
    Timeout,
    Http(hyper::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Connect(e) => write!(f, "connect failed: {:?}", e.kind()),
            ClientError::Timeout => write!(f, "timed out waiting for the response head"),
            ClientError::Http(e) => write!(f, "{}", error_chain(e)),
        }
    }
}

/// hyper's Display hides the cause ("error reading a body from connection"); walk `source()`
/// to reach it (turmoil-hyper-probe.md §6 pitfall 6).
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Sends one request on a fresh connection and returns the response head with its streaming
/// body. The connection task is spawned and ends with the body.
pub async fn send<E: Env>(
    env: &E,
    addr: &str,
    req: Request<Full<Bytes>>,
    head_timeout: std::time::Duration,
) -> Result<Response<Incoming>, ClientError> {
    let work = async {
        let stream = env.connect(addr).await.map_err(ClientError::Connect)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(ClientError::Http)?;
        env.spawner().spawn(async move {
            let _ = conn.await;
        });
        sender.send_request(req).await.map_err(ClientError::Http)
    };
    match env.clock().timeout(head_timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::Timeout),
    }
}

/// Reads a whole request body (bounded: bodies over `limit` bytes are an error).
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, String> {
    let collected = http_body_util::Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(collected.to_bytes())
}
