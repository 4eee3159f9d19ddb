//! Structured mutation fuzzing of every parser a user's file or a network peer reaches
//! (docs/fuzzing.md): scenario TOML, cassettes (version 1 and 2), the SSE decoder, the provider
//! stream decoders, the Letta request bodies the server model reads, and the readers `sim
//! import` runs on files users bring (raw SSE, vcrpy YAML, letta_e2e exchanges).
//!
//! Each [`Target`] takes bytes and must answer with a value or an error, never a panic. Inputs
//! are the target's seed corpus (the bundled files, `tests/fuzz/corpus/<target>/`) mutated by a
//! seeded generator: byte flips, insertions of tokens the grammar cares about, deletions,
//! duplications and splices of two seeds. The same seed gives the same inputs, so a panic
//! found is reproduced by its target, seed and input number, and its input is returned.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use crate::cassette::import::{ImportKind, import_bytes};
use crate::cassette::scrub::Scrubber;
use crate::cassette::{Cassette, Recording};
use crate::harness::scenario::Scenario;
use crate::wire::letta::SendMessageRequest;
use crate::wire::provider::{ProviderDecoder, StreamFormat};
use crate::wire::sse::SseDecoder;

/// A parser under fuzzing.
pub struct Target {
    pub name: &'static str,
    /// Seed files: paths under the crate root, files or folders (every file in a folder).
    pub seeds: &'static [&'static str],
    /// Parses one input; its answer is dropped.
    pub run: fn(&[u8]),
}

/// Every target.
pub const TARGETS: [Target; 9] = [
    Target {
        name: "scenario",
        seeds: &["scenarios/letta", "scenarios/kimi", "scenarios/planted"],
        run: scenario,
    },
    Target {
        name: "cassette-v1",
        seeds: &["cassettes/provider"],
        run: cassette_v1,
    },
    Target {
        name: "cassette-v2",
        seeds: &["cassettes/letta", "cassettes/provider"],
        run: cassette_v2,
    },
    Target {
        name: "sse",
        seeds: &["tests/fuzz/corpus/sse"],
        run: sse,
    },
    Target {
        name: "provider-decoders",
        seeds: &["tests/fuzz/corpus/sse"],
        run: provider_decoders,
    },
    Target {
        name: "letta-request-body",
        seeds: &["tests/fuzz/corpus/letta_body"],
        run: letta_body,
    },
    Target {
        name: "import-sse",
        seeds: &["tests/fuzz/corpus/sse"],
        run: import_sse,
    },
    Target {
        name: "import-vcr-yaml",
        seeds: &["tests/fuzz/corpus/vcr"],
        run: import_vcr_yaml,
    },
    Target {
        name: "import-letta-e2e",
        seeds: &["tests/fuzz/corpus/letta_e2e"],
        run: import_letta_e2e,
    },
];

fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

fn scenario(bytes: &[u8]) {
    // Beside the bundled scenarios, so that their relative cassette paths resolve.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/letta/fuzzed.toml");
    let _ = Scenario::parse(&text(bytes), &path);
}

fn cassette_v1(bytes: &[u8]) {
    let _ = Cassette::parse(&text(bytes), "fuzzed.jsonl");
}

fn cassette_v2(bytes: &[u8]) {
    if let Ok(r) = Recording::parse(&text(bytes), "fuzzed.jsonl") {
        for i in 1..=r.exchanges().len().min(4) {
            let _ = r.stream(i);
        }
    }
}

/// The decoder fed in pieces whose sizes come from the input itself, then finished.
fn sse(bytes: &[u8]) {
    let mut d = SseDecoder::new();
    let step = 1 + bytes.first().map_or(0, |b| usize::from(*b % 17));
    for piece in bytes.chunks(step) {
        let _ = d.push(piece);
    }
    let _ = d.has_partial();
    let _ = d.finish();
}

fn provider_decoders(bytes: &[u8]) {
    let mut d = SseDecoder::new();
    let mut frames = d.push(bytes);
    frames.extend(d.finish());
    for format in [
        StreamFormat::Anthropic,
        StreamFormat::OpenAiChat,
        StreamFormat::OpenAiResponses,
        StreamFormat::Gemini,
    ] {
        let mut dec = ProviderDecoder::new(format);
        for f in &frames {
            if dec.on_frame(f).is_err() {
                break;
            }
        }
        let _ = dec.finish();
    }
}

fn letta_body(bytes: &[u8]) {
    let _ = serde_json::from_slice::<SendMessageRequest>(bytes);
    let _ = serde_json::from_slice::<Vec<crate::wire::letta::MessageItem>>(bytes);
}

fn import(kind: ImportKind, bytes: &[u8]) {
    let _ = import_bytes(kind, bytes, "fuzzed", None, &Scrubber::default());
}

fn import_sse(bytes: &[u8]) {
    import(ImportKind::Sse, bytes);
}

fn import_vcr_yaml(bytes: &[u8]) {
    import(ImportKind::VcrYaml, bytes);
}

fn import_letta_e2e(bytes: &[u8]) {
    import(ImportKind::LettaE2e, bytes);
}

/// What a run of one target did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub target: &'static str,
    pub inputs: u64,
    /// Inputs that panicked: (input number, the input).
    pub panics: Vec<(u64, Vec<u8>)>,
}

/// The seed corpus of `target`, read from under `root`, in path order.
pub fn seeds(target: &Target, root: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for s in target.seeds {
        let p = root.join(s);
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                files.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_file()));
            }
        } else if p.is_file() {
            files.push(p);
        }
    }
    files.sort();
    files
        .into_iter()
        .filter_map(|p| std::fs::read(p).ok())
        .filter(|b| b.len() <= 256 << 10)
        .collect()
}

/// Runs `inputs` mutated inputs through `target` from seed `seed`, catching panics (at most
/// `keep` are kept).
pub fn fuzz(target: &Target, corpus: &[Vec<u8>], inputs: u64, seed: u64, keep: usize) -> Outcome {
    let mut panics = Vec::new();
    let run = target.run;
    for (n, input) in (0..inputs).zip(generated(corpus, seed)) {
        if catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() && panics.len() < keep {
            panics.push((n, input));
        }
    }
    Outcome {
        target: target.name,
        inputs,
        panics,
    }
}

/// Input number `n` of a [`fuzz`] run from `seed` over `corpus`, regenerated without running
/// the target: how an input that did not panic but misbehaved (ran out of memory, took
/// too long) is found again from its number.
pub fn input(corpus: &[Vec<u8>], seed: u64, n: u64) -> Vec<u8> {
    let n = usize::try_from(n).expect("an input number fits in usize");
    generated(corpus, seed)
        .nth(n)
        .expect("the generator never ends")
}

/// The endless sequence of mutated inputs from `seed` over `corpus` (the empty input alone
/// when the corpus is empty): [`fuzz`] runs it, [`input`] picks one of it.
fn generated(corpus: &[Vec<u8>], seed: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    const EMPTY: &[Vec<u8>] = &[Vec::new()];
    let corpus = if corpus.is_empty() { EMPTY } else { corpus };
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    std::iter::repeat_with(move || mutate(&mut rng, corpus))
}

/// xorshift64*: a small deterministic generator (no OS entropy).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Tokens the formats' grammars turn on: delimiters, keys' punctuation, line ends, numbers at
/// the edges of their types, SSE field names, JSON and TOML keywords.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"=",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"\\",
    b"\\u",
    b"\\ud800",
    b"0",
    b"-1",
    b"1e999",
    b"18446744073709551615",
    b"18446744073709551616",
    b"4294967296",
    b"-9223372036854775809",
    b"null",
    b"true",
    b"[[",
    b"]]",
    b"data: ",
    b"event: ",
    b"id: ",
    b"retry: ",
    b": ",
    b"data: [DONE]\n\n",
    b"\xff",
    b"\xc3",
    b"\0",
    b"\"type\":",
    b"\"messages\":",
    b"\"t\":",
    b"{}",
    b"[]",
    b"#",
    b"'''",
    b"\"\"\"",
];

/// One input: a seed (sometimes spliced with another) with a few mutations.
fn mutate(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut v = corpus[rng.below(corpus.len())].clone();
    if rng.below(8) == 0 {
        let other = &corpus[rng.below(corpus.len())];
        let cut = rng.below(v.len() + 1);
        let from = rng.below(other.len() + 1);
        v.truncate(cut);
        v.extend_from_slice(&other[from..]);
    }
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            2 => {
                let end = (at + 1 + rng.below(64)).min(v.len());
                v.drain(at.min(end)..end);
            }
            3 => {
                let end = (at + 1 + rng.below(64)).min(v.len());
                let piece = v[at.min(end)..end].to_vec();
                v.splice(end..end, piece);
            }
            4 => v.insert(at, rng.next() as u8),
            _ => {
                // A digit run made long or extreme.
                let digits = b"99999999999999999999";
                v.splice(
                    at..at,
                    digits[..1 + rng.below(digits.len() - 1)].iter().copied(),
                );
            }
        }
    }
    v
}
