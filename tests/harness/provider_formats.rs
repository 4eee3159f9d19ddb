//! The provider formats a model speaks, end to end in the simulated world: a scenario whose
//! `[provider] api` is `gemini` or `openai_responses` has the Letta server and the agent loop
//! send that API's request to its path, and what they make of the answer is what the format's
//! decoder reads in the cassette (the decoder round trip through the world). A stream cut in
//! the middle is handled as it is over OpenAI Chat.

use crate::common::{lines_with, load, outcomes, repo, run};
use loopsim::cassette::Recording;
use loopsim::harness::faults::Fault;
use loopsim::harness::report::{RunReport, Verdict};
use loopsim::harness::scenario::Scenario;
use loopsim::model::port::inject::StreamFault;
use loopsim::wire::provider::{ProviderEvent, ToolCallAccumulator};

/// What the format's decoder reads in a committed recording (exchange 1, or `N` of
/// `FILE#N`): the tool calls (name, arguments) and the text.
fn decoded(cassette: &str) -> (Vec<(String, String)>, String) {
    let (file, n) = cassette.split_once('#').unwrap_or((cassette, "1"));
    let r = Recording::load(repo().join(file)).unwrap_or_else(|e| panic!("{e}"));
    let events = r
        .provider_events(n.parse().unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    let calls = ToolCallAccumulator::from_events(&events)
        .into_calls()
        .into_iter()
        .map(|c| (c.name, c.arguments))
        .collect();
    let text = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (calls, text)
}

const GEMINI_CALL: &str =
    "cassettes/provider/sse/gemini/pydanticai_function_call_thought_signature.jsonl";
const GEMINI_TEXT: &str = "cassettes/provider/sse/gemini/pydanticai_plain_text_crlf.jsonl";
const RESPONSES_CALL: &str =
    "cassettes/provider/sse/openai_responses/pydanticai_function_call_args_delta.jsonl";
const RESPONSES_TEXT: &str =
    "cassettes/provider/sse/openai_responses/pydanticai_output_text_after_tool.jsonl";

/// (scenario, the call's exchange, the answer's exchange): both from one recorded session.
const LETTA: [(&str, &str, &str); 2] = [
    (
        "scenarios/letta/gemini_tool_call.toml",
        "cassettes/provider/vcr/gemini/pydanticai_function_call_thought_signature.jsonl#1",
        "cassettes/provider/vcr/gemini/pydanticai_function_call_thought_signature.jsonl#2",
    ),
    (
        "scenarios/letta/openai_responses_tool_call.toml",
        "cassettes/provider/vcr/openai_responses/pydanticai_function_call_args_delta__and__output_text_after_tool.jsonl#1",
        "cassettes/provider/vcr/openai_responses/pydanticai_function_call_args_delta__and__output_text_after_tool.jsonl#2",
    ),
];

/// (scenario, the path its requests go to, the call cassette, the text cassette)
const LOOP: [(&str, &str, &str, &str); 2] = [
    (
        "scenarios/kimi/gemini_tool_call.toml",
        "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse",
        GEMINI_CALL,
        GEMINI_TEXT,
    ),
    (
        "scenarios/kimi/openai_responses_tool_call.toml",
        "/v1/responses",
        RESPONSES_CALL,
        RESPONSES_TEXT,
    ),
];

fn passing(s: &Scenario, seed: u64) -> RunReport {
    let r = run(s, seed, 2);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render());
    // The fake provider validates every request by its API's rules: none was refused.
    assert!(
        lines_with(&r, "provider_rejected").is_empty(),
        "{}",
        r.trace_text
    );
    r
}

#[test]
fn the_letta_server_speaks_each_format_and_keeps_what_its_decoder_reads() {
    for (file, call, text) in LETTA {
        let s = load(file);
        let (calls, _) = decoded(call);
        let (_, answer) = decoded(text);
        assert_eq!(calls.len(), 1, "{call}");
        for seed in 0..3 {
            let r = passing(&s, seed);
            assert_eq!(outcomes(&r), ["stopped: end_turn"], "{file}");
            // The server stored the decoded call, name and arguments byte for byte ...
            let (name, args) = &calls[0];
            let stored = lines_with(&r, "entry.kind=tool_call");
            assert_eq!(stored.len(), 1, "{file}: {stored:?}");
            assert!(
                stored[0].contains(&format!("entry.name={name} ")),
                "{file}: {}",
                stored[0]
            );
            let quoted = serde_json::to_string(args).unwrap();
            assert!(
                stored[0].ends_with(&format!("entry.arguments={quoted}")),
                "{file}: {} (decoded {quoted})",
                stored[0]
            );
            // ... and the decoded text as the answer.
            let chars = format!(
                "entry.kind=assistant entry.chars={}",
                answer.chars().count()
            );
            assert_eq!(lines_with(&r, &chars).len(), 1, "{file}: no {chars}");
            // The fake provider answers a call only on its recording's API path (any other is
            // a 404 that counts no call), so both calls went to the format's path.
            let served = lines_with(&r, "provider_serve call=");
            assert_eq!(served.len(), 2, "{file}: {}", r.trace_text);
            assert!(
                served.iter().all(|l| l.contains("status=200")),
                "{served:?}"
            );
        }
    }
}

#[test]
fn the_agent_loop_speaks_each_format_and_runs_what_its_decoder_reads() {
    for (file, path, call, text) in LOOP {
        let s = load(file);
        let (calls, _) = decoded(call);
        let (_, answer) = decoded(text);
        for seed in 0..3 {
            let r = passing(&s, seed);
            assert_eq!(outcomes(&r), ["completed: end_turn (2 steps)"], "{file}");
            let requests = lines_with(&r, "loop_provider_request");
            assert_eq!(requests.len(), 2, "{file}");
            let quoted_path = if path.contains('?') {
                format!("path={path:?}")
            } else {
                format!("path={path}")
            };
            assert!(
                requests.iter().all(|l| l.contains(&quoted_path)),
                "{file}: {requests:?}"
            );
            let (name, args) = &calls[0];
            let run = lines_with(&r, "loop_tool_call");
            assert_eq!(run.len(), 1, "{file}");
            assert!(run[0].contains(&format!("name={name} ")), "{}", run[0]);
            let quoted = serde_json::to_string(args).unwrap();
            assert!(
                run[0].ends_with(&format!("args={quoted}")),
                "{} (decoded {quoted})",
                run[0]
            );
            let part = format!("kind=text chars={}", answer.chars().count());
            assert_eq!(lines_with(&r, &part).len(), 1, "{file}: no {part}");
        }
    }
}

/// The trace lines that say how a model call's stream was cut and what came of it, without
/// their times (the formats' recordings differ in length and pace).
fn cut_lines(r: &RunReport, needles: &[&str]) -> Vec<String> {
    needles
        .iter()
        .map(|n| {
            let l = lines_with(r, n);
            let first = l
                .first()
                .unwrap_or_else(|| panic!("no {n}:\n{}", r.trace_text));
            first
                .split_once(n)
                .map(|(_, rest)| format!("{n}{rest}"))
                .unwrap()
        })
        .collect()
}

fn with_reset(mut s: Scenario) -> Scenario {
    s.faults.push(toml::Spanned::new(
        0..0,
        Fault::ProviderStream {
            call: 1,
            frame: 2,
            action: StreamFault::Reset,
        },
    ));
    s
}

#[test]
fn a_stream_reset_mid_answer_is_handled_as_over_openai_chat() {
    // The Letta server: the run fails `llm_api_error` with the vendor's network error, and the
    // client's turn ends on it, whatever the format.
    let letta = [
        ("scenarios/letta/openai_parallel_tools.toml", "OpenAI"),
        ("scenarios/letta/gemini_tool_call.toml", "Google Vertex"),
        ("scenarios/letta/openai_responses_tool_call.toml", "OpenAI"),
    ];
    let mut seen = Vec::new();
    for (file, vendor) in letta {
        let r = passing(&with_reset(load(file)), 1);
        let result = lines_with(&r, "provider_result");
        let error = format!(
            "outcome=\"error: INTERNAL_SERVER_ERROR: Network error during {vendor} streaming:"
        );
        assert!(
            result.iter().any(|l| l.contains(&error)),
            "{file}: {result:?}"
        );
        let cut = cut_lines(
            &r,
            &["provider_serve_end call=1", "stop_reason=llm_api_error"],
        );
        seen.push((outcomes(&r).join(";"), cut));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:#?}");
    // The agent loop: a connection error, retried like any other.
    let looped = [
        "scenarios/kimi/openai_unknown_tools.toml",
        "scenarios/kimi/gemini_tool_call.toml",
        "scenarios/kimi/openai_responses_tool_call.toml",
    ];
    let mut seen = Vec::new();
    for file in looped {
        let r = passing(&with_reset(load(file)), 1);
        seen.push(cut_lines(
            &r,
            &[
                "loop_provider_stream_end call=1",
                "loop_model_error turn_step=1.2",
                "loop_retrying step=2 failed_attempt=1",
            ],
        ));
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "{seen:#?}");
}

/// The scenario keys of the formats refuse what they cannot do, at the line that says it.
#[test]
fn bad_format_input_names_the_file_line_and_key() {
    let path = repo().join("scenarios/letta/gemini_tool_call.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let parse = |t: &str| {
        Scenario::parse(t, &path)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let e = parse(&text.replace("api = \"gemini\"", "api = \"gemini_pro\""));
    assert!(
        e.contains(
            "gemini_tool_call.toml:15:7: unknown provider api \"gemini_pro\": expected one of \"anthropic\", \"openai_chat\", \"openai_responses\", \"gemini\""
        ),
        "{e}"
    );
    let e = parse(&text.replace("jsonl#2", "jsonl#3"));
    assert!(
        e.contains("gemini_tool_call.toml:18:3: cassette \"../../cassettes/provider/vcr/gemini/pydanticai_function_call_thought_signature.jsonl#3\": exchange 3 of a recording of 2"),
        "{e}"
    );
    // A cassette of another format is refused at its entry, as for the older formats.
    let other = Scenario::parse(
        &text.replace("api = \"gemini\"", "api = \"openai_responses\""),
        &path,
    )
    .unwrap();
    let e = loopsim::harness::run::run_scenario(&other, 0, 1)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("gemini_tool_call.toml:17:3: cassette"), "{e}");
    assert!(
        e.contains("records a gemini stream, but [provider] api is \"openai_responses\""),
        "{e}"
    );
    // Script steps are synthesized as Anthropic or OpenAI Chat streams only.
    let looped = repo().join("scenarios/kimi/gemini_tool_call.toml");
    let text = std::fs::read_to_string(&looped).unwrap();
    let e = Scenario::parse(
        &format!("{text}\n[[agent_loop.script]]\ntext = \"hi\"\n"),
        &looped,
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("script steps are served as Anthropic or OpenAI Chat streams, not gemini"),
        "{e}"
    );
}

/// A Gemini or Responses stream in memory is written as a one-exchange version 2 recording
/// (version 1 cannot name those formats) and loads back the same stream.
#[test]
fn a_stream_of_a_later_format_saves_as_version_2_and_loads_back() {
    use loopsim::cassette::{Cassette, RECORDING_VERSION, version_of};
    for (n, file) in [GEMINI_CALL, RESPONSES_TEXT].into_iter().enumerate() {
        let c = Cassette::load(repo().join(file)).unwrap();
        let text = c.to_jsonl();
        assert_eq!(version_of(&text), Some(RECORDING_VERSION), "{text}");
        let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("later_format_{n}.jsonl"));
        c.save(&out).unwrap();
        let back = Cassette::load(&out).unwrap();
        assert_eq!(back.header().format, c.header().format);
        assert_eq!(back.header().status, c.header().status);
        assert_eq!(back.frames(), c.frames());
        assert_eq!(back.end(), c.end());
    }
}

/// A duplicated `response.output_item.added` (found by a swarm sweep, seed 55) is an
/// undecodable stream, as a duplicated Anthropic block start is: the run fails `llm_api_error`
/// (`internal_error`, after output) and no call runs with arguments its provider did not send.
/// The server's run error carries no `retryable` flag, so the client's rule retries an
/// `llm_api_error` it cannot otherwise classify (letta-protocol.md §3.7, "otherwise yes"): one
/// post-stream retry, whose run the provider's next answer ends `end_turn`.
#[test]
fn a_duplicated_function_call_start_fails_the_run_instead_of_splitting_the_call() {
    let mut s = load("scenarios/letta/openai_responses_tool_call.toml");
    s.faults.push(toml::Spanned::new(
        0..0,
        Fault::ProviderStream {
            call: 0,
            frame: 3,
            action: StreamFault::Duplicate,
        },
    ));
    let r = passing(&s, 1);
    assert_eq!(outcomes(&r), ["stopped: end_turn"]);
    let drained = lines_with(&r, "client_drained");
    assert!(
        drained[0].contains("stop_reason=llm_api_error"),
        "{drained:?}"
    );
    let retried = lines_with(&r, "client_retry");
    assert!(
        retried.len() == 1 && retried[0].contains("kind=post_stream"),
        "{retried:?}"
    );
    let result = lines_with(&r, "provider_result");
    assert!(
        result[0].contains("added again while still open"),
        "{result:?}"
    );
    assert!(
        lines_with(&r, "tool_started").is_empty(),
        "{}",
        r.trace_text
    );
}
