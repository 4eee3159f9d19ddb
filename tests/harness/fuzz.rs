//! A short run of every fuzz target (docs/fuzzing.md has the long one's figures): no parser a
//! user's file or a network peer reaches panics on mutated input.

use loopsim::harness::fuzz::{TARGETS, fuzz, seeds};

use crate::common::repo;

#[test]
fn no_parser_panics_on_mutated_input() {
    for target in &TARGETS {
        let corpus = seeds(target, repo());
        assert!(!corpus.is_empty(), "{}: no seed files", target.name);
        let out = fuzz(target, &corpus, 2_000, 7, 3);
        let shown: Vec<String> = out
            .panics
            .iter()
            .map(|(n, input)| format!("input {n}: {:?}", String::from_utf8_lossy(input)))
            .collect();
        assert!(
            out.panics.is_empty(),
            "{} panicked:\n{}",
            target.name,
            shown.join("\n")
        );
    }
}
