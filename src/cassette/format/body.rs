//! A recorded HTTP body, kept readable: JSON as JSON, other UTF-8 as text, and base64 only for
//! bytes that are not UTF-8. Pure.

use serde_json::Value;

/// One request or response body as a version 2 cassette keeps it.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// No bytes.
    Empty,
    /// A JSON document. Written back compactly: insignificant whitespace is not kept, every value
    /// is (see [`Body::from_bytes`]).
    Json(Value),
    /// UTF-8 that is not JSON (or whose JSON would not survive a round trip unchanged).
    Text(String),
    /// Bytes that are not UTF-8.
    Binary(Vec<u8>),
}

impl Body {
    /// Classifies bytes: empty; JSON when re-serialising the parsed value gives the same JSON
    /// tokens (same keys in the same order, same strings, numbers of the same value), so nothing
    /// is lost but whitespace; else UTF-8 text; else binary.
    pub fn from_bytes(bytes: &[u8]) -> Body {
        if bytes.is_empty() {
            return Body::Empty;
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Body::Binary(bytes.to_vec());
        };
        match lossless_json(text) {
            Some(v) => Body::Json(v),
            None => Body::Text(text.to_string()),
        }
    }

    /// The bytes a replay sends: JSON compact, text and binary as they are.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Body::Empty => Vec::new(),
            Body::Json(v) => serde_json::to_vec(v).unwrap_or_default(),
            Body::Text(t) => t.as_bytes().to_vec(),
            Body::Binary(b) => b.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Body::Empty)
    }

    /// The kind's name, as written (`json`, `text`, `base64`; `empty` for no body).
    pub fn kind(&self) -> &'static str {
        match self {
            Body::Empty => "empty",
            Body::Json(_) => "json",
            Body::Text(_) => "text",
            Body::Binary(_) => "base64",
        }
    }
}

/// The parsed value when `text` is JSON that survives parse and compact re-serialisation with
/// every token's meaning intact; `None` otherwise (not JSON, a number that does not fit, a
/// duplicated key that parsing would drop).
pub(crate) fn lossless_json(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    let again = serde_json::to_string(&value).ok()?;
    (tokens(text)? == tokens(&again)?).then_some(value)
}

#[derive(Debug, PartialEq)]
enum Token {
    Punct(u8),
    Str(String),
    /// An integer that fits in i128, by value.
    Int(i128),
    /// Any other number, by its f64 value's bits.
    Float(u64),
    Lit(&'static str),
}

/// The JSON tokens of `text`, strings decoded and numbers by value; `None` on anything that is
/// not well-formed JSON lexically.
fn tokens(text: &str) -> Option<Vec<Token>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            c @ (b'{' | b'}' | b'[' | b']' | b':' | b',') => {
                out.push(Token::Punct(c));
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let raw = text.get(start..i)?;
                out.push(Token::Str(serde_json::from_str(raw).ok()?));
            }
            b't' if text[i..].starts_with("true") => {
                out.push(Token::Lit("true"));
                i += 4;
            }
            b'f' if text[i..].starts_with("false") => {
                out.push(Token::Lit("false"));
                i += 5;
            }
            b'n' if text[i..].starts_with("null") => {
                out.push(Token::Lit("null"));
                i += 4;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let raw = &text[start..i];
                let integer = !raw.contains(['.', 'e', 'E']);
                match raw.parse::<i128>() {
                    Ok(n) if integer => out.push(Token::Int(n)),
                    _ => out.push(Token::Float(raw.parse::<f64>().ok()?.to_bits())),
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let v = (chunk[0] as u32) << 16
            | (chunk.get(1).copied().unwrap_or(0) as u32) << 8
            | chunk.get(2).copied().unwrap_or(0) as u32;
        for k in 0..4 {
            if k <= n {
                out.push(ALPHABET[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Inverse of [`base64_encode`]; strict: the padded standard alphabet only, no whitespace.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let b = text.as_bytes();
    if !b.len().is_multiple_of(4) {
        return Err(format!("base64 length {} is not a multiple of 4", b.len()));
    }
    let value = |c: u8, at: usize| -> Result<u32, String> {
        ALPHABET
            .iter()
            .position(|&a| a == c)
            .map(|p| p as u32)
            .ok_or_else(|| format!("invalid base64 character {:?} at {at}", c as char))
    };
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (q, quad) in b.chunks(4).enumerate() {
        let last = (q + 1) * 4 == b.len();
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(format!("misplaced base64 padding at {}", q * 4));
        }
        let mut v = 0u32;
        for (k, &c) in quad.iter().enumerate() {
            let d = if k >= 4 - pad {
                0
            } else {
                value(c, q * 4 + k)?
            };
            v = v << 6 | d;
        }
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        for n in 0..40u8 {
            let bytes: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
            let text = base64_encode(&bytes);
            assert_eq!(base64_decode(&text).unwrap(), bytes);
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert!(base64_decode("Zm9").is_err());
        assert!(base64_decode("Zm=v").is_err());
        assert!(base64_decode("Z!9v").is_err());
    }

    #[test]
    fn bodies_are_classified_without_loss() {
        assert_eq!(Body::from_bytes(b""), Body::Empty);
        assert!(matches!(
            Body::from_bytes(b"{\"a\": [1, 2.5, \"x\"]}"),
            Body::Json(_)
        ));
        assert!(matches!(Body::from_bytes(b"not json"), Body::Text(_)));
        assert!(matches!(Body::from_bytes(&[0xff, 0xfe]), Body::Binary(_)));
        // A number beyond u64, a duplicated key: JSON that would not survive, kept as text.
        assert!(matches!(
            Body::from_bytes(b"{\"n\": 123456789012345678901234567890}"),
            Body::Text(_)
        ));
        assert!(matches!(
            Body::from_bytes(b"{\"a\":1,\"a\":2}"),
            Body::Text(_)
        ));
        // Exponents and escapes are the same values written differently: kept as JSON.
        assert!(matches!(
            Body::from_bytes(b"{\"x\": 1e3, \"s\": \"\\u00e9\"}"),
            Body::Json(_)
        ));
    }
}
