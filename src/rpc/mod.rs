//! JSON-RPC 2.0 itself: request bodies, the wire shape of messages, and the
//! judging of answers into outcomes.

mod expect;
mod judge;
mod outcome;
mod request;
pub mod wire;

pub use expect::{Expectation, JsonType, ResultCheck};
pub use judge::{Judge, Verdict};
pub use outcome::{Outcome, OutcomeKind, ProtocolKind};
pub use request::{CallTemplate, Entry, RequestBuilder};
