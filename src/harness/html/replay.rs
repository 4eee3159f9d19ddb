//! The report of `sim replay`: per cassette and side, the verdict, every differing exchange,
//! the first divergence as the recorded and the replayed body side by side with their diff,
//! and the replayed world's trace up to it as a sequence diagram.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{escape, page, parse, sequence};
use crate::harness::replay::ReplayReport;

/// A unified diff as HTML, one line per row, coloured by its first character.
fn diff_html(diff: &str) -> String {
    let mut s = String::from(r#"<pre class="diff">"#);
    for line in diff.lines() {
        let class = match line.as_bytes().first() {
            Some(b'+') if !line.starts_with("+++") => "add",
            Some(b'-') if !line.starts_with("---") => "del",
            Some(b'@') => "hunk",
            _ => "ctx",
        };
        let _ = writeln!(s, r#"<span class="{class}">{}</span>"#, escape(line));
    }
    s.push_str("</pre>");
    s
}

fn section(body: &mut String, n: usize, r: &ReplayReport) {
    let verdict = if r.exit_code() == 0 { "pass" } else { "fail" };
    let _ = write!(
        body,
        r#"<section class="replay" id="replay{n}"><h2>{cassette} ({side} side)</h2><div class="meta">server profile {server}{client}</div><div class="verdict {verdict}">{summary}</div>"#,
        cassette = escape(&r.cassette),
        side = r.side,
        server = escape(&r.server_profile),
        client = r
            .client_profile
            .as_ref()
            .map(|c| format!(", client profile {}", escape(c)))
            .unwrap_or_default(),
        summary = escape(&r.summary()),
    );
    if !r.violations.is_empty() {
        body.push_str(
            r#"<h3>Invariants broken in the replayed world</h3><table class="invariants">"#,
        );
        for (inv, m) in &r.violations {
            let _ = writeln!(
                body,
                r#"<tr class="inv-fail" data-invariant="{i}"><td>{i}</td><td>{}</td></tr>"#,
                escape(m),
                i = escape(inv)
            );
        }
        body.push_str("</table>");
    }
    if !r.sequence.is_empty() {
        body.push_str(
            r#"<h3>Exchanges, recorded and replayed</h3><table class="sequence-table"><tr><th>#</th><th>recorded</th><th>replayed</th><th></th></tr>"#,
        );
        let first = r.divergence.as_ref().map(|d| d.exchange);
        for row in &r.sequence {
            let class = match (Some(row.n) == first, row.state) {
                (true, _) => "first-divergence",
                (false, "differs") => "differs",
                (false, "not compared") => "not-compared",
                _ => "same",
            };
            let _ = writeln!(
                body,
                r#"<tr class="{class}" data-n="{n}"><td>{n}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                escape(&row.recorded),
                escape(&row.ours),
                if Some(row.n) == first {
                    "first divergence"
                } else {
                    row.state
                },
                n = row.n,
            );
        }
        body.push_str("</table>");
    }
    if !r.differences.is_empty() {
        body.push_str("<h3>Differing exchanges</h3><ol class=\"differences\">");
        for d in &r.differences {
            let _ = writeln!(body, "<li>{}</li>", escape(d));
        }
        body.push_str("</ol>");
    }
    if let Some(d) = &r.divergence {
        let _ = write!(
            body,
            r#"<h3 class="divergence" data-exchange="{}">First divergence: exchange {} — {}</h3><ul>"#,
            d.exchange,
            d.exchange,
            escape(&d.request)
        );
        for p in &d.difference.problems {
            let _ = writeln!(body, "<li>{}</li>", escape(p));
        }
        let _ = write!(
            body,
            r#"</ul><div class="side-by-side"><div><h4>recorded</h4><pre>{}</pre></div><div><h4>replayed (ours)</h4><pre>{}</pre></div></div>"#,
            escape(&d.difference.recorded),
            escape(&d.difference.ours)
        );
        if !d.difference.diff.is_empty() {
            body.push_str("<h4>diff (recorded → ours)</h4>");
            body.push_str(&diff_html(&d.difference.diff));
        }
    }
    if !r.trace.is_empty() {
        let rows = parse::rows(&r.trace.join("\n"));
        let lanes = sequence::lanes(&rows);
        let upto = match &r.divergence {
            Some(d) => format!("up to exchange {}", d.exchange),
            None => "the whole replay".to_string(),
        };
        let _ = write!(
            body,
            r#"<h3>The replayed world, {upto} ({} events)</h3><div class="scroll"><div class="sticky">{}</div>{}</div>"#,
            rows.len(),
            sequence::header_svg(&lanes),
            sequence::diagram_svg(&rows, &lanes, &BTreeMap::new())
        );
    }
    body.push_str("</section>\n");
}

/// One page for the reports of one `sim replay` command.
pub fn replay_page(reports: &[ReplayReport]) -> String {
    let failed = reports.iter().filter(|r| r.exit_code() != 0).count();
    let mut body = format!(
        r#"<header><h1>Replay of {} recording(s)</h1><div class="verdict {}" id="verdict">{} matched, {failed} diverged or broke an invariant</div></header>"#,
        reports.len(),
        if failed == 0 { "pass" } else { "fail" },
        reports.len() - failed,
    );
    body.push('\n');
    for (n, r) in reports.iter().enumerate() {
        section(&mut body, n, r);
    }
    page::wrap("replay", &body)
}
