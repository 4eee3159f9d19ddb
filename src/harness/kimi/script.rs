//! Scripted model calls (`[[agent_loop.script]]`) turned into provider-layer cassettes, so the
//! fake provider serves them over the network exactly like recorded ones: Anthropic Messages
//! or OpenAI Chat SSE, 10 ms between frames, tool arguments split into three fragments (the
//! first empty, as the API opens every tool block), ending clean.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cassette::{
    Cassette, CassetteHeader, DEFAULT_IMPORT_SPACING_MS, EndKind, Layer, StreamEnd, TimedFrame,
};
use crate::harness::input::InputError;
use crate::harness::kimi::scenario::{ScriptCall, ScriptStep};
use crate::harness::scenario::Scenario;
use crate::model::provider::ProviderResponse;
use crate::wire::provider::ProviderFormat;
use crate::wire::sse::{SseEvent, SseFrame};

/// The provider's answers for an agent-loop scenario, in call order: the `[provider]
/// responses` cassettes, then the scripted steps. Also returns the scripted per-call tool
/// latencies by tool-call id.
pub fn loop_responses(
    scenario: &Scenario,
) -> Result<(Vec<ProviderResponse>, BTreeMap<String, u64>), InputError> {
    let mut responses = crate::harness::cassettes::provider_responses(scenario)?;
    let api = scenario.provider_api()?;
    let mut latencies = BTreeMap::new();
    let Some(section) = &scenario.agent_loop else {
        return Ok((responses, latencies));
    };
    let model = section.model.clone();
    for (i, spanned) in section.script.iter().enumerate() {
        let n = i + 1;
        let step = spanned.get_ref();
        for (k, call) in step.tool_calls.iter().enumerate() {
            if let Some(ms) = call.latency_ms {
                latencies.insert(call_id(api, n, k + 1, call), ms);
            }
        }
        // Other formats are refused when the scenario loads (`check_step`).
        let frames = match api {
            ProviderFormat::Anthropic => anthropic_frames(n, step, &model),
            _ => openai_frames(n, step, &model),
        };
        let name = format!("script[{n}]");
        let end_t = frames.last().map_or(0, |f| f.t_ms) + DEFAULT_IMPORT_SPACING_MS;
        let header = CassetteHeader {
            layer: Layer::Provider,
            format: api,
            source: format!("{} [[agent_loop.script]] #{n}", scenario.path.display()),
            status: 200,
            content_type: "text/event-stream".into(),
            note: Some("hand-written: synthesized from a scenario script step".into()),
        };
        let end = StreamEnd {
            t_ms: end_t,
            kind: EndKind::Clean,
        };
        let cassette = Cassette::new(header, frames, end, &name)
            .map_err(|e| scenario.error_at(spanned.span(), format!("script step {n}: {e}")))?;
        responses.push(ProviderResponse { name, cassette });
    }
    Ok((responses, latencies))
}

/// The id of scripted call `k` (1-based) of step `n` (1-based).
pub fn call_id(api: ProviderFormat, n: usize, k: usize, call: &ScriptCall) -> String {
    call.id.clone().unwrap_or_else(|| match api {
        ProviderFormat::Anthropic => format!("toolu_s{n}_{k}"),
        _ => format!("call_s{n}_{k}"),
    })
}

fn arguments(call: &ScriptCall) -> String {
    match (&call.raw_args, &call.args) {
        (Some(raw), _) => raw.clone(),
        (None, Some(table)) => serde_json::to_value(table)
            .unwrap_or_else(|_| json!({}))
            .to_string(),
        (None, None) => "{}".into(),
    }
}

/// Splits `s` into three pieces at char boundaries: "", the first half, the rest.
fn pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mid = chars.len() / 2;
    vec![
        String::new(),
        chars[..mid].iter().collect(),
        chars[mid..].iter().collect(),
    ]
}

struct Frames {
    t: u64,
    out: Vec<TimedFrame>,
}

impl Frames {
    fn push(&mut self, frame: SseFrame) {
        self.out.push(TimedFrame {
            t_ms: self.t,
            frame,
        });
        self.t += DEFAULT_IMPORT_SPACING_MS;
    }

    fn named(&mut self, event: &str, data: Value) {
        self.push(SseFrame::Event(SseEvent::named(event, data.to_string())));
    }

    fn data(&mut self, data: Value) {
        self.push(SseFrame::Event(SseEvent::data(data.to_string())));
    }
}

fn anthropic_frames(n: usize, step: &ScriptStep, model: &str) -> Vec<TimedFrame> {
    let u = step.usage;
    let mut f = Frames {
        t: 0,
        out: Vec::new(),
    };
    f.named(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_sim_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": u.input, "cache_creation_input_tokens": u.cache_creation,
                      "cache_read_input_tokens": u.cache_read, "output_tokens": 1}}}),
    );
    let mut index = 0u32;
    let mut block = |f: &mut Frames, start: Value, deltas: Vec<Value>| {
        f.named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        for d in deltas {
            f.named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            );
        }
        f.named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    };
    if let Some(thinking) = &step.thinking {
        let deltas = pieces(thinking)
            .into_iter()
            .skip(1)
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .chain([json!({"type": "signature_delta", "signature": format!("sig_sim_{n}")})])
            .collect();
        block(
            &mut f,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if let Some(text) = &step.text {
        let deltas = pieces(text)
            .into_iter()
            .skip(1)
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        block(&mut f, json!({"type": "text", "text": ""}), deltas);
    }
    for (k, call) in step.tool_calls.iter().enumerate() {
        let deltas = pieces(&arguments(call))
            .into_iter()
            .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
            .collect();
        block(
            &mut f,
            json!({"type": "tool_use", "id": call_id(ProviderFormat::Anthropic, n, k + 1, call),
                   "name": call.name, "input": {}}),
            deltas,
        );
    }
    f.named(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": step.stop_word(), "stop_sequence": null},
               "usage": {"output_tokens": u.output}}),
    );
    f.named("message_stop", json!({"type": "message_stop"}));
    f.out
}

fn openai_frames(n: usize, step: &ScriptStep, model: &str) -> Vec<TimedFrame> {
    let u = step.usage;
    let id = format!("chatcmpl-sim-{n}");
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 1767225600, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut f = Frames {
        t: 0,
        out: Vec::new(),
    };
    f.data(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    if let Some(thinking) = &step.thinking {
        for p in pieces(thinking).into_iter().skip(1) {
            f.data(chunk(json!({"reasoning_content": p}), Value::Null));
        }
    }
    if let Some(text) = &step.text {
        for p in pieces(text).into_iter().skip(1) {
            f.data(chunk(json!({"content": p}), Value::Null));
        }
    }
    for (k, call) in step.tool_calls.iter().enumerate() {
        let id = call_id(ProviderFormat::OpenAiChat, n, k + 1, call);
        f.data(chunk(
            json!({"tool_calls": [{"index": k, "id": id, "type": "function",
                    "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for p in pieces(&arguments(call)).into_iter().skip(1) {
            f.data(chunk(
                json!({"tool_calls": [{"index": k, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
    }
    let finish = match step.stop_word().as_str() {
        "end_turn" => "stop".to_string(),
        "tool_use" => "tool_calls".to_string(),
        "max_tokens" => "length".to_string(),
        "refusal" => "content_filter".to_string(),
        other => other.to_string(),
    };
    f.data(chunk(json!({}), Value::String(finish)));
    f.data(
        json!({"id": id, "object": "chat.completion.chunk", "created": 1767225600,
                  "model": model, "choices": [],
                  "usage": {"prompt_tokens": u.input, "completion_tokens": u.output,
                            "total_tokens": u.input + u.output,
                            "prompt_tokens_details": {"cached_tokens": u.cache_read}}}),
    );
    f.push(SseFrame::Event(SseEvent::data("[DONE]")));
    f.out
}
