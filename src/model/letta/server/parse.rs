//! What a request carries, read the way the server reads it: query parameters in order,
//! percent-decoded path segments, and a JSON body (empty means `{}`).

use serde_json::{Value, json};

/// Query parameters in order (repeated keys kept), percent-decoded.
pub(crate) fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = query else { return Vec::new() };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first value of `key`.
pub(crate) fn q<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Every value of `key`, in order.
pub(crate) fn q_all<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The body as JSON; an empty (or all-whitespace) body is `{}`.
pub(crate) fn body_json(bytes: &[u8]) -> Result<Value, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer's request target is untrusted: an escape cut short at the end of a segment, or
    /// one that is not hex, stays as written instead of reading past the end.
    #[test]
    fn percent_escapes_decode_and_a_cut_or_bad_one_stays_as_written() {
        assert_eq!(percent_decode("conv%2D1+x"), "conv-1 x");
        assert_eq!(percent_decode("run%41"), "runA");
        for raw in ["run%4", "run%", "%", "%zz", "a%é"] {
            assert_eq!(percent_decode(raw), raw);
        }
        assert_eq!(
            query_pairs(Some("limit=5&order=desc&x%3Dy=%")),
            vec![
                ("limit".to_string(), "5".to_string()),
                ("order".to_string(), "desc".to_string()),
                ("x=y".to_string(), "%".to_string()),
            ]
        );
    }
}
