//! Id normalisation for comparing a recorded response with ours: what a server invents (ids,
//! uuids, dates) becomes placeholders numbered in order of first appearance, so two bodies
//! compare equal when the same id recurs in the same places on both sides.

use std::collections::BTreeMap;

/// The id kinds a Letta server invents: `<kind>-` + a lower-case uuid.
pub const ID_KINDS: [&str; 8] = [
    "run-", "message-", "step-", "ping-", "conv-", "agent-", "user-", "org-",
];

/// The all-zero uuid of the default user and organisation; it is not invented, so it stays.
const FIXED_UUID: &str = "00000000-0000-4000-8000-000000000000";

/// A lower-case 8-4-4-4-12 uuid.
pub fn is_uuid(s: &str) -> bool {
    is_uuid_bytes(s.as_bytes())
}

/// [`is_uuid`] on bytes, so text around it may be any UTF-8.
fn is_uuid_bytes(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit() && !c.is_ascii_uppercase(),
        })
}

/// Ids of one kind (`run-`, `conv-`, …) in `text`, in order of first appearance.
pub fn ids_in(text: &str, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let cand = &rest[i..];
        let id_len = prefix.len() + 36;
        if cand.len() >= id_len && is_uuid_bytes(&cand.as_bytes()[prefix.len()..id_len]) {
            let id = cand[..id_len].to_string();
            if !out.contains(&id) {
                out.push(id);
            }
            rest = &cand[id_len..];
        } else {
            rest = &cand[prefix.len()..];
        }
    }
    out
}

/// Replaces what a server invents with placeholders. Ids ([`ID_KINDS`] + uuid) and bare uuids
/// (the otids derived from message ids) become `<kind-N>`, numbered per kind in order of first
/// appearance in the exchange; an id an earlier exchange of the chain showed first becomes
/// `<kind-N@that exchange>`, so references across exchanges (a replay's run, a
/// `pending_request_id`, a step) are checked too, and a mismatch in one exchange does not
/// renumber the others. The all-zero uuid of the default user and organisation stays. `date`
/// values become `<date>`, Python datetime reprs `<datetime>`; with
/// [`Normalizer::with_timestamps`], every ISO-8601 UTC timestamp (`created_at`, …) becomes
/// `<time>` too.
#[derive(Default)]
pub struct Normalizer {
    /// Ids of earlier exchanges → their placeholder there, with `@exchange`.
    earlier: BTreeMap<String, String>,
    /// Ids of this exchange → placeholder.
    seen: BTreeMap<String, String>,
    counts: BTreeMap<String, usize>,
    timestamps: bool,
}

impl Normalizer {
    /// A normaliser that also hides ISO-8601 timestamps (JSON objects' `created_at`, …): wall
    /// clock of the recording on one side, simulated time on the other.
    pub fn with_timestamps() -> Self {
        Normalizer {
            timestamps: true,
            ..Normalizer::default()
        }
    }

    fn placeholder(&mut self, kind: &str, value: &str) -> String {
        if let Some(p) = self.seen.get(value).or_else(|| self.earlier.get(value)) {
            return p.clone();
        }
        let n = self.counts.entry(kind.to_string()).or_insert(0);
        *n += 1;
        let p = format!("<{kind}-{n}>");
        self.seen.insert(value.to_string(), p.clone());
        p
    }

    /// Normalises exchange `name`'s body; its new ids become references for later exchanges,
    /// labelled with `name` up to its first `_`.
    pub fn capture(&mut self, name: &str, text: &str) -> String {
        let out = self.normalize(text);
        for (value, p) in std::mem::take(&mut self.seen) {
            let short = name.split('_').next().unwrap_or(name);
            let label = format!("{}@{short}>", p.trim_end_matches('>'));
            self.earlier.insert(value, label);
        }
        self.counts.clear();
        out
    }

    fn normalize(&mut self, text: &str) -> String {
        let b = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            let rest = &text[i..];
            if let Some(kind) = ID_KINDS.iter().find(|k| {
                rest.starts_with(**k)
                    && rest.len() >= k.len() + 36
                    && is_uuid_bytes(&rest.as_bytes()[k.len()..k.len() + 36])
            }) {
                let id = &rest[..kind.len() + 36];
                if id.ends_with(FIXED_UUID) {
                    out.push_str(id);
                } else {
                    let p = self.placeholder(kind.trim_end_matches('-'), id);
                    out.push_str(&p);
                }
                i += id.len();
                continue;
            }
            if rest.len() >= 36
                && is_uuid_bytes(&rest.as_bytes()[..36])
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            {
                let id = &rest[..36];
                if id == FIXED_UUID {
                    out.push_str(id);
                } else {
                    let p = self.placeholder("uuid", id);
                    out.push_str(&p);
                }
                i += 36;
                continue;
            }
            if is_date(rest) {
                out.push_str("<date>");
                i += 25;
                continue;
            }
            if self.timestamps
                && let Some(n) = timestamp_len(rest)
            {
                out.push_str("<time>");
                i += n;
                continue;
            }
            if rest.starts_with("datetime.datetime(")
                && let Some(end) = rest.find("TzInfo(0))")
            {
                out.push_str("<datetime>");
                i += end + "TzInfo(0))".len();
                continue;
            }
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            i += c.len_utf8();
        }
        out
    }
}

/// `YYYY-MM-DDTHH:MM:SS+00:00`, the only `date` format 0.16.8 streams.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 25
        && b[..25].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 | 22 => *c == b':',
            19 => *c == b'+',
            _ => c.is_ascii_digit(),
        })
        && &s[19..25] == "+00:00"
}

/// The length of an ISO-8601 timestamp at the start of `s`: `YYYY-MM-DDTHH:MM:SS`, optional
/// fraction, optional `Z` or `+00:00` (the objects' `created_at`, `updated_at`, …).
fn timestamp_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let head = b.len() >= 19
        && b[..19].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T' || *c == b' ',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        });
    if !head {
        return None;
    }
    let mut n = 19;
    if b.get(n) == Some(&b'.') {
        n += 1;
        while b.get(n).is_some_and(u8::is_ascii_digit) {
            n += 1;
        }
    }
    if b.get(n) == Some(&b'Z') {
        n += 1;
    } else if s[n..].starts_with("+00:00") {
        n += 6;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_numbered_by_first_appearance() {
        let mut n = Normalizer::default();
        let s = n.capture(
            "b_x",
            r#"{"id":"message-2dc54175-e0d8-4433-838b-5c87a66a8b28","date":"2026-11-30T00:14:33+00:00","otid":"2dc54175-e0d8-4433-838b-5c87a66a8b00","run_id":"run-9692b116-0e54-437f-ad12-7076e30bfa01"} message-2dc54175-e0d8-4433-838b-5c87a66a8b28 user-00000000-0000-4000-8000-000000000000"#,
        );
        assert_eq!(
            s,
            r#"{"id":"<message-1>","date":"<date>","otid":"<uuid-1>","run_id":"<run-1>"} <message-1> user-00000000-0000-4000-8000-000000000000"#
        );
        // A later exchange refers to it by where it came from; its own ids count from 1 again.
        assert_eq!(
            n.capture(
                "f1_y",
                "run-9692b116-0e54-437f-ad12-7076e30bfa01 run-00000000-0000-4000-8000-00000000000a"
            ),
            "<run-1@b> <run-1>"
        );
    }

    #[test]
    fn timestamps_are_hidden_only_when_asked() {
        let text = r#"{"created_at":"2026-11-30T00:46:34.578624Z","at":"2026-11-30T00:46:34"}"#;
        assert_eq!(Normalizer::default().capture("x", text), text);
        assert_eq!(
            Normalizer::with_timestamps().capture("x", text),
            r#"{"created_at":"<time>","at":"<time>"}"#
        );
    }

    #[test]
    fn text_around_ids_may_be_any_utf8() {
        let text =
            "agent \u{2014} a new generation of agent built for experiential learnin\u{2014}";
        assert_eq!(Normalizer::with_timestamps().capture("x", text), text);
    }

    #[test]
    fn ids_of_a_kind_in_order() {
        let a = "run-9692b116-0e54-437f-ad12-7076e30bfa01";
        let b = "run-00000000-0000-4000-8000-00000000000a";
        assert_eq!(
            ids_in(&format!("{b} x {a} {b} run-short"), "run-"),
            vec![b.to_string(), a.to_string()]
        );
    }
}
