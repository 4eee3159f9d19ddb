//! The tool scheduler (kimi-loop.md §5.2 `tool-scheduler.ts`): tasks whose accesses do not
//! conflict overlap; conflicting tasks serialise at provider-order boundaries.
//!
//! JavaScript promises run themselves; here nothing spawns. The scheduler owns each started
//! task's future and the caller drives it with [`ToolScheduler::drive`] from the same task that
//! awaits the results, so every poll happens in one deterministic order: tasks in start order.
//! Starting a task polls it once immediately, which mirrors `execute` being invoked
//! synchronously inside `add`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;

use super::access::ToolAccesses;

/// Starts a task: called once, when the task is allowed to run.
pub type TaskStart<R> = Box<dyn FnOnce() -> BoxFuture<'static, R> + Send>;

/// A task's handle: its index in add order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub usize);

enum Slot<R> {
    Queued(TaskStart<R>),
    Running(BoxFuture<'static, R>),
    Done(Option<R>),
    Empty,
}

struct Task<R> {
    accesses: ToolAccesses,
    slot: Slot<R>,
}

/// `ToolScheduler`: an `active` list and a `queued` list, both in order.
pub struct ToolScheduler<R> {
    tasks: Vec<Task<R>>,
    active: Vec<usize>,
    queued: Vec<usize>,
    start_log: Vec<TaskId>,
    /// Planted defect ([`LoopBugs::scheduler_drain_ignores_active`](super::bugs::LoopBugs)).
    drain_ignores_active: bool,
}

impl<R: Send + 'static> Default for ToolScheduler<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Send + 'static> ToolScheduler<R> {
    /// An empty scheduler.
    pub fn new() -> Self {
        Self {
            tasks: Vec::new(),
            active: Vec::new(),
            queued: Vec::new(),
            start_log: Vec::new(),
            drain_ignores_active: false,
        }
    }

    /// A scheduler with the planted defect of [`LoopBugs`](super::bugs::LoopBugs) switched
    /// on or off (off is [`new`](Self::new)).
    pub fn with_bugs(bugs: super::bugs::LoopBugs) -> Self {
        Self {
            drain_ignores_active: bugs.scheduler_drain_ignores_active,
            ..Self::new()
        }
    }

    /// `add(task)`: blocked if it conflicts with any active or any already-queued task; else
    /// started (and polled once) now. Returns the handle for [`take_result`](Self::take_result).
    pub fn add(
        &mut self,
        accesses: ToolAccesses,
        start: TaskStart<R>,
        cx: &mut Context<'_>,
    ) -> TaskId {
        let index = self.tasks.len();
        let blocked = self
            .active
            .iter()
            .chain(self.queued.iter())
            .any(|&other| self.tasks[other].accesses.conflicts_with(&accesses));
        self.tasks.push(Task {
            accesses,
            slot: Slot::Queued(start),
        });
        if blocked {
            self.queued.push(index);
        } else {
            self.start(index);
            self.drive(cx);
        }
        TaskId(index)
    }

    fn start(&mut self, index: usize) {
        let slot = std::mem::replace(&mut self.tasks[index].slot, Slot::Empty);
        let Slot::Queued(start) = slot else {
            unreachable!("only queued tasks start");
        };
        self.active.push(index);
        self.start_log.push(TaskId(index));
        self.tasks[index].slot = Slot::Running(start());
    }

    /// `startQueuedTasks()`: walk `queued` in order; a task stays queued if it conflicts with
    /// any active task (including ones started in this pass) or any task kept queued in this
    /// pass.
    fn start_queued(&mut self) {
        let queued = std::mem::take(&mut self.queued);
        let mut still_queued: Vec<usize> = Vec::new();
        for index in queued {
            let accesses = &self.tasks[index].accesses;
            let active: &[usize] = if self.drain_ignores_active {
                &[]
            } else {
                &self.active
            };
            let blocked = active
                .iter()
                .chain(still_queued.iter())
                .any(|&other| self.tasks[other].accesses.conflicts_with(accesses));
            if blocked {
                still_queued.push(index);
            } else {
                self.start(index);
            }
        }
        self.queued = still_queued;
    }

    /// Poll every active task in start order; finished tasks release their accesses and queued
    /// tasks start (and are polled) in the same call. Returns how many tasks finished.
    pub fn drive(&mut self, cx: &mut Context<'_>) -> usize {
        let mut finished_total = 0;
        loop {
            let mut finished = 0;
            for index in self.active.clone() {
                let Slot::Running(future) = &mut self.tasks[index].slot else {
                    continue;
                };
                if let Poll::Ready(result) = Pin::new(future).poll(cx) {
                    self.tasks[index].slot = Slot::Done(Some(result));
                    self.active.retain(|&other| other != index);
                    finished += 1;
                }
            }
            if finished == 0 {
                return finished_total;
            }
            finished_total += finished;
            self.start_queued();
        }
    }

    /// The result of a finished task, once (`None` while it runs or after it was taken).
    pub fn take_result(&mut self, id: TaskId) -> Option<R> {
        match &mut self.tasks.get_mut(id.0)?.slot {
            Slot::Done(result) => result.take(),
            _ => None,
        }
    }

    /// Whether the task has started.
    pub fn is_started(&self, id: TaskId) -> bool {
        self.start_log.contains(&id)
    }

    /// Task ids in the order they started.
    pub fn start_log(&self) -> &[TaskId] {
        &self.start_log
    }

    /// True when nothing is active or queued.
    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && self.queued.is_empty()
    }
}
