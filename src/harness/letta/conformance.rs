//! CLI conformance: request logs (ours, a real CLI's, `sim serve`'s) normalised to the fields
//! that matter, and compared step by step.
//!
//! A step is a protocol request: message sends, resume streams, run lookups, cancels, and the
//! resume-data reads (the tail listing and `GET /v1/messages/{id}`). Start-up and bookkeeping
//! calls the published CLI makes around them (models, agent create/patch/retrieve, secrets,
//! mcp-servers, repositories, conversation create, and the `GET /v1/conversations/{id}` it sends
//! before every POST) are left out: they carry no recovery semantics (docs/client.md,
//! "Conformance").
//!
//! Identifiers are replaced by labels in order of first appearance, so two logs compare equal
//! when they reuse and refresh otids, run ids and tool call ids in the same pattern: `o1`, `o2`
//! for otids, `r1` for runs, `c1` for tool calls, `m1` for message ids; the conversation and the
//! agent become `{conv}` and `{agent}`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::model::letta::client::backend::RequestRecord;

/// One normalised protocol request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Step {
    pub method: String,
    pub path: String,
    /// The fields that matter, rendered as text.
    pub fields: BTreeMap<String, String>,
    pub status: Option<u16>,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        for (k, v) in &self.fields {
            write!(f, " {k}={v}")?;
        }
        if let Some(s) = self.status {
            write!(f, " -> {s}")?;
        }
        Ok(())
    }
}

/// A raw request from any log.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRequest {
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub status: Option<u16>,
}

impl From<&RequestRecord> for RawRequest {
    fn from(r: &RequestRecord) -> Self {
        RawRequest {
            method: r.method.clone(),
            path: r.path.clone(),
            body: r.body.clone(),
            status: r.status,
        }
    }
}

/// Parses one JSON line of a request log: `{method, path, body|request_body, status?}` (our
/// log, `sim serve`'s, and the captures' exchange records). Records of other clients (a
/// `user-agent` header that is not `letta-code/…`) are skipped.
pub fn parse_log_line(line: &str) -> Option<RawRequest> {
    let v: Value = serde_json::from_str(line).ok()?;
    if let Some(headers) = v.get("request_headers").and_then(Value::as_array) {
        let ua = headers.iter().find_map(|h| {
            let k = h.get(0)?.as_str()?;
            k.eq_ignore_ascii_case("user-agent")
                .then(|| h.get(1)?.as_str())
                .flatten()
        });
        if !ua.is_some_and(|u| u.starts_with("letta-code/")) {
            return None;
        }
    }
    Some(RawRequest {
        method: v.get("method")?.as_str()?.to_string(),
        path: v.get("path")?.as_str()?.to_string(),
        body: v
            .get("body")
            .or_else(|| v.get("request_body"))
            .filter(|b| !b.is_null())
            .cloned(),
        status: v
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
    })
}

/// Label tables, in order of first appearance.
#[derive(Debug, Default)]
struct Labels {
    maps: BTreeMap<&'static str, Vec<String>>,
    conv: Option<String>,
    agent: Option<String>,
}

impl Labels {
    fn label(&mut self, kind: &'static str, id: &str) -> String {
        let list = self.maps.entry(kind).or_default();
        let n = match list.iter().position(|x| x == id) {
            Some(i) => i + 1,
            None => {
                list.push(id.to_string());
                list.len()
            }
        };
        format!("{kind}{n}")
    }
}

fn split_query(path: &str) -> (&str, Option<&str>) {
    match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    }
}

fn otid_of(item: &Value) -> Option<&str> {
    item.get("otid").and_then(Value::as_str)
}

fn reason_text(r: &str) -> String {
    r.to_string()
}

/// Normalises a log to its protocol steps.
pub fn normalise(log: &[RawRequest]) -> Vec<Step> {
    let mut labels = Labels::default();
    let mut out = Vec::new();
    for r in log {
        let (path, query) = split_query(&r.path);
        let segs: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        let mut fields = BTreeMap::new();
        let norm_path = match (r.method.as_str(), segs.as_slice()) {
            ("POST", ["v1", "conversations", c, "messages"]) => {
                labels.conv.get_or_insert_with(|| c.to_string());
                if let Some(body) = &r.body {
                    fields.insert("items".into(), items(&mut labels, body));
                    if let Some(m) = body.get("override_model").and_then(Value::as_str) {
                        fields.insert("override_model".into(), m.into());
                    }
                }
                "/v1/conversations/{conv}/messages".to_string()
            }
            ("POST", ["v1", "conversations", c, "stream"]) => {
                labels.conv.get_or_insert_with(|| c.to_string());
                if let Some(body) = &r.body {
                    if let Some(o) = body.get("otid").and_then(Value::as_str) {
                        fields.insert("otid".into(), labels.label("o", o));
                    }
                    for k in ["starting_after", "batch_size", "run_id"] {
                        if let Some(v) = body.get(k).filter(|v| !v.is_null()) {
                            let text = match (k, v.as_str()) {
                                ("run_id", Some(id)) => labels.label("r", id),
                                _ => v.to_string(),
                            };
                            fields.insert(k.into(), text);
                        }
                    }
                }
                "/v1/conversations/{conv}/stream".to_string()
            }
            ("POST", ["v1", "runs", run, "stream"]) => {
                let l = labels.label("r", run);
                if let Some(body) = &r.body {
                    for k in ["starting_after", "batch_size"] {
                        if let Some(v) = body.get(k).filter(|v| !v.is_null()) {
                            fields.insert(k.into(), v.to_string());
                        }
                    }
                }
                format!("/v1/runs/{{{l}}}/stream")
            }
            ("GET", ["v1", "runs", run]) => format!("/v1/runs/{{{}}}", labels.label("r", run)),
            ("GET", ["v1", "runs"]) => {
                fields.insert("query".into(), query.unwrap_or("").into());
                "/v1/runs/".to_string()
            }
            ("POST", ["v1", "conversations", _, "cancel"]) => {
                "/v1/conversations/{conv}/cancel".to_string()
            }
            ("POST", ["v1", "agents", a, "messages", "cancel"]) => {
                labels.agent.get_or_insert_with(|| a.to_string());
                if let Some(ids) = r
                    .body
                    .as_ref()
                    .and_then(|b| b.get("run_ids"))
                    .and_then(Value::as_array)
                {
                    let l: Vec<String> = ids
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|id| labels.label("r", id))
                        .collect();
                    fields.insert("run_ids".into(), l.join(","));
                }
                "/v1/agents/{agent}/messages/cancel".to_string()
            }
            ("GET", ["v1", "conversations", _, "messages"]) => {
                fields.insert("query".into(), tail_query(query));
                "/v1/conversations/{conv}/messages".to_string()
            }
            ("GET", ["v1", "agents", _, "messages"]) => {
                fields.insert("query".into(), tail_query(query));
                "/v1/agents/{agent}/messages".to_string()
            }
            ("GET", ["v1", "messages", m]) => format!("/v1/messages/{{{}}}", labels.label("m", m)),
            _ => continue,
        };
        out.push(Step {
            method: r.method.clone(),
            path: norm_path,
            fields,
            status: r.status,
        });
    }
    out
}

/// The tail listing's query without volatile parts: limit, order and the type list.
fn tail_query(query: Option<&str>) -> String {
    let Some(q) = query else {
        return String::new();
    };
    let mut limit = "";
    let mut order = "";
    let mut types = Vec::new();
    for kv in q.split('&') {
        match kv.split_once('=') {
            Some(("limit", v)) => limit = v,
            Some(("order", v)) => order = v,
            Some(("include_return_message_types", v)) => types.push(v),
            _ => {}
        }
    }
    format!("limit={limit} order={order} types={}", types.len())
}

fn items(labels: &mut Labels, body: &Value) -> String {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return "none".into();
    };
    messages
        .iter()
        .map(|m| {
            let otid = otid_of(m)
                .map(|o| labels.label("o", o))
                .unwrap_or_else(|| "no-otid".into());
            match m.get("type").and_then(Value::as_str) {
                Some("approval") => {
                    let inner: Vec<String> = m
                        .get("approvals")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            let call = a
                                .get("tool_call_id")
                                .and_then(Value::as_str)
                                .map(|c| labels.label("c", c))
                                .unwrap_or_default();
                            match a.get("type").and_then(Value::as_str) {
                                Some("tool") => format!(
                                    "tool:{call}:{}",
                                    a.get("status").and_then(Value::as_str).unwrap_or("")
                                ),
                                _ if a.get("approve") == Some(&Value::Bool(false)) => format!(
                                    "deny:{call}:{:?}",
                                    reason_text(
                                        a.get("reason").and_then(Value::as_str).unwrap_or("")
                                    )
                                ),
                                _ => format!("approve:{call}"),
                            }
                        })
                        .collect();
                    format!("approval({otid})[{}]", inner.join(","))
                }
                _ => format!(
                    "{}({otid})",
                    m.get("role").and_then(Value::as_str).unwrap_or("?")
                ),
            }
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The first difference between two step sequences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// 0-based index of the first differing step.
    pub index: usize,
    pub expected: Option<Step>,
    pub actual: Option<Step>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |s: &Option<Step>| s.as_ref().map_or("<end>".to_string(), ToString::to_string);
        write!(
            f,
            "step {}: expected {}\n          got      {}",
            self.index + 1,
            show(&self.expected),
            show(&self.actual)
        )
    }
}

/// Compares two step sequences; statuses are compared only when both sides have one.
pub fn compare(expected: &[Step], actual: &[Step]) -> Result<(), Box<Mismatch>> {
    let n = expected.len().max(actual.len());
    for i in 0..n {
        let (e, a) = (expected.get(i), actual.get(i));
        let same = match (e, a) {
            (Some(e), Some(a)) => {
                e.method == a.method
                    && e.path == a.path
                    && e.fields == a.fields
                    && (e.status.is_none() || a.status.is_none() || e.status == a.status)
            }
            _ => false,
        };
        if !same {
            return Err(Box::new(Mismatch {
                index: i,
                expected: e.cloned(),
                actual: a.cloned(),
            }));
        }
    }
    Ok(())
}

/// Renders steps one per line (the committed fixtures' format).
pub fn render(steps: &[Step]) -> String {
    steps.iter().map(|s| format!("{s}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(method: &str, path: &str, body: Option<Value>, status: u16) -> RawRequest {
        RawRequest {
            method: method.into(),
            path: path.into(),
            body,
            status: Some(status),
        }
    }

    #[test]
    fn same_otid_resent_and_fresh_otids_get_stable_labels() {
        let user = |o: &str| json!({"messages": [{"role": "user", "content": "x", "otid": o}]});
        let log = vec![
            req("GET", "/v1/models/", None, 200),
            req(
                "POST",
                "/v1/conversations/conv-9/messages",
                Some(user("A")),
                409,
            ),
            req(
                "POST",
                "/v1/conversations/conv-9/stream",
                Some(json!({"otid": "A", "starting_after": 0, "batch_size": 1000})),
                404,
            ),
            req("GET", "/v1/conversations/conv-9", None, 200),
            req(
                "POST",
                "/v1/conversations/conv-9/messages",
                Some(user("A")),
                200,
            ),
            req(
                "POST",
                "/v1/conversations/conv-9/messages",
                Some(
                    json!({"messages": [{"type": "approval", "otid": "B", "approvals": [
                {"type": "tool", "tool_call_id": "call_1", "status": "success", "tool_return": "x"},
                {"type": "approval", "tool_call_id": "call_2", "approve": false, "reason": "no"}]}]}),
                ),
                200,
            ),
            req(
                "POST",
                "/v1/runs/run-77/stream",
                Some(json!({"starting_after": 1, "batch_size": 1000})),
                200,
            ),
            req(
                "POST",
                "/v1/agents/agent-1/messages/cancel",
                Some(json!({"run_ids": ["run-77"]})),
                200,
            ),
        ];
        let steps = normalise(&log);
        let text = render(&steps);
        assert_eq!(
            text,
            "POST /v1/conversations/{conv}/messages items=user(o1) -> 409\n\
             POST /v1/conversations/{conv}/stream batch_size=1000 otid=o1 starting_after=0 -> 404\n\
             POST /v1/conversations/{conv}/messages items=user(o1) -> 200\n\
             POST /v1/conversations/{conv}/messages items=approval(o2)[tool:c1:success,deny:c2:\"no\"] -> 200\n\
             POST /v1/runs/{r1}/stream batch_size=1000 starting_after=1 -> 200\n\
             POST /v1/agents/{agent}/messages/cancel run_ids=r1 -> 200\n"
        );
        assert_eq!(compare(&steps, &steps), Ok(()));
        // A fresh otid where the same one was expected is a mismatch at that step.
        let mut other = log.clone();
        other[4] = req(
            "POST",
            "/v1/conversations/conv-9/messages",
            Some(user("Z")),
            200,
        );
        let m = compare(&steps, &normalise(&other)).unwrap_err();
        assert_eq!(m.index, 2);
        assert!(m.to_string().contains("items=user(o1)"), "{m}");
        assert!(m.to_string().contains("items=user(o2)"), "{m}");
        // A missing step.
        let m = compare(&steps, &steps[..3]).unwrap_err();
        assert_eq!((m.index, m.actual), (3, None));
    }

    #[test]
    fn capture_records_of_other_clients_are_skipped() {
        let cli = r#"{"seq":1,"method":"POST","path":"/v1/conversations/c/messages","request_headers":[["User-Agent","letta-code/0.32.18"]],"request_body":{"messages":[]},"status":200}"#;
        let curl = r#"{"seq":2,"method":"POST","path":"/v1/conversations/c/messages","request_headers":[["user-agent","curl/7.88.1"]],"request_body":{"messages":[]},"status":200}"#;
        let serve = r#"{"method":"POST","path":"/v1/runs/r/stream","body":{"starting_after":0}}"#;
        assert!(parse_log_line(cli).is_some());
        assert!(parse_log_line(curl).is_none());
        let s = parse_log_line(serve).unwrap();
        assert_eq!(s.body, Some(json!({"starting_after": 0})));
        assert_eq!(s.status, None);
        assert!(parse_log_line("not json").is_none());
    }
}

/// The published client's run lookups after a failed run, run on the model itself (the fast
/// test command of docs/finding-power.md reaches the `letta-code` profile only here).
#[cfg(test)]
mod published_client {
    use super::*;
    use crate::harness::run::run_scenario;
    use crate::harness::scenario::Scenario;
    use toml::Spanned;

    fn steps(file: &str, mode: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let mut s = Scenario::load(&path).unwrap();
        s.scenario.client_profile = Spanned::new(0..0, "letta-code".into());
        s.client.mode = Spanned::new(0..0, mode.into());
        let report = run_scenario(&s, 1, 1).unwrap();
        let log: Vec<RawRequest> = report.requests.iter().map(RawRequest::from).collect();
        normalise(&log).iter().map(ToString::to_string).collect()
    }

    /// letta-protocol.md §3.10, headless order: "`llm_api_error` with budget → always retried
    /// (no metadata check)". The published client still reads each failed run once for its
    /// error detail (`fetchRunErrorDetail`, docs/client.md difference 17), and no more: one
    /// lookup per run, then the resend with fresh otids (it ignores `retryable: false` here,
    /// docs/findings.md#headless-ignores-retryable-false), until the provider's answers run out.
    #[test]
    fn headless_reads_a_run_that_stopped_on_llm_api_error_once() {
        let log = steps(
            "scenarios/letta/client_llm_error_nonretryable.toml",
            "headless",
        );
        let mut want = vec![
            "GET /v1/agents/{agent}/messages query=limit=50 order=desc types=8 -> 200".to_string(),
            "GET /v1/messages/{m1} -> 200".to_string(),
        ];
        for run in 1..=4 {
            want.push(format!(
                "POST /v1/conversations/{{conv}}/messages items=user(o{run}) -> 200"
            ));
            want.push(format!("GET /v1/runs/{{r{run}}} -> 200"));
        }
        assert_eq!(log, want);
    }
}
