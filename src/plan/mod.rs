//! The plan's vocabulary: what a run will do, as plain data that the
//! scenario compiles a file into and the engine carries out. The load
//! (model, stages), the mix of calls, the call templates and the generators
//! their params hold, and the values polled while the run goes.

mod call;
mod data;
mod expr;
mod flow;
mod header;
mod load;
mod mix;
mod pointer;
mod poll;
mod race;
mod shard;
mod template;
mod vars;

pub use call::{CallTemplate, RequestBuilder, SetupCall};
pub use expr::Scope;
pub use flow::{Capture, Check, Flow, ForEach, Pick, Step, Until, FOR_EACH_LIMIT};
pub use header::{HeaderTemplate, HeaderText};
pub use load::{LoadPlan, Pacing, Profile, Stage, DEFAULT_MAX_FLOWS};
pub use mix::{BatchSize, Mix, MixBatch, MixCall, Next, Planned, ReplaySource};
pub use pointer::Pointer;
pub use poll::{Poll, PollSpec, Polled};
pub use race::Race;
pub use shard::{Shard, MAX_SHARDS};
pub use template::{split, Part, Template};
pub use vars::Vars;
