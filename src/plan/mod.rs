//! The plan's vocabulary: what a run will do, as plain data that the
//! scenario compiles a file into and the engine carries out. The load
//! (model, stages), the mix of calls, the call templates and the generators
//! their params hold, and the values polled while the run goes.

mod call;
mod data;
mod expr;
mod load;
mod mix;
mod poll;
mod shard;
mod template;

pub use call::{CallTemplate, RequestBuilder, SetupCall};
pub use expr::Scope;
pub use load::{LoadPlan, Pacing, Profile, Stage};
pub use mix::{BatchSize, Mix, MixBatch, MixCall, Planned, ReplaySource};
pub use poll::{Poll, PollSpec, Polled};
pub use shard::{Shard, MAX_SHARDS};
pub use template::{split, Part, Template};
