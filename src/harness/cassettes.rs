//! The scenario's provider cassettes, loaded and checked against the scenario.

use super::input::InputError;
use super::scenario::Scenario;
use crate::cassette::Cassette;
use crate::model::provider::ProviderResponse;

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
                None => Cassette::load(scenario.resolve(r.get_ref())).map_err(|e| InputError {
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
