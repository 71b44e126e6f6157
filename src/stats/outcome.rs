//! What became of one call. Counted by a cheap enum, never by formatting.

use std::fmt;

/// The fate of one call: exactly one per call sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A well-formed JSON-RPC error answer, with its code.
    RpcError(i64),
    /// A non-2xx HTTP status with no valid JSON-RPC body.
    HttpStatus(u16),
    /// The body was not JSON (truncated, HTML, ...).
    InvalidJson,
    /// Valid JSON that breaks a JSON-RPC 2.0 rule.
    Protocol(ProtocolKind),
    /// A valid answer that is not what the scenario expected.
    Assertion,
    /// A flow's step whose answer held nothing where its capture points
    /// (an empty block, a missing member, an error answer).
    Capture,
    /// A flow's step whose `until` never held within its time.
    Until,
    Timeout,
    Connect,
    Io,
}

impl Outcome {
    pub fn kind(self) -> OutcomeKind {
        match self {
            Outcome::Ok => OutcomeKind::Ok,
            Outcome::RpcError(_) => OutcomeKind::RpcError,
            Outcome::HttpStatus(_) => OutcomeKind::HttpStatus,
            Outcome::InvalidJson => OutcomeKind::InvalidJson,
            Outcome::Protocol(_) => OutcomeKind::Protocol,
            Outcome::Assertion => OutcomeKind::Assertion,
            Outcome::Capture => OutcomeKind::Capture,
            Outcome::Until => OutcomeKind::Until,
            Outcome::Timeout => OutcomeKind::Timeout,
            Outcome::Connect => OutcomeKind::Connect,
            Outcome::Io => OutcomeKind::Io,
        }
    }
}

/// The outcome without its detail, usable as an array index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    Ok = 0,
    RpcError,
    HttpStatus,
    InvalidJson,
    Protocol,
    Assertion,
    Capture,
    Until,
    Timeout,
    Connect,
    Io,
}

impl OutcomeKind {
    pub const COUNT: usize = 11;
    pub const ALL: [OutcomeKind; Self::COUNT] = [
        OutcomeKind::Ok,
        OutcomeKind::RpcError,
        OutcomeKind::HttpStatus,
        OutcomeKind::InvalidJson,
        OutcomeKind::Protocol,
        OutcomeKind::Assertion,
        OutcomeKind::Capture,
        OutcomeKind::Until,
        OutcomeKind::Timeout,
        OutcomeKind::Connect,
        OutcomeKind::Io,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OutcomeKind::Ok => "ok",
            OutcomeKind::RpcError => "rpc_error",
            OutcomeKind::HttpStatus => "http_status",
            OutcomeKind::InvalidJson => "invalid_json",
            OutcomeKind::Protocol => "protocol",
            OutcomeKind::Assertion => "assertion",
            OutcomeKind::Capture => "capture",
            OutcomeKind::Until => "until",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::Connect => "connect",
            OutcomeKind::Io => "io",
        }
    }
}

/// Which JSON-RPC 2.0 rule an answer broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolKind {
    /// `jsonrpc` missing or not exactly "2.0".
    WrongVersion = 0,
    /// The id has the right type but another value.
    IdMismatch,
    /// The id has another JSON type than the one sent (1 is not "1").
    IdWrongType,
    /// A batch answer has no entry for this call.
    MissingEntry,
    /// A batch answer answers this call more than once.
    DuplicateEntry,
    /// Both `result` and `error` are present.
    ResultAndError,
    /// Neither `result` nor `error` is present.
    NoResultOrError,
    /// `error` lacks an integer `code` or a string `message`.
    BadErrorObject,
    /// The answer is JSON but not a response object (or array for a batch),
    /// or an object that names a member twice.
    NotAResponse,
    /// A call expected an answer and the body was empty.
    NoAnswer,
    /// A notification was answered.
    AnswerToNotification,
}

impl ProtocolKind {
    pub const COUNT: usize = 11;
    pub const ALL: [ProtocolKind; Self::COUNT] = [
        ProtocolKind::WrongVersion,
        ProtocolKind::IdMismatch,
        ProtocolKind::IdWrongType,
        ProtocolKind::MissingEntry,
        ProtocolKind::DuplicateEntry,
        ProtocolKind::ResultAndError,
        ProtocolKind::NoResultOrError,
        ProtocolKind::BadErrorObject,
        ProtocolKind::NotAResponse,
        ProtocolKind::NoAnswer,
        ProtocolKind::AnswerToNotification,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::WrongVersion => "wrong_version",
            ProtocolKind::IdMismatch => "id_mismatch",
            ProtocolKind::IdWrongType => "id_wrong_type",
            ProtocolKind::MissingEntry => "missing_entry",
            ProtocolKind::DuplicateEntry => "duplicate_entry",
            ProtocolKind::ResultAndError => "result_and_error",
            ProtocolKind::NoResultOrError => "no_result_or_error",
            ProtocolKind::BadErrorObject => "bad_error_object",
            ProtocolKind::NotAResponse => "not_a_response",
            ProtocolKind::NoAnswer => "no_answer",
            ProtocolKind::AnswerToNotification => "answer_to_notification",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::RpcError(code) => write!(f, "rpc_error({code})"),
            Outcome::HttpStatus(status) => write!(f, "http_status({status})"),
            Outcome::Protocol(kind) => write!(f, "protocol({})", kind.name()),
            other => f.write_str(other.kind().name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_index_their_own_position() {
        for (i, kind) in OutcomeKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
        }
        for (i, kind) in ProtocolKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
        }
    }
}
