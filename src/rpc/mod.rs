//! JSON-RPC itself (2.0, and 1.0 where a server still speaks it): the wire
//! shape of messages, what answers must look like, and the judging of
//! answers into outcomes.

mod entry;
mod expect;
mod judge;
pub mod same;
mod skim;
pub mod wire;

pub use entry::Entry;
pub use expect::{Expectation, JsonType, RecordedAnswer, ResultCheck};
pub use judge::{AnswerExtras, Judge};

/// The JSON-RPC a server speaks. 1.0 (Bitcoin-derived nodes still speak
/// it) has no `jsonrpc` member, params always an array, notifications with
/// `id: null`, no batches, and answers that carry `result` and `error`,
/// the one that does not apply `null` (or left out, as servers do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    V1,
    #[default]
    V2,
}

impl Version {
    /// `"1.0"` or `"2.0"`, as a scenario's `protocol` and `--jsonrpc` say it.
    pub fn parse(text: &str) -> Option<Version> {
        match text {
            "1.0" => Some(Version::V1),
            "2.0" => Some(Version::V2),
            _ => None,
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Version::V1 => "1.0",
            Version::V2 => "2.0",
        })
    }
}
