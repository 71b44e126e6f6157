//! JSON-RPC 2.0 itself: request bodies, the wire shape of messages, and the
//! judging of answers into outcomes.

mod judge;
mod outcome;
mod request;
pub mod wire;

pub use judge::{Judge, Verdict};
pub use outcome::{Outcome, OutcomeKind, ProtocolKind};
pub use request::{CallTemplate, Entry, RequestBuilder};
