//! Scenario cassettes → provider responses.

use super::scenario::{InputError, Scenario};
use crate::model::provider::{ProviderResponse, StreamEnd, TimedFrame};

pub fn provider_responses(scenario: &Scenario) -> Result<Vec<ProviderResponse>, InputError> {
    let api = scenario.provider_api()?;
    scenario
        .provider
        .responses
        .iter()
        .map(|r| {
            let p = scenario.resolve(r.get_ref());
            let bytes = std::fs::read(&p).map_err(|e| InputError {
                file: p.display().to_string(),
                line: None,
                column: None,
                message: e.to_string(),
            })?;
            let frames = crate::wire::sse::decode_all(&bytes)
                .into_iter()
                .enumerate()
                .map(|(i, frame)| TimedFrame {
                    t_ms: i as u64 * 10,
                    frame,
                })
                .collect();
            Ok(ProviderResponse {
                name: r.get_ref().clone(),
                api,
                status: 200,
                frames,
                end: StreamEnd::Clean,
            })
        })
        .collect()
}
