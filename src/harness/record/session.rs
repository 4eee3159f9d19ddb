//! A recording session on its own runtime, from the first request to the end line.

use super::*;

pub(crate) fn scrub_frame(s: &Scrubber, f: TimedFrame) -> TimedFrame {
    let frame = match f.frame {
        SseFrame::Event(mut ev) => {
            ev.data = s.sse_data(&ev.data);
            SseFrame::Event(ev)
        }
        SseFrame::Comment(c) => SseFrame::Comment(s.sse_data(&c)),
    };
    TimedFrame {
        t_ms: f.t_ms,
        frame,
    }
}

/// Runs a recording session on a fresh runtime until `until` resolves (for `sim record`: the
/// first Ctrl-C). `ready` gets [`Recorder::ready_line`] once the proxy listens.
pub fn record(
    opts: RecordOptions,
    ready: impl FnOnce(Value),
    until: impl std::future::Future<Output = ()>,
) -> Result<RecordSummary, InputError> {
    let out = opts.out.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| input_error(&out, format!("cannot start a tokio runtime: {e}")))?;
    runtime.block_on(async move {
        let recorder = Recorder::start(opts).await?;
        ready(recorder.ready_line());
        until.await;
        recorder.stop().await
    })
}

/// Resolves at the first Ctrl-C (SIGINT), or never when the signal cannot be listened for.
pub async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
