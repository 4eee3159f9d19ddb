//! The scenario's provider cassettes, loaded and checked against the scenario.

use super::input::InputError;
use super::scenario::{Scenario, split_ref};
use crate::cassette::{Cassette, CassetteError, Recording};
use crate::model::provider::ProviderResponse;

/// Loads one `[provider] responses` entry ([`split_ref`]), its path relative to the scenario
/// file: a cassette file ([`Cassette::load`]), or exchange `N` of a recording
/// ([`Recording::stream`]).
pub fn load_response(scenario: &Scenario, entry: &str) -> Result<Cassette, CassetteError> {
    let (file, n) = split_ref(entry);
    let path = scenario.resolve(file);
    match n {
        None => Cassette::load(path),
        // Digits too many for a number name no exchange: exchange 0 is refused as absent.
        Some(n) => Recording::load(path)?.stream(n.parse().unwrap_or(0)),
    }
}

/// Loads every cassette the scenario lists, in call order. A cassette that cannot be read or is
/// malformed is an error naming the cassette file and line; one whose format differs from the
/// scenario's provider api is an error naming the scenario line that lists it.
pub fn provider_responses(scenario: &Scenario) -> Result<Vec<ProviderResponse>, InputError> {
    let api = scenario.provider_api()?;
    scenario
        .provider
        .responses
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let cassette = match scenario.cassette_overrides.get(&i) {
                Some(c) => c.clone(),
                None => load_response(scenario, r.get_ref()).map_err(|e| InputError {
                    file: e.origin.clone(),
                    line: e.line,
                    column: None,
                    message: e.message.clone(),
                })?,
            };
            let format = cassette.header().format;
            if format != api {
                return Err(scenario.error_at(
                    r.span(),
                    format!(
                        "cassette {:?} records a {} stream, but [provider] api is {:?}",
                        r.get_ref(),
                        format.as_str(),
                        api.as_str()
                    ),
                ));
            }
            Ok(ProviderResponse {
                name: r.get_ref().clone(),
                cassette,
            })
        })
        .collect()
}
