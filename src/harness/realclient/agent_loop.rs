//! `sim explore --real-client CMD` over agent-loop scenarios (`system = "agent-loop"`): seed
//! sweeps of a real coding agent that talks to an LLM provider itself — the published Kimi
//! Code CLI — against the scenario's fake provider on real TCP (docs/real-client.md, "The agent
//! loop").
//!
//! Per seed: a plan of provider faults ([`plan`], drawn as the agent-loop swarm draws its
//! `provider` family, seeded `derive_seed(seed, "real-client")`, placed inside a fault-free
//! simulated run), the scenario's provider served in this process as `sim serve
//! --provider-only` serves it ([`LoopServed`]), the command launched with a fresh HOME and
//! work dir holding the scenario's files ([`super::launch`]), and the run judged from the
//! provider's side ([`super::loop_judge`]). Each failing seed is run again for flakiness, and
//! every seed's plan is run in simulation by the agent-loop model for comparison.
//!
//! Real time: the provider, the launch and the judge's timings read the wall clock (this is
//! a real process on real sockets); the plan and the model's run are deterministic.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt as _;
use serde_json::{Value, json};

use super::judge::Finding;
use super::launch::{Launch, launch};
use super::loop_judge::{self, Item, ModelCall};
use super::report::{ModelRun, RealReport};
use super::{RealClientOptions, RealRun, System, serve::Request, sweep};
use crate::harness::faults::Fault;
use crate::harness::invariants::{BUDGET_RESPECTED, LOOP_ENVELOPE, TURN_TERMINATES};
use crate::harness::kimi::swarm::{Baseline, STREAM_ACTIONS};
use crate::harness::kimi::world::run_once as simulate_once;
use crate::harness::report::Verdict;
use crate::harness::run::run_scenario;
use crate::harness::scenario::{InputError, Scenario};
use crate::harness::serve::{
    Exchange, ExchangeSink, ProviderOnlyOptions, ROUTE_MODEL_CALL, serve_scenario,
};
use crate::harness::swarm::{draw_plan, provider_fault, provider_stream_fault};
use crate::wire::provider::StreamFormat;

/// The families an agent-loop real-client plan draws from, each on with the swarm's
/// probability: `provider` is the agent-loop swarm's own (an error status 429/500/503/529, a
/// 429 with `Retry-After`, or a stream fault on a model call), `stream` a second stream fault
/// on a model call. Network, process, user, tool and listener faults act on turmoil or inside
/// the agent, so they are never drawn.
pub const FAMILIES: [&str; 2] = ["provider", "stream"];

/// What the model describes itself as in the report.
pub const MODEL: &str = "the agent-loop model";

/// The frames of each provider answer of a fault-free simulated run: where faults can land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopPlanner {
    pub provider_frames: Vec<u64>,
}

impl LoopPlanner {
    /// The baseline of `scenario` (seed 0, its explicit faults removed).
    pub fn new(scenario: &Scenario) -> Result<LoopPlanner, InputError> {
        let mut clean = scenario.clone();
        clean.faults.clear();
        let out = simulate_once(&clean, 0)?;
        Ok(LoopPlanner {
            provider_frames: Baseline::from_trace(&out.trace, out.end_ms).provider_frames,
        })
    }

    pub fn plan(&self, seed: u64) -> Vec<Fault> {
        plan(seed, &self.provider_frames)
    }
}

/// The plan of `seed` over answers of `provider_frames` frames.
pub fn plan(seed: u64, provider_frames: &[u64]) -> Vec<Fault> {
    draw_plan(seed, "real-client", &FAMILIES, |family, rng| match family {
        "provider" => provider_fault(rng, provider_frames, &STREAM_ACTIONS),
        _ => {
            let call = rng.random_range(0..provider_frames.len().max(1) as u32);
            provider_stream_fault(rng, provider_frames, call, &STREAM_ACTIONS)
        }
    })
}

/// One seed's provider: the scenario (its faults are the plan) served on a free loopback port
/// by a thread of this process, every request kept with the real time its response head was
/// ready and the bytes its response really carried.
pub struct LoopServed {
    /// `host:port`.
    pub listening: String,
    /// The scenario's API (`anthropic`, `openai_chat`, …).
    pub api: String,
    /// The model id the provider's catalogs list.
    pub model: String,
    /// Real time since the provider started (the zero of every `t_ms`).
    pub start: tokio::time::Instant,
    exchanges: Arc<Mutex<Vec<(u64, Exchange)>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), InputError>>>,
}

impl LoopServed {
    pub fn start(scenario: &Scenario) -> Result<LoopServed, InputError> {
        // Real time on purpose: a real client on real TCP, never a simulation.
        let start = tokio::time::Instant::now();
        let exchanges: Arc<Mutex<Vec<(u64, Exchange)>>> = Arc::default();
        let log = exchanges.clone();
        let sink: ExchangeSink = Arc::new(move |x: Exchange| {
            log.lock()
                .unwrap()
                .push((start.elapsed().as_millis() as u64, x));
        });
        let opts = ProviderOnlyOptions {
            scenario: scenario.path.clone(),
            listen: ([127, 0, 0, 1], 0).into(),
            request_log: None,
            trace: None,
        };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Value>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let s = scenario.clone();
        let thread = std::thread::spawn(move || {
            serve_scenario(
                &s,
                &opts,
                Some(sink),
                async move {
                    let _ = stop_rx.await;
                },
                move |ready| {
                    let _ = ready_tx.send(ready);
                },
            )
        });
        let Ok(ready) = ready_rx.recv() else {
            let err = match thread.join() {
                Ok(Err(e)) => e,
                _ => InputError {
                    file: scenario.path.display().to_string(),
                    line: None,
                    column: None,
                    message: "the provider stopped before it listened".into(),
                },
            };
            return Err(err);
        };
        let field = |k: &str| ready[k].as_str().unwrap_or("").to_string();
        Ok(LoopServed {
            listening: field("listening"),
            api: field("api"),
            model: field("model"),
            start,
            exchanges,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Stops the provider; its requests in the order their heads were ready.
    pub fn stop(mut self) -> Vec<(u64, Exchange)> {
        self.shutdown();
        std::mem::take(&mut *self.exchanges.lock().unwrap())
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LoopServed {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The Kimi Code CLI's provider type for an API, and the base URL it is given (the OpenAI
/// SDKs append `/chat/completions` or `/responses` to a `/v1` base; Anthropic's appends
/// `/v1/messages`).
pub fn kimi_provider(api: &str, listening: &str) -> (&'static str, String) {
    match api {
        "anthropic" => ("anthropic", format!("http://{listening}")),
        "openai_responses" => ("openai_responses", format!("http://{listening}/v1")),
        _ => ("openai", format!("http://{listening}/v1")),
    }
}

/// The environment of the command besides HOME, PATH and [`launch`]'s own (docs/real-client.md
/// "The agent loop"): the provider, for any client (`SIM_PROVIDER_*`) and in the Kimi Code
/// CLI's variables, with its HOME, telemetry, updater and catalog refresh hermetic.
fn command_env(
    scenario: &Scenario,
    seed: u64,
    served: &LoopServed,
    options: &RealClientOptions,
    home: &Path,
) -> Vec<(String, String)> {
    let section = scenario.agent_loop.as_ref();
    let turns: Vec<&str> = section
        .map(|s| s.turns.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let (ptype, base_url) = kimi_provider(&served.api, &served.listening);
    let mut env: Vec<(String, String)> = [
        ("SIM_ROOT", options.root.display().to_string()),
        ("SIM_SCENARIO", scenario.path.display().to_string()),
        ("SIM_SEED", seed.to_string()),
        ("SIM_TURN", turns.first().copied().unwrap_or("").to_string()),
        (
            "SIM_TURNS",
            serde_json::to_string(&turns).unwrap_or_default(),
        ),
        ("SIM_MODEL", served.model.clone()),
        ("SIM_PROVIDER_URL", format!("http://{}", served.listening)),
        ("SIM_PROVIDER_API", served.api.clone()),
        (
            "KIMI_CODE_HOME",
            home.join(".kimi-code").display().to_string(),
        ),
        ("KIMI_DISABLE_TELEMETRY", "1".into()),
        ("KIMI_CODE_NO_AUTO_UPDATE", "1".into()),
        ("KIMI_CODE_MODEL_CATALOG_REFRESH_ON_START", "0".into()),
        ("KIMI_MODEL_PROVIDER_TYPE", ptype.into()),
        ("KIMI_MODEL_BASE_URL", base_url),
        ("KIMI_MODEL_NAME", served.model.clone()),
        ("KIMI_MODEL_API_KEY", "sk-loopsim-real-client".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if let Some(n) = section.and_then(|s| s.max_steps).filter(|n| *n > 0) {
        env.push(("KIMI_LOOP_MAX_STEPS_PER_TURN".into(), n.to_string()));
    }
    env
}

/// The scenario's `[agent_loop.files]`, written under `work` (a leading `/` dropped).
fn write_files(scenario: &Scenario, work: &Path) -> std::io::Result<()> {
    for (k, v) in scenario.agent_loop.iter().flat_map(|s| s.files.iter()) {
        let p = work.join(k.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, v)?;
    }
    Ok(())
}

/// A model call's line in the report's request log: its call number, the calls and results
/// its request carries, and what its answer delivered.
fn summary(format: StreamFormat, c: &ModelCall) -> Value {
    let items: Vec<String> = loop_judge::items(format, &c.body)
        .into_iter()
        .map(|i| match i {
            Item::Call { id, name } => format!("call {name} {id}"),
            Item::Result { id, text } => {
                let first: String = text.lines().next().unwrap_or("").chars().take(80).collect();
                format!("result {id}: {first}")
            }
        })
        .collect();
    let a = loop_judge::answer(format, &c.served);
    json!({
        "call": c.call,
        "items": items,
        "answer": {
            "calls": a.calls.iter().map(|(id, name)| format!("{name} {id}")).collect::<Vec<_>>(),
            "stopped": a.stopped,
            "bytes": c.served.len(),
            "undecodable": a.undecodable,
        },
    })
}

/// Runs the command once against the agent-loop `scenario` with `plan`, in `dir` (emptied
/// first), and judges it.
pub fn run_once(
    scenario: &Scenario,
    seed: u64,
    plan: &[Fault],
    options: &RealClientOptions,
    dir: &Path,
) -> Result<RealRun, InputError> {
    let io_error = |what: &str, e: std::io::Error| InputError {
        file: dir.display().to_string(),
        line: None,
        column: None,
        message: format!("{what}: {e}"),
    };
    let _ = std::fs::remove_dir_all(dir);
    let home = dir.join("home");
    let work = dir.join("work");
    std::fs::create_dir_all(home.join(".kimi-code"))
        .map_err(|e| io_error("cannot create the run directory", e))?;
    std::fs::create_dir_all(&work).map_err(|e| io_error("cannot create the work dir", e))?;
    write_files(scenario, &work).map_err(|e| io_error("cannot write the scenario's files", e))?;
    let planned = super::plan::with_plan(scenario, plan);
    let served = LoopServed::start(&planned)?;
    let cli = launch(&Launch {
        command: &options.command,
        dir,
        env: command_env(scenario, seed, &served, options, &home),
        budget: Duration::from_millis(options.run_timeout_ms),
        start: served.start,
    })
    .map_err(|e| io_error(&format!("cannot start `sh -c {}`", options.command), e))?;
    let exchanges = served.stop();
    let mut calls = Vec::new();
    let mut requests = Vec::new();
    let mut provider_log = String::new();
    let mut format = None;
    for (k, (t_ms, x)) in exchanges.iter().enumerate() {
        let body: Value = if x.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&x.body)
                .unwrap_or_else(|_| json!({"_raw": String::from_utf8_lossy(&x.body)}))
        };
        let served_bytes = x.served.lock().unwrap().clone();
        provider_log += &format!(
            "{}\n",
            json!({
                "n": k + 1, "t_ms": t_ms, "method": x.method, "path": x.path,
                "status": x.status, "route": x.route, "call": x.call, "cassette": x.cassette,
                "body": body, "served": String::from_utf8_lossy(&served_bytes),
            })
        );
        let mut logged = body.clone();
        if x.route == ROUTE_MODEL_CALL {
            let f = StreamFormat::of_path(&x.path).unwrap_or(StreamFormat::OpenAiChat);
            format.get_or_insert(f);
            let c = ModelCall {
                n: k as u64 + 1,
                call: x.call,
                t_ms: *t_ms,
                path: x.path.clone(),
                status: x.status,
                body,
                served: served_bytes,
            };
            logged = summary(f, &c);
            calls.push(c);
        }
        requests.push(Request {
            n: k as u64 + 1,
            t_ms: *t_ms,
            method: x.method.clone(),
            path: x.path.clone(),
            body: logged,
            status: x.status,
        });
    }
    let format = format.unwrap_or(StreamFormat::OpenAiChat);
    let success = loop_judge::outcome(&cli) == "success";
    let verdicts: Vec<(&'static str, Vec<Finding>)> = vec![
        (
            LOOP_ENVELOPE,
            loop_judge::loop_envelope(format, &calls, plan, success),
        ),
        (BUDGET_RESPECTED, loop_judge::budget(&calls, &cli, plan)),
        (
            TURN_TERMINATES,
            loop_judge::terminates(&cli, options.run_timeout_ms),
        ),
        (super::judge::CLI_RESULT, loop_judge::cli_result(&cli)),
    ];
    let run = RealRun {
        scenario: scenario.path.display().to_string(),
        seed,
        plan: plan.to_vec(),
        verdicts,
        requests,
        cli,
        dir: dir.to_path_buf(),
    };
    super::report::write_run_files(&run, &[]);
    let _ = std::fs::write(dir.join("provider.jsonl"), provider_log);
    Ok(run)
}

/// The model's turn outcome in the report's terms.
fn model_outcome(outcomes: &[String]) -> String {
    if outcomes.is_empty() {
        "none".into()
    } else if outcomes.iter().all(|o| o.starts_with("completed")) {
        "success".into()
    } else if outcomes.iter().any(|o| o.starts_with("failed")) {
        "error".into()
    } else {
        "interrupted".into()
    }
}

/// The plan run in simulation by the agent-loop model: which of the judged invariants it
/// breaks, and how its turn ended.
pub fn model_run(scenario: &Scenario, seed: u64, plan: &[Fault]) -> Result<ModelRun, InputError> {
    let s = super::plan::with_plan(scenario, plan);
    let report = run_scenario(&s, seed, 1)?;
    let failed: Vec<String> = report
        .invariants
        .iter()
        .filter(|(id, v)| !v.is_empty() && loop_judge::CHECKED.contains(id))
        .map(|(id, _)| id.to_string())
        .collect();
    let message = report
        .invariants
        .iter()
        .find(|(_, v)| !v.is_empty())
        .and_then(|(_, v)| v.first())
        .map(|v| v.message.clone())
        .unwrap_or_default();
    Ok(ModelRun {
        outcome: model_outcome(&report.turn_outcomes),
        failed,
        verdict: match &report.verdict {
            Verdict::Pass => "pass".into(),
            other => other
                .failure_kind()
                .map(|k| k.as_str().to_string())
                .unwrap_or_default(),
        },
        outcomes: report.turn_outcomes.clone(),
        message,
        profile: MODEL.into(),
    })
}

/// Runs the sweep over agent-loop scenarios. `progress(done, total, what)` after every run.
pub fn explore(
    scenarios: &[Scenario],
    options: &RealClientOptions,
    progress: &(dyn Fn(u64, u64, &str) + Sync),
) -> Result<RealReport, InputError> {
    if let Some(s) = scenarios.iter().find(|s| !s.is_agent_loop()) {
        return Err(s.error_at(
            s.scenario.system.span(),
            "--real-client sweeps either Letta scenarios or agent-loop ones; this one is not an agent-loop scenario (system = \"agent-loop\") but others are",
        ));
    }
    let planners: Vec<LoopPlanner> = scenarios
        .iter()
        .map(LoopPlanner::new)
        .collect::<Result<_, _>>()?;
    let work: Vec<(usize, u64)> = (0..scenarios.len())
        .flat_map(|i| options.seeds.clone().map(move |s| (i, s)))
        .collect();
    let system = System {
        plan: &|i, seed| planners[i].plan(seed),
        run_once,
        model_run,
        outcome: loop_judge::outcome,
        name_in_progress: true,
        model: MODEL,
    };
    sweep(scenarios, &work, options, &system, progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_a_function_of_the_seed_and_only_provider_faults() {
        let frames = [12, 9, 4];
        let mut faulted = 0;
        for seed in 0..200 {
            let p = plan(seed, &frames);
            assert_eq!(p, plan(seed, &frames));
            faulted += usize::from(!p.is_empty());
            for f in &p {
                assert!(
                    matches!(
                        f,
                        Fault::ProviderError { .. } | Fault::ProviderStream { .. }
                    ),
                    "not a provider fault: {f}"
                );
                if let Fault::ProviderStream { call, frame, .. } = f {
                    assert!(*frame >= 1 && *frame <= frames[*call as usize], "{f}");
                }
            }
        }
        // Each family is on half the time: about three seeds in four have a fault.
        assert!((120..180).contains(&faulted), "{faulted} of 200");
    }

    #[test]
    fn the_cli_is_pointed_at_the_provider_by_api() {
        assert_eq!(
            kimi_provider("anthropic", "127.0.0.1:9"),
            ("anthropic", "http://127.0.0.1:9".to_string())
        );
        assert_eq!(
            kimi_provider("openai_chat", "127.0.0.1:9").1,
            "http://127.0.0.1:9/v1"
        );
    }
}
