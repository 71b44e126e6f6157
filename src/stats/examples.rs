//! Examples of failed calls: the first few of each error outcome, each with
//! the reason and how the answer began, so that a run full of errors says
//! what they were in its files and on stdout, not only on the dashboard.
//!
//! Only what the server sent and what volley concluded is kept: never a
//! request, so never a header value.

use std::fmt::{self, Display};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Outcome, ProtocolKind};

/// Examples kept per error outcome, per method (and in the total).
pub const EXAMPLES_PER_OUTCOME: usize = 3;
/// Bytes of an answer shown wherever volley shows one (an example, the
/// live view's last error, a failed setup call or poll, `check`'s
/// evidence): enough to recognise an error object or an HTML page, not
/// enough to hold a big body in memory.
pub const EXCERPT_BYTES: usize = 200;

/// The first bytes of `bytes` as text (`EXCERPT_BYTES`, never half a
/// character), without a mark of the cut: what an example keeps, beside
/// the size of the whole.
pub fn head(bytes: &[u8]) -> String {
    let mut end = bytes.len().min(EXCERPT_BYTES);
    // A cut through a character leaves it out rather than garble it.
    while end > 0
        && end < bytes.len()
        && std::str::from_utf8(&bytes[..end]).is_err_and(|e| e.error_len().is_none())
    {
        end -= 1;
    }
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `bytes` as a message shows them: whole when short, else their first
/// `EXCERPT_BYTES` and the size of the whole.
pub fn excerpt(bytes: &[u8]) -> String {
    let shown = head(bytes);
    if bytes.len() <= EXCERPT_BYTES {
        return shown;
    }
    format!("{shown}… ({} bytes in all)", bytes.len())
}

/// One failed call, kept as an example.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrorExample {
    pub method: String,
    /// The outcome in full: `rpc_error(-32000)`, `protocol(id_mismatch)`, `io`.
    pub outcome: String,
    /// Why the call failed, in words: the transport's own error, the rule
    /// the answer broke, what the scenario expected.
    pub reason: String,
    /// The first bytes of the call's answer (its own entry in a batch), as
    /// lossy UTF-8; empty when no answer came.
    pub answer: String,
    /// The answer's whole size: larger than `answer` when it was cut.
    pub answer_bytes: usize,
}

/// What the engine knows of why a call failed, beyond its outcome. Borrowed,
/// so that it costs nothing until an example is actually kept.
#[derive(Clone, Copy)]
pub enum Cause<'a> {
    /// An answer came and was judged: the outcome says why.
    Answer,
    /// The transport failed, in its own words.
    Transport(&'a dyn Display),
    /// No answer within this long.
    Timeout(Duration),
    /// No answer when the run's grace (this long after the schedule's
    /// end) ran out.
    GraceOver(Duration),
}

impl ErrorExample {
    pub fn new(
        method: &str,
        outcome: Outcome,
        cause: Cause<'_>,
        expected: Option<&dyn Display>,
        answer: &[u8],
    ) -> Self {
        ErrorExample {
            method: method.to_string(),
            outcome: outcome.to_string(),
            reason: Reason {
                outcome,
                cause,
                expected,
            }
            .to_string(),
            answer: head(answer),
            answer_bytes: answer.len(),
        }
    }
}

/// The reason of an example, written out only when one is kept.
struct Reason<'a> {
    outcome: Outcome,
    cause: Cause<'a>,
    expected: Option<&'a dyn Display>,
}

impl Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.cause, self.outcome) {
            (Cause::Transport(error), _) => error.fmt(f),
            (Cause::Timeout(after), _) => {
                write!(f, "no answer within {}", humantime::format_duration(after))
            }
            (Cause::GraceOver(grace), _) => write!(
                f,
                "no answer by the end of the run's grace ({} after the schedule ended)",
                humantime::format_duration(grace)
            ),
            (Cause::Answer, Outcome::RpcError(code)) => {
                write!(f, "the server answered with JSON-RPC error {code}")
            }
            (Cause::Answer, Outcome::HttpStatus(status)) => {
                write!(f, "HTTP status {status} with no JSON-RPC answer in the body")
            }
            (Cause::Answer, Outcome::InvalidJson) => f.write_str("the answer is not JSON"),
            (Cause::Answer, Outcome::Protocol(kind)) => {
                write!(f, "{}: {}", kind.name(), rule_broken(kind))
            }
            (Cause::Answer, Outcome::Assertion | Outcome::Until) => match self.expected {
                Some(expected) => write!(f, "expected {expected}"),
                None => f.write_str("not what the scenario expected"),
            },
            (Cause::Answer, Outcome::Capture) => match self.expected {
                Some(expected) => write!(f, "nothing to capture: expected {expected}"),
                None => f.write_str("nothing to capture"),
            },
            (Cause::Answer, other) => other.fmt(f),
        }
    }
}

/// The JSON-RPC 2.0 rule an answer broke, in words.
fn rule_broken(kind: ProtocolKind) -> &'static str {
    match kind {
        ProtocolKind::WrongVersion => "`jsonrpc` is missing or not \"2.0\"",
        ProtocolKind::IdMismatch => "the answer's id is not the call's",
        ProtocolKind::IdWrongType => "the answer's id has another JSON type than the call's",
        ProtocolKind::MissingEntry => "the batch answer has no entry for this call",
        ProtocolKind::DuplicateEntry => "the batch answer answers this call more than once",
        ProtocolKind::ResultAndError => "the answer has both `result` and `error`",
        ProtocolKind::NoResultOrError => "the answer has neither `result` nor `error`",
        ProtocolKind::BadErrorObject => "`error` lacks an integer `code` or a string `message`",
        ProtocolKind::NotAResponse => {
            "the JSON is not a response object (or array, for a batch), or names a member twice"
        }
        ProtocolKind::NoAnswer => "the call expected an answer and the body was empty",
        ProtocolKind::AnswerToNotification => "a notification was answered",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_cut_and_its_size_kept() {
        let answer = vec![b'x'; 1000];
        let example = ErrorExample::new("m", Outcome::InvalidJson, Cause::Answer, None, &answer);
        assert_eq!(example.answer.len(), EXCERPT_BYTES);
        assert_eq!(example.answer_bytes, 1000);
        assert_eq!(example.reason, "the answer is not JSON");
    }

    #[test]
    fn a_cut_through_a_character_stays_valid_text() {
        // The cut falls in the middle of the 100th `é`, which is left out.
        let answer = format!("a{}", "é".repeat(EXCERPT_BYTES));
        let example = ErrorExample::new("m", Outcome::InvalidJson, Cause::Answer, None, answer.as_bytes());
        assert_eq!(example.answer, format!("a{}", "é".repeat(EXCERPT_BYTES / 2 - 1)));
    }

    #[test]
    fn an_excerpt_is_whole_when_short_and_says_its_size_when_cut() {
        assert_eq!(excerpt(b"short"), "short");
        let exact = vec![b'a'; EXCERPT_BYTES];
        assert_eq!(excerpt(&exact), "a".repeat(EXCERPT_BYTES));
        let longer = vec![b'b'; EXCERPT_BYTES + 1];
        let shown = format!(
            "{}… ({} bytes in all)",
            "b".repeat(EXCERPT_BYTES),
            EXCERPT_BYTES + 1
        );
        assert_eq!(excerpt(&longer), shown);
        // Bytes that are not text are shown as replacement characters.
        assert_eq!(excerpt(b"\xff!"), "\u{fffd}!");
    }

    #[test]
    fn each_cause_gives_its_reason() {
        let error = "connection reset by peer";
        let io = ErrorExample::new("m", Outcome::Io, Cause::Transport(&error), None, b"");
        assert_eq!((io.outcome.as_str(), io.reason.as_str()), ("io", error));
        let late = ErrorExample::new(
            "m",
            Outcome::Timeout,
            Cause::Timeout(Duration::from_secs(2)),
            None,
            b"",
        );
        assert_eq!(late.reason, "no answer within 2s");
        let rpc = ErrorExample::new("m", Outcome::RpcError(-32000), Cause::Answer, None, b"{}");
        assert_eq!(rpc.outcome, "rpc_error(-32000)");
        assert!(rpc.reason.contains("-32000"));
        let wrong = ErrorExample::new(
            "m",
            Outcome::Protocol(ProtocolKind::IdMismatch),
            Cause::Answer,
            None,
            b"{}",
        );
        assert_eq!(wrong.reason, "id_mismatch: the answer's id is not the call's");
        let expected = "a result of type string";
        let assertion = ErrorExample::new("m", Outcome::Assertion, Cause::Answer, Some(&expected), b"{}");
        assert_eq!(assertion.reason, "expected a result of type string");
    }
}
