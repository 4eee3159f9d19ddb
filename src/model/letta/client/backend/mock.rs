//! A scripted [`Backend`] for unit tests: every call is logged as a line, and each endpoint
//! answers from a queue (or a fixed answer once the queue is empty). Mirrors the mock backends
//! of the upstream tests (letta-tests-and-real-client.md A.2, A.6).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{Backend, Thrown};
use crate::model::letta::client::sdk_stream::{ScriptEnd, ScriptedSource, SdkEvent};
use crate::model::port::clock::Clock;
use crate::wire::letta::SendMessageRequest;

/// A stream answer: events then an ending, or a thrown error.
pub type StreamAnswer = Result<(Vec<(u64, SdkEvent)>, ScriptEnd), Thrown>;

#[derive(Default)]
pub struct MockState {
    pub calls: Vec<String>,
    pub sends: VecDeque<StreamAnswer>,
    pub sent_bodies: Vec<SendMessageRequest>,
    pub run_streams: VecDeque<StreamAnswer>,
    pub conversation_streams: VecDeque<StreamAnswer>,
    /// Answers of `GET /v1/runs/{id}`, then `run_default`.
    pub runs: VecDeque<Result<Value, Thrown>>,
    pub run_default: Option<Result<Value, Thrown>>,
    /// `list_runs`: answers keyed by the first query pair ("conversation_id=x").
    pub run_lists: Vec<(String, Vec<Value>)>,
    pub conversation: Option<Result<Value, Thrown>>,
    pub agent: Option<Result<Value, Thrown>>,
    pub conversation_messages: Option<Result<Vec<Value>, Thrown>>,
    pub agent_messages: Option<Result<Vec<Value>, Thrown>>,
    /// `GET /v1/messages/{id}` answers by id.
    pub messages: Vec<(String, Result<Vec<Value>, Thrown>)>,
}

#[derive(Clone, Default)]
pub struct MockBackend {
    pub state: Arc<Mutex<MockState>>,
}

fn not_scripted(what: &str) -> Thrown {
    serde_json::json!({"status": 500, "message": format!("500 mock: no answer for {what}")})
}

fn stream(answer: Option<StreamAnswer>, what: &str) -> Result<ScriptedSource, Thrown> {
    match answer {
        Some(Ok((events, end))) => Ok(ScriptedSource::new(events, end)),
        Some(Err(e)) => Err(e),
        None => Err(not_scripted(what)),
    }
}

impl MockBackend {
    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    fn log(&self, line: String) {
        self.state.lock().unwrap().calls.push(line);
    }
}

fn q(query: &[(String, String)]) -> String {
    query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

impl Backend for MockBackend {
    type Stream = ScriptedSource;

    /// tokio's clock: the tests run on a paused tokio runtime.
    fn clock(&self) -> Clock {
        Clock::tokio()
    }

    async fn send_message(
        &self,
        conversation_id: &str,
        body: &SendMessageRequest,
        response_state: Option<String>,
    ) -> Result<ScriptedSource, Thrown> {
        self.log(format!(
            "send {conversation_id}{}",
            response_state
                .map(|s| format!(" response_state={s}"))
                .unwrap_or_default()
        ));
        let mut st = self.state.lock().unwrap();
        st.sent_bodies.push(body.clone());
        let a = st.sends.pop_front();
        drop(st);
        stream(a, "send")
    }

    async fn stream_conversation(&self, id: &str, body: Value) -> Result<ScriptedSource, Thrown> {
        self.log(format!("stream_conversation {id} {body}"));
        let a = self.state.lock().unwrap().conversation_streams.pop_front();
        stream(a, "stream_conversation")
    }

    async fn stream_run(&self, run_id: &str, body: Value) -> Result<ScriptedSource, Thrown> {
        self.log(format!("stream_run {run_id} {body}"));
        let a = self.state.lock().unwrap().run_streams.pop_front();
        stream(a, "stream_run")
    }

    async fn retrieve_run(&self, run_id: &str) -> Result<Value, Thrown> {
        self.log(format!("retrieve_run {run_id}"));
        let mut st = self.state.lock().unwrap();
        match st.runs.pop_front() {
            Some(a) => a,
            None => st
                .run_default
                .clone()
                .unwrap_or_else(|| Err(not_scripted("retrieve_run"))),
        }
    }

    async fn list_runs(&self, query: Vec<(String, String)>) -> Result<Vec<Value>, Thrown> {
        let line = q(&query);
        self.log(format!("list_runs {line}"));
        let st = self.state.lock().unwrap();
        let key = query
            .first()
            .map(|(k, v)| format!("{k}={v}"))
            .unwrap_or_default();
        Ok(st
            .run_lists
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default())
    }

    async fn cancel_conversation(&self, id: &str) -> Result<Value, Thrown> {
        self.log(format!("cancel_conversation {id}"));
        Ok(Value::Null)
    }

    async fn cancel_run(&self, agent_id: &str, run_id: &str) -> Result<Value, Thrown> {
        self.log(format!("cancel_run {agent_id} {run_id}"));
        Ok(Value::Null)
    }

    async fn create_conversation(&self, agent_id: &str) -> Result<Value, Thrown> {
        self.log(format!("create_conversation {agent_id}"));
        Ok(serde_json::json!({"id": "conv-new", "agent_id": agent_id}))
    }

    async fn retrieve_conversation(&self, id: &str) -> Result<Value, Thrown> {
        self.log(format!("retrieve_conversation {id}"));
        self.state
            .lock()
            .unwrap()
            .conversation
            .clone()
            .unwrap_or_else(|| Err(not_scripted("conversation")))
    }

    async fn retrieve_agent(&self, id: &str) -> Result<Value, Thrown> {
        self.log(format!("retrieve_agent {id}"));
        self.state
            .lock()
            .unwrap()
            .agent
            .clone()
            .unwrap_or_else(|| Err(not_scripted("agent")))
    }

    async fn list_conversation_messages(
        &self,
        id: &str,
        query: Vec<(String, String)>,
    ) -> Result<Vec<Value>, Thrown> {
        self.log(format!("list_conversation_messages {id} {}", q(&query)));
        self.state
            .lock()
            .unwrap()
            .conversation_messages
            .clone()
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    async fn list_agent_messages(
        &self,
        agent_id: &str,
        query: Vec<(String, String)>,
    ) -> Result<Vec<Value>, Thrown> {
        self.log(format!("list_agent_messages {agent_id} {}", q(&query)));
        self.state
            .lock()
            .unwrap()
            .agent_messages
            .clone()
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    async fn retrieve_message(&self, id: &str) -> Result<Vec<Value>, Thrown> {
        self.log(format!("retrieve_message {id}"));
        self.state
            .lock()
            .unwrap()
            .messages
            .iter()
            .find(|(k, _)| k == id)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| {
                Err(serde_json::json!({"status": 404, "message": "404 not found", "error": {"detail": "Not Found"}}))
            })
    }
}
