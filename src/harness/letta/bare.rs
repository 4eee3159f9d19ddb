//! The bare baseline for `sim bench --compare-bare`: the same three turmoil hosts, the same
//! tick and latency, hyper on both hops, and the same bytes at the same times, with none of
//! loopsim's logic. A loopsim run of the scenario logs every exchange with the server (request
//! line and body, response status and every body frame with its time) and every provider call;
//! the bare world replays that log: the client sends each request when the loopsim client did,
//! the server answers it with the recorded frames at their recorded offsets and calls the
//! provider when the server model did, and the provider streams the cassettes at their recorded
//! offsets. No models, no trace, no invariants: what is left is turmoil + hyper + the bytes.
//!
//! The ratio loopsim/bare is the cost of the harness and the models.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use crate::cassette::TimedFrame;
use crate::harness::letta::world::{RunOutput, SERVER_PORT};
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::world::{PROVIDER_PORT, derive_seed};
use crate::model::letta::server::Exchange;
use crate::model::port::http::Body;
use crate::model::port::observe::Observation;

/// The header that tells the bare server which recorded exchange a request is.
const EXCHANGE_HEADER: &str = "x-bare-exchange";

/// What the bare world replays.
#[derive(Clone)]
pub struct BareScript {
    /// Each provider answer's frames, in call order.
    pub provider: Arc<Vec<Vec<TimedFrame>>>,
    /// When the server called the provider (ms since the start), in call order.
    pub provider_calls: Arc<Vec<u64>>,
    /// Every exchange with the server, in arrival order.
    pub exchanges: Arc<Vec<Exchange>>,
}

impl BareScript {
    /// The bytes a loopsim run sent, from its trace and its exchange log
    /// (`world::run_once_logging`).
    pub fn from_run(
        scenario: &Scenario,
        out: &RunOutput,
        exchanges: Vec<Exchange>,
    ) -> Result<BareScript, InputError> {
        let responses = crate::harness::cassettes::provider_responses(scenario)?;
        let provider = responses
            .iter()
            .map(|r| r.cassette.frames().to_vec())
            .collect();
        let provider_calls = out
            .trace
            .iter()
            .filter(|e| matches!(e.obs, Observation::ProviderCall { .. }))
            .map(|e| e.t_ms)
            .collect();
        Ok(BareScript {
            provider: Arc::new(provider),
            provider_calls: Arc::new(provider_calls),
            exchanges: Arc::new(exchanges),
        })
    }
}

async fn serve<F, Fut>(port: u16, handler: F) -> std::io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Body>> + Send + 'static,
{
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", port)).await?;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            biased;
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                let h = handler.clone();
                tasks.spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let h = h.clone();
                        async move { Ok::<_, std::convert::Infallible>(h(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .auto_date_header(false)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        }
    }
}

/// Sends one request on a fresh connection (as the models' client does) and returns the body.
async fn send(
    addr: &str,
    method: &str,
    path: &str,
    body: Bytes,
    exchange: Option<usize>,
) -> Option<Incoming> {
    let stream = turmoil::net::TcpStream::connect(addr.to_string())
        .await
        .ok()?;
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr);
    if let Some(j) = exchange {
        req = req.header(EXCHANGE_HEADER, j.to_string());
    }
    let req = req.body(Full::new(body)).ok()?;
    Some(tx.send_request(req).await.ok()?.into_body())
}

/// Reads a body to its end.
async fn drain(mut body: Incoming) {
    while let Some(Ok(_)) = body.frame().await {}
}

/// Runs the bare world once; returns simulated milliseconds.
pub fn run_bare(scenario: &Scenario, seed: u64, script: &BareScript) -> Result<u64, String> {
    let mut b = turmoil::Builder::new();
    b.rng_seed(derive_seed(seed, "turmoil"))
        .epoch(UNIX_EPOCH + Duration::from_millis(scenario.network.start.unix_ms()))
        .tick_duration(Duration::from_millis(scenario.network.tick_ms))
        .min_message_latency(Duration::from_millis(scenario.network.latency_ms[0]))
        .max_message_latency(Duration::from_millis(scenario.network.latency_ms[1]))
        .simulation_duration(Duration::from_millis(scenario.limits.sim_time_ms));
    let mut sim = b.build();

    let provider = script.provider.clone();
    sim.host("provider", move || {
        let provider = provider.clone();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        async move {
            serve(PROVIDER_PORT, move |req: Request<Incoming>| {
                let provider = provider.clone();
                let calls = calls.clone();
                async move {
                    let _ = req.into_body().collect().await;
                    let i = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let frames = provider.get(i).cloned().unwrap_or_default();
                    // Simulated: tokio's clock is turmoil's on this host.
                    let start = tokio::time::Instant::now();
                    let body = futures::stream::unfold(0usize, move |j| {
                        let f = frames.get(j).cloned();
                        async move {
                            let f = f?;
                            tokio::time::sleep_until(start + Duration::from_millis(f.t_ms)).await;
                            let bytes = Bytes::from(crate::wire::sse::encode_frame(&f.frame));
                            Some((Ok::<_, std::io::Error>(Frame::data(bytes)), j + 1))
                        }
                    });
                    Response::new(StreamBody::new(body).boxed())
                }
            })
            .await
            .map_err(|e| e.to_string().into())
        }
    });

    let exchanges = script.exchanges.clone();
    let calls = script.provider_calls.clone();
    sim.host("server", move || {
        let exchanges = exchanges.clone();
        let calls = calls.clone();
        async move {
            // The provider calls, when the server model made them; each body read to the end.
            let start = tokio::time::Instant::now();
            tokio::spawn(async move {
                for &t in calls.iter() {
                    tokio::time::sleep_until(start + Duration::from_millis(t)).await;
                    tokio::spawn(async move {
                        let addr = format!("provider:{PROVIDER_PORT}");
                        if let Some(body) = send(
                            &addr,
                            "POST",
                            "/v1/messages",
                            Bytes::from_static(b"{}"),
                            None,
                        )
                        .await
                        {
                            drain(body).await;
                        }
                    });
                }
            });
            serve(SERVER_PORT, move |req: Request<Incoming>| {
                let exchanges = exchanges.clone();
                async move {
                    let arrived = tokio::time::Instant::now();
                    let j: usize = req
                        .headers()
                        .get(EXCHANGE_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(usize::MAX);
                    let _ = req.into_body().collect().await;
                    let Some(x) = exchanges.get(j).cloned() else {
                        return Response::new(crate::model::port::http::full(Bytes::new()));
                    };
                    // The recorded frames at their recorded offsets from the request's arrival.
                    let body = futures::stream::unfold(0usize, move |k| {
                        let frame = x.frames.get(k).cloned();
                        let arrived_ms = x.arrived_ms;
                        async move {
                            let (t, bytes) = frame?;
                            let offset = Duration::from_millis(t.saturating_sub(arrived_ms));
                            tokio::time::sleep_until(arrived + offset).await;
                            Some((Ok::<_, std::io::Error>(Frame::data(bytes)), k + 1))
                        }
                    });
                    let mut resp = Response::builder().status(x.status);
                    if let Some(ct) = &x.content_type {
                        resp = resp.header("content-type", ct.as_str());
                    }
                    resp.body(StreamBody::new(body).boxed())
                        .unwrap_or_else(|_| {
                            Response::new(crate::model::port::http::full(Bytes::new()))
                        })
                }
            })
            .await
            .map_err(|e| e.to_string().into())
        }
    });

    let exchanges = script.exchanges.clone();
    sim.client("client", async move {
        // Each request when the loopsim client sent it (it reached the server one hop later).
        let start = tokio::time::Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for (j, x) in exchanges.iter().enumerate() {
            let at = start + Duration::from_millis(x.arrived_ms);
            let (method, path, body) = (x.method.clone(), x.path.clone(), x.body.clone());
            tasks.spawn(async move {
                tokio::time::sleep_until(at).await;
                let addr = format!("server:{SERVER_PORT}");
                if let Some(b) = send(&addr, &method, &path, body, Some(j)).await {
                    drain(b).await;
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        Ok(())
    });
    loop {
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(sim.elapsed().as_millis() as u64)
}
