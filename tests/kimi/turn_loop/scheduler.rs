//! `tool-scheduler.test.ts` (kimi-loop.md §7.11 = the worked examples 1–11 of §5.2). Each case
//! asserts the start order (sampled after one drive) and the drained result order (add order).
//! The access conflict rule's worked examples (§5.1) are the lib's, in `turn_loop/access.rs`.

use std::sync::Arc;
use std::task::{Context, Waker};

use loopsim::model::kimi::turn_loop::scheduler::{TaskId, ToolScheduler};
use loopsim::model::kimi::turn_loop::*;

use super::util::Gate;

type Outcome = Result<&'static str, &'static str>;

struct Bench {
    scheduler: ToolScheduler<Outcome>,
    names: Vec<&'static str>,
    gates: Vec<Arc<Gate>>,
}

impl Bench {
    fn new() -> Self {
        Self {
            scheduler: ToolScheduler::new(),
            names: Vec::new(),
            gates: Vec::new(),
        }
    }

    fn add(&mut self, name: &'static str, accesses: ToolAccesses) -> TaskId {
        self.add_outcome(name, accesses, Ok(name))
    }

    fn add_outcome(
        &mut self,
        name: &'static str,
        accesses: ToolAccesses,
        outcome: Outcome,
    ) -> TaskId {
        let gate = Arc::new(Gate::default());
        self.gates.push(gate.clone());
        self.names.push(name);
        let mut cx = Context::from_waker(Waker::noop());
        self.scheduler.add(
            accesses,
            Box::new(move || {
                Box::pin(async move {
                    gate.started.set();
                    gate.released.wait().await;
                    outcome
                })
            }),
            &mut cx,
        )
    }

    fn drive(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        self.scheduler.drive(&mut cx);
    }

    fn started(&self) -> Vec<&'static str> {
        self.scheduler
            .start_log()
            .iter()
            .map(|id| self.names[id.0])
            .collect()
    }

    fn release(&mut self, name: &str) {
        let index = self.names.iter().position(|n| *n == name).unwrap();
        self.gates[index].released.set();
        self.drive();
    }

    /// Release everything still running, in add order, and collect results in add order.
    fn drain(&mut self) -> Vec<Outcome> {
        for _ in 0..self.names.len() {
            for gate in &self.gates {
                gate.released.set();
            }
            self.drive();
        }
        assert!(self.scheduler.is_idle());
        (0..self.names.len())
            .map(|i| self.scheduler.take_result(TaskId(i)).expect("result"))
            .collect()
    }
}

/// §7.11 #1
#[test]
fn reads_of_the_same_path_overlap() {
    let mut bench = Bench::new();
    bench.add("first", ToolAccesses::read_file("a"));
    bench.add("second", ToolAccesses::read_file("a"));
    bench.drive();
    assert_eq!(bench.started(), vec!["first", "second"]);
    assert_eq!(bench.drain(), vec![Ok("first"), Ok("second")]);
}

/// §7.11 #2
#[test]
fn a_reader_waits_for_the_writer() {
    let mut bench = Bench::new();
    bench.add("writer", ToolAccesses::write_file("a"));
    bench.add("reader", ToolAccesses::read_file("a"));
    bench.drive();
    assert_eq!(bench.started(), vec!["writer"]);
    bench.release("writer");
    assert_eq!(bench.started(), vec!["writer", "reader"]);
    assert_eq!(bench.drain(), vec![Ok("writer"), Ok("reader")]);
}

/// §7.11 #3
#[test]
fn writers_of_the_same_path_serialise() {
    let mut bench = Bench::new();
    bench.add("w1", ToolAccesses::write_file("a"));
    bench.add("w2", ToolAccesses::write_file("a"));
    bench.drive();
    assert_eq!(bench.started(), vec!["w1"]);
    bench.release("w1");
    assert_eq!(bench.started(), vec!["w1", "w2"]);
    assert_eq!(bench.drain(), vec![Ok("w1"), Ok("w2")]);
}

/// §7.11 #4
#[test]
fn paths_fold_case_and_separators() {
    let mut bench = Bench::new();
    bench.add("writer", ToolAccesses::write_file("C:\\Repo\\a.ts"));
    bench.add("reader", ToolAccesses::read_file("c:/repo/A.ts"));
    bench.drive();
    assert_eq!(bench.started(), vec!["writer"]);
    assert_eq!(bench.drain(), vec![Ok("writer"), Ok("reader")]);
}

/// §7.11 #5
#[test]
fn different_paths_overlap() {
    let mut bench = Bench::new();
    bench.add("write-a", ToolAccesses::write_file("a"));
    bench.add("read-b", ToolAccesses::read_file("b"));
    bench.drive();
    assert_eq!(bench.started(), vec!["write-a", "read-b"]);
    assert_eq!(bench.drain(), vec![Ok("write-a"), Ok("read-b")]);
}

/// §7.11 #6
#[test]
fn a_recursive_read_covers_a_write_below_it() {
    let mut bench = Bench::new();
    bench.add("tree", ToolAccesses::read_tree("/repo/src"));
    bench.add("write", ToolAccesses::write_file("/repo/src/a.ts"));
    bench.drive();
    assert_eq!(bench.started(), vec!["tree"]);
    assert_eq!(bench.drain(), vec![Ok("tree"), Ok("write")]);
}

/// §7.11 #7
#[test]
fn a_rejected_writer_still_releases_the_reader() {
    let mut bench = Bench::new();
    bench.add_outcome(
        "writer",
        ToolAccesses::write_file("a"),
        Err("writer failed"),
    );
    bench.add("reader", ToolAccesses::read_file("a"));
    bench.drive();
    assert_eq!(bench.started(), vec!["writer"]);
    bench.release("writer");
    assert_eq!(bench.started(), vec!["writer", "reader"]);
    assert_eq!(bench.drain(), vec![Err("writer failed"), Ok("reader")]);
}

/// §7.11 #8
#[test]
fn a_later_task_overtakes_only_without_conflicts() {
    let mut bench = Bench::new();
    bench.add("#1", ToolAccesses::write_file("a"));
    bench.add("#2", ToolAccesses::write_file("a"));
    bench.add("b", ToolAccesses::read_file("b"));
    bench.drive();
    assert_eq!(bench.started(), vec!["#1", "b"]);
    bench.release("b");
    assert_eq!(bench.started(), vec!["#1", "b"]);
    bench.release("#1");
    assert_eq!(bench.started(), vec!["#1", "b", "#2"]);
    assert_eq!(bench.drain(), vec![Ok("#1"), Ok("#2"), Ok("b")]);
}

/// §7.11 #9
#[test]
fn a_queued_all_blocks_later_tasks() {
    let mut bench = Bench::new();
    bench.add("write-a", ToolAccesses::write_file("a"));
    bench.add("ALL", ToolAccesses::all());
    bench.add("read-b", ToolAccesses::read_file("b"));
    bench.drive();
    assert_eq!(bench.started(), vec!["write-a"]);
    bench.release("write-a");
    assert_eq!(bench.started(), vec!["write-a", "ALL"]);
    bench.release("ALL");
    assert_eq!(bench.started(), vec!["write-a", "ALL", "read-b"]);
    assert_eq!(bench.drain(), vec![Ok("write-a"), Ok("ALL"), Ok("read-b")]);
}

/// §7.11 #10
#[test]
fn all_serialises_with_a_read() {
    let mut bench = Bench::new();
    bench.add("read-a", ToolAccesses::read_file("a"));
    bench.add("ALL", ToolAccesses::all());
    bench.drive();
    assert_eq!(bench.started(), vec!["read-a"]);
    bench.release("read-a");
    assert_eq!(bench.started(), vec!["read-a", "ALL"]);
    assert_eq!(bench.drain(), vec![Ok("read-a"), Ok("ALL")]);
}

/// §7.11 #11
#[test]
fn none_tasks_overlap_and_results_keep_add_order() {
    let mut bench = Bench::new();
    bench.add("first", ToolAccesses::none());
    bench.add("second", ToolAccesses::none());
    bench.drive();
    assert_eq!(bench.started(), vec!["first", "second"]);
    bench.release("second");
    assert_eq!(bench.scheduler.take_result(TaskId(0)), None);
    assert_eq!(bench.drain()[0], Ok("first"));
}
