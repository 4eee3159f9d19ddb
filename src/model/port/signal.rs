//! A value whose changes tasks can wait for (what `tokio::sync::watch` offers), with waiters
//! that wake in the order they started waiting.
//!
//! tokio's watch spreads its waiters over eight `Notify`s, each waiter's chosen with the
//! runtime's thread RNG (`BigNotify::notified`, tokio 1.54.1 `sync/watch.rs`), and tokio
//! reseeds that RNG from the runtime's seed generator every time the runtime is entered. A
//! turmoil host's runtime is entered once per step, so with two tasks waiting on one value the
//! order they woke in depended on how many steps their host had run, and the warp, which
//! skips idle steps, changed it (a server with two streams following one run wrote their
//! frames in the other order, and the latencies turmoil drew for them swapped). Here every
//! waiter waits on one `Notify`, which wakes its waiters oldest first: nothing depends on the
//! step count. The tidy rule `step-rng` keeps `tokio::sync::watch` out of `src/`.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The sending half: holds the value. Dropping it closes the signal (waiting receivers see
/// [`Closed`]).
#[derive(Debug)]
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// A receiving half: remembers the version it saw last.
#[derive(Debug)]
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    seen: u64,
}

/// The sender was dropped and no change is left unseen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

#[derive(Debug)]
struct Shared<T> {
    state: Mutex<State<T>>,
    notify: Notify,
}

#[derive(Debug)]
struct State<T> {
    value: T,
    version: u64,
    closed: bool,
}

/// A signal holding `value`, and a receiver that has seen it.
pub fn channel<T>(value: T) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            value,
            version: 0,
            closed: false,
        }),
        notify: Notify::new(),
    });
    let rx = Receiver {
        shared: shared.clone(),
        seen: 0,
    };
    (Sender { shared }, rx)
}

impl<T> Sender<T> {
    /// Changes the value in place and wakes every waiting receiver, oldest waiter first.
    pub fn send_modify(&self, modify: impl FnOnce(&mut T)) {
        {
            let mut state = self.shared.state.lock().unwrap();
            modify(&mut state.value);
            state.version += 1;
        }
        self.shared.notify.notify_waiters();
    }

    /// Reads the value.
    pub fn with<R>(&self, read: impl FnOnce(&T) -> R) -> R {
        read(&self.shared.state.lock().unwrap().value)
    }

    /// A receiver that has seen the value as it is now.
    pub fn subscribe(&self) -> Receiver<T> {
        let seen = self.shared.state.lock().unwrap().version;
        Receiver {
            shared: self.shared.clone(),
            seen,
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap().closed = true;
        self.shared.notify.notify_waiters();
    }
}

impl<T> Receiver<T> {
    /// Waits until the value changed since this receiver last saw it, and marks it seen; a
    /// change made before the sender was dropped still counts.
    pub async fn changed(&mut self) -> Result<(), Closed> {
        self.wait(|_| true).await.map(|_| ())
    }

    /// Waits until `ready` holds for the value (checked now, then on every change) and marks
    /// it seen; `Closed` if the sender is dropped first.
    pub async fn wait_for(&mut self, ready: impl Fn(&T) -> bool) -> Result<(), Closed> {
        let (version, holds, closed) = {
            let state = self.shared.state.lock().unwrap();
            (state.version, ready(&state.value), state.closed)
        };
        self.seen = version;
        if holds {
            return Ok(());
        }
        if closed {
            return Err(Closed);
        }
        self.wait(ready).await
    }

    /// Waits for a version after the one seen that satisfies `ready`.
    async fn wait(&mut self, ready: impl Fn(&T) -> bool) -> Result<(), Closed> {
        loop {
            // Enlisted before the version is read, so a change between the read and the await
            // still wakes this waiter.
            let notified = self.shared.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.shared.state.lock().unwrap();
                if state.version != self.seen {
                    self.seen = state.version;
                    if ready(&state.value) {
                        return Ok(());
                    }
                } else if state.closed {
                    return Err(Closed);
                }
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn waiters_wake_in_the_order_they_started_waiting() {
        // tokio's watch wakes these twenty in an order drawn from the runtime's RNG.
        let local = tokio::task::LocalSet::new();
        let (tx, _) = channel(0u64);
        let woke = Rc::new(RefCell::new(Vec::new()));
        for i in 0..20 {
            let mut rx = tx.subscribe();
            let woke = woke.clone();
            local.spawn_local(async move {
                rx.changed().await.unwrap();
                woke.borrow_mut().push(i);
            });
        }
        runtime().block_on(local.run_until(async {
            // The set runs its tasks in spawn order; each starts waiting on its first poll.
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            tx.send_modify(|v| *v += 1);
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        }));
        assert_eq!(*woke.borrow(), (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn a_change_is_seen_once_and_a_drop_closes() {
        runtime().block_on(async {
            let (tx, mut rx) = channel(1u8);
            tx.send_modify(|v| *v = 2);
            assert_eq!(rx.changed().await, Ok(()));
            tx.send_modify(|v| *v = 3);
            drop(tx);
            // The change before the drop still counts; after it, the signal is closed.
            assert_eq!(rx.changed().await, Ok(()));
            assert_eq!(rx.changed().await, Err(Closed));
        });
    }

    #[test]
    fn wait_for_checks_the_value_first_then_each_change() {
        runtime().block_on(async {
            let (tx, mut rx) = channel(false);
            let tx = Arc::new(tx);
            assert_eq!(tx.subscribe().wait_for(|v| !*v).await, Ok(()));
            let setter = tx.clone();
            let waiting = async { rx.wait_for(|v| *v).await };
            let setting = async move {
                tokio::task::yield_now().await;
                setter.send_modify(|v| *v = true);
            };
            let (waited, ()) = tokio::join!(waiting, setting);
            assert_eq!(waited, Ok(()));
            assert!(tx.with(|v| *v));
        });
    }
}
