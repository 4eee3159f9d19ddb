#!/usr/bin/env python3
"""Reads a cargo-mutants output directory written by tests/mutants/run.sh and prints the
mutation score and, per mutant, what caught it: the unit tests, the plain runs (each scenario
as written), the swarm sweep, the guided sweep, the guided sweep of the published client's
model, each sweep's failing runs and first failing seed (docs/finding-power.md). Logs written
before a way existed show "-" for it."""
import json
import os
import re
import sys

def main(root):
    out = os.path.join(root, "mutants.out") if os.path.isdir(os.path.join(root, "mutants.out")) else root
    with open(os.path.join(out, "outcomes.json")) as f:
        outcomes = json.load(f)["outcomes"]
    rows = []
    for o in outcomes:
        scenario = o.get("scenario")
        if not isinstance(scenario, dict) or "Mutant" not in scenario:
            continue
        m = scenario["Mutant"]
        name = m.get("name") or "%s:%s" % (m["file"], m["span"]["start"]["line"])
        summary = o["summary"]
        log = os.path.join(out, o["log_path"]) if o.get("log_path") else None
        text = open(log, errors="replace").read() if log and os.path.exists(log) else ""
        fp = None
        for line in text.splitlines():
            i = line.find("finding-power: ")
            if i >= 0:
                fp = json.loads(line[i + len("finding-power: "):])
        unit = bool(re.search(r"^test .* \.\.\. FAILED$", text, re.M) and not (
            fp and any(fp.get(k, {}).get("failed") for k in ("plain", "swarm", "guided", "published")) and
            len(re.findall(r"^test .* \.\.\. FAILED$", text, re.M)) == 1))
        rows.append((name, summary, fp, unit))
    viable = [r for r in rows if r[1] != "Unviable"]
    caught = [r for r in viable if r[1] in ("CaughtMutant", "Timeout")]
    print("mutants %d, unviable %d, caught %d (timeouts %d), missed %d" % (
        len(rows), len(rows) - len(viable), len(caught),
        sum(r[1] == "Timeout" for r in viable), len(viable) - len(caught)))
    if viable:
        print("score   %.1f %% of viable mutants caught" % (100.0 * len(caught) / len(viable)))
    print()
    print("| mutant | outcome | unit tests | plain: failing runs (first seed) | swarm: failing runs (first seed) | guided: failing runs (first seed) | published client, guided |")
    print("|---|---|---|---|---|---|---|")
    for name, summary, fp, unit in rows:
        if summary == "Unviable":
            continue
        def way(k):
            if not fp or k not in fp:
                return "-"
            w = fp[k]
            if not w["failed"]:
                return "0 of %d" % w["runs"]
            return "%d of %d (seed %s)" % (w["failed"], w["runs"], w["first_seed"])
        print("| `%s` | %s | %s | %s | %s | %s | %s |" % (name.replace("|", "\\|"), summary,
              "fails" if unit else "pass", way("plain"), way("swarm"), way("guided"),
              way("published")))

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/mutants")
