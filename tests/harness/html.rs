//! The HTML report, tested the way a person uses it: rendered for a failing planted scenario,
//! kept byte for byte in a snapshot, and opened in headless Chromium, which must run its
//! script without error and show the lanes, a fault marker and the failing invariant.

use std::path::{Path, PathBuf};
use std::process::Command;

use loopsim::harness::html;
use loopsim::harness::report::RunReport;
use loopsim::harness::seed::run_seed;

use crate::common;

/// A planted defect whose run has a fault (an approval pending in band) and two failing
/// invariants, each with the event that broke it.
const FAILING: &str = "scenarios/planted/dangling_tool_call.toml";

fn failing_run() -> RunReport {
    run_seed(
        &common::repo().join(FAILING),
        1,
        false,
        &Default::default(),
        2,
    )
    .expect("scenario loads")
}

#[test]
fn the_same_run_gives_the_same_html_bytes() {
    let a = html::run_page(&failing_run());
    let b = html::run_page(&failing_run());
    assert_eq!(a, b);
    // Paths in the report are absolute here; the snapshot keeps them relative to the repo.
    let root = format!("{}/", common::repo().display());
    common::snapshots()
        .bind(|| insta::assert_snapshot!("dangling_tool_call_seed_1_html", a.replace(&root, "")));
}

#[test]
fn the_page_names_the_broken_event_for_each_failing_invariant() {
    let report = failing_run();
    let page = html::run_page(&report);
    for (id, violations) in &report.invariants {
        for v in violations {
            let Some(i) = v.event else { continue };
            assert!(
                page.contains(&format!(r#"data-goto="{i}""#)),
                "{id}: no link to event {i}"
            );
            assert!(page.contains(&format!(
                r#"<g class="ev broke" data-i="{i}" id="e{i}" data-broke="#
            )));
        }
    }
    assert!(page.contains(r#"<tr class="inv-fail" data-invariant="tool-call-resolved">"#));
    assert!(page.contains(r#"<rect class="fault""#));
    assert!(!page.contains("http://") || !page.contains("<script src"));
}

/// Headless Chromium's path, installing it when missing; None (with the reason printed) when
/// it cannot be installed here. The setup runs once per test binary: two tests installing at
/// once would race for dpkg's lock.
fn chromium() -> Option<PathBuf> {
    static CHROMIUM: std::sync::Mutex<Option<Option<PathBuf>>> = std::sync::Mutex::new(None);
    let mut once = CHROMIUM.lock().unwrap_or_else(|e| e.into_inner());
    once.get_or_insert_with(install_chromium).clone()
}

fn install_chromium() -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(common::repo().join("tests/browser/setup.sh"))
        .output()
        .expect("bash runs");
    match out.status.code() {
        Some(0) => Some(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )),
        Some(75) => {
            eprintln!(
                "SKIP browser test: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            None
        }
        _ => panic!(
            "tests/browser/setup.sh failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Runs headless Chromium on a file: the DOM after load, or a screenshot when `shot` is set.
fn chromium_on(browser: &Path, page: &Path, shot: Option<&Path>) -> String {
    let profile = tempdir("chromium-profile");
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=5000",
        "--window-size=1400,1000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    match shot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh directory under target/: tests run in parallel and each Chromium needs its own
/// profile directory.
fn tempdir(name: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = common::repo()
        .join("target/html-test")
        .join(format!("{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn attr<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let start = dom.find(&format!("{name}=\""))? + name.len() + 2;
    dom[start..].split('"').next()
}

#[test]
fn chromium_opens_the_report_without_script_errors_and_shows_lanes_fault_and_invariant() {
    let Some(browser) = chromium() else { return };
    let dir = tempdir("report");
    let page = dir.join("dangling_tool_call.html");
    std::fs::write(&page, html::run_page(&failing_run())).unwrap();
    let dom = chromium_on(&browser, &page, None);
    assert_eq!(
        attr(&dom, "data-ready"),
        Some("ok"),
        "the page's script did not finish cleanly; errors: {:?}",
        attr(&dom, "data-errors")
    );
    for lane in ["client", "server", "provider"] {
        assert!(
            dom.contains(&format!(r#"class="lane-head" data-host="{lane}""#)),
            "no {lane} lane"
        );
    }
    assert!(dom.contains(r#"class="fault""#), "no fault marker");
    assert!(dom.contains(r#"class="inv-fail" data-invariant="tool-call-resolved""#));
    assert!(dom.contains(r#"class="verdict fail""#));
    let shot = dir.join("dangling_tool_call.png");
    chromium_on(&browser, &page, Some(&shot));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// A run of at least 10,000 events: the failing run's trace repeated, each copy later in time,
/// with the report around it (the page's size is what is measured, not the run).
fn long_run(events: usize) -> RunReport {
    let mut report = failing_run();
    let lines: Vec<&str> = report.trace_text.lines().collect();
    let mut text = String::new();
    let mut n = 0;
    let mut offset = 0u64;
    while n < events {
        for l in &lines {
            let (t, rest) = l.trim_start().split_once(' ').unwrap();
            let t: u64 = t.parse().unwrap();
            text.push_str(&format!("{:>8} {}\n", t + offset, rest));
            n += 1;
        }
        offset += report.end_ms + 1_000;
    }
    report.events = n;
    report.trace_text = text;
    report
}

#[test]
fn chromium_loads_a_10000_event_report_and_says_how_long_it_took() {
    let Some(browser) = chromium() else { return };
    let report = long_run(10_000);
    let dir = tempdir("long");
    let page = dir.join("long.html");
    let text = html::run_page(&report);
    std::fs::write(&page, &text).unwrap();
    let dom = chromium_on(&browser, &page, None);
    assert_eq!(attr(&dom, "data-ready"), Some("ok"));
    let ms = attr(&dom, "data-loaded-ms").expect("the page recorded its load time");
    // Printed, not asserted: a timed assertion fails on a loaded machine, not on a slow page.
    eprintln!(
        "a {}-event report ({} KiB) loaded in {ms} ms in headless Chromium",
        report.events,
        text.len() / 1024
    );
}

#[test]
fn a_sweep_page_groups_failures_by_invariant_and_links_the_run_reports() {
    use std::collections::BTreeMap;

    use loopsim::harness::explore::ExploreOptions;
    use loopsim::harness::sweep::explore_files;

    let path = common::repo().join(FAILING);
    let options = ExploreOptions {
        seeds: 0..3,
        jobs: 1,
        shard: None,
        swarm: false,
        determinism_every: 0,
        guided: false,
    };
    let report = explore_files(
        std::slice::from_ref(&path),
        &Default::default(),
        &options,
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(report.failures.len(), 3);
    let scenario = path.display().to_string();
    let links: BTreeMap<(String, u64), String> = BTreeMap::from([(
        (scenario, 1),
        "runs/dangling_tool_call-seed1.html".to_string(),
    )]);
    let page = html::sweep_page(&report, &links, None);
    assert_eq!(page, html::sweep_page(&report, &links, None));
    let rate = html::Rate {
        seeds_per_s: 12.5,
        jobs: 2,
        wall_s: 0.24,
    };
    assert!(
        html::sweep_page(&report, &links, Some(&rate))
            .contains("rate 12.5 seeds/s over 2 job(s) (0.24 s wall)")
    );
    assert!(page.contains(r#"data-invariant="tool-call-resolved""#));
    assert!(page.contains(r#"<a href="runs/dangling_tool_call-seed1.html">run report</a>"#));
    assert!(page.contains("0 passed, 3 failed"));
    assert!(
        page.contains("--seed 2"),
        "each failure's reproduce command is on the page"
    );
}

#[test]
fn a_replay_page_shows_each_recording_and_the_first_divergence_side_by_side() {
    use loopsim::harness::replay::{self, ReplayOptions, Side};

    let mut reports = Vec::new();
    for (cassette, side) in [
        ("cassettes/letta/a_fresh_unrestricted.jsonl", Side::Server),
        (
            "cassettes/letta/d3_pending_approval_after_startup_bidir.jsonl",
            Side::Client,
        ),
    ] {
        let opts = ReplayOptions::from_names(side, "letta-oss-0.16", "reference", false).unwrap();
        reports.push(replay::replay_file(&common::repo().join(cassette), &opts).unwrap());
    }
    let page = html::replay_page(&reports);
    assert_eq!(
        page,
        html::replay_page(&reports),
        "the same bytes every time"
    );
    assert_eq!(page.matches(r#"<section class="replay""#).count(), 2);
    assert!(page.contains(r#"class="lane-head" data-host="server""#));
    let rows: usize = reports.iter().map(|r| r.sequence.len()).sum();
    assert!(rows > 0);
    assert!(
        page.matches(r#"<tr class=""#).count() >= rows,
        "every exchange of both recordings is a row"
    );
    for r in &reports {
        match &r.divergence {
            Some(d) => {
                assert!(page.contains(&format!(r#"data-exchange="{}""#, d.exchange)));
                assert!(page.contains(&format!(
                    r#"<tr class="first-divergence" data-n="{}">"#,
                    d.exchange
                )));
                assert!(page.contains(r#"<div class="side-by-side">"#));
            }
            None => assert!(page.contains("match")),
        }
    }
}
