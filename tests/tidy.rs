//! Tidy: the repository's rules, checked as a test over the source text of `src/` and
//! `sim/src/` (the way rust-analyzer's and TigerBeetle's tidy tests keep theirs). A failure names
//! `file:line`, the rule and what it found.
//!
//! The rules:
//! - `layering`: a file under `src/model/` or `src/wire/` names a path through `harness` (the
//!   models and the wire formats never depend on the harness that drives them).
//! - `hash-collection`: `HashMap` or `HashSet` in `src/` (their iteration order differs between
//!   processes; use `BTreeMap`/`BTreeSet` or `IndexMap`).
//! - `wall-clock`: `SystemTime` or `std::time::Instant` in `src/` (simulated time only;
//!   `tokio::time::Instant` is allowed: under turmoil and a paused tokio clock it is virtual).
//! - `model-clock`: `tokio::time` in `src/model/` (a model reads time, sleeps and times out
//!   only through the `Clock` its `Env` hands out, so the harness owns simulated time and can
//!   skip idle stretches of it; `src/model/port/clock.rs`, which wraps tokio's clock for real
//!   TCP and paused-runtime tests, is the one exception).
//! - `model-spawn`: `tokio::spawn`, `tokio::task::spawn*` or `JoinSet` in `src/model/` (a
//!   model starts its side tasks through the `Spawner` its `Env` hands out, so a simulated
//!   host runs them on its `LocalSet`, whose tasks wake in a step-independent order;
//!   `src/model/port/spawn.rs`, which is that spawner, is the one exception).
//! - `os-entropy`: randomness from the operating system in `src/` (every random draw comes from
//!   the seeded PRNG).
//! - `select-biased`: a `select!` whose first token is not `biased;` (an unbiased select polls
//!   its branches in a random order).
//! - `step-rng`: `tokio::sync::watch` in `src/` (its waiters wake in an order drawn from the
//!   runtime's thread RNG, which tokio reseeds each time a runtime is entered, once per turmoil
//!   step, so the order would depend on how many steps the warp skipped; use
//!   `model::port::signal`, which wakes waiters oldest first).
//! - `file-length`: a file over 900 lines.
//! - `todo`: `todo!` or `unimplemented!`.
//! - `history-comment`: a comment in `src/` or `sim/src/` that tells the project's history
//!   (`issue 12`, `client-model:`) instead of what the code does.
//!
//! `sim/src/` is the command-line front end, not a model: it may read the wall clock (progress
//! lines, `sim bench` timings) and use hash collections, so only `select-biased`, `file-length`,
//! `todo` and `history-comment` apply there.
//!
//! The code rules look at code only: comments and the contents of string and character literals
//! are blanked first, so a doc comment that mentions `HashMap` or an error message that says
//! `todo!` is not a violation. The history rule looks at comments only.

use std::path::Path;

/// Longest allowed source file, in lines.
const MAX_LINES: usize = 900;

/// Narrow, reasoned exceptions: (file, rule, why). Each must still match a violation, so a stale
/// exception fails too. The real-TCP `Env` (src/harness/tcp.rs) and `sim serve`
/// (src/harness/serve.rs) read real time through `tokio::time::Instant`, which the wall-clock
/// rule allows.
const EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "src/model/port/clock.rs",
        "model-clock",
        "`Clock::tokio`: tokio's clock as a model clock, for `sim serve`'s real-TCP Env and for \
         the model tests under a paused tokio runtime",
    ),
    (
        "src/model/port/spawn.rs",
        "model-spawn",
        "`Spawner`: the one place a model's task reaches tokio's spawn functions",
    ),
    (
        "src/harness/record.rs",
        "step-rng",
        "the recorder runs on real TCP between a real client and server, never on turmoil",
    ),
    (
        "src/harness/replay/server.rs",
        "step-rng",
        "each stream's end is its own channel with one receiver, so no wake order exists",
    ),
];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    path: String,
    line: usize,
    rule: &'static str,
    what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.path, self.line, self.rule, self.what
        )
    }
}

/// Which rule families apply to a file, by where it is.
#[derive(Debug, Clone, Copy)]
struct Scope {
    /// `src/model/` or `src/wire/`.
    layered: bool,
    /// `src/` (not `sim/src/`): the determinism rules.
    library: bool,
    /// `src/model/`: time only through the model's `Clock`.
    model: bool,
}

fn scope(path: &str) -> Scope {
    Scope {
        layered: path.starts_with("src/model/") || path.starts_with("src/wire/"),
        library: path.starts_with("src/"),
        model: path.starts_with("src/model/"),
    }
}

// ---------------------------------------------------------------------------------------------
// Lexing: code and comments apart

/// The text split in two of the same shape (same length in chars, same newlines): `code` with
/// comments and literal contents blanked, `comments` with only the comments.
struct Split {
    code: String,
    comments: String,
}

fn split(text: &str) -> Split {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Split {
        code: String::with_capacity(text.len()),
        comments: String::with_capacity(text.len()),
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p);
            out.comment(&chars[i..end]);
            i = end;
        } else if c == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            let mut j = i;
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            let end = j.min(chars.len());
            out.comment(&chars[i..end]);
            i = end;
        } else if let Some((open, hashes)) = (i == 0 || !ident(chars[i - 1]))
            .then(|| raw_string_start(&chars, i))
            .flatten()
        {
            // r"…", r#"…"#, br"…", cr"…": no escapes; ends at a quote and as many hashes.
            let body = i + open;
            let closes = |j: usize| {
                chars[j] == '"'
                    && chars
                        .get(j + 1..j + 1 + hashes)
                        .is_some_and(|h| h.iter().all(|&c| c == '#'))
            };
            let end = (body..chars.len())
                .find(|&j| closes(j))
                .unwrap_or(chars.len());
            let close = (end + 1 + hashes).min(chars.len());
            out.code(&chars[i..body]);
            out.literal(&chars[body..end]);
            out.code(&chars[end..close]);
            i = close;
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = j.min(chars.len());
            let close = (end + 1).min(chars.len());
            out.code(&chars[i..i + 1]);
            out.literal(&chars[i + 1..end]);
            out.code(&chars[end..close]);
            i = close;
        } else if let Some(len) = (c == '\'').then(|| char_literal_len(&chars, i)).flatten() {
            out.code(&chars[i..i + 1]);
            out.literal(&chars[i + 1..i + len - 1]);
            out.code(&chars[i + len - 1..i + len]);
            i += len;
        } else {
            out.code(&chars[i..i + 1]);
            i += 1;
        }
    }
    out
}

impl Split {
    fn code(&mut self, chars: &[char]) {
        self.code.extend(chars);
        self.comments.extend(chars.iter().map(|&c| blank(c)));
    }

    fn comment(&mut self, chars: &[char]) {
        self.code.extend(chars.iter().map(|&c| blank(c)));
        self.comments.extend(chars);
    }

    fn literal(&mut self, chars: &[char]) {
        self.code.extend(chars.iter().map(|&c| blank(c)));
        self.comments.extend(chars.iter().map(|&c| blank(c)));
    }
}

/// A space in place of `c`, keeping newlines.
fn blank(c: char) -> char {
    if c == '\n' { '\n' } else { ' ' }
}

/// At a raw string literal (`r"`, `r#"`, `br"`, `cr#"`…): the length of its opening and the
/// number of hashes.
fn raw_string_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    (chars.get(j) == Some(&'"')).then_some((j + 1 - i, hashes))
}

/// At a `'`: the length of the character literal starting there, or `None` for a lifetime or a
/// label (`'a`, `'outer:`).
fn char_literal_len(chars: &[char], i: usize) -> Option<usize> {
    match chars.get(i + 1)? {
        // An escape (`'\n'`, `'\''`, `'\u{1F600}'`): the closing quote comes after the escaped
        // character.
        '\\' => {
            let close = chars
                .get(i + 3..)?
                .iter()
                .take(10)
                .position(|&c| c == '\'')?;
            Some(close + 4)
        }
        '\'' | '\n' => None,
        _ => (chars.get(i + 2) == Some(&'\'')).then_some(3),
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens and paths

#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

/// Identifiers (and numbers), `::`, and single punctuation characters of blanked code.
fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let mut text: String = chars[start..i].iter().collect();
            // A raw identifier `r#name` is the identifier `name`.
            if text == "r" && chars.get(i) == Some(&'#') {
                let s = i + 1;
                i = s;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                text = chars[s..i].iter().collect();
            }
            out.push(Token { text, line });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Every path the code names, as its segments and the line of its last segment: the paths of
/// `use` trees expanded (`use std::time::{Duration, Instant}` names `std::time::Instant`) and
/// every qualified path elsewhere (`std::time::Instant::now`).
fn paths(toks: &[Token]) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].text == "use" {
            let mut j = i + 1;
            use_tree(toks, &mut j, &[], &mut out);
            i = j;
            continue;
        }
        if is_ident(&toks[i].text) || toks[i].text == "::" {
            let mut segs = Vec::new();
            let mut line = toks[i].line;
            let mut j = i;
            while j < toks.len() {
                if is_ident(&toks[j].text) {
                    segs.push(toks[j].text.clone());
                    line = toks[j].line;
                    j += 1;
                    if toks.get(j).is_some_and(|t| t.text == "::")
                        && toks.get(j + 1).is_some_and(|t| is_ident(&t.text))
                    {
                        j += 1;
                        continue;
                    }
                } else if toks[j].text == "::" && segs.is_empty() {
                    j += 1;
                    continue;
                }
                break;
            }
            if segs.len() > 1 {
                out.push((segs, line));
            }
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
    out
}

/// Parses one use tree at `*j` under `prefix`, pushing every full path; stops after the tree.
fn use_tree(toks: &[Token], j: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, usize)>) {
    let mut segs = prefix.to_vec();
    loop {
        let Some(t) = toks.get(*j) else { return };
        match t.text.as_str() {
            "::" => *j += 1,
            "{" => {
                *j += 1;
                while toks.get(*j).is_some_and(|t| t.text != "}") {
                    use_tree(toks, j, &segs, out);
                    if toks.get(*j).is_some_and(|t| t.text == ",") {
                        *j += 1;
                    }
                }
                *j += 1;
                break;
            }
            "*" => {
                segs.push("*".into());
                out.push((segs.clone(), t.line));
                *j += 1;
                break;
            }
            "as" => {
                *j += 2;
                break;
            }
            s if is_ident(s) => {
                segs.push(s.to_string());
                *j += 1;
                if toks.get(*j).is_none_or(|t| t.text != "::") {
                    out.push((segs.clone(), t.line));
                    if toks.get(*j).is_some_and(|t| t.text == "as") {
                        *j += 2;
                    }
                    break;
                }
            }
            _ => break,
        }
    }
    if prefix.is_empty() && toks.get(*j).is_some_and(|t| t.text == ";") {
        *j += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// The rules

/// Identifiers that are violations wherever they appear in library code.
const FORBIDDEN_IDENTS: &[(&str, &str)] = &[
    ("HashMap", "hash-collection"),
    ("HashSet", "hash-collection"),
    ("SystemTime", "wall-clock"),
    // The OS entropy sources of rand 0.8 and of rand 0.10 (the version this crate uses), and
    // getrandom itself.
    ("thread_rng", "os-entropy"),
    ("ThreadRng", "os-entropy"),
    ("OsRng", "os-entropy"),
    ("SysRng", "os-entropy"),
    ("getrandom", "os-entropy"),
    ("from_entropy", "os-entropy"),
    ("from_os_rng", "os-entropy"),
    ("make_rng", "os-entropy"),
];

/// Paths (prefixes of segments) that are violations in library code; a last segment ending in
/// `*` matches any segment starting with what comes before it.
const FORBIDDEN_PATHS: &[(&[&str], &str)] = &[
    (&["std", "time", "Instant"], "wall-clock"),
    (&["rand", "rng"], "os-entropy"),
    (&["rand", "random*"], "os-entropy"),
    (&["rand", "fill"], "os-entropy"),
    (&["tokio", "sync", "watch"], "step-rng"),
];

fn path_matches(path: &[String], pattern: &[&str]) -> bool {
    path.len() >= pattern.len()
        && path
            .iter()
            .zip(pattern)
            .all(|(seg, pat)| match pat.strip_suffix('*') {
                Some(prefix) => seg.starts_with(prefix),
                None => seg == pat,
            })
}

/// Every rule on one file. `path` is relative to the repository root with `/` separators.
fn check(path: &str, text: &str) -> Vec<Violation> {
    let scope = scope(path);
    let split = split(text);
    let toks = tokens(&split.code);
    let mut out = Vec::new();
    let mut report = |line: usize, rule: &'static str, what: String| {
        out.push(Violation {
            path: path.to_string(),
            line,
            rule,
            what,
        })
    };

    let lines = text.lines().count();
    if lines > MAX_LINES {
        report(
            MAX_LINES + 1,
            "file-length",
            format!("{lines} lines (at most {MAX_LINES})"),
        );
    }

    for (k, t) in toks.iter().enumerate() {
        let bang = toks.get(k + 1).is_some_and(|n| n.text == "!");
        if bang && (t.text == "todo" || t.text == "unimplemented") {
            report(t.line, "todo", format!("{}!", t.text));
        }
        if bang && t.text == "select" {
            let first = toks.get(k + 3);
            let biased = matches!(toks.get(k + 2), Some(o) if o.text == "{" || o.text == "(")
                && first.is_some_and(|f| f.text == "biased")
                && toks.get(k + 4).is_some_and(|s| s.text == ";");
            if !biased {
                report(
                    t.line,
                    "select-biased",
                    "select! without `biased;` first".into(),
                );
            }
        }
        if scope.library
            && let Some((_, rule)) = FORBIDDEN_IDENTS.iter().find(|(id, _)| t.text == *id)
        {
            report(t.line, rule, t.text.clone());
        }
    }

    for (segs, line) in paths(&toks) {
        if scope.layered && segs.iter().any(|s| s == "harness") {
            report(
                line,
                "layering",
                format!("{} (model/ and wire/ never use harness/)", segs.join("::")),
            );
        }
        if scope.library
            && let Some((_, rule)) = FORBIDDEN_PATHS.iter().find(|(p, _)| path_matches(&segs, p))
        {
            report(line, rule, segs.join("::"));
        }
        if scope.model
            && [
                &["tokio", "spawn"][..],
                &["tokio", "task", "spawn*"],
                &["tokio", "task", "JoinSet"],
            ]
            .iter()
            .any(|p| path_matches(&segs, p))
        {
            report(
                line,
                "model-spawn",
                format!(
                    "{} (a model's tasks start through its Env's Spawner)",
                    segs.join("::")
                ),
            );
        }
        if scope.model && path_matches(&segs, &["tokio", "time"]) {
            report(
                line,
                "model-clock",
                format!("{} (a model's time is its Env's Clock)", segs.join("::")),
            );
        }
    }

    for (n, comment) in split.comments.lines().enumerate() {
        if let Some(what) = history(comment) {
            report(n + 1, "history-comment", what);
        }
    }

    out.sort_by(|a, b| (a.line, a.rule, &a.what).cmp(&(b.line, b.rule, &b.what)));
    out.dedup();
    out
}

/// In one line of comment text: an `issue 12` (or `issue #12`, `Issue 12`) reference or a
/// `client-model:` tag.
fn history(comment: &str) -> Option<String> {
    if let Some(p) = comment.find("client-model:") {
        return Some(comment[p..].trim_end().chars().take(40).collect());
    }
    let lower = comment.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower[from..].find("issue") {
        let at = from + p;
        from = at + "issue".len();
        if lower[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric())
        {
            continue;
        }
        let rest = lower[from..]
            .trim_start_matches('s')
            .trim_start()
            .trim_start_matches('#');
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let len = lower[at..].len() - rest.len()
                + rest.chars().take_while(char::is_ascii_digit).count();
            return Some(comment[at..at + len].to_string());
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The tree

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir` (relative to the repository root), sorted, as
/// (relative path with `/`, text).
fn sources(dir: &str) -> Vec<(String, String)> {
    fn walk(abs: &Path, rel: &str, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(abs)
            .unwrap_or_else(|e| panic!("{}: {e}", abs.display()))
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{rel}/{name}");
            let path = e.path();
            if path.is_dir() {
                walk(&path, &rel, out);
            } else if name.ends_with(".rs") {
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join(dir), dir, &mut out);
    out
}

#[test]
fn the_tree_is_tidy() {
    let files: Vec<_> = ["src", "sim/src"].iter().flat_map(|d| sources(d)).collect();
    assert!(files.len() > 50, "only {} source files found", files.len());
    let mut found = Vec::new();
    let mut used = vec![false; EXCEPTIONS.len()];
    for (path, text) in &files {
        for v in check(path, text) {
            match EXCEPTIONS
                .iter()
                .position(|(p, r, _)| *p == v.path && *r == v.rule)
            {
                Some(e) => used[e] = true,
                None => found.push(v.to_string()),
            }
        }
    }
    for (e, (p, r, why)) in EXCEPTIONS.iter().enumerate() {
        if !used[e] {
            found.push(format!(
                "{p}: {r}: stale exception ({why}): nothing to excuse"
            ));
        }
    }
    assert!(
        found.is_empty(),
        "{} tidy violation(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Tidy can fail: each rule on a planted line

/// The rules `check` reports for `text` at `path`, as (line, rule).
fn rules(path: &str, text: &str) -> Vec<(usize, &'static str)> {
    check(path, text)
        .into_iter()
        .map(|v| (v.line, v.rule))
        .collect()
}

const MODEL: &str = "src/model/letta/server/x.rs";
const HARNESS: &str = "src/harness/x.rs";
const SIM: &str = "sim/src/x.rs";

#[test]
fn a_clean_file_passes() {
    let text = r#"//! A model file that follows every rule.
use std::collections::BTreeMap;
use std::time::Duration;

/// Waits on two things, in order.
async fn wait(clock: &Clock, a: impl Future<Output = ()>, b: impl Future<Output = ()>) {
    let _start = clock.now() + Duration::from_millis(1);
    tokio::select! {
        biased;
        _ = a => {}
        _ = b => {}
    }
}

fn label<'a>(m: &'a BTreeMap<String, u32>) -> Option<&'a str> {
    'outer: for k in m.keys() {
        if k == "x" { break 'outer; }
    }
    let _c = '"';
    None
}
"#;
    assert_eq!(check(MODEL, text), vec![]);
    assert_eq!(check(SIM, text), vec![]);
}

#[test]
fn layering_fails_on_a_model_or_wire_file_that_uses_harness() {
    assert_eq!(
        rules(MODEL, "use crate::harness::trace::Trace;\n"),
        [(1, "layering")]
    );
    assert_eq!(
        rules(
            "src/wire/sse.rs",
            "use crate::{wire::x, harness::env::SimEnv};\n"
        ),
        [(1, "layering")]
    );
    assert_eq!(
        rules(
            MODEL,
            "fn f() {\n    let e = super::super::harness::env::now();\n}\n"
        ),
        [(2, "layering")]
    );
    // The harness itself, and a doc link in a comment, are fine.
    assert_eq!(rules(HARNESS, "use crate::harness::trace::Trace;\n"), []);
    assert_eq!(
        rules(MODEL, "/// Driven by [`crate::harness::run`].\nfn f() {}\n"),
        []
    );
}

#[test]
fn hash_collections_fail_in_src_not_in_sim_and_not_in_comments() {
    assert_eq!(
        rules(
            HARNESS,
            "use std::collections::HashMap;\nfn f(s: std::collections::HashSet<u8>) {}\n"
        ),
        [(1, "hash-collection"), (2, "hash-collection")]
    );
    assert_eq!(rules(SIM, "use std::collections::HashMap;\n"), []);
    assert_eq!(
        rules(
            HARNESS,
            "/// Not a `HashMap`: iteration order matters.\nlet s = \"HashSet\";\n"
        ),
        []
    );
}

#[test]
fn the_wall_clock_fails_in_src_and_tokio_instant_is_allowed() {
    assert_eq!(
        rules(MODEL, "use std::time::SystemTime;\n"),
        [(1, "wall-clock")]
    );
    assert_eq!(
        rules(MODEL, "use std::time::Instant;\n"),
        [(1, "wall-clock")]
    );
    assert_eq!(
        rules(MODEL, "use std::time::{\n    Duration,\n    Instant,\n};\n"),
        [(3, "wall-clock")]
    );
    assert_eq!(
        rules(MODEL, "use std::{io, time::Instant};\n"),
        [(1, "wall-clock")]
    );
    assert_eq!(
        rules(
            MODEL,
            "fn f() {\n    let t = std::time::Instant::now();\n}\n"
        ),
        [(2, "wall-clock")]
    );
    assert_eq!(
        rules(
            HARNESS,
            "use tokio::time::Instant;\nfn f() { Instant::now(); }\n"
        ),
        []
    );
    assert_eq!(rules(HARNESS, "let t = tokio::time::Instant::now();\n"), []);
    assert_eq!(rules(SIM, "use std::time::Instant;\n"), []);
}

#[test]
fn tokio_time_fails_in_a_model_and_is_allowed_in_the_harness() {
    assert_eq!(
        rules(MODEL, "use tokio::time::Instant;\n"),
        [(1, "model-clock")]
    );
    assert_eq!(
        rules(
            MODEL,
            "async fn f() {\n    tokio::time::sleep(d).await;\n}\n"
        ),
        [(2, "model-clock")]
    );
    assert_eq!(
        rules(MODEL, "use tokio::{sync::Notify, time};\n"),
        [(1, "model-clock")]
    );
    assert_eq!(
        rules(MODEL, "/// Like `tokio::time::timeout`.\nfn f() {}\n"),
        []
    );
    assert_eq!(rules(HARNESS, "tokio::time::sleep(d).await;\n"), []);
}

#[test]
fn tokio_spawn_fails_in_a_model_and_is_allowed_in_the_harness() {
    assert_eq!(
        rules(MODEL, "fn f() {\n    tokio::spawn(async {});\n}\n"),
        [(2, "model-spawn")]
    );
    assert_eq!(
        rules(MODEL, "use tokio::task::JoinSet;\n"),
        [(1, "model-spawn")]
    );
    assert_eq!(rules(MODEL, "/// Unlike `tokio::spawn`.\nfn f() {}\n"), []);
    assert_eq!(rules(HARNESS, "tokio::spawn(async {});\n"), []);
}

#[test]
fn os_entropy_fails_in_src() {
    for planted in [
        "let mut r = rand::thread_rng();",
        "let mut r = rand::rng();",
        "let x: u8 = rand::random();",
        "let x = rand::random_range(0..3);",
        "let r = ChaCha8Rng::from_entropy();",
        "let r = ChaCha8Rng::from_os_rng();",
        "use rand::rngs::OsRng;",
        "use rand::rngs::SysRng;",
        "getrandom::fill(&mut buf).unwrap();",
        "use rand::{Rng, random};",
    ] {
        assert_eq!(
            rules(HARNESS, &format!("fn f() {{\n    {planted}\n}}\n")),
            [(2, "os-entropy")],
            "{planted}"
        );
    }
    // A seeded generator is the rule, not an exception.
    assert_eq!(
        rules(HARNESS, "let r = ChaCha8Rng::seed_from_u64(seed);\n"),
        []
    );
}

#[test]
fn tokio_watch_fails_in_src() {
    assert_eq!(rules(MODEL, "use tokio::sync::watch;\n"), [(1, "step-rng")]);
    assert_eq!(
        rules(
            HARNESS,
            "fn f() {\n    let (tx, rx) = tokio::sync::watch::channel(0);\n}\n"
        ),
        [(2, "step-rng")]
    );
    assert_eq!(rules(MODEL, "use crate::model::port::signal;\n"), []);
}

#[test]
fn select_without_biased_first_fails() {
    let unbiased =
        "fn f() {\n    tokio::select! {\n        _ = a => {}\n        _ = b => {}\n    }\n}\n";
    assert_eq!(rules(HARNESS, unbiased), [(2, "select-biased")]);
    assert_eq!(rules(SIM, unbiased), [(2, "select-biased")]);
    let late = "select! {\n    _ = a => {}\n    biased;\n}\n";
    assert_eq!(rules(HARNESS, late), [(1, "select-biased")]);
    assert_eq!(
        rules(
            HARNESS,
            "let x = select!(biased; _ = a => 1, _ = b => 2);\n"
        ),
        []
    );
    assert_eq!(rules(HARNESS, "// tokio::select! { without biased }\n"), []);
}

#[test]
fn a_file_over_900_lines_fails() {
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    assert_eq!(rules(SIM, &long), [(MAX_LINES + 1, "file-length")]);
    assert_eq!(rules(SIM, &"fn f() {}\n".repeat(MAX_LINES)), []);
}

#[test]
fn todo_and_unimplemented_fail_but_not_in_strings() {
    assert_eq!(rules(MODEL, "fn f() {\n    todo!()\n}\n"), [(2, "todo")]);
    assert_eq!(
        rules(SIM, "fn f() { unimplemented!(\"later\") }\n"),
        [(1, "todo")]
    );
    assert_eq!(
        rules(
            MODEL,
            "let s = \"todo!()\";\nlet r = r#\"unimplemented!\"#;\n"
        ),
        []
    );
}

#[test]
fn history_comments_fail_but_history_in_code_is_not_a_comment() {
    assert_eq!(
        rules(MODEL, "// Added for issue 12.\nfn f() {}\n"),
        [(1, "history-comment")]
    );
    assert_eq!(
        rules(SIM, "/// See Issue #3.\nfn f() {}\n"),
        [(1, "history-comment")]
    );
    assert_eq!(
        rules(MODEL, "fn f() {} // client-model: resume data\n"),
        [(1, "history-comment")]
    );
    assert_eq!(
        rules(
            MODEL,
            "/* a block\n   comment (issues 4 and 5) */\nfn f() {}\n"
        ),
        [(2, "history-comment")]
    );
    // Not history: the word without a number, a word that contains it, or a string.
    assert_eq!(
        rules(
            MODEL,
            "// An issue with retries; reissue 3 requests.\nlet s = \"issue 12\";\n"
        ),
        []
    );
}

#[test]
fn literals_and_comments_are_blanked_with_lines_kept() {
    let text = "let a = \"x\\\"HashMap\"; // HashSet\nlet b = r##\"a \"# HashMap\"##; /* x\n todo!() */ let c = 'h';\nlet d = b'\\'';\n";
    let s = split(text);
    assert_eq!(s.code.lines().count(), text.lines().count());
    assert!(!s.code.contains("Hash"), "{}", s.code);
    assert!(!s.code.contains("todo"), "{}", s.code);
    assert!(s.code.contains("let c"), "{}", s.code);
    assert!(s.code.contains("let d"), "{}", s.code);
    assert!(s.comments.contains("HashSet") && s.comments.contains("todo!()"));
    assert!(!s.comments.contains("let"));
}
