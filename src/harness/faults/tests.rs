//! The fault format: every kind's printed line and its TOML round trip, and trigger checks.

use super::*;
use crate::model::kimi::agent::inject::{Garbage, ListenerFault};
use crate::model::port::inject::{DateField, StreamFault};

fn stale(send: u64) -> (u64, String, String, String) {
    (send, "toolu_1".into(), "Bash".into(), "{}".into())
}

/// One fault of every kind and the line it prints (the trace records these lines, so they
/// must not change), each also read back from what it writes.
#[test]
fn every_kind_prints_its_line_and_round_trips_through_toml() {
    let (send, tool_call_id, tool, arguments) = stale(2);
    let on = |event: &str, nth| When::OnEvent {
        event: event.into(),
        nth,
    };
    let cases = [
        (
            Fault::DropConnection {
                response: 1,
                after_frame: 4,
            },
            "drop_connection response=1 after_frame=4",
        ),
        (
            Fault::ServerStream {
                response: 2,
                frame: 3,
                action: StreamFault::CutInside,
            },
            "server_stream response=2 frame=3 action=cut_inside",
        ),
        (
            Fault::ProviderStream {
                call: 0,
                frame: 9,
                action: StreamFault::Stall,
            },
            "provider_stream call=0 frame=9 action=stall",
        ),
        (
            Fault::ProviderError {
                call: 1,
                status: 429,
                retry_after_s: Some(3),
                message: Some("slow down".into()),
            },
            "provider_error call=1 status=429 retry_after_s=3",
        ),
        (
            Fault::Latency {
                when: When::AtMs(5),
                max_ms: 40,
            },
            "latency max_ms=40 at_ms=5",
        ),
        (
            Fault::Partition {
                between: ["client".into(), "server".into()],
                when: on("chunk_recorded", 3),
                duration_ms: 500,
            },
            "partition between=client,server duration_ms=500 on_event=chunk_recorded nth=3",
        ),
        (
            Fault::Hold {
                between: ["server".into(), "provider".into()],
                when: When::AtMs(7),
                duration_ms: 100,
            },
            "hold between=server,provider duration_ms=100 at_ms=7",
        ),
        (
            Fault::Crash {
                host: "server".into(),
                when: When::AtMs(60),
                restart_after_ms: Some(500),
            },
            "crash host=server at_ms=60 restart_after_ms=500",
        ),
        (
            Fault::Crash {
                host: "provider".into(),
                when: on("provider_serve", 1),
                restart_after_ms: None,
            },
            "crash host=provider on_event=provider_serve nth=1 restart=at-heal",
        ),
        (
            Fault::UserAbort {
                when: When::AtMs(1500),
                reason: None,
            },
            "user_abort at_ms=1500 reason=user",
        ),
        (
            Fault::ToolHang {
                execution: 2,
                abort_after_ms: Some(500),
            },
            "tool_hang execution=2 abort_after_ms=500",
        ),
        (
            Fault::ToolGarbage {
                execution: 1,
                value: Garbage::NoOutput,
            },
            "tool_garbage execution=1 value=no_output",
        ),
        (
            Fault::ListenerThrows {
                event: None,
                nth: Some(2),
                how: ListenerFault::Error,
            },
            "listener_throws event=any nth=2 how=error",
        ),
        (
            Fault::TranscriptRejects {
                event: Some("tool.call".into()),
                nth: None,
            },
            "transcript_rejects event=tool.call nth=1",
        ),
        (Fault::BusyOnSend { send: 1 }, "busy_on_send send=1"),
        (
            Fault::ShuttingDownOnSend {
                send: 3,
                retry_after_s: None,
                retry_after_date: false,
                retry_after_broken: None,
            },
            "shutting_down_on_send send=3",
        ),
        (
            Fault::ShuttingDownOnSend {
                send: 2,
                retry_after_s: Some(4),
                retry_after_date: true,
                retry_after_broken: None,
            },
            "shutting_down_on_send send=2 retry_after_s=4 retry_after_date=true",
        ),
        (
            Fault::ApprovalPendingOnSend {
                send,
                tool_call_id: tool_call_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
            },
            "approval_pending_on_send send=2 tool_call_id=toolu_1",
        ),
        (
            Fault::StaleApproval {
                conversation: "default".into(),
                tool_call_id: tool_call_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
            },
            "stale_approval conversation=default tool_call_id=toolu_1",
        ),
        (
            Fault::RunStreamFail {
                times: 2,
                retry_after_s: None,
                retry_after_date: false,
                retry_after_broken: None,
            },
            "run_stream_fail times=2",
        ),
        (
            Fault::RunStreamFail {
                times: 1,
                retry_after_s: Some(3),
                retry_after_date: true,
                retry_after_broken: None,
            },
            "run_stream_fail times=1 retry_after_s=3 retry_after_date=true",
        ),
        (
            Fault::RunStreamFail {
                times: 1,
                retry_after_s: Some(3),
                retry_after_date: true,
                retry_after_broken: Some(DateField::Minute),
            },
            "run_stream_fail times=1 retry_after_s=3 retry_after_date=true retry_after_broken=minute",
        ),
        (Fault::RunReadFail { times: 3 }, "run_read_fail times=3"),
        (Fault::BusyOwnRun { send: 1 }, "busy_own_run send=1"),
        (
            Fault::ApprovalPendingInBand {
                send,
                tool_call_id,
                tool,
                arguments,
            },
            "approval_pending_in_band send=2 tool_call_id=toolu_1",
        ),
        (
            Fault::Interrupt {
                turn: 1,
                during: During::Stream,
                after_chunk: Some(4),
                after_ms: None,
            },
            "interrupt turn=1 during=stream after_chunk=4",
        ),
        (
            Fault::ClientCrash {
                turn: 2,
                at: CrashAt::AfterTools,
                after_chunk: None,
            },
            "client_crash turn=2 at=after_tools",
        ),
    ];
    for (fault, line) in cases {
        assert_eq!(fault.to_string(), line);
        assert_eq!(fault.problem(), None, "{line}");
        let text = fault.to_toml();
        let table: toml::Table = toml::from_str(&format!("f = {text}")).unwrap();
        let back: Fault = table["f"].clone().try_into().unwrap();
        assert_eq!(back, fault, "{text}");
    }
}

#[test]
fn a_trigger_is_read_from_its_keys_and_checked() {
    let read = |keys: &str| -> Result<Fault, String> {
        let t: toml::Table =
            toml::from_str(&format!("f = {{ kind = \"latency\", max_ms = 1, {keys} }}")).unwrap();
        t["f"]
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string())
    };
    let when = |keys| match read(keys) {
        Ok(Fault::Latency { when, .. }) => Ok(when),
        other => Err(format!("{other:?}")),
    };
    assert_eq!(when("at_ms = 5"), Ok(When::AtMs(5)));
    assert_eq!(
        when("on_event = \"x\""),
        Ok(When::OnEvent {
            event: "x".into(),
            nth: 1
        })
    );
    for (keys, message) in [
        (
            "at_ms = 1, on_event = \"x\"",
            "give either at_ms or on_event, not both",
        ),
        ("nth = 2", "give a trigger"),
        ("on_event = \"x\", nth = 0", "nth counts from 1"),
        ("at_ms = 1, nth = 2", "nth goes with on_event"),
    ] {
        let e = read(keys).unwrap_err();
        assert!(e.contains(message), "{keys}: {e}");
    }
}

/// `retry_after_broken` breaks the date `retry_after_date` writes, names one of four fields,
/// and says so when it is misused.
#[test]
fn a_broken_retry_after_date_needs_the_date_and_a_field_it_knows() {
    let read = |keys: &str| -> Result<Fault, String> {
        let t: toml::Table = toml::from_str(&format!(
            "f = {{ kind = \"shutting_down_on_send\", send = 1, {keys} }}"
        ))
        .unwrap();
        t["f"]
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string())
    };
    let without_date = read("retry_after_s = 2, retry_after_broken = \"day\"").unwrap();
    assert!(
        without_date
            .problem()
            .is_some_and(|p| p.contains("set retry_after_date = true")),
        "{without_date:?}"
    );
    let unknown =
        read("retry_after_s = 2, retry_after_date = true, retry_after_broken = \"second\"")
            .unwrap_err();
    assert!(unknown.contains("`day`, `hour`, `minute`"), "{unknown}");
    for field in DateField::ALL {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        let broken = field.break_in(date);
        assert_ne!(broken, date);
        // The client model's reader and the oracle's own both refuse it.
        assert_eq!(
            crate::model::letta::client::policy::parse_imf_fixdate_ms(&broken),
            None,
            "{broken}"
        );
        assert!(
            crate::harness::letta::dates_true::imf_fixdate_unix_ms(&broken).is_err(),
            "{broken}"
        );
    }
}
