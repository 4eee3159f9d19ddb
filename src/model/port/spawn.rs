//! Where a model's side tasks run: the [`Spawner`] its [`Env`](super::env::Env) hands out.
//!
//! A model starts tasks beside its main one (a hyper connection driver, the server's run
//! task, the client's fire-and-forget cancel). In the simulation they run on the host's
//! `LocalSet`, the set turmoil polls each step, so tokio's scheduler queues stay empty and
//! only the set's own step counter decides which of two woken tasks runs first
//! (docs/performance.md: idle time is then skipped in whole phases of that counter). On real
//! TCP they run on tokio's scheduler as any tokio program's tasks do.

use std::future::Future;

use tokio::task::{JoinHandle, JoinSet};

/// Where [`Spawner::spawn`] puts a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spawner {
    /// `tokio::spawn`: the runtime's scheduler (real TCP, tests on a plain runtime).
    Runtime,
    /// `tokio::task::spawn_local`: the current `LocalSet` (a turmoil host).
    Local,
}

impl Spawner {
    /// Starts `task` and returns its handle; dropping the handle detaches the task.
    pub fn spawn<F>(self, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self {
            Spawner::Runtime => tokio::spawn(task),
            Spawner::Local => tokio::task::spawn_local(task),
        }
    }

    /// An empty set of tasks started through this spawner.
    pub fn set(self) -> TaskSet {
        TaskSet {
            spawner: self,
            tasks: JoinSet::new(),
        }
    }
}

/// Tasks joined together (a server's connections), started where their [`Spawner`] says.
/// Dropping the set aborts them.
pub struct TaskSet {
    spawner: Spawner,
    tasks: JoinSet<()>,
}

impl TaskSet {
    pub fn spawn<F>(&mut self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self.spawner {
            Spawner::Runtime => drop(self.tasks.spawn(task)),
            Spawner::Local => drop(self.tasks.spawn_local(task)),
        }
    }

    /// The next task to end; `None` when the set is empty.
    pub async fn join_next(&mut self) -> Option<()> {
        self.tasks.join_next().await.map(|_| ())
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}
