//! The abort signal (the DOM `AbortController`/`AbortSignal` pair the loop is written against).
//! The harness injects interrupts by holding the controller; the loop only checks the signal at
//! its safe points and awaits it in abortable waits.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::errors::{AbortError, LoopError};

#[derive(Default)]
struct AbortState {
    reason: Mutex<Option<AbortError>>,
    notify: Notify,
}

/// The owning side: whoever holds it can abort the turn.
#[derive(Clone, Default, Debug)]
pub struct AbortController {
    signal: AbortSignal,
}

impl AbortController {
    /// A fresh, un-aborted controller.
    pub fn new() -> Self {
        Self::default()
    }

    /// The signal to hand to the loop.
    pub fn signal(&self) -> AbortSignal {
        self.signal.clone()
    }

    /// Abort with the default reason. A second abort keeps the first reason.
    pub fn abort(&self) {
        self.abort_with(AbortError::default_reason());
    }

    /// Abort with a reason (e.g. [`AbortError::user_cancellation`]).
    pub fn abort_with(&self, reason: AbortError) {
        let state = &self.signal.state;
        {
            let mut slot = state.reason.lock().expect("abort state poisoned");
            if slot.is_some() {
                return;
            }
            *slot = Some(reason);
        }
        state.notify.notify_waiters();
    }
}

/// The observing side, cloned freely.
#[derive(Clone, Default)]
pub struct AbortSignal {
    state: Arc<AbortState>,
}

impl std::fmt::Debug for AbortSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortSignal")
            .field("reason", &self.reason())
            .finish()
    }
}

impl AbortSignal {
    /// A signal that never fires.
    pub fn never() -> Self {
        Self::default()
    }

    /// `signal.aborted`.
    pub fn aborted(&self) -> bool {
        self.reason().is_some()
    }

    /// `signal.reason`.
    pub fn reason(&self) -> Option<AbortError> {
        self.state
            .reason
            .lock()
            .expect("abort state poisoned")
            .clone()
    }

    /// `signal.throwIfAborted()`.
    pub fn throw_if_aborted(&self) -> Result<(), LoopError> {
        match self.reason() {
            Some(reason) => Err(LoopError::Aborted(reason)),
            None => Ok(()),
        }
    }

    /// Resolves with the reason once the signal fires (immediately if it already has).
    pub async fn cancelled(&self) -> AbortError {
        loop {
            let notified = self.state.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(reason) = self.reason() {
                return reason;
            }
            notified.await;
        }
    }
}
