//! Test plugin: workflow type `hostile`, which misbehaves on demand so the host runtime's
//! tests can check that a bad plugin yields a clear error and never harms the operator.
//!
//! `info` always behaves; `validate` sleeps an hour in mode `sleep-in-validate` and accepts
//! anything else. `template` does what `params.mode` says:
//!
//! | mode | `template` |
//! |---|---|
//! | `ok` (default) | one good step, `ok` |
//! | `loop` | loops forever |
//! | `oom` | allocates 1 MiB chunks until memory runs out |
//! | `recurse` | recurses until the stack overflows |
//! | `trap` | panics (a trap: `panic = "abort"`) |
//! | `huge` | returns 100 000 steps (with empty fields, so that building them is cheap) |
//! | `huge-command` | returns one step whose command is 10 MiB |
//! | `bad-graph`, `cycle` | returns steps `a` and `b` depending on each other |
//! | `duplicate` | returns two steps named `twin` |
//! | `missing-dep` | returns a step depending on a step that does not exist |
//! | `bad-name` | returns a step named `Not_A_DNS_Label` |
//! | `log-flood` | logs 1 000 messages of 64 KiB, then returns one good step |
//! | `error` | returns an error (`hostile template error`) |
//! | `sleep` | `std::thread::sleep` for an hour (wasi-libc's `nanosleep`) |
//! | `sleep-30s` | `std::thread::sleep` for 30 s |
//! | `poll-clock` | `wasi:io/poll.poll` on a monotonic-clock subscription an hour ahead |
//! | `block-on-clock` | `pollable.block` on a monotonic-clock subscription of an hour |
//! | `read-stdin` | a blocking read of stdin, then an error saying what it returned |
//!
//! `gate` and `evaluate` misbehave according to the **step's name**: `loop`, `oom`, `recurse`,
//! `trap`, `sleep` and `poll-clock` do as above; `evaluate` of a step named `huge` returns a
//! 10 MiB reason. Any other step starts now and is judged by the default success logic.

mod waits;

use std::hint::black_box;

use workflow_plugin_sdk::prelude::*;

/// What `template` should do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(crate = "workflow_plugin_sdk::serde", rename_all = "kebab-case")]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub enum Mode {
    /// One good step.
    #[default]
    Ok,
    /// Loop forever.
    Loop,
    /// Allocate until memory runs out.
    Oom,
    /// Recurse until the stack overflows.
    Recurse,
    /// Panic.
    Trap,
    /// 100 000 steps.
    Huge,
    /// One step with a 10 MiB command.
    HugeCommand,
    /// Two steps depending on each other (a cycle).
    BadGraph,
    /// Two steps with the same name.
    Duplicate,
    /// A dependency on a missing step.
    MissingDep,
    /// A step name that is not a DNS-1123 label.
    BadName,
    /// Two steps depending on each other.
    Cycle,
    /// Many large log messages.
    LogFlood,
    /// An ordinary template error.
    Error,
    /// Sleep an hour.
    Sleep,
    /// Sleep 30 seconds.
    #[serde(rename = "sleep-30s")]
    Sleep30s,
    /// Poll a clock subscription an hour ahead.
    PollClock,
    /// Block on a clock subscription of an hour.
    BlockOnClock,
    /// Read stdin, blocking.
    ReadStdin,
    /// `validate` sleeps an hour.
    SleepInValidate,
}

/// Parameters: `spec.params.hostile: { mode: ... }`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(crate = "workflow_plugin_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct HostileParams {
    /// How to misbehave.
    #[serde(default)]
    pub mode: Mode,
}

/// The `hostile` workflow type.
pub struct Hostile;

const MIB: usize = 1 << 20;

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn exhaust_memory() -> usize {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        chunks.push(black_box(vec![1u8; MIB]));
        black_box(&chunks);
    }
}

fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    // Always true at run time, but the compiler cannot know it.
    if black_box(depth) != u64::MAX {
        return recurse(depth + 1).wrapping_add(frame[7]);
    }
    depth
}

fn trap(what: &str) -> ! {
    panic!("hostile plugin traps on purpose in {what}")
}

fn misbehave_by_name(name: &str, call: &str) {
    match name {
        "loop" => spin(),
        "oom" => {
            exhaust_memory();
        }
        "recurse" => {
            black_box(recurse(0));
        }
        "trap" => trap(call),
        "sleep" => waits::sleep(waits::HOUR),
        "poll-clock" => waits::poll_clock(),
        _ => {}
    }
}

fn step(name: &str) -> Step {
    Step::new(name, "true").description("a step of the hostile plugin")
}

impl WorkflowType for Hostile {
    type Params = HostileParams;

    fn info() -> Info {
        Info::new("hostile", env!("CARGO_PKG_VERSION"))
            .description("Misbehaves on demand (test plugin)")
    }

    fn validate(params: &HostileParams) -> Result<(), Error> {
        if params.mode == Mode::SleepInValidate {
            waits::sleep(waits::HOUR);
        }
        Ok(())
    }

    fn template(ctx: &Context<HostileParams>) -> Result<Vec<Step>, Error> {
        Ok(match ctx.params.mode {
            Mode::Ok => vec![step("ok")],
            Mode::Loop => spin(),
            Mode::Oom => {
                exhaust_memory();
                Vec::new()
            }
            Mode::Recurse => {
                black_box(recurse(0));
                Vec::new()
            }
            Mode::Trap => trap("template"),
            // Empty strings do not allocate: the cost is in the host's handling, not here.
            Mode::Huge => vec![Step::default(); 100_000],
            Mode::HugeCommand => vec![Step::new("huge-command", "x".repeat(10 * MIB))],
            Mode::Duplicate => vec![step("twin"), step("twin")],
            Mode::MissingDep => vec![step("orphan").depends_on(["does-not-exist"])],
            Mode::BadName => vec![step("Not_A_DNS_Label")],
            Mode::BadGraph | Mode::Cycle => {
                vec![step("a").depends_on(["b"]), step("b").depends_on(["a"])]
            }
            Mode::LogFlood => {
                let line = "x".repeat(64 * 1024);
                for _ in 0..1000 {
                    log::info(&line);
                }
                vec![step("ok")]
            }
            Mode::Error => return Err(Error::new("hostile template error")),
            Mode::Sleep => {
                waits::sleep(waits::HOUR);
                vec![step("ok")]
            }
            Mode::Sleep30s => {
                waits::sleep(std::time::Duration::from_secs(30));
                vec![step("ok")]
            }
            Mode::PollClock => {
                waits::poll_clock();
                vec![step("ok")]
            }
            Mode::BlockOnClock => {
                waits::block_on_clock();
                vec![step("ok")]
            }
            Mode::ReadStdin => {
                return Err(Error::new(format!(
                    "stdin read returned: {}",
                    waits::read_stdin()
                )));
            }
            Mode::SleepInValidate => vec![step("ok")],
        })
    }

    fn gate(step: &Step, _ctx: &Context<HostileParams>) -> Gate {
        misbehave_by_name(&step.name, "gate");
        Gate::StartNow
    }

    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        misbehave_by_name(&step.name, "evaluate");
        if step.name == "huge" {
            return Verdict::Failed("x".repeat(10 * MIB));
        }
        default_verdict(outcome)
    }
}

export_workflow_type!(Hostile);
