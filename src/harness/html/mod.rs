//! Self-contained HTML reports (docs/trace.md, "The HTML report"): a run as a sequence
//! diagram with its faults and verdicts, a sweep as its failures grouped by invariant, and a
//! replay as its first divergence beside the recording.
//!
//! One file, no network: the CSS and the small script are inline and the diagram is SVG drawn
//! here. The bytes depend only on the report, so the same run gives the same file.

mod page;
pub mod parse;
mod replay;
pub mod sequence;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::explore::ExploreReport;
use super::report::{RunReport, Verdict};
use super::system::System;

pub use replay::replay_page;

/// `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn verdict_text(v: &Verdict) -> (&'static str, String) {
    match v {
        Verdict::Pass => ("pass", "PASS".into()),
        Verdict::Correctness => ("fail", "FAIL (correctness)".into()),
        Verdict::Liveness(why) => ("fail", format!("FAIL (liveness): {why}")),
        Verdict::Crash(p) => ("fail", format!("CRASH: {p}")),
    }
}

/// The report of one run.
pub fn run_page(report: &RunReport) -> String {
    let rows = parse::rows(&report.trace_text);
    let lanes = sequence::lanes(&rows);
    let mut broken: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (id, violations) in &report.invariants {
        for v in violations {
            if let Some(i) = v.event
                && i < rows.len()
            {
                broken.entry(i).or_default().push(id.to_string());
            }
        }
    }
    let (vclass, vtext) = verdict_text(&report.verdict);
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<header><h1>{name}</h1><div class="meta"><span>{path}</span> · <span>seed {seed}</span> · <span>{events} events, {end} ms simulated</span> · <span>trace {hash}</span></div><div class="verdict {vclass}" id="verdict">{vtext}</div>"#,
        name = escape(&report.scenario_name),
        path = escape(&report.scenario_path),
        seed = report.seed,
        events = report.events,
        end = report.end_ms,
        hash = escape(&report.trace_hash),
        vtext = escape(&vtext),
    );
    if report.verdict != Verdict::Pass {
        let _ = write!(
            body,
            r#"<div class="repro"><code id="repro">{}</code><button type="button" data-copy="repro">copy</button></div>"#,
            escape(&report.repro_command())
        );
    }
    body.push_str("</header>\n");
    body.push_str(r#"<section class="summary"><div><h2>Faults</h2><ul class="faults">"#);
    if report.faults.is_empty() {
        body.push_str("<li>none</li>");
    }
    for f in &report.faults {
        let _ = writeln!(body, "<li class=\"fault-item\">{}</li>", escape(f));
    }
    body.push_str("</ul><h2>Turns</h2><ol>");
    for t in &report.turn_outcomes {
        let _ = write!(body, "<li>{}</li>", escape(t));
    }
    body.push_str(r#"</ol></div><div><h2>Invariants</h2><table class="invariants">"#);
    for (id, violations) in &report.invariants {
        let expected = report.expected.iter().find(|(x, _, _)| x == id);
        let (class, state) = match (expected, violations.is_empty()) {
            (Some((_, f, true)), _) => ("xfail", format!("XFAIL ({f})")),
            (Some((_, f, false)), _) => ("xpass", format!("XPASS ({f})")),
            (None, true) => ("pass", "pass".to_string()),
            (None, false) => ("inv-fail", "FAIL".to_string()),
        };
        let _ = write!(
            body,
            r#"<tr class="{class}" data-invariant="{id}"><td>{id}</td><td>{}</td><td>"#,
            escape(&state)
        );
        for v in violations {
            let at = v
                .event
                .filter(|i| *i < rows.len())
                .map(|i| format!(r##" <a href="#e{i}" data-goto="{i}">event {}</a>"##, i + 1))
                .unwrap_or_default();
            let _ = write!(body, "<div>{}{at}</div>", escape(&v.message));
        }
        body.push_str("</td></tr>\n");
    }
    body.push_str("</table></div></section>");
    let _ = write!(
        body,
        r#"<section class="sequence"><h2>Sequence</h2><p class="hint">One row per trace event, in order; simulated ms on the left. Hover for the trace line, click to pin it below.</p><div class="detail" id="detail">click an event</div><div class="scroll"><div class="sticky">{}</div>{}</div></section>"#,
        sequence::header_svg(&lanes),
        sequence::diagram_svg(&rows, &lanes, &broken)
    );
    body.push_str(r#"<section><h2>Trace</h2><pre class="trace" id="trace">"#);
    for r in &rows {
        let class = if broken.contains_key(&r.index) {
            r#" class="broke""#
        } else {
            ""
        };
        let _ = writeln!(
            body,
            r#"<span id="l{}"{class}>{}</span>"#,
            r.index,
            escape(&r.line)
        );
    }
    body.push_str("</pre></section>");
    page::wrap(
        &format!("{} seed {}", report.scenario_name, report.seed),
        &body,
    )
}

/// How fast a sweep ran: measured by the command line in wall time, so it is passed in and
/// never part of the deterministic report.
pub struct Rate {
    pub seeds_per_s: f64,
    pub jobs: usize,
    pub wall_s: f64,
}

/// The report of a sweep; `run_pages` maps (scenario, seed) of a failure to the file name of
/// its run report, when those were written beside it. Without `rate` the page is the same
/// bytes for the same sweep.
pub fn sweep_page(
    report: &ExploreReport,
    run_pages: &BTreeMap<(String, u64), String>,
    rate: Option<&Rate>,
) -> String {
    let mut body = String::new();
    let failed = report.failures.len();
    let vclass = if failed == 0 { "pass" } else { "fail" };
    let _ = write!(
        body,
        r#"<header><h1>Sweep of {n} scenario(s)</h1><div class="meta">seeds {a}..{b}{shard}{swarm} · {runs} runs</div><div class="verdict {vclass}" id="verdict">{passed} passed, {failed} failed</div></header>"#,
        n = report.scenarios.len(),
        a = report.seeds[0],
        b = report.seeds[1],
        shard = report
            .shard
            .map(|[k, n]| format!(", shard {k}/{n}"))
            .unwrap_or_default(),
        swarm = if report.swarm { ", swarm faults" } else { "" },
        runs = report.runs,
        passed = report.passed,
    );
    if let Some(r) = rate {
        let _ = write!(
            body,
            r#"<div class="meta rate">rate {:.1} seeds/s over {} job(s) ({:.2} s wall)</div>"#,
            r.seeds_per_s, r.jobs, r.wall_s
        );
    }
    body.push_str(r#"<section><h2>Failures by invariant</h2>"#);
    if failed == 0 {
        body.push_str("<p>none</p>");
    }
    for (inv, seeds) in report.by_invariant() {
        let _ = write!(
            body,
            r#"<details open class="group" data-invariant="{i}"><summary>{i}: {} seed(s)</summary><table>"#,
            seeds.len(),
            i = escape(&inv)
        );
        for (scenario, seed) in &seeds {
            let Some(f) = report
                .failures
                .iter()
                .find(|f| &f.scenario == scenario && f.seed == *seed)
            else {
                continue;
            };
            let link = run_pages
                .get(&(scenario.clone(), *seed))
                .map(|p| format!(r#" <a href="{}">run report</a>"#, escape(p)))
                .unwrap_or_default();
            let _ = writeln!(
                body,
                "<tr><td>seed {seed}</td><td>{}</td><td>{}<div class=\"plan\">{}</div></td><td><code>{}</code>{link}</td></tr>",
                escape(scenario),
                escape(&f.summary_under(&inv)),
                escape(&f.plan.join("; ")),
                escape(&f.reproduce),
            );
        }
        body.push_str("</table></details>");
    }
    body.push_str(r#"</section><section><h2>Coverage</h2><table class="coverage">"#);
    for g in System::ALL
        .iter()
        .flat_map(|s| s.goals())
        .filter(|g| report.coverage.contains_key(g.id))
    {
        let n = report.coverage.get(g.id).copied().unwrap_or(0);
        let class = if n == 0 { "never" } else { "reached" };
        let _ = writeln!(
            body,
            "<tr class=\"{class}\"><td>{}</td><td>{n}</td><td>{}</td></tr>",
            g.id,
            if n == 0 { "NEVER REACHED" } else { "" }
        );
    }
    body.push_str("</table></section>");
    if !report.expected.is_empty() {
        body.push_str("<section><h2>Known findings let through (XFAIL)</h2><ul>");
        for (f, n) in &report.expected {
            let _ = write!(body, "<li>{} in {n} run(s)</li>", escape(f));
        }
        body.push_str("</ul></section>");
    }
    page::wrap("sweep", &body)
}
