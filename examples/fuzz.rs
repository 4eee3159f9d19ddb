//! The long fuzzing run of docs/fuzzing.md: every parser target, N mutated inputs each.
//!
//!     cargo run --release --example fuzz -- 1000000 [SEED] [TARGET]
//!     cargo run --release --example fuzz -- input N SEED TARGET    # write input N, run nothing
//!
//! Prints one line per target (inputs, panics, inputs per second) and writes every panicking
//! input to `fuzz-crashes/<target>-<n>`; exits 1 if any input panicked.

use loopsim::harness::fuzz::{TARGETS, fuzz, input, seeds};

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let all: Vec<String> = std::env::args().skip(1).collect();
    if let [cmd, n, seed, name] = &all[..]
        && cmd == "input"
    {
        let (Ok(n), Ok(seed)) = (n.parse::<u64>(), seed.parse::<u64>()) else {
            eprintln!("usage: fuzz input N SEED TARGET");
            std::process::exit(2);
        };
        let Some(target) = TARGETS.iter().find(|t| t.name == name) else {
            eprintln!("no fuzz target {name}");
            std::process::exit(2);
        };
        let file = format!("fuzz-crashes/{name}-{n}");
        let _ = std::fs::create_dir_all("fuzz-crashes");
        std::fs::write(&file, input(&seeds(target, root), seed, n))
            .expect("fuzz-crashes/ writable");
        println!("{file}");
        return;
    }
    let mut args = all.into_iter();
    let inputs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let only = args.next();
    // The panics are counted and kept; their messages would only flood the terminal.
    std::panic::set_hook(Box::new(|_| {}));
    let mut failed = false;
    for target in TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == t.name))
    {
        let corpus = seeds(target, root);
        let started = std::time::Instant::now();
        let out = fuzz(target, &corpus, inputs, seed, 20);
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{:<20} {:>9} inputs from {:>3} seeds, seed {seed}: {} panics ({:.0} inputs/s)",
            target.name,
            out.inputs,
            corpus.len(),
            out.panics.len(),
            out.inputs as f64 / secs.max(1e-9)
        );
        for (n, input) in &out.panics {
            failed = true;
            let _ = std::fs::create_dir_all("fuzz-crashes");
            let _ = std::fs::write(format!("fuzz-crashes/{}-{n}", target.name), input);
        }
    }
    std::process::exit(i32::from(failed));
}
