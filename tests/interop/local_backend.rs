//! The real Letta Code CLI's local backend (`LETTA_LOCAL_BACKEND_EXPERIMENTAL=1`,
//! letta-protocol.md §7, letta-tests-and-real-client.md B.7.3) against `sim serve
//! --provider-only`, recorded through `sim record --layer provider`; the cassette is checked
//! (layer, frames, scrubbing) and its model calls are replayed as the fake provider's cassettes
//! in a simulated run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loopsim::cassette::{Body, EndKind, Layer, Recording, ResponseBody};
use loopsim::check::Check;
use loopsim::harness::record::{RecordMode, RecordOptions, RecordSummary, Recorder};
use loopsim::harness::serve::{ProviderOnlyOptions, serve_provider};
use loopsim::wire::provider::StreamFormat;
use serde_json::Value;

use crate::clients::{Served, run_cli_env, setup, work_dir};
use crate::common::repo;

const PROMPT: &str = "Please run the marker command.";
/// An LM Studio handle: the local backend asks the provider's LM Studio catalog for the model.
const MODEL: &str = "lmstudio/gpt-4o-mini";
/// A key the CLI sends to the provider (`LMSTUDIO_API_KEY`); it must never reach the cassette.
const SECRET: &str = "sk-loopsim-planted-0123456789abcdefghij";

/// `sim serve --provider-only` on a thread of this process: its ready line and request log.
fn start_provider(dir: &Path) -> (Value, PathBuf) {
    start_provider_with(dir, repo().join("tests/interop/provider_only.toml"))
        .unwrap_or_else(|e| panic!("sim serve --provider-only failed: {e}"))
}

pub fn start_provider_with(dir: &Path, scenario: PathBuf) -> Result<(Value, PathBuf), String> {
    let log = dir.join("provider.jsonl");
    let opts = ProviderOnlyOptions {
        scenario,
        listen: "127.0.0.1:0".parse().unwrap(),
        request_log: Some(log.clone()),
        trace: Some(dir.join("provider-trace.txt")),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let tx2 = tx.clone();
        if let Err(e) = serve_provider(opts, move |ready| {
            let _ = tx2.send(Ok(ready));
        }) {
            let _ = tx.send(Err(e.to_string()));
        }
    });
    let ready = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("sim serve --provider-only got ready or failed")?;
    Ok((ready, log))
}

/// tests/interop/provider_only.toml with its cassettes by absolute path and `extra` appended,
/// written into `dir`.
fn scenario_with(dir: &Path, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("tests/interop/provider_only.toml"))
        .unwrap()
        .replace(
            "\"../../cassettes/",
            &format!("\"{}/cassettes/", repo().display()),
        );
    let path = dir.join("scenario.toml");
    std::fs::write(&path, format!("{text}\n{extra}")).unwrap();
    path
}

#[tokio::test]
async fn provider_only_answers_catalogs_without_consuming_a_response_and_logs_every_request() {
    use crate::record::proxy::send;

    let dir = work_dir()
        .join("runs")
        .join(format!("provider-only-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = scenario_with(
        &dir,
        "[[faults]]\nkind = \"provider_error\"\ncall = 1\nstatus = 529\n",
    );
    let (ready, log) = start_provider_with(&dir, scenario).unwrap();
    assert_eq!(ready["faults"].as_array().unwrap().len(), 1, "{ready}");
    let addr: SocketAddr = ready["listening"].as_str().unwrap().parse().unwrap();
    let json = [("content-type", "application/json")];
    let post = |path: &'static str, body: Value| {
        send(addr, "POST", path, &json, body.to_string().into_bytes())
    };

    let lm = send(addr, "GET", "/api/v0/models", &[], Vec::new()).await;
    assert_eq!(lm.status, 200);
    assert_eq!(lm.json()["data"][0]["id"], "gpt-4o-mini");
    assert_eq!(lm.json()["data"][0]["max_context_length"], 200_000);
    let models = send(addr, "GET", "/v1/models", &[], Vec::new()).await;
    assert_eq!(models.json()["data"][0]["id"], "gpt-4o-mini");
    let missing = send(addr, "GET", "/api/tags", &[], Vec::new()).await;
    assert_eq!(missing.status, 404);
    assert!(
        missing.text().contains("no route for GET /api/tags"),
        "{}",
        missing.text()
    );
    // Invalid for the API: refused with its text, not counted as a call.
    let stray = post(
        "/v1/chat/completions",
        serde_json::json!({"model": "gpt-4o-mini", "messages": [
        {"role": "tool", "tool_call_id": "c", "content": "r"}]}),
    )
    .await;
    assert_eq!(stray.status, 400);
    assert!(
        stray
            .text()
            .contains("must be a response to a preceeding message"),
        "{}",
        stray.text()
    );
    let user = serde_json::json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let first = post("/v1/chat/completions", user.clone()).await;
    assert_eq!(first.status, 200);
    assert!(first.text().contains("call_fake0001"), "{}", first.text());
    // Another API's path: refused, nothing consumed (a body valid for that API, or its own
    // validation would refuse it first).
    let wrong = post(
        "/v1/messages",
        serde_json::json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(wrong.status, 404, "{}", wrong.text());
    // Call 1 is the scenario's provider_error; the cassette answers call 2; then none is left.
    assert_eq!(post("/v1/chat/completions", user.clone()).await.status, 529);
    let second = post("/v1/chat/completions", user.clone()).await;
    assert!(
        second.text().contains("chatcmpl-fake0002"),
        "{}",
        second.text()
    );
    let none = post("/v1/chat/completions", user).await;
    assert_eq!(none.status, 500);
    assert!(
        none.text().contains("no recorded response left"),
        "{}",
        none.text()
    );

    let logged = lines(&log);
    let summary: Vec<String> = logged
        .iter()
        .map(|l| {
            let cassette = l["cassette"]
                .as_str()
                .map(|c| c.rsplit('/').next().unwrap().to_string());
            format!(
                "{} {} {} {} {:?} {cassette:?}",
                l["method"].as_str().unwrap(),
                l["path"].as_str().unwrap(),
                l["status"],
                l["route"].as_str().unwrap(),
                l["call"].as_u64()
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            "GET /api/v0/models 200 catalog None None",
            "GET /v1/models 200 catalog None None",
            "GET /api/tags 404 not_found None None",
            "POST /v1/chat/completions 400 model_call None None",
            "POST /v1/chat/completions 200 model_call Some(0) Some(\"openai_bash_echo_tool_call.jsonl\")",
            "POST /v1/messages 404 model_call None None",
            "POST /v1/chat/completions 529 model_call Some(1) Some(\"<fault>\")",
            "POST /v1/chat/completions 200 model_call Some(2) Some(\"openai_done_tool_said.jsonl\")",
            "POST /v1/chat/completions 500 model_call Some(3) Some(\"<none>\")",
        ]
    );
    assert_eq!(logged[4]["body"]["messages"][0]["content"], "hi");
    assert_eq!(logged[0]["n"], 1);
}

#[test]
fn provider_only_refuses_a_fault_it_cannot_apply_naming_its_line() {
    let dir = work_dir()
        .join("runs")
        .join(format!("provider-only-fault-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = scenario_with(&dir, "[[faults]]\nkind = \"busy_on_send\"\nsend = 1\n");
    let err = start_provider_with(&dir, scenario).unwrap_err();
    let after = err.split("scenario.toml:").nth(1).unwrap_or("");
    assert!(
        after.starts_with(|c: char| c.is_ascii_digit()),
        "no line: {err}"
    );
    assert!(err.contains("is not a provider fault"), "{err}");
}

/// A recorder on a thread of its own; send on the channel to stop it.
fn spawn_recorder(
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

pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn the_real_cli_local_backend_recorded_through_sim_record_then_replayed_in_a_simulation() {
    let Some(cli) = setup() else { return };
    let dir = work_dir()
        .join("runs")
        .join(format!("local-backend-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (ready, provider_log) = start_provider(&dir);
    assert_eq!(ready["provider_only"], true);
    assert_eq!(ready["model"], "gpt-4o-mini");
    let provider_url = ready["base_url"].as_str().unwrap().to_string();

    let out = dir.join("provider-session.jsonl");
    let mut opts = RecordOptions::new(Layer::Provider, &provider_url, &out);
    opts.mode = RecordMode::All;
    opts.format = Some(StreamFormat::OpenAiChat);
    let (addr, stop, recorder) = spawn_recorder(opts);
    let lmstudio = format!("http://{addr}/v1");
    // The CLI talks to no Letta server in local mode; a loopback URL nobody serves keeps it
    // offline (reference B.1: a non-cloud URL skips the cloud catalog).
    let served = Served {
        ready: ready.clone(),
        base_url: "http://127.0.0.1:9".into(),
        log: provider_log.clone(),
        dir: dir.clone(),
    };
    let run = run_cli_env(
        &cli,
        &served,
        &["-p", PROMPT, "-m", MODEL, "--output-format", "stream-json"],
        &[
            ("LETTA_LOCAL_BACKEND_EXPERIMENTAL", "1"),
            ("LMSTUDIO_BASE_URL", &lmstudio),
            ("LMSTUDIO_API_KEY", SECRET),
        ],
        |_| {},
    );
    stop.send(()).unwrap();
    let summary = recorder.join().unwrap();
    let result = run.result();
    assert_eq!(
        result["subtype"], "success",
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert_eq!(result["result"], "Done. Tool said: e2e-ok");
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert_eq!((summary.failed, summary.refused), (0, 0), "{summary:?}");

    // The provider saw the catalog requests, then the two model calls, each answered by its
    // cassette in order; the catalogs consumed none.
    let logged = lines(&provider_log);
    let calls: Vec<&Value> = logged
        .iter()
        .filter(|l| l["route"] == "model_call")
        .collect();
    assert_eq!(calls.len(), 2, "{logged:#?}");
    for (i, c) in calls.iter().enumerate() {
        assert_eq!(c["path"], "/v1/chat/completions");
        assert_eq!(c["status"], 200);
        assert_eq!(c["call"], i);
    }
    assert!(
        calls[0]["cassette"]
            .as_str()
            .unwrap()
            .ends_with("openai_bash_echo_tool_call.jsonl")
    );
    assert!(
        calls[1]["cassette"]
            .as_str()
            .unwrap()
            .ends_with("openai_done_tool_said.jsonl")
    );
    let catalogs: Vec<&Value> = logged.iter().filter(|l| l["route"] == "catalog").collect();
    assert!(
        catalogs.iter().any(|l| l["path"] == "/api/v0/models"),
        "{logged:#?}"
    );
    assert!(
        logged.iter().all(|l| l["route"] != "not_found"),
        "{logged:#?}"
    );
    // The CLI's second call carries the tool's result for the first call's tool call.
    let roles = |c: &Value| -> Vec<String> {
        c["body"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(roles(calls[0]), ["system", "user"]);
    assert_eq!(roles(calls[1]), ["system", "user", "assistant", "tool"]);
    let tool = &calls[1]["body"]["messages"][3];
    assert_eq!(tool["tool_call_id"], "call_fake0001");
    assert!(tool["content"].to_string().contains("e2e-ok"), "{tool}");

    // The cassette: a provider session of the same requests, the model calls' SSE frames as
    // served, no secret anywhere.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains(SECRET), "the key reached the cassette");
    let r = Recording::load(&out).unwrap();
    assert_eq!(r.header().layer, Layer::Provider);
    assert_eq!(r.header().format, Some(StreamFormat::OpenAiChat));
    assert_eq!(r.exchanges().len(), logged.len());
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
    let model_calls: Vec<usize> = (1..=r.exchanges().len())
        .filter(|n| r.exchanges()[n - 1].path == "/v1/chat/completions")
        .collect();
    assert_eq!(model_calls.len(), 2);
    for &n in &model_calls {
        let x = &r.exchanges()[n - 1];
        let answer = x.answer().unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.end.kind, EndKind::Clean);
        let ResponseBody::Sse(frames) = &answer.body else {
            panic!("exchange {n} answered without SSE")
        };
        assert_eq!(frames.len(), 8, "exchange {n}");
        assert_eq!(
            frames.last().unwrap().frame.as_event().unwrap().data,
            "[DONE]"
        );
        let Body::Json(body) = &x.request.body else {
            panic!("exchange {n}: a JSON request")
        };
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(body["stream"], true);
        // A secret-shaped header the CLI sent is recorded scrubbed.
        for (k, v) in &x.request.headers {
            assert!(!v.contains(SECRET), "header {k} kept the key");
        }
    }
    let auth: Vec<&String> = r
        .exchanges()
        .iter()
        .flat_map(|x| x.request.headers.iter())
        .filter(|(k, _)| k == "authorization")
        .map(|(_, v)| v)
        .collect();
    println!(
        "recorded {} exchanges ({} model calls); authorization headers as recorded: {auth:?}",
        r.exchanges().len(),
        model_calls.len()
    );
    assert!(!auth.is_empty(), "the CLI sent its LM Studio key");

    // The recorded model calls, as the fake provider's cassettes of a simulated run: the
    // simulated server and client run the same turn to the end.
    let replay_dir = dir.join("replay");
    std::fs::create_dir_all(&replay_dir).unwrap();
    let mut names = Vec::new();
    for (i, &n) in model_calls.iter().enumerate() {
        let path = replay_dir.join(format!("call{i}.jsonl"));
        r.stream(n).unwrap().save(&path).unwrap();
        names.push(path);
    }
    let scenario = std::fs::read_to_string(repo().join("tests/interop/provider_only.toml"))
        .unwrap()
        .replace(
            "\"../../cassettes/provider/openai_bash_echo_tool_call.jsonl\"",
            &format!("{:?}", names[0].display().to_string()),
        )
        .replace(
            "\"../../cassettes/provider/openai_done_tool_said.jsonl\"",
            &format!("{:?}", names[1].display().to_string()),
        );
    let scenario_path = replay_dir.join("replayed.toml");
    std::fs::write(&scenario_path, scenario).unwrap();
    let report = Check::load(&scenario_path).unwrap().run_seed(0).unwrap();
    assert!(report.passed(), "{}", report.render());
    for (i, name) in names.iter().enumerate() {
        let served = format!("provider_serve call={i} cassette={}", name.display());
        assert!(report.trace_text.contains(&served), "{}", report.trace_text);
    }
    assert!(
        report
            .trace_text
            .contains("tool_executed tool_call_id=call_fake0001 tool=Bash"),
        "{}",
        report.trace_text
    );
}
