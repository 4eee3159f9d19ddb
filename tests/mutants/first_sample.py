#!/usr/bin/env python3
"""The before/after detection rates of docs/finding-power.md, re-measured on this tree.

    python3 tests/mutants/first_sample.py [SEEDS]

The first mutation sample (`run.sh 1/100` on dac0cdf) caught 18 mutants; the finding-power
issue measures its detection-rate target on that set. Their lines have moved since, and three
of the mutated functions were rewritten as patterns (kosong's and the published client's own
regular expressions), so each mutant is written here as a text edit of today's code: the same
edit where the code is the same, the edit with the same effect where it was rewritten (the
`note` says which). Each edit is turned into a diff under target/mutants/first-sample/ and
swept by tests/mutants/rate.sh (plain, swarm and guided, seeds 0..SEEDS, default 100).

Prints the table with the `before` counts measured on dac0cdf (swarm and guided, of 6,800
runs) and the medians before and after. Costs one incremental release build and three sweeps
per mutant: about 70-90 minutes on 2 cores for the 18. Run it in a worktree of its own if you
edit this one (rate.sh patches the tree and reverts it).
"""
import difflib
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# (mutant as the first sample named it, file, text today, mutated text, before swarm,
#  before guided, note). Each text must occur exactly once in its file.
MUTANTS = [
    ("kimi/turn_loop/errors.rs:163 delete the 413 arm",
     "src/model/kimi/turn_loop/errors.rs",
     "} else if classify::is_request_too_large_status(status, &message) {",
     "} else if false {",
     0, 52, "the body-size branch of `from_http`"),
    ("kimi/turn_loop/provider.rs:147 `||` -> `&&`",
     "src/model/kimi/turn_loop/classify.rs",
     '        r"roles must alternate",\n',
     "",
     0, 39, "the line's leading `||` before the roles-alternate clause, so it matched only "
     "beside the first-message one; now that pattern"),
    ("kimi/turn_loop/retry.rs:156 `>` -> `==`",
     "src/model/kimi/turn_loop/retry.rs",
     ".filter(|&ms| ms > 0)", ".filter(|&ms| ms == 0)", 115, 127, ""),
    ("letta/server/store.rs:453 `+` -> `*`",
     "src/model/letta/server/store.rs",
     "run.log.len() as u64 + 1", "run.log.len() as u64 * 1", 1266, 962, ""),
    ("letta/client/backend.rs:333 `+=` -> `-=`",
     "src/model/letta/client/backend.rs",
     "done += 1;", "done -= 1;", 224, 219, ""),
    ("letta/client/policy/pre_stream.rs:37 `<` -> `>`",
     "src/model/letta/client/policy/pre_stream.rs",
     "conversation_busy_retries < max_conversation_busy_retries",
     "conversation_busy_retries > max_conversation_busy_retries", 0, 0, ""),
    ("letta/client/resume.rs:537 `<` -> `<=`",
     "src/model/letta/client/resume.rs",
     "if attempt < policy.max_attempts {", "if attempt <= policy.max_attempts {", 0, 0, ""),
    ("letta/client/turn/approval_step.rs:274 delete `!`",
     "src/model/letta/client/turn/approval_step.rs",
     "if !finished {", "if finished {", 0, 0, ""),
    ("letta/server/compaction/estimate.rs:193 -> `Some(0)`",
     "src/model/letta/server/compaction/estimate.rs",
     ") -> Option<u64> {\n    let e = context_estimate(msgs);",
     ") -> Option<u64> {\n    return Some(0);\n    let e = context_estimate(msgs);", 0, 0, ""),
    ("letta/server/parse.rs:22 `<` -> `<=`",
     "src/model/letta/server/parse.rs",
     "while i < b.len() {", "while i <= b.len() {", 0, 0, ""),
    ("letta/server/send.rs:313 -> `Ok((\"xyzzy\", \"xyzzy\"))`",
     "src/model/letta/server/send.rs",
     ") -> Result<(String, String), Refused> {\n",
     ") -> Result<(String, String), Refused> {\n    return Ok((\"xyzzy\".into(), \"xyzzy\".into()));\n",
     0, 0, ""),
    ("kimi/turn_loop/schema.rs:238 `<` -> `>`",
     "src/model/kimi/turn_loop/schema.rs",
     '("exclusiveMaximum", "<", |v, l| v < l)', '("exclusiveMaximum", "<", |v, l| v > l)',
     0, 0, ""),
    ("letta/client/resume.rs:65 `is_replayable_run` -> `false`",
     "src/model/letta/client/resume.rs",
     "pub fn is_replayable_run(run: &Value) -> bool {\n",
     "pub fn is_replayable_run(run: &Value) -> bool {\n    return false;\n", 0, 0, ""),
    ("letta/server/ids.rs:52 `%` -> `+`",
     "src/model/letta/server/ids.rs",
     "(secs / 86_400, secs % 86_400)", "(secs / 86_400, secs + 86_400)", 0, 0, ""),
    ("letta/client/policy/classifiers.rs:43 `&&` -> `||`",
     "src/model/letta/client/policy/classifiers.rs",
     r'r"(?i)(?-u:\b)run_id=', r'r"(?i)run_id=',
     0, 0, "the word-boundary check, now the pattern's `\\b`"),
    ("letta/client/policy/delays.rs:108 `/` -> `%`",
     "src/model/letta/client/policy/delays.rs",
     "yoe / 4", "yoe % 4", 0, 0, ""),
    ("letta/client/policy/retry_decisions.rs:65 -> `Some(Default)`",
     "src/model/letta/client/policy/retry_decisions.rs",
     "pub fn from_run(run: &Value) -> Option<RunErrorMeta> {\n",
     "pub fn from_run(run: &Value) -> Option<RunErrorMeta> {\n"
     "        return Some(Default::default());\n", 0, 0, ""),
    ("letta/server/compaction/summary.rs:138 `*` -> `+`",
     "src/model/letta/server/compaction/summary.rs",
     "let head_n = (budget as f64 * 0.3)", "let head_n = (budget as f64 + 0.3)", 0, 0, ""),
]

LINE = re.compile(r"^(plain|swarm|guided) (\d+) of (\d+)(?: \(first seed (\d+)\))?$")


def write_diff(index, path, old, new):
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    if text.count(old) != 1:
        sys.exit(f"first_sample.py: {path}: the text to mutate occurs {text.count(old)} times, "
                 f"not once; the code moved: rewrite the entry\n  {old!r}")
    mutated = text.replace(old, new)
    diff = difflib.unified_diff(text.splitlines(True), mutated.splitlines(True), path, path)
    out = os.path.join(ROOT, "target", "mutants", "first-sample", f"{index:02}.diff")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.writelines(diff)
    return out


def cell(way):
    if way is None:
        return "not measured"
    failing, first = way
    return f"{failing:,} ({first})" if failing else "0"


def main():
    seeds = sys.argv[1] if len(sys.argv) > 1 else "100"
    diffs = [write_diff(i, m[1], m[2], m[3]) for i, m in enumerate(MUTANTS, 1)]
    rows = []
    for (name, _, _, _, before_swarm, before_guided, note), diff in zip(MUTANTS, diffs):
        print(f"first_sample.py: {name}", file=sys.stderr, flush=True)
        run = subprocess.run(["bash", "tests/mutants/rate.sh", diff, seeds], cwd=ROOT,
                             capture_output=True, text=True)
        ways, runs = {}, None
        for line in run.stdout.splitlines():
            m = LINE.match(line.strip())
            if m:
                ways[m[1]] = (int(m[2]), m[4] or "-")
                runs = int(m[3])
        if run.returncode != 0 or len(ways) < 3:
            print(f"  rate.sh exit {run.returncode}: {run.stderr.strip()[-400:]}", file=sys.stderr)
        rows.append((name, note, before_swarm, before_guided, runs, ways))
        print("  " + ", ".join(f"{w} {cell(ways.get(w))}" for w in ("plain", "swarm", "guided"))
              + (f" of {runs:,}" if runs else ""), file=sys.stderr, flush=True)

    print("| mutant | before: swarm | before: guided | runs | plain | swarm | guided |")
    print("|---|---|---|---|---|---|---|")
    for name, note, bs, bg, runs, ways in rows:
        where, _, what = name.partition(" ")
        label = (f"`{where}` {what}" + (f" ({note})" if note else "")).replace("|", "\\|")
        print(f"| {label} | {bs:,} | {bg:,} | {runs or '-'} | "
              + " | ".join(cell(ways.get(w)) for w in ("plain", "swarm", "guided")) + " |")
    measured = [r for r in rows if all(w in r[5] for w in ("swarm", "guided"))]
    print()
    print(f"measured {len(measured)} of {len(rows)}")
    for col, way in ((2, "swarm"), (3, "guided")):
        before = statistics.median(r[col] for r in measured)
        after = statistics.median(r[5][way][0] for r in measured)
        print(f"median failing runs, {way}: before {before:g} (of 6,800), after {after:g}")
    found = sum(1 for r in measured if any(r[5][w][0] for w in ("plain", "swarm", "guided")))
    print(f"found by some sweep: {found} of {len(measured)}")


if __name__ == "__main__":
    main()
