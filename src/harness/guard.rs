//! Panics inside a simulated world become a verdict, never a dead process: every host runs on
//! the calling thread under turmoil, so a panic hook that records per thread catches panics
//! even where tokio swallows them in a spawned task's `JoinHandle`.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use super::scenario::InputError;

thread_local! {
    /// Panic messages caught on this thread while a run is in progress. turmoil runs every host
    /// on the calling thread, so a panic in any model task lands here even when tokio swallows
    /// it in a spawned task's JoinHandle.
    static PANICS: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Whether caught panics are also printed on stderr ([`echo_panics`]).
static ECHO: AtomicBool = AtomicBool::new(false);

/// Also print every panic caught from now on to stderr, as `panic: <message> at <file:line>`.
/// A process whose parent reads its stderr turns on this: if a later panic aborts the process
/// (one that cannot unwind), what was caught before it is still said.
pub fn echo_panics(on: bool) {
    ECHO.store(on, Ordering::SeqCst);
}

fn install_panic_recorder() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let recorded = PANICS.with(|p| {
                if let Some(list) = p.borrow_mut().as_mut() {
                    let loc = info
                        .location()
                        .map(|l| format!(" at {}:{}", l.file(), l.line()))
                        .unwrap_or_default();
                    let msg = info
                        .payload()
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| info.payload().downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "panic".into());
                    if ECHO.load(Ordering::SeqCst) {
                        eprintln!("panic: {msg}{loc}");
                    }
                    list.push(format!("{msg}{loc}"));
                    true
                } else {
                    false
                }
            });
            if !recorded {
                default(info);
            }
        }));
    });
}

/// Runs one world (`run`), turning panics anywhere in it into `Err(message)`.
pub fn guarded<T>(
    run: impl FnOnce() -> Result<T, InputError>,
) -> Result<Result<T, String>, InputError> {
    install_panic_recorder();
    PANICS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let result = catch_unwind(AssertUnwindSafe(run));
    let panics = PANICS.with(|p| p.borrow_mut().take()).unwrap_or_default();
    match result {
        Ok(Ok(out)) if panics.is_empty() => Ok(Ok(out)),
        Ok(Ok(_)) => Ok(Err(panics.join("; "))),
        Ok(Err(input)) => Err(input),
        Err(_) => Ok(Err(if panics.is_empty() {
            "panic".into()
        } else {
            panics.join("; ")
        })),
    }
}
