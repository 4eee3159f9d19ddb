//! CLI conformance against `sim serve`: the real Letta Code CLI (0.32.18, installed by
//! tests/interop/setup.sh) runs each interop flow of tests/interop/cli.rs against `sim serve`;
//! the Rust client in the `letta-code` profile (headless, one-shot, as the CLI runs) runs the
//! same scenario in simulation; the two request logs, normalised to the fields that matter
//! (`loopsim::harness::letta::conformance`), must be equal step by step: same requests in the
//! same order, same otid reuse and refresh, same `starting_after`, same approval items and
//! denial texts, same statuses.
//!
//! The simulated run gets what the CLI brings itself: its Bash tool (with the required
//! `command` and `description`), its permission mode, and the conversation it was started on.
//! Skips, saying why, only when a package registry is unreachable (as tests/interop/cli.rs).

use super::clients::{Served, run_cli, setup};
use crate::common;
use loopsim::harness::letta::conformance::{
    RawRequest, Step, compare, normalise, parse_log_line, render,
};
use loopsim::harness::report::Verdict;
use loopsim::harness::scenario::{Scenario, Tool};

const PROMPT: &str = "Please run the marker command.";
const MODEL: &str = "zai/gpt-4o-mini";

/// How the CLI is started for a flow, and what that means for the simulated client.
struct Flow {
    scenario: &'static str,
    seed: u64,
    /// `--permission-mode standard` plus an `alwaysAsk: [Bash]` rule (flow 2).
    always_ask_bash: bool,
    /// `--conversation <id>` (flow 5); otherwise the CLI creates a fresh conversation.
    conversation: Option<&'static str>,
    /// Steps the CLI's sequence must contain (so the comparison is about the flow).
    must: &'static [&'static str],
}

fn cli_steps(cli: &std::path::Path, f: &Flow, tag: &str) -> (Vec<Step>, String) {
    let served = Served::start(f.scenario, tag, f.seed);
    let mut args = vec!["-p", PROMPT];
    match f.conversation {
        Some(c) => args.extend(["--conversation", c]),
        None => args.extend(["-m", MODEL]),
    }
    if f.always_ask_bash {
        args.extend(["--permission-mode", "standard"]);
    }
    args.extend(["--output-format", "stream-json"]);
    let always_ask = f.always_ask_bash;
    let run = run_cli(cli, &served, &args, move |work| {
        if always_ask {
            std::fs::create_dir_all(work.join(".letta")).unwrap();
            std::fs::write(
                work.join(".letta/settings.json"),
                r#"{"permissions":{"alwaysAsk":["Bash"]}}"#,
            )
            .unwrap();
        }
    });
    let text = std::fs::read_to_string(&served.log).unwrap_or_default();
    let log: Vec<RawRequest> = text.lines().filter_map(parse_log_line).collect();
    (normalise(&log), run.stdout)
}

fn sim_steps(f: &Flow) -> (Vec<Step>, String) {
    let mut s: Scenario = common::load(f.scenario);
    s = common::with_mode(common::with_profile(s, "letta-code"), "headless");
    s.client.tools = vec![Tool {
        name: "Bash".into(),
        description: Some("Run a shell command (executed by the client).".into()),
        parameters: Some(
            toml::from_str(
                r#"type = "object"
required = ["command", "description"]
properties = { command = { type = "string" }, description = { type = "string" } }"#,
            )
            .unwrap(),
        ),
    }];
    if f.always_ask_bash {
        s.permissions.always_ask = vec!["Bash".into()];
    } else {
        s.permissions.allow = vec!["Bash".into()];
    }
    // Without `--conversation` the CLI creates a fresh conversation (B.3 row 9).
    s.client.conversation = f.conversation.unwrap_or("new").into();
    let report = common::run(&s, f.seed, 1);
    assert_eq!(report.verdict, Verdict::Pass, "{}", report.render());
    let log: Vec<RawRequest> = report.requests.iter().map(RawRequest::from).collect();
    (normalise(&log), report.render())
}

fn assert_conforms(tag: &str, f: Flow) {
    let Some(cli) = setup() else { return };
    let (want, stdout) = cli_steps(&cli, &f, tag);
    let (got, report) = sim_steps(&f);
    let text = render(&want);
    for m in f.must {
        assert!(
            text.contains(m),
            "{tag}: the CLI's steps lack {m:?}:\n{text}\n{stdout}"
        );
    }
    if let Err(m) = compare(&want, &got) {
        panic!(
            "{tag}: the Rust client differs from the real CLI at {m}\n\nreal CLI:\n{}\nRust client:\n{}\n{report}",
            render(&want),
            render(&got)
        );
    }
}

#[test]
fn cli_flow1_fresh_start_one_bash_approval() {
    assert_conforms(
        "conf-flow1",
        Flow {
            scenario: "tests/interop/fresh.toml",
            seed: 1,
            always_ask_bash: false,
            conversation: None,
            must: &[
                "items=user(o1) -> 200",
                "items=approval(o2)[tool:c1:success] -> 200",
            ],
        },
    );
}

#[test]
fn cli_flow2_standard_mode_denial() {
    assert_conforms(
        "conf-flow2",
        Flow {
            scenario: "tests/interop/fresh.toml",
            seed: 2,
            always_ask_bash: true,
            conversation: None,
            must: &["[deny:c1:\"Tool requires approval (headless mode)\"]"],
        },
    );
}

#[test]
fn cli_flow3_busy_409() {
    assert_conforms(
        "conf-flow3",
        Flow {
            scenario: "tests/interop/busy.toml",
            seed: 3,
            always_ask_bash: false,
            conversation: None,
            must: &[
                "items=user(o1) -> 409",
                "otid=o1 starting_after=0 -> 404",
                "items=user(o1) -> 200",
            ],
        },
    );
}

#[test]
fn cli_flow4_approval_pending_409() {
    assert_conforms(
        "conf-flow4",
        Flow {
            scenario: "tests/interop/approval_pending.toml",
            seed: 4,
            always_ask_bash: false,
            conversation: None,
            must: &[
                "items=user(o1) -> 409",
                "items=approval(o2)[deny:c1:\"The agent harness automatically closed",
                "items=user(o1) -> 200",
            ],
        },
    );
}

#[test]
fn cli_flow5_stale_approval_at_startup() {
    assert_conforms(
        "conf-flow5",
        Flow {
            scenario: "tests/interop/stale_startup.toml",
            seed: 5,
            always_ask_bash: false,
            conversation: Some("conv-00000000-0000-4000-8000-0000000057a1"),
            must: &["items=approval(o1)[deny:c1:\"The agent harness automatically closed"],
        },
    );
}

#[test]
fn cli_flow6_stream_cut_resumed() {
    assert_conforms(
        "conf-flow6",
        Flow {
            scenario: "tests/interop/cut.toml",
            seed: 6,
            always_ask_bash: false,
            conversation: None,
            must: &["POST /v1/runs/{r1}/stream batch_size=1000 starting_after=1 -> 200"],
        },
    );
}

#[test]
fn cli_flow7_resume_failing_until_budget_spent() {
    assert_conforms(
        "conf-flow7",
        Flow {
            scenario: "tests/interop/resume_failing.toml",
            seed: 7,
            always_ask_bash: false,
            conversation: None,
            must: &["POST /v1/runs/{r1}/stream batch_size=1000 starting_after=2 -> 500"],
        },
    );
}
