//! Hostile input to the scenario loader: fault targets no run can reach are input errors that
//! name the file, line and key, and the trigger vocabulary cannot drift from the trace's.

use std::path::Path;

use loopsim::harness::scenario::{InputError, Scenario};

use crate::common::repo;

/// `base` (a bundled scenario) with `extra` appended, parsed as if it sat beside `base`.
fn parse_with(base: &str, extra: &str) -> (Result<Scenario, InputError>, usize) {
    let path = repo().join(base);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().count() + 2;
    (Scenario::parse(&format!("{text}\n{extra}"), &path), line)
}

fn refused(base: &str, extra: &str, key: &str) {
    let (r, line) = parse_with(base, extra);
    let e = r.expect_err(extra);
    assert_eq!(e.line, Some(line), "{e}");
    assert!(
        e.file
            .ends_with(Path::new(base).file_name().unwrap().to_str().unwrap()),
        "{e}"
    );
    assert!(e.message.starts_with(key), "{e}");
}

const LETTA: &str = "scenarios/letta/approval_turn.toml";
const LOOP: &str = "scenarios/kimi/user_abort.toml";

#[test]
fn a_fault_aimed_past_what_the_scenario_reaches_is_an_input_error_in_both_systems() {
    for (extra, key) in [
        (
            "[[faults]]\nkind = \"drop_connection\"\nresponse = 999\nafter_frame = 1\n",
            "response = 999",
        ),
        (
            "[[faults]]\nkind = \"server_stream\"\nresponse = 999\nframe = 1\naction = \"drop\"\n",
            "response = 999",
        ),
        (
            "[[faults]]\nkind = \"provider_stream\"\ncall = 99\nframe = 1\naction = \"drop\"\n",
            "call = 99",
        ),
        (
            "[[faults]]\nkind = \"provider_error\"\ncall = 99\nstatus = 500\n",
            "call = 99",
        ),
        (
            "[[faults]]\nkind = \"interrupt\"\nturn = 99\nduring = \"approval\"\n",
            "turn = 99",
        ),
        (
            "[[faults]]\nkind = \"client_crash\"\nturn = 2\nat = \"after_tools\"\n",
            "turn = 2",
        ),
        (
            "[[faults]]\nkind = \"busy_on_send\"\nsend = 9999\n",
            "send = 9999",
        ),
    ] {
        refused(LETTA, extra, key);
    }
    for (extra, key) in [
        (
            "[[faults]]\nkind = \"provider_stream\"\ncall = 99\nframe = 1\naction = \"drop\"\n",
            "call = 99",
        ),
        (
            "[[faults]]\nkind = \"provider_error\"\ncall = 3\nstatus = 529\n",
            "call = 3",
        ),
    ] {
        refused(LOOP, extra, key);
    }
}

#[test]
fn targets_a_run_can_reach_still_load() {
    for extra in [
        // The last cassette, and one more call answered by the error itself.
        "[[faults]]\nkind = \"provider_stream\"\ncall = 1\nframe = 1\naction = \"drop\"\n",
        "[[faults]]\nkind = \"provider_error\"\ncall = 2\nstatus = 500\n",
        "[[faults]]\nkind = \"interrupt\"\nturn = 1\nduring = \"approval\"\n",
        "[[faults]]\nkind = \"drop_connection\"\nresponse = 3\nafter_frame = 1\n",
    ] {
        let (r, _) = parse_with(LETTA, extra);
        r.unwrap_or_else(|e| panic!("{extra}: {e}"));
    }
    let (r, _) = parse_with(
        LOOP,
        "[[faults]]\nkind = \"provider_error\"\ncall = 2\nstatus = 529\n",
    );
    r.unwrap();
}

/// Every variant of `Observation` has its name in `Observation::NAMES`, in declaration order:
/// an `on_event` trigger is checked against that list, so a variant missing from it would be
/// refused, and a name left over would be accepted and never fire. The variants are read from
/// the enum's source (serde names them in snake_case; none is renamed).
#[test]
fn observation_names_cover_every_variant() {
    use loopsim::model::port::observe::Observation;
    let src = std::fs::read_to_string(repo().join("src/model/port/observe.rs")).unwrap();
    let start = src.find("pub enum Observation {").expect("the enum");
    let body = &src[start..];
    let body = &body[..body.find("\n}\n").expect("the enum's end")];
    assert!(
        !body.contains("serde(rename"),
        "a renamed variant: read its name here"
    );
    let variants: Vec<String> = body
        .lines()
        .filter_map(|l| {
            let name = l.strip_prefix("    ")?;
            let first = name.chars().next()?;
            if !first.is_ascii_uppercase() {
                return None;
            }
            let ident: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            Some(snake(&ident))
        })
        .collect();
    assert!(variants.len() > 40, "{variants:?}");
    assert_eq!(variants, Observation::NAMES.to_vec());
}

fn snake(camel: &str) -> String {
    let mut s = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}
