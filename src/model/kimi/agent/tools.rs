//! The loop's tools over the simulated workspace (`model::tools::Workspace`): `Read`, `Write`,
//! `Edit`, `Grep`, `Bash` and `get_weather` (the tool of the recorded Anthropic stream), each
//! an [`ExecutableTool`] that declares the resource accesses it touches (kimi-loop.md §5.1),
//! takes simulated time to run, honours the abort signal, and reports its start and end.
//!
//! Paths: a path without a leading `/` is relative to the workspace root `/`, so `a.txt` and
//! `/a.txt` are one file, and a `Grep` over `/` covers every file (its `search` tree access
//! conflicts with any write).
//!
//! Each execution reports `loop_tool_start` with the accesses it *really* touches and
//! `loop_tool_end` when it settles or is abandoned; `lock-safety` is judged on those, not on
//! what the tool declared to the scheduler.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rand::{RngExt as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use super::Probe;
use super::inject::{AbortReason, ToolAct};
use crate::model::kimi::turn_loop::access::{FileOperation, ToolAccesses, ToolResourceAccess};
use crate::model::kimi::turn_loop::errors::LoopError;
use crate::model::kimi::turn_loop::result::ExecutableToolResult;
use crate::model::kimi::turn_loop::tool::{
    ExecutableTool, RunnableToolExecution, SharedTool, ToolExecuteContext, ToolExecution,
};
use crate::model::port::clock::Clock;
use crate::model::port::observe::{AccessList, Observation};
use crate::model::tools::{ToolStatus, Workspace};

/// The tools this module implements, by the name the model calls them.
pub const TOOL_NAMES: [&str; 6] = ["Read", "Write", "Edit", "Grep", "Bash", "get_weather"];

/// A workspace path as the tools use it: with a leading `/`.
pub fn resolve_path(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

/// What the tools share: the workspace, timing, the fault hooks and the execution counter.
pub struct ToolRuntime {
    workspace: Arc<Mutex<Workspace>>,
    probe: Arc<Probe>,
    /// Per-execution latency range `[min, max]` in ms, drawn from `prng`.
    latency_ms: [u64; 2],
    /// Fixed latencies by tool-call id (scripted calls).
    overrides: BTreeMap<String, u64>,
    prng: Mutex<ChaCha8Rng>,
    executions: Mutex<u32>,
    /// The host's clock (tool latencies, scripted aborts).
    clock: Clock,
}

impl ToolRuntime {
    pub fn new(
        workspace: Arc<Mutex<Workspace>>,
        probe: Arc<Probe>,
        latency_ms: [u64; 2],
        overrides: BTreeMap<String, u64>,
        seed: u64,
        clock: Clock,
    ) -> Arc<Self> {
        Arc::new(ToolRuntime {
            workspace,
            probe,
            latency_ms,
            overrides,
            prng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            clock,
            executions: Mutex::new(0),
        })
    }

    fn latency_for(&self, tool_call_id: &str) -> u64 {
        if let Some(ms) = self.overrides.get(tool_call_id) {
            return *ms;
        }
        let [min, max] = self.latency_ms;
        if min >= max {
            return min;
        }
        self.prng
            .lock()
            .expect("prng poisoned")
            .random_range(min..=max)
    }

    async fn execute(
        self: Arc<Self>,
        name: &'static str,
        op: Op,
        accesses: ToolAccesses,
        ctx: ToolExecuteContext,
    ) -> Result<Value, LoopError> {
        let execution = {
            let mut n = self.executions.lock().expect("counter poisoned");
            *n += 1;
            *n
        };
        let act = self.probe.faults().tool(execution, name, &ctx.tool_call_id);
        self.probe.observe(Observation::LoopToolStart {
            tool_call_id: ctx.tool_call_id.clone(),
            tool: name.to_string(),
            execution,
            accesses: AccessList(accesses),
        });
        let mut end = EndGuard {
            probe: Arc::clone(&self.probe),
            tool_call_id: ctx.tool_call_id.clone(),
            how: "dropped",
        };
        if let ToolAct::Hang { abort_after_ms } = act {
            // Ignores the signal: only the loop's grace timeout (or the end of the run) ends it.
            if let Some(ms) = abort_after_ms {
                self.clock.sleep(Duration::from_millis(ms)).await;
                self.probe.abort(AbortReason::User);
            }
            std::future::pending::<()>().await;
        }
        let latency = self.latency_for(&ctx.tool_call_id);
        tokio::select! {
            biased;
            reason = ctx.signal.cancelled() => {
                end.how = "aborted";
                return Err(LoopError::Aborted(reason));
            }
            () = self.clock.sleep(Duration::from_millis(latency)) => {}
        }
        let result = self.apply(&op, &ctx.tool_call_id, name);
        if let ToolAct::Garbage(garbage) = act {
            end.how = "garbage";
            return Ok(garbage.value());
        }
        end.how = if result.is_error { "error" } else { "ok" };
        Ok(result.to_value())
    }

    /// The tool's effect on the workspace, all at once (after its latency).
    fn apply(&self, op: &Op, tool_call_id: &str, name: &str) -> ExecutableToolResult {
        let mut ws = self.workspace.lock().expect("workspace poisoned");
        if !matches!(op, Op::Bash { .. }) {
            ws.record_execution(tool_call_id, name, &op.describe());
        }
        match op {
            Op::Read { path } => match ws.file(path) {
                Some(content) => ExecutableToolResult::text(content),
                None => ExecutableToolResult::error(format!("File does not exist: {path}")),
            },
            Op::Write { path, content } => {
                ws.put_file(path, content.clone());
                ExecutableToolResult::text(format!("Wrote {} bytes to {path}", content.len()))
            }
            Op::Edit { path, old, new } => {
                let Some(content) = ws.file(path).map(str::to_string) else {
                    return ExecutableToolResult::error(format!("File does not exist: {path}"));
                };
                if old.is_empty() || !content.contains(old.as_str()) {
                    return ExecutableToolResult::error(format!(
                        "String to replace not found in {path}"
                    ));
                }
                ws.put_file(path, content.replacen(old.as_str(), new, 1));
                ExecutableToolResult::text(format!("Edited {path}"))
            }
            Op::Grep { pattern, path } => {
                let tree = if path.ends_with('/') {
                    path.clone()
                } else {
                    format!("{path}/")
                };
                let mut hits = String::new();
                for (file, content) in ws.files() {
                    if file != path && !file.starts_with(&tree) {
                        continue;
                    }
                    for (i, line) in content.lines().enumerate() {
                        if line.contains(pattern.as_str()) {
                            hits.push_str(&format!("{file}:{}:{line}\n", i + 1));
                        }
                    }
                }
                if hits.is_empty() {
                    ExecutableToolResult::text("No matches found")
                } else {
                    ExecutableToolResult::text(hits)
                }
            }
            Op::Bash { command } => {
                let args = json!({ "command": command }).to_string();
                let (outcome, _) = ws.execute(tool_call_id, "Bash", &args);
                match outcome.status {
                    ToolStatus::Success => ExecutableToolResult::text(outcome.tool_return),
                    ToolStatus::Error => ExecutableToolResult::error(outcome.tool_return),
                }
            }
            Op::Weather { location } => ExecutableToolResult::text(
                json!({"location": location, "forecast": "sunny, 21C"}).to_string(),
            ),
        }
    }
}

/// Reports `loop_tool_end` however the execution ends, including when its future is dropped.
struct EndGuard {
    probe: Arc<Probe>,
    tool_call_id: String,
    how: &'static str,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.probe.observe(Observation::LoopToolEnd {
            tool_call_id: std::mem::take(&mut self.tool_call_id),
            how: self.how.to_string(),
        });
    }
}

/// One tool operation with resolved paths.
#[derive(Debug, Clone)]
enum Op {
    Read {
        path: String,
    },
    Write {
        path: String,
        content: String,
    },
    Edit {
        path: String,
        old: String,
        new: String,
    },
    Grep {
        pattern: String,
        path: String,
    },
    Bash {
        command: String,
    },
    Weather {
        location: String,
    },
}

impl Op {
    /// The accesses this operation declares to the scheduler, through §5.1's helpers as a
    /// tool of the reference does (`readFile(p)`, `writeFile(p)`, ...).
    fn declared(&self) -> ToolAccesses {
        match self {
            Op::Read { path } => ToolAccesses::read_file(path.as_str()),
            Op::Write { path, .. } => ToolAccesses::write_file(path.as_str()),
            Op::Edit { path, .. } => ToolAccesses::read_write_file(path.as_str()),
            Op::Grep { path, .. } => ToolAccesses::search_tree(path.as_str()),
            Op::Bash { .. } => ToolAccesses::all(),
            Op::Weather { .. } => ToolAccesses::none(),
        }
    }

    /// The accesses this operation really touches, written out rather than built by the
    /// helpers it declares with: `lock-safety` judges these, so a helper that declares wrongly
    /// does not also make the execution look harmless.
    fn touched(&self) -> ToolAccesses {
        use FileOperation::{Read, Readwrite, Search, Write};
        let file = |operation, path: &str, recursive| {
            ToolAccesses(vec![ToolResourceAccess::File {
                operation,
                path: path.to_owned(),
                recursive,
            }])
        };
        match self {
            Op::Read { path } => file(Read, path, false),
            Op::Write { path, .. } => file(Write, path, false),
            Op::Edit { path, .. } => file(Readwrite, path, false),
            Op::Grep { path, .. } => file(Search, path, true),
            Op::Bash { .. } => ToolAccesses(vec![ToolResourceAccess::All]),
            Op::Weather { .. } => ToolAccesses(Vec::new()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Op::Read { path } => format!("Read {path}"),
            Op::Write { path, .. } => format!("Write {path}"),
            Op::Edit { path, .. } => format!("Edit {path}"),
            Op::Grep { pattern, path } => format!("Grep {pattern:?} in {path}"),
            Op::Bash { command } => format!("Bash {command}"),
            Op::Weather { location } => format!("Weather in {location}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Write,
    Edit,
    Grep,
    Bash,
    Weather,
}

impl Kind {
    fn parameters(self) -> Value {
        match self {
            Kind::Read => string_props(&["path"], &[]),
            Kind::Write => string_props(&["path", "content"], &[]),
            Kind::Edit => string_props(&["path", "old", "new"], &[]),
            Kind::Grep => string_props(&["pattern"], &["path"]),
            Kind::Bash => string_props(&["command"], &[]),
            // The recorded stream's tool: lenient, like the original client tool.
            Kind::Weather => json!({
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            }),
        }
    }
}

/// One workspace tool.
struct WorkspaceTool {
    kind: Kind,
    runtime: Arc<ToolRuntime>,
}

fn string_props(required: &[&str], optional: &[&str]) -> Value {
    let mut props = serde_json::Map::new();
    for p in required.iter().chain(optional) {
        props.insert((*p).to_string(), json!({"type": "string"}));
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

impl WorkspaceTool {
    fn op(&self, args: &Value) -> Op {
        let s = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match self.kind {
            Kind::Read => Op::Read {
                path: resolve_path(&s("path")),
            },
            Kind::Write => Op::Write {
                path: resolve_path(&s("path")),
                content: s("content"),
            },
            Kind::Edit => Op::Edit {
                path: resolve_path(&s("path")),
                old: s("old"),
                new: s("new"),
            },
            Kind::Grep => Op::Grep {
                pattern: s("pattern"),
                path: resolve_path(&s("path")),
            },
            Kind::Bash => Op::Bash {
                command: s("command"),
            },
            Kind::Weather => Op::Weather {
                location: s("location"),
            },
        }
    }
}

impl ExecutableTool for WorkspaceTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Read => "Read",
            Kind::Write => "Write",
            Kind::Edit => "Edit",
            Kind::Grep => "Grep",
            Kind::Bash => "Bash",
            Kind::Weather => "get_weather",
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::Read => "Read a file of the workspace.",
            Kind::Write => "Write a file of the workspace (creates or replaces it).",
            Kind::Edit => "Replace the first occurrence of `old` with `new` in a file.",
            Kind::Grep => {
                "Search the files under `path` (default: all) for lines containing `pattern`."
            }
            Kind::Bash => "Run a shell command (echo, cat, ls, touch).",
            Kind::Weather => "Get the weather for a location.",
        }
    }

    fn parameters(&self) -> Value {
        self.kind.parameters()
    }

    fn resolve_execution<'a>(
        &'a self,
        args: Value,
    ) -> BoxFuture<'a, Result<ToolExecution, LoopError>> {
        Box::pin(async move {
            let op = self.op(&args);
            let accesses = op.touched();
            let declared = op.declared();
            let description = op.describe();
            let runtime = Arc::clone(&self.runtime);
            let name: &'static str = match self.kind {
                Kind::Read => "Read",
                Kind::Write => "Write",
                Kind::Edit => "Edit",
                Kind::Grep => "Grep",
                Kind::Bash => "Bash",
                Kind::Weather => "get_weather",
            };
            let runnable = RunnableToolExecution::new(format!("{name}(*)"), move |ctx| {
                Box::pin(runtime.execute(name, op, accesses, ctx))
            })
            .with_accesses(declared)
            .with_description(description);
            Ok(ToolExecution::Runnable(runnable))
        })
    }
}

/// The parameter schema the agent's tool `name` declares to the model, or `None` for a name
/// that is not one of [`TOOL_NAMES`].
pub fn declared_parameters(name: &str) -> Option<Value> {
    kind_of(name).map(Kind::parameters)
}

fn kind_of(name: &str) -> Option<Kind> {
    Some(match name {
        "Read" => Kind::Read,
        "Write" => Kind::Write,
        "Edit" => Kind::Edit,
        "Grep" => Kind::Grep,
        "Bash" => Kind::Bash,
        "get_weather" => Kind::Weather,
        _ => return None,
    })
}

/// The named tools over `runtime`, in the order given. Names not in [`TOOL_NAMES`] are
/// skipped (the scenario loader rejects them).
pub fn workspace_tools(names: &[String], runtime: &Arc<ToolRuntime>) -> Vec<SharedTool> {
    names
        .iter()
        .filter_map(|n| {
            let kind = kind_of(n)?;
            Some(Arc::new(WorkspaceTool {
                kind,
                runtime: Arc::clone(runtime),
            }) as SharedTool)
        })
        .collect()
}
