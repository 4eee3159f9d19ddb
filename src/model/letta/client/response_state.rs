//! Response-state reuse (letta-protocol.md §10.1): a `response_state` chunk with
//! `cache_scope:"approval_boundary"` and a non-empty `response_id` is cached per scope; the next
//! request sends `X-Letta-Response-State: base64url(JSON)` only when it is an approval-only
//! continuation and the caller allowed reuse (every approval auto-handled); the cached id is
//! consumed. Any other request clears it.

use indexmap::IndexMap;
use serde_json::{Value, json};

use crate::cassette::base64_encode;
use crate::wire::letta::LettaChunk;

/// The only cache scope the client reuses (letta-protocol.md §10.1).
pub const APPROVAL_BOUNDARY: &str = "approval_boundary";

/// The cache, keyed by `"<conversationId>:<agentId>"` (or just the conversation id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseStateCache {
    ids: IndexMap<String, String>,
    /// Planted (`ClientBugs::response_state_padded`): the header is padded standard base64.
    padded: bool,
}

/// The scope key of a conversation and agent.
pub fn scope_key(conversation_id: &str, agent_id: Option<&str>) -> String {
    match agent_id {
        Some(a) if !a.is_empty() => format!("{conversation_id}:{a}"),
        _ => conversation_id.to_string(),
    }
}

impl ResponseStateCache {
    /// An empty cache; `padded` is the planted `ClientBugs::response_state_padded`.
    pub fn new(padded: bool) -> Self {
        Self {
            padded,
            ..Self::default()
        }
    }

    /// Caches the response id of a `response_state` chunk, if it qualifies.
    pub fn observe(&mut self, scope: &str, chunk: &LettaChunk) {
        if let LettaChunk::ResponseState(m) = chunk {
            let id = m.fields.get("response_id").and_then(Value::as_str);
            let cache_scope = m.fields.get("cache_scope").and_then(Value::as_str);
            if cache_scope == Some(APPROVAL_BOUNDARY)
                && let Some(id) = id.filter(|s| !s.is_empty())
            {
                self.ids.insert(scope.to_string(), id.to_string());
            }
        }
    }

    /// The header value for the next request: `Some` only for an approval-only continuation
    /// with reuse allowed, and the id is consumed; every other request clears the scope.
    pub fn take_for_request(
        &mut self,
        scope: &str,
        approval_only: bool,
        reuse_allowed: bool,
    ) -> Option<String> {
        let id = self.ids.shift_remove(scope)?;
        (approval_only && reuse_allowed).then(|| {
            if self.padded {
                base64_encode(header_json(&id).as_bytes())
            } else {
                header_value(&id)
            }
        })
    }

    pub fn cached(&self, scope: &str) -> Option<&str> {
        self.ids.get(scope).map(String::as_str)
    }
}

/// `base64url(JSON {"v":1, "cache_scope":"approval_boundary", "previous_response_id": id})`.
pub fn header_value(previous_response_id: &str) -> String {
    base64url(header_json(previous_response_id).as_bytes())
}

/// The header's JSON, in the key order Node's `JSON.stringify` keeps.
fn header_json(previous_response_id: &str) -> String {
    json!({"v": 1, "cache_scope": APPROVAL_BOUNDARY, "previous_response_id": previous_response_id})
        .to_string()
}

/// Unpadded base64url (RFC 4648 §5), as Node's `Buffer#toString("base64url")`.
pub fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        if chunk.len() > 1 {
            out.push(A[(n >> 6) as usize & 63] as char);
        }
        if chunk.len() > 2 {
            out.push(A[n as usize & 63] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(id: &str, scope: &str) -> LettaChunk {
        LettaChunk::from_json(&format!(
            r#"{{"id":"x","message_type":"response_state","response_id":"{id}","cache_scope":"{scope}"}}"#
        ))
        .unwrap()
    }

    #[test]
    fn cached_then_consumed_only_by_an_allowed_approval_continuation() {
        let mut c = ResponseStateCache::default();
        let scope = scope_key("conv-1", Some("agent-1"));
        assert_eq!(scope, "conv-1:agent-1");
        c.observe(&scope, &rs("resp-1", APPROVAL_BOUNDARY));
        assert_eq!(c.cached(&scope), Some("resp-1"));
        let h = c.take_for_request(&scope, true, true).unwrap();
        assert_eq!(h, header_value("resp-1"));
        assert_eq!(c.cached(&scope), None, "consumed");
        // A human in the loop, or a plain message: the id is cleared without a header.
        c.observe(&scope, &rs("resp-2", APPROVAL_BOUNDARY));
        assert_eq!(c.take_for_request(&scope, true, false), None);
        assert_eq!(c.cached(&scope), None);
        c.observe(&scope, &rs("resp-3", APPROVAL_BOUNDARY));
        assert_eq!(c.take_for_request(&scope, false, true), None);
        assert_eq!(c.cached(&scope), None);
        // Other scopes and empty ids are ignored.
        c.observe(&scope, &rs("resp-4", "turn"));
        c.observe(&scope, &rs("", APPROVAL_BOUNDARY));
        assert_eq!(c.cached(&scope), None);
        assert_eq!(scope_key("conv-1", None), "conv-1");
    }

    #[test]
    fn base64url_matches_rfc4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64url(i.as_bytes()), o);
        }
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(
            header_value("r"),
            base64url(br#"{"v":1,"cache_scope":"approval_boundary","previous_response_id":"r"}"#)
        );
    }
}
