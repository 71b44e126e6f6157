//! JSON-RPC 2.0 itself: the wire shape of messages, what answers must look
//! like, and the judging of answers into outcomes.

mod entry;
mod expect;
mod judge;
pub mod wire;

pub use entry::Entry;
pub use expect::{Expectation, JsonType, ResultCheck};
pub use judge::{Judge, Verdict};
