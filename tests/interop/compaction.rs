//! The real Letta Code CLI's own compaction as the judge of the `local` profile's
//! (letta-protocol.md §8, letta-tests-and-real-client.md B.7): the CLI's local backend
//! (`LETTA_LOCAL_BACKEND_EXPERIMENTAL=1`) runs a six-turn conversation against `sim serve
//! --provider-only`, whose LM Studio catalog gives the model a 40,000-token window (threshold
//! 32,000, §8.1). Every model request it sends is logged; then the pure functions of
//! `loopsim::model::letta::server::compaction`, given the same conversation, must decide to
//! compact at the same turns and phases, cut at the same message, send the same summariser
//! requests (system prompt and transcript), pack the same summary message and report the
//! same `compaction_stats`.
//!
//! The conversation (each turn one `letta -p` process on the same conversation, the CLI
//! putting its `<system-reminder>` parts in front of each user text):
//!
//! | turn | user text | what the CLI does |
//! |---|---|---|
//! | 1, 2 | 8,000 characters | no compaction (estimates about 28,300 and 30,600) |
//! | 3 | 8,000 characters | preflight compaction (about 32,900 > 32,000): sliding window cuts at the first assistant message |
//! | 4 | 116,000 characters | preflight compaction: the sliding window finds no cut under the goal (its eviction sequence runs out), `all` summarises everything |
//! | 5 | short | the answer reports 33,000 tokens of usage: post-turn compaction (source `usage`), sliding window over `[summary, assistant, user, assistant]` |
//! | 6 | short | no compaction: the 33,000-token usage is older than the newest summary, so it is no anchor (§8.4) |
//!
//! Every answer but turn 5's reports zero usage, so the estimates are the unanchored ones
//! (system prompt + messages + client tools, chars / 4), which the CLI also reports as the
//! turn's `usage_statistics.context_tokens`; the test checks the model's estimate against it.

use std::path::{Path, PathBuf};

use loopsim::model::letta::server::compact::summariser_body;
use loopsim::model::letta::server::compaction::estimate::{
    CtxMessage, CtxToolCall, Role, provider_estimate,
};
use loopsim::model::letta::server::compaction::summary::{CompactionStats, package_summary};
use loopsim::model::letta::server::compaction::{
    self, Mode, Outcome, Settings, Summariser, SummariserError, SummaryRequest, Trigger,
    over_threshold, should_compact,
};
use loopsim::wire::letta::LettaChunk;
use loopsim::wire::provider::ProviderFormat;
use serde_json::{Value, json};

use crate::clients::{Served, run_cli_env, setup, work_dir};
use crate::local_backend::{lines, start_provider_with};

/// A stand-in for the packed summary's `time`, as long as the CLI's ISO time (the estimate
/// counts its characters); both are normalised before comparing.
const PACKED_TIME: &str = "2026-01-01T00:00:00.000Z";

/// The model's window, served as the LM Studio catalog's `max_context_length`.
const WINDOW: u64 = 40_000;
const MODEL: &str = "lmstudio/gpt-4o-mini";
const AGENT: &str = "agent-00000000-0000-4000-8000-0000000c0a11";

/// One answer the fake provider serves, in call order.
struct Answer {
    text: &'static str,
    usage: u64,
}

/// The answers in the order the CLI asks for them: turn answers and summaries interleaved
/// where the CLI compacts (the test fails if it asks in another order: a summary would answer
/// a turn, or the other way round).
static ANSWERS: [Answer; 9] = [
    Answer {
        text: "Noted the first block.",
        usage: 0,
    },
    Answer {
        text: "Noted the second block.",
        usage: 0,
    },
    Answer {
        text: "Summary: the user sent a block of A characters.",
        usage: 0,
    },
    Answer {
        text: "Noted the third block.",
        usage: 0,
    },
    Answer {
        text: "Summary: blocks of A, B, C and a very long block of D were sent.",
        usage: 0,
    },
    Answer {
        text: "Noted the long block.",
        usage: 0,
    },
    Answer {
        text: "Turn five answered.",
        usage: 33_000,
    },
    Answer {
        text: "Summary: an earlier summary of four blocks.",
        usage: 0,
    },
    Answer {
        text: "Turn six answered.",
        usage: 0,
    },
];

/// An OpenAI Chat cassette of one text answer with the given usage.
fn cassette(i: usize, a: &Answer) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": format!("chatcmpl-compact{i}"), "object": "chat.completion.chunk",
               "created": 0, "model": "gpt-4o-mini",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let usage = json!({"id": format!("chatcmpl-compact{i}"), "object": "chat.completion.chunk",
        "created": 0, "model": "gpt-4o-mini", "choices": [],
        "usage": {"prompt_tokens": a.usage, "completion_tokens": 0, "total_tokens": a.usage}})
    .to_string();
    let frames = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": a.text}), Value::Null),
        chunk(json!({}), json!("stop")),
        usage,
        "[DONE]".to_string(),
    ];
    let mut out = vec![
        json!({"loopsim_cassette": 1, "layer": "provider", "format": "openai_chat",
               "source": "tests/interop/compaction.rs", "status": 200,
               "content_type": "text/event-stream",
               "note": "written by the compaction conformance test: one text answer"})
        .to_string(),
    ];
    for (n, f) in frames.iter().enumerate() {
        out.push(json!({"t": n * 10, "data": f}).to_string());
    }
    out.push(json!({"t": frames.len() * 10, "end": "clean"}).to_string());
    out.join("\n") + "\n"
}

/// The provider-only scenario: the answers as cassettes, the agent's window for the catalog.
fn write_scenario(dir: &Path) -> PathBuf {
    let mut paths = Vec::new();
    for (i, a) in ANSWERS.iter().enumerate() {
        let p = dir.join(format!("answer{i}.jsonl"));
        std::fs::write(&p, cassette(i, a)).unwrap();
        paths.push(format!("{:?}", p.display().to_string()));
    }
    let text = format!(
        "[scenario]\nname = \"interop-compaction\"\ndescription = \"the real CLI's compaction\"\n\
         system = \"letta\"\n\n[provider]\napi = \"openai_chat\"\nresponses = [{}]\n\n\
         [agent]\nid = \"{AGENT}\"\nmodel = \"{MODEL}\"\ncontext_window_limit = {WINDOW}\n\n\
         [client]\nturns = [\"unused\"]\n",
        paths.join(", ")
    );
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The user texts of the six turns.
fn turns() -> Vec<String> {
    vec![
        "A".repeat(8000),
        "B".repeat(8000),
        "C".repeat(8000),
        "D".repeat(116_000),
        "Turn five: a short question.".into(),
        "Turn six: another short question.".into(),
    ]
}

/// A message of a chat-completions request as the compaction code sees it.
fn ctx_of(m: &Value) -> CtxMessage {
    let texts = |c: &Value| -> (Vec<String>, u64) {
        match c {
            Value::String(s) => (vec![s.clone()], 0),
            Value::Array(parts) => (
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_string))
                    .collect(),
                parts
                    .iter()
                    .filter(|p| p["type"] == "image_url" || p["type"] == "image")
                    .count() as u64,
            ),
            _ => (Vec::new(), 0),
        }
    };
    match m["role"].as_str().unwrap() {
        "user" => {
            let (parts, images) = texts(&m["content"]);
            CtxMessage {
                images,
                parts: if parts.len() > 1 {
                    parts.clone()
                } else {
                    Vec::new()
                },
                ..CtxMessage::new(Role::User, &parts.concat())
            }
        }
        "assistant" => {
            let (parts, _) = texts(&m["content"]);
            let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
            CtxMessage {
                tool_calls: calls
                    .iter()
                    .map(|c| CtxToolCall {
                        id: c["id"].as_str().unwrap_or("").into(),
                        name: c["function"]["name"].as_str().unwrap().into(),
                        arguments: c["function"]["arguments"].as_str().unwrap().into(),
                    })
                    .collect(),
                ..CtxMessage::new(Role::Assistant, &parts.concat())
            }
        }
        "tool" => {
            let (parts, images) = texts(&m["content"]);
            CtxMessage {
                images,
                tool_call_id: m["tool_call_id"].as_str().map(str::to_string),
                ..CtxMessage::new(Role::ToolResult, &parts.join("\n"))
            }
        }
        other => panic!("unexpected role {other} in {m}"),
    }
}

/// What of a message the comparison looks at: role, text, parts, images, calls, results.
fn shape(m: &CtxMessage) -> String {
    let calls: Vec<String> = m
        .tool_calls
        .iter()
        .map(|c| format!("{}:{}({})", c.id, c.name, c.arguments))
        .collect();
    format!(
        "{:?} text={:?} parts={} images={} calls={calls:?} result_of={:?}",
        m.role,
        normalise_time(&m.text),
        m.parts.len(),
        m.images,
        m.tool_call_id
    )
}

/// The packed summary's `time` (wall clock in the CLI) replaced by a placeholder.
fn normalise_time(s: &str) -> String {
    match serde_json::from_str::<Value>(s) {
        Ok(mut v) if v["type"] == "system_alert" => {
            v["time"] = json!("<time>");
            v.to_string()
        }
        _ => s.to_string(),
    }
}

/// The summariser of the model side: records each request and answers with the summary the
/// CLI was served for its summariser call.
struct CliSummaries {
    answers: std::vec::IntoIter<String>,
    requests: Vec<SummaryRequest>,
}

impl Summariser for CliSummaries {
    fn summarise(
        &mut self,
        req: SummaryRequest,
    ) -> futures::future::BoxFuture<'_, Result<String, SummariserError>> {
        self.requests.push(req);
        let next = self.answers.next().expect("a served summary");
        Box::pin(async move { Ok(next) })
    }
}

/// The tool definitions as the CLI's local backend counts them (`JSON.stringify` of the
/// request's `client_tools`: name, description, parameters).
fn tools_json(body: &Value) -> String {
    let tools: Vec<Value> = body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    json!({"name": t["function"]["name"], "description": t["function"]["description"],
                           "parameters": t["function"]["parameters"]})
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::to_string(&tools).unwrap()
}

/// A summariser request: no tools, a system prompt and one user message (the transcript).
fn is_summariser(body: &Value) -> bool {
    body.get("tools").is_none() && body["messages"].as_array().is_some_and(|m| m.len() == 2)
}

/// One compaction the CLI did, as the test saw it.
struct Seen<'a> {
    turn: usize,
    phase: &'static str,
    summariser: Vec<&'a Value>,
    stats: Value,
}

#[test]
fn the_local_profile_compacts_where_the_real_cli_does_with_the_same_summariser_requests() {
    let Some(cli) = setup() else { return };
    let dir = work_dir()
        .join("runs")
        .join(format!("compaction-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = write_scenario(&dir);
    let (ready, log) = start_provider_with(&dir, scenario).unwrap();
    let base = ready["base_url"].as_str().unwrap().to_string();
    let served = Served {
        ready: ready.clone(),
        base_url: "http://127.0.0.1:9".into(),
        log: log.clone(),
        dir: dir.clone(),
    };
    let lmstudio = format!("{base}/v1");
    let env = [
        ("LETTA_LOCAL_BACKEND_EXPERIMENTAL", "1"),
        ("LMSTUDIO_BASE_URL", lmstudio.as_str()),
    ];

    // Drive the CLI: one process per turn, the first one creating the conversation.
    let mut conversation: Option<String> = None;
    let mut per_turn_calls: Vec<Vec<Value>> = Vec::new();
    let mut runs = Vec::new();
    for (k, text) in turns().iter().enumerate() {
        let before = model_calls(&log).len();
        let mut args = vec![
            "-p",
            text.as_str(),
            "-m",
            MODEL,
            "--output-format",
            "stream-json",
        ];
        if let Some(c) = &conversation {
            args.extend(["--conversation", c.as_str()]);
        }
        let run = run_cli_env(&cli, &served, &args, &env, |_| {});
        let result = run.result().clone();
        assert_eq!(
            result["subtype"],
            "success",
            "turn {}: stdout:\n{}\nstderr:\n{}",
            k + 1,
            run.stdout,
            run.stderr
        );
        conversation = Some(result["conversation_id"].as_str().unwrap().to_string());
        per_turn_calls.push(model_calls(&log)[before..].to_vec());
        runs.push(run);
    }
    let all_calls: usize = per_turn_calls.iter().map(Vec::len).sum();
    assert_eq!(all_calls, ANSWERS.len(), "every answer served once");

    // What the CLI did: per turn, the summariser calls before its model request (preflight)
    // and after it (post-turn), with the stats its summary_message chunk reported.
    let mut seen: Vec<Seen> = Vec::new();
    for (k, calls) in per_turn_calls.iter().enumerate() {
        let model_at = calls
            .iter()
            .position(|c| !is_summariser(&c["body"]))
            .expect("each turn calls the model");
        assert!(
            calls[model_at + 1..]
                .iter()
                .all(|c| is_summariser(&c["body"])),
            "turn {}: one model request per turn",
            k + 1
        );
        let summaries = runs[k].messages("summary_message");
        let mut stats = summaries.iter().map(|s| s["compaction_stats"].clone());
        for (phase, part) in [
            ("preflight", &calls[..model_at]),
            ("post_turn", &calls[model_at + 1..]),
        ] {
            if !part.is_empty() {
                seen.push(Seen {
                    turn: k + 1,
                    phase,
                    summariser: part.iter().map(|c| &c["body"]).collect(),
                    stats: stats.next().expect("a summary_message per compaction"),
                });
            }
        }
        assert!(stats.next().is_none(), "turn {}: extra summaries", k + 1);
    }
    // The local backend's chunks as the CLI printed them: stop_reason and usage_statistics
    // carry seq ids like every recorded chunk (§7.4), which the wire types read; the post-turn
    // pair comes between usage_statistics and stop_reason (§1.6).
    for (k, run) in runs.iter().enumerate() {
        for e in run.of_type("message") {
            let chunk = LettaChunk::from_json(&e.to_string()).unwrap();
            assert_eq!(chunk.seq_id(), e["seq_id"].as_u64(), "turn {}: {e}", k + 1);
            if matches!(
                chunk,
                LettaChunk::StopReason(_) | LettaChunk::UsageStatistics(_)
            ) {
                assert!(chunk.seq_id().is_some(), "turn {}: {e}", k + 1);
                assert_eq!(chunk.run_id(), e["run_id"].as_str(), "turn {}: {e}", k + 1);
            }
        }
    }
    let types = |k: usize| -> Vec<&str> {
        runs[k]
            .of_type("message")
            .iter()
            .map(|e| e["message_type"].as_str().unwrap())
            .collect()
    };
    assert_eq!(
        types(4),
        [
            "assistant_message",
            "usage_statistics",
            "event_message",
            "summary_message",
            "stop_reason"
        ]
    );
    assert_eq!(
        types(2)[..3],
        ["event_message", "summary_message", "assistant_message"]
    );
    let observed: Vec<(usize, &str)> = seen.iter().map(|s| (s.turn, s.phase)).collect();
    assert_eq!(
        observed,
        [(3, "preflight"), (4, "preflight"), (5, "post_turn")],
        "the conversation was built to make the CLI compact at these turns"
    );

    // The model side, from the same conversation: the transcript as the local backend keeps
    // it, each turn's user message as the CLI stored it, each answer from the cassette.
    let stored = stored_user_messages(&dir.join("home"), conversation.as_deref().unwrap());
    assert_eq!(
        stored.len(),
        turns().len(),
        "one stored user message per turn"
    );
    let mut transcript: Vec<CtxMessage> = Vec::new();
    let mut clock = 0u64;
    let mut summaries = ANSWERS
        .iter()
        .enumerate()
        .filter(|(i, _)| [2, 4, 7].contains(i))
        .map(|(_, a)| a.text.to_string());
    let mut answers = ANSWERS
        .iter()
        .enumerate()
        .filter(|(i, _)| ![2, 4, 7].contains(i))
        .map(|(_, a)| a);
    let mut predicted: Vec<(usize, &str)> = Vec::new();
    let mut seen_iter = seen.iter();
    for (k, calls) in per_turn_calls.iter().enumerate() {
        let turn = k + 1;
        let request = &calls.iter().find(|c| !is_summariser(&c["body"])).unwrap()["body"];
        let msgs = request["messages"].as_array().unwrap();
        let system = msgs[0]["content"].as_str().unwrap();
        let tools = tools_json(request);
        clock += 1;
        // The turn's user message as the CLI stored it (an `all` compaction can summarise it
        // away before the model request); when the request still ends with it, the same.
        let mut user = ctx_of(&stored[k]);
        let last = ctx_of(msgs.last().unwrap());
        if last.role == Role::User && !last.text.starts_with("{\"type\":\"system_alert\"") {
            assert_eq!(
                shape(&last),
                shape(&user),
                "turn {turn}: the stored user message is the one sent"
            );
        }
        user.at_ms = clock;
        transcript.push(user);

        // Preflight (§8.1 a): the provider estimate against the threshold.
        let estimate = provider_estimate(system, &transcript, &tools);
        let cli_usage = runs[k].messages("usage_statistics");
        let answer = answers.next().unwrap();
        if answer.usage == 0 {
            assert_eq!(
                estimate,
                cli_usage[0]["context_tokens"].as_u64(),
                "turn {turn}: the preflight estimate"
            );
        }
        let cli_compacted = |phase: &str| seen.iter().any(|s| s.turn == turn && s.phase == phase);
        assert_eq!(
            should_compact(estimate, Some(WINDOW)),
            cli_compacted("preflight"),
            "turn {turn}: compact before the model call? (estimate {estimate:?}, window {WINDOW})"
        );
        if should_compact(estimate, Some(WINDOW)) {
            predicted.push((turn, "preflight"));
            let s = seen_iter.next().unwrap();
            transcript = compact_like_the_cli(&transcript, s, &mut summaries, &mut clock);
        }

        // The model request carries the transcript the model side has now.
        let ours: Vec<String> = transcript.iter().map(shape).collect();
        let theirs: Vec<String> = msgs[1..].iter().map(|m| shape(&ctx_of(m))).collect();
        assert_eq!(ours, theirs, "turn {turn}: the messages sent to the model");

        // The answer, then the post-turn check (§8.1 b): usage, else the estimate with it.
        clock += 1;
        let mut reply = CtxMessage::new(Role::Assistant, answer.text);
        reply.usage = (answer.usage > 0).then_some(answer.usage);
        reply.at_ms = clock;
        transcript.push(reply);
        let tokens = reply_tokens(answer.usage, system, &transcript, &tools);
        assert_eq!(
            over_threshold(tokens, Some(WINDOW)),
            cli_compacted("post_turn"),
            "turn {turn}: compact after the answer? ({tokens} tokens, window {WINDOW})"
        );
        if over_threshold(tokens, Some(WINDOW)) {
            predicted.push((turn, "post_turn"));
            let s = seen_iter.next().unwrap();
            transcript = compact_like_the_cli(&transcript, s, &mut summaries, &mut clock);
        }
    }
    assert_eq!(
        predicted, observed,
        "compaction at the same turns and phases"
    );
    println!(
        "the CLI compacted at {observed:?}; the local profile's functions agree on the turns, \
         cuts, summariser requests, summary messages and stats"
    );
}

/// The post-turn tokens: the answer's usage when positive, else the estimate with it (§8.1).
fn reply_tokens(usage: u64, system: &str, transcript: &[CtxMessage], tools: &str) -> u64 {
    if usage > 0 {
        usage
    } else {
        provider_estimate(system, transcript, tools).unwrap_or(0)
    }
}

/// Runs the model's compaction of `transcript` and checks it against the CLI's `seen` one:
/// the summariser requests (system prompt and transcript, in order) and the stats. Returns
/// the compacted transcript, `[summary message, ...kept]`.
fn compact_like_the_cli(
    transcript: &[CtxMessage],
    seen: &Seen,
    summaries: &mut impl Iterator<Item = String>,
    clock: &mut u64,
) -> Vec<CtxMessage> {
    let what = format!("turn {} {}", seen.turn, seen.phase);
    let answers: Vec<String> = (0..seen.summariser.len())
        .map(|_| summaries.next().expect("a summary answer"))
        .collect();
    let mut summariser = CliSummaries {
        answers: answers.into_iter(),
        requests: Vec::new(),
    };
    // The sliding pass's summary as the CLI stores it (an `all` fallback's stats estimate it).
    let summary_message = |s: &str, stats: &CompactionStats| CtxMessage {
        summary: Some(s.to_string()),
        ..CtxMessage::new(Role::User, &package_summary(true, stats, s, PACKED_TIME))
    };
    let outcome: Outcome = futures::executor::block_on(compaction::compact(
        transcript,
        &Settings::default(),
        Some(WINDOW),
        Trigger::ContextWindowLimit,
        &summary_message,
        &mut summariser,
    ))
    .unwrap_or_else(|f| panic!("{what}: the model's compaction failed: {f:?}"));
    let ours: Vec<(String, String)> = summariser
        .requests
        .iter()
        .map(|r| (r.prompt.clone(), r.transcript.clone()))
        .collect();
    let theirs: Vec<(String, String)> = seen
        .summariser
        .iter()
        .map(|b| {
            (
                b["messages"][0]["content"].as_str().unwrap().to_string(),
                b["messages"][1]["content"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(ours.len(), theirs.len(), "{what}: summariser calls");
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert!(
            o.0 == t.0,
            "{what}: summariser call {i}: the system prompt differs: {}",
            first_difference(&o.0, &t.0)
        );
        assert!(
            o.1 == t.1,
            "{what}: summariser call {i}: the transcript differs: {}",
            first_difference(&o.1, &t.1)
        );
    }
    // The body's other keys as the CLI sends them on the OpenAI-compatible endpoint: no
    // storing, and the output ceiling clamped to the window less the request's estimate.
    for (i, (r, b)) in summariser.requests.iter().zip(&seen.summariser).enumerate() {
        let ours = summariser_body(ProviderFormat::OpenAiChat, "m", Some(WINDOW), r);
        for key in ["store", "max_completion_tokens", "stream", "stream_options"] {
            assert_eq!(
                ours[key], b[key],
                "{what}: summariser call {i}: the body's {key}"
            );
        }
    }
    assert_eq!(
        outcome.stats.to_json(),
        seen.stats,
        "{what}: compaction_stats"
    );
    // The summary message as the CLI packs it (its `time` normalised when compared).
    *clock += 1;
    let packed = package_summary(
        outcome.mode == Mode::SlidingWindow,
        &outcome.stats,
        &outcome.summary,
        PACKED_TIME,
    );
    let mut next = vec![CtxMessage {
        summary: Some(outcome.summary.clone()),
        at_ms: *clock,
        ..CtxMessage::new(Role::User, &packed)
    }];
    next.extend(outcome.kept.iter().map(|&i| transcript[i].clone()));
    next
}

/// Where two texts first differ, with some context of each (the transcripts run to 136,000
/// characters).
fn first_difference(ours: &str, theirs: &str) -> String {
    let a: Vec<char> = ours.chars().collect();
    let b: Vec<char> = theirs.chars().collect();
    let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let around = |v: &[char]| -> String {
        v[at.saturating_sub(80)..(at + 160).min(v.len())]
            .iter()
            .collect()
    };
    format!(
        "at character {at} (lengths {} and {}):\nours:   {:?}\ntheirs: {:?}",
        a.len(),
        b.len(),
        around(&a),
        around(&b)
    )
}

/// The user messages of `conversation` in the CLI's local store, in order (its transcript
/// file under `$HOME/.letta/lc-local-backend/conversations/`, one JSON entry per line; the
/// summary messages, which carry `metadata.compaction`, left out), as `{role, content}`.
fn stored_user_messages(home: &Path, conversation: &str) -> Vec<Value> {
    let root = home.join(".letta/lc-local-backend/conversations");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    for d in dirs {
        let entries = lines(&d.join("messages.jsonl"));
        if !entries
            .iter()
            .any(|e| e["type"] == "session" && e["id"] == conversation)
        {
            continue;
        }
        return entries
            .iter()
            .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
            .filter(|e| e["message"]["metadata"].get("compaction").is_none())
            .map(|e| json!({"role": "user", "content": e["message"]["content"]}))
            .collect();
    }
    panic!("no transcript of {conversation} under {}", root.display())
}

/// The model calls logged so far, in order.
fn model_calls(log: &Path) -> Vec<Value> {
    lines(log)
        .into_iter()
        .filter(|l| l["route"] == "model_call")
        .collect()
}
