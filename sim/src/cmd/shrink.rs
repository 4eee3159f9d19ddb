//! `sim shrink`: one failing seed shrunk to a minimal scenario directory.

use loopsim::harness::seed::{ShrinkSeedOptions, shrink_seed};

use super::{CmdResult, check_output_dir};
use crate::args::ShrinkArgs;

pub fn run(a: ShrinkArgs) -> CmdResult {
    if let Some(dir) = &a.out {
        check_output_dir(dir)?;
    }
    let options = ShrinkSeedOptions {
        seed: a.seed,
        swarm: a.swarm,
        invariant: a.invariant,
        out: a.out,
        max_runs: a.max_runs,
    };
    let outcome = shrink_seed(&a.scenario, &options)?;
    print!("{}", outcome.render());
    Ok(outcome.exit_code())
}
