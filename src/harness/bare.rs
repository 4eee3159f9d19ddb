//! The bare baseline for `sim bench --compare-bare`: the same three turmoil hosts, the same
//! tick and latency, hyper on both hops, and the same bytes, with none of loopsim's logic. The
//! provider streams the scenario's cassettes at their recorded offsets; the server, for each
//! client request, calls the provider and relays, frame for frame, the exact Letta SSE body the
//! real server model sent for that request in a loopsim run; the client reads each body to the
//! end. No models, no trace, no invariants: what is left is turmoil + hyper + the bytes.
//!
//! The ratio loopsim/bare is the cost of the harness and the models.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use super::scenario::{InputError, Scenario};
use super::world::{EPOCH_UNIX_MS, PROVIDER_PORT, RunOutput, SERVER_PORT, derive_seed};
use crate::cassette::TimedFrame;
use crate::model::http::Body;
use crate::model::observe::Observation;

/// What the bare world replays: provider answers and server bodies, in order.
#[derive(Clone)]
pub struct BareScript {
    pub provider: Arc<Vec<Vec<TimedFrame>>>,
    /// Each server response body, as SSE events (one `Bytes` per event).
    pub server: Arc<Vec<Vec<Bytes>>>,
}

impl BareScript {
    /// The bytes a loopsim run actually sent: its provider cassettes and its server's run logs,
    /// in the order the runs started.
    pub fn from_run(scenario: &Scenario, out: &RunOutput) -> Result<BareScript, InputError> {
        let responses = super::cassettes::provider_responses(scenario)?;
        let provider = responses
            .iter()
            .map(|r| r.cassette.frames().to_vec())
            .collect();
        let order: Vec<&str> = out
            .trace
            .iter()
            .filter_map(|e| match &e.obs {
                Observation::RunStarted { run_id, .. } => Some(run_id.as_str()),
                _ => None,
            })
            .collect();
        let store = out.store.lock().unwrap();
        let server = order
            .iter()
            .filter_map(|id| store.runs.get(*id))
            .map(|run| {
                let mut events: Vec<Bytes> = run
                    .log
                    .iter()
                    .map(|e| {
                        let mut t = String::new();
                        if let Some(ev) = e.event {
                            t.push_str(&format!("event: {ev}\n"));
                        }
                        t.push_str(&format!("data: {}\n\n", e.json));
                        Bytes::from(t)
                    })
                    .collect();
                if run.done_marker {
                    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
                }
                events
            })
            .collect();
        Ok(BareScript {
            provider: Arc::new(provider),
            server: Arc::new(server),
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

async fn post(addr: &str, path: &str) -> Option<Incoming> {
    let stream = turmoil::net::TcpStream::connect(addr.to_string())
        .await
        .ok()?;
    let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::post(path)
        .header("host", addr)
        .body(Full::new(Bytes::from_static(b"{}")))
        .ok()?;
    Some(tx.send_request(req).await.ok()?.into_body())
}

/// Runs the bare world once; returns simulated milliseconds.
pub fn run_bare(scenario: &Scenario, seed: u64, script: &BareScript) -> Result<u64, String> {
    let mut b = turmoil::Builder::new();
    b.rng_seed(derive_seed(seed, "turmoil"))
        .epoch(UNIX_EPOCH + Duration::from_millis(EPOCH_UNIX_MS))
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

    let server = script.server.clone();
    sim.host("server", move || {
        let server = server.clone();
        let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        async move {
            serve(SERVER_PORT, move |req: Request<Incoming>| {
                let server = server.clone();
                let requests = requests.clone();
                async move {
                    let _ = req.into_body().collect().await;
                    let j = requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let events = server.get(j).cloned().unwrap_or_default();
                    let upstream = post(&format!("provider:{PROVIDER_PORT}"), "/v1/messages").await;
                    // Relay: one Letta event per provider frame, the rest when the provider ends.
                    let body = futures::stream::unfold(
                        (0usize, events, upstream),
                        |(k, events, mut upstream)| async move {
                            if k >= events.len() {
                                return None;
                            }
                            if let Some(up) = upstream.as_mut()
                                && up.frame().await.is_none()
                            {
                                upstream = None;
                            }
                            let e = events[k].clone();
                            Some((
                                Ok::<_, std::io::Error>(Frame::data(e)),
                                (k + 1, events, upstream),
                            ))
                        },
                    );
                    Response::new(StreamBody::new(body).boxed())
                }
            })
            .await
            .map_err(|e| e.to_string().into())
        }
    });

    let n = script.server.len();
    sim.client("client", async move {
        for _ in 0..n {
            if let Some(mut body) = post(
                &format!("server:{SERVER_PORT}"),
                "/v1/conversations/default/messages",
            )
            .await
            {
                while let Some(Ok(_)) = body.frame().await {}
            }
        }
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
