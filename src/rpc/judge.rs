//! Judging answers by their body, never by the HTTP status alone.
//!
//! Every call of a request gets exactly one outcome. A batch answer is walked
//! element by element without collecting it, and each element is matched to
//! its call by subtracting the request's first id.

use std::fmt;

use serde::de::{Deserializer as _, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::wire::{self, Message};
use super::{Entry, Expectation, Version};
use crate::stats::{Outcome, ProtocolKind};

/// What a judged answer held besides the calls' outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnswerExtras {
    /// Batch entries whose id matched no call of the request.
    pub extra_entries: u32,
}

/// Judges answers; owns the scratch space for batches so that judging
/// allocates nothing once warmed up.
#[derive(Default)]
pub struct Judge {
    slots: Vec<Slot>,
    version: Version,
}

#[derive(Clone, Copy)]
struct Slot {
    entry: usize,
    seen: u32,
    outcome: Outcome,
    /// Where the call's answer lies in the body.
    answer: (usize, usize),
}

impl Judge {
    /// A judge of answers in `version`'s rules.
    pub fn new(version: Version) -> Self {
        Judge {
            slots: Vec::new(),
            version,
        }
    }

    /// Judges `body` (answered with HTTP `status`) against the request's
    /// `entries`, calling `record(entry_index, outcome, answer)` once per
    /// entry, where `answer` is the part of the body that answered it.
    /// `expectations` is indexed by each entry's `call`.
    pub fn judge(
        &mut self,
        status: u16,
        body: &[u8],
        entries: &[Entry],
        batch: bool,
        expectations: &[Option<Expectation>],
        mut record: impl FnMut(usize, Outcome, &[u8]),
    ) -> AnswerExtras {
        let success = (200..300).contains(&status);
        // A non-2xx status stands for the call unless the body still was a
        // proper JSON-RPC answer (e.g. an error object sent with HTTP 500).
        let mut settle = |index: usize, outcome: Outcome, answer: &[u8]| {
            let outcome = match outcome {
                Outcome::InvalidJson | Outcome::Protocol(_) if !success => Outcome::HttpStatus(status),
                other => other,
            };
            record(index, outcome, answer)
        };
        let expectation = |entry: &Entry| expectations.get(entry.call as usize).and_then(Option::as_ref);
        let empty = wire::first_significant_byte(body).is_none();
        if entries.iter().all(|e| e.id.is_none()) {
            // Only notifications: nothing may come back.
            let outcome = match (empty, success) {
                (true, true) => Outcome::Ok,
                (true, false) => Outcome::HttpStatus(status),
                (false, _) => Outcome::Protocol(ProtocolKind::AnswerToNotification),
            };
            for index in 0..entries.len() {
                settle(index, outcome, body);
            }
            return AnswerExtras::default();
        }
        if !batch {
            let expected = entries[0].id.expect("checked above: a call, not a notification");
            let outcome = judge_single(body, expected, expectation(&entries[0]), self.version);
            settle(0, outcome, body);
            return AnswerExtras::default();
        }
        self.judge_batch(body, entries, &expectation, &mut settle)
    }

    /// Gives every entry of a request that got no answer the same outcome.
    pub fn fail_all(entries: &[Entry], outcome: Outcome, mut record: impl FnMut(usize, Outcome, &[u8])) {
        for index in 0..entries.len() {
            record(index, outcome, &[]);
        }
    }

    fn judge_batch<'e>(
        &mut self,
        body: &[u8],
        entries: &'e [Entry],
        expectation: &impl Fn(&'e Entry) -> Option<&'e Expectation>,
        settle: &mut impl FnMut(usize, Outcome, &[u8]),
    ) -> AnswerExtras {
        let first_id = self.open_slots(entries);
        let mut extras = AnswerExtras::default();
        let whole = match wire::first_significant_byte(body) {
            None => Some(Outcome::Protocol(ProtocolKind::NoAnswer)),
            Some(b'[') => self.match_elements(body, entries, first_id, expectation, &mut extras),
            // One object for a whole batch: an error with a null id means the
            // server rejected the batch as such (e.g. a rate limiter), which
            // is worth counting by its code; anything else breaks the rules.
            Some(b'{') => Some(judge_whole_batch(body)),
            Some(_) => Some(invalid_or_not_a_response(body)),
        };
        self.settle_entries(body, entries, whole, expectation, settle);
        extras
    }

    /// One slot per call of the batch, in id order; returns the first id.
    fn open_slots(&mut self, entries: &[Entry]) -> u64 {
        self.slots.clear();
        let mut first_id = 0;
        for (index, entry) in entries.iter().enumerate() {
            if let Some(id) = entry.id {
                if self.slots.is_empty() {
                    first_id = id;
                }
                debug_assert_eq!(id, first_id + self.slots.len() as u64);
                self.slots.push(Slot {
                    entry: index,
                    seen: 0,
                    outcome: Outcome::Protocol(ProtocolKind::MissingEntry),
                    answer: (0, 0),
                });
            }
        }
        first_id
    }

    /// Matches each element of a batch answer to its call's slot, counting
    /// those that answer no call. An answer that is not valid JSON gives
    /// every call its outcome.
    fn match_elements<'e>(
        &mut self,
        body: &[u8],
        entries: &'e [Entry],
        first_id: u64,
        expectation: &impl Fn(&'e Entry) -> Option<&'e Expectation>,
        extras: &mut AnswerExtras,
    ) -> Option<Outcome> {
        let slots = &mut self.slots;
        let walked = for_each_element(body, |element| {
            let expect = |slot: usize| expectation(&entries[slots[slot].entry]);
            match match_batch_entry(element, first_id, slots.len(), expect) {
                Some((slot, outcome)) => {
                    let slot = &mut slots[slot];
                    slot.seen += 1;
                    if slot.seen == 1 {
                        slot.outcome = outcome;
                        let start = element.get().as_ptr() as usize - body.as_ptr() as usize;
                        slot.answer = (start, start + element.get().len());
                    }
                }
                None => extras.extra_entries += 1,
            }
        });
        match walked {
            Ok(()) => None,
            Err(_) => {
                *extras = AnswerExtras::default();
                Some(Outcome::InvalidJson)
            }
        }
    }

    /// Hands each entry its outcome: the whole answer's if there is one,
    /// else its slot's; notifications are fine unanswered.
    fn settle_entries<'e>(
        &self,
        body: &[u8],
        entries: &'e [Entry],
        whole: Option<Outcome>,
        expectation: &impl Fn(&'e Entry) -> Option<&'e Expectation>,
        settle: &mut impl FnMut(usize, Outcome, &[u8]),
    ) {
        let slots = &self.slots;
        let mut next_slot = 0;
        for (index, entry) in entries.iter().enumerate() {
            if entry.id.is_none() {
                settle(index, Outcome::Ok, &[]);
                continue;
            }
            let slot = slots[next_slot];
            next_slot += 1;
            debug_assert_eq!(slot.entry, index);
            let outcome = match (whole, slot.seen) {
                (Some(outcome), _) => expectation(entry).map_or(outcome, |e| e.apply(outcome, None)),
                (None, 0) => Outcome::Protocol(ProtocolKind::MissingEntry),
                (None, 1) => slot.outcome,
                (None, _) => Outcome::Protocol(ProtocolKind::DuplicateEntry),
            };
            let answer = match whole {
                Some(_) => body,
                None => &body[slot.answer.0..slot.answer.1],
            };
            settle(index, outcome, answer);
        }
    }
}

/// Judges the answer to a single call with id `expected`.
fn judge_single(body: &[u8], expected: u64, expect: Option<&Expectation>, version: Version) -> Outcome {
    match wire::first_significant_byte(body) {
        None => Outcome::Protocol(ProtocolKind::NoAnswer),
        Some(b'{') => match Message::parse(body) {
            Some(msg) => {
                let id = msg.id.map_or(IdMatch::Mismatch, |id| match_id(id, expected));
                let outcome = match version {
                    Version::V2 => judge_protocol(&msg, id),
                    Version::V1 => judge_version_1(&msg, id),
                };
                judge_expectation(outcome, &msg, expect)
            }
            None => invalid_or_not_a_response(body),
        },
        Some(_) => invalid_or_not_a_response(body),
    }
}

/// How a response's id relates to the id sent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IdMatch {
    Same,
    Null,
    Mismatch,
    WrongType,
}

fn match_id(text: &str, expected: u64) -> IdMatch {
    if text == itoa::Buffer::new().format(expected) {
        IdMatch::Same
    } else if text == "null" {
        IdMatch::Null
    } else if text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        IdMatch::Mismatch
    } else {
        IdMatch::WrongType
    }
}

/// The protocol's verdict on one response object, then the scenario's.
fn judge_message(msg: &Message, id: IdMatch, expect: Option<&Expectation>) -> Outcome {
    judge_expectation(judge_protocol(msg, id), msg, expect)
}

/// The scenario's verdict on an answer the protocol found right.
fn judge_expectation(outcome: Outcome, msg: &Message, expect: Option<&Expectation>) -> Outcome {
    match expect {
        Some(expect) => expect.apply_to(outcome, msg.result, msg.error),
        None => outcome,
    }
}

/// JSON-RPC 1.0's rules: `result` and `error` both carried, the one that
/// does not apply `null`; servers in use leave that one out, so a missing
/// member counts as `null`, but one of the two must be there. A `null`
/// result beside a `null` error is a method that returned nothing (Bitcoin
/// Core answers so), not a broken answer. 1.0 leaves the error's shape
/// open: one without an integer code counts as `rpc_error(0)`.
fn judge_version_1(msg: &Message, id: IdMatch) -> Outcome {
    let error = msg.error.filter(|&e| e != "null");
    let result = msg.result.filter(|&r| r != "null");
    match (result, error) {
        (Some(_), Some(_)) => Outcome::Protocol(ProtocolKind::ResultAndError),
        (None, None) if msg.result.is_none() && msg.error.is_none() => {
            Outcome::Protocol(ProtocolKind::NoResultOrError)
        }
        (_, None) => match id {
            IdMatch::Same => Outcome::Ok,
            other => id_outcome(other),
        },
        (None, Some(error)) => match id {
            IdMatch::Same | IdMatch::Null => {
                Outcome::RpcError(wire::error_code(error).map_or(0, |(code, _)| code))
            }
            other => id_outcome(other),
        },
    }
}

fn judge_protocol(msg: &Message, id: IdMatch) -> Outcome {
    if !wire::is_version_2(msg.jsonrpc) {
        return Outcome::Protocol(ProtocolKind::WrongVersion);
    }
    match (msg.result, msg.error) {
        (Some(_), Some(_)) => Outcome::Protocol(ProtocolKind::ResultAndError),
        (None, None) => Outcome::Protocol(ProtocolKind::NoResultOrError),
        (Some(_), None) => match id {
            IdMatch::Same => Outcome::Ok,
            other => id_outcome(other),
        },
        (None, Some(error)) => match id {
            // The spec answers with a null id when the request's id could
            // not be read (a parse error), so an error may carry one.
            IdMatch::Same | IdMatch::Null => match wire::error_code(error) {
                Some((code, true)) => Outcome::RpcError(code),
                _ => Outcome::Protocol(ProtocolKind::BadErrorObject),
            },
            other => id_outcome(other),
        },
    }
}

fn id_outcome(id: IdMatch) -> Outcome {
    match id {
        IdMatch::WrongType | IdMatch::Null => Outcome::Protocol(ProtocolKind::IdWrongType),
        _ => Outcome::Protocol(ProtocolKind::IdMismatch),
    }
}

/// Finds which call of a batch an element answers, and judges it. Returns
/// `None` for an element that answers no call of the batch.
fn match_batch_entry<'e>(
    element: &RawValue,
    first_id: u64,
    calls: usize,
    expect: impl Fn(usize) -> Option<&'e Expectation>,
) -> Option<(usize, Outcome)> {
    let msg = Message::parse(element.get().as_bytes())?;
    // An id sent back as a string ("5" for 5) still names its call.
    let (id, wrong_type) = wire::id_number(msg.id?)?;
    let slot = usize::try_from(id.checked_sub(first_id)?).ok()?;
    if slot >= calls {
        return None;
    }
    let id = if wrong_type {
        IdMatch::WrongType
    } else {
        IdMatch::Same
    };
    Some((slot, judge_message(&msg, id, expect(slot))))
}

/// The outcome of every call of a batch answered by one object.
fn judge_whole_batch(body: &[u8]) -> Outcome {
    match Message::parse(body) {
        Some(msg) => match (msg.error, msg.result, msg.id) {
            (Some(error), None, Some("null")) if wire::is_version_2(msg.jsonrpc) => {
                match wire::error_code(error) {
                    Some((code, true)) => Outcome::RpcError(code),
                    _ => Outcome::Protocol(ProtocolKind::BadErrorObject),
                }
            }
            _ => Outcome::Protocol(ProtocolKind::NotAResponse),
        },
        None => invalid_or_not_a_response(body),
    }
}

fn invalid_or_not_a_response(body: &[u8]) -> Outcome {
    // JSON is UTF-8 (RFC 8259 §8.1); serde_json lets bad bytes through in
    // what it skips.
    if simdutf8::basic::from_utf8(body).is_err() {
        return Outcome::InvalidJson;
    }
    match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        Ok(_) => Outcome::Protocol(ProtocolKind::NotAResponse),
        Err(_) => Outcome::InvalidJson,
    }
}

/// Calls `f` with each element of a JSON array, without collecting them.
fn for_each_element<'de>(body: &'de [u8], f: impl FnMut(&'de RawValue)) -> serde_json::Result<()> {
    struct Each<F>(F);
    impl<'de, F: FnMut(&'de RawValue)> Visitor<'de> for Each<F> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an array of responses")
        }
        fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
            while let Some(element) = seq.next_element::<&'de RawValue>()? {
                (self.0)(element);
            }
            Ok(())
        }
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    (&mut de).deserialize_seq(Each(f))?;
    de.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: u64) -> Entry {
        Entry {
            method: 0,
            call: 0,
            id: Some(id),
        }
    }
    fn note() -> Entry {
        Entry {
            method: 0,
            call: 0,
            id: None,
        }
    }

    fn outcomes(status: u16, body: &str, entries: &[Entry], batch: bool) -> (Vec<Outcome>, AnswerExtras) {
        let mut judge = Judge::default();
        let mut got = vec![None; entries.len()];
        let extras = judge.judge(status, body.as_bytes(), entries, batch, &[], |i, o, _| {
            assert!(got[i].is_none(), "entry {i} recorded twice");
            got[i] = Some(o);
        });
        (
            got.into_iter()
                .map(|o| o.expect("every entry recorded"))
                .collect(),
            extras,
        )
    }

    fn single(status: u16, body: &str) -> Outcome {
        outcomes(status, body, &[call(5)], false).0[0]
    }

    #[test]
    fn a_single_answer_is_judged_by_each_rule() {
        use ProtocolKind::*;
        let p = Outcome::Protocol;
        assert_eq!(single(200, r#"{"jsonrpc":"2.0","result":1,"id":5}"#), Outcome::Ok);
        // The same version string, written with an escape.
        assert_eq!(
            single(200, r#"{"jsonrpc":"2\u002e0","result":1,"id":5}"#),
            Outcome::Ok
        );
        assert_eq!(
            single(200, r#"{"jsonrpc":"2\u002e1","result":1,"id":5}"#),
            p(WrongVersion)
        );
        assert_eq!(
            single(200, r#"{"jsonrpc":"2.0","result":null,"id":5}"#),
            Outcome::Ok
        );
        assert_eq!(
            single(
                200,
                r#"{"jsonrpc":"2.0","error":{"code":-32601,"message":"x"},"id":5}"#
            ),
            Outcome::RpcError(-32601)
        );
        assert_eq!(
            single(
                200,
                r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"x"},"id":null}"#
            ),
            Outcome::RpcError(-32700)
        );
        assert_eq!(
            single(200, r#"{"jsonrpc":"2.0","result":1,"id":6}"#),
            p(IdMismatch)
        );
        assert_eq!(
            single(200, r#"{"jsonrpc":"2.0","result":1,"id":"5"}"#),
            p(IdWrongType)
        );
        assert_eq!(
            single(200, r#"{"jsonrpc":"2.0","result":1,"id":null}"#),
            p(IdWrongType)
        );
        assert_eq!(single(200, r#"{"jsonrpc":"2.0","result":1}"#), p(IdMismatch));
        assert_eq!(
            single(200, r#"{"jsonrpc":"1.0","result":1,"id":5}"#),
            p(WrongVersion)
        );
        assert_eq!(single(200, r#"{"result":1,"id":5}"#), p(WrongVersion));
        assert_eq!(
            single(
                200,
                r#"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":""},"id":5}"#
            ),
            p(ResultAndError)
        );
        assert_eq!(single(200, r#"{"jsonrpc":"2.0","id":5}"#), p(NoResultOrError));
        assert_eq!(
            single(
                200,
                r#"{"jsonrpc":"2.0","error":{"code":"x","message":"m"},"id":5}"#
            ),
            p(BadErrorObject)
        );
        assert_eq!(
            single(
                200,
                r#"{"jsonrpc":"2.0","error":{"code":1.5,"message":"m"},"id":5}"#
            ),
            p(BadErrorObject)
        );
        assert_eq!(
            single(200, r#"{"jsonrpc":"2.0","error":{"code":1},"id":5}"#),
            p(BadErrorObject)
        );
        assert_eq!(
            single(200, r#"[{"jsonrpc":"2.0","result":1,"id":5}]"#),
            p(NotAResponse)
        );
        assert_eq!(single(200, "42"), p(NotAResponse));
        assert_eq!(single(200, ""), p(NoAnswer));
        assert_eq!(single(200, r#"{"jsonrpc":"2.0","res"#), Outcome::InvalidJson);
        assert_eq!(
            single(200, "<html><body>Bad gateway</body></html>"),
            Outcome::InvalidJson
        );
    }

    #[test]
    fn a_version_1_answer_is_judged_by_1_0_rules() {
        use ProtocolKind::*;
        let v1 = |body: &str| judge_single(body.as_bytes(), 5, None, Version::V1);
        let p = Outcome::Protocol;
        assert_eq!(v1(r#"{"result":1,"error":null,"id":5}"#), Outcome::Ok);
        assert_eq!(v1(r#"{"result":"0xab","id":5}"#), Outcome::Ok, "error left out");
        assert_eq!(
            v1(r#"{"result":null,"error":null,"id":5}"#),
            Outcome::Ok,
            "a method returning nothing"
        );
        assert_eq!(
            v1(r#"{"error":null,"id":5}"#),
            Outcome::Ok,
            "result left out is null"
        );
        assert_eq!(
            v1(r#"{"result":null,"error":{"code":-8,"message":"bad"},"id":5}"#),
            Outcome::RpcError(-8)
        );
        assert_eq!(
            v1(r#"{"error":"out of gas","id":5}"#),
            Outcome::RpcError(0),
            "1.0 errors need no code"
        );
        assert_eq!(
            v1(r#"{"result":null,"error":{"code":-32700},"id":null}"#),
            Outcome::RpcError(-32700)
        );
        assert_eq!(v1(r#"{"result":1,"error":{"code":1},"id":5}"#), p(ResultAndError));
        assert_eq!(v1(r#"{"id":5}"#), p(NoResultOrError));
        assert_eq!(v1(r#"{"result":1,"error":null,"id":6}"#), p(IdMismatch));
        assert_eq!(v1(r#"{"result":1,"error":null,"id":null}"#), p(IdWrongType));
        assert_eq!(
            v1(r#"{"jsonrpc":"2.0","result":1,"id":5}"#),
            Outcome::Ok,
            "no version to check"
        );
        assert_eq!(
            single(200, r#"{"result":1,"error":null,"id":5}"#),
            p(WrongVersion),
            "the same answer breaks 2.0"
        );
        let mut judge = Judge::new(Version::V1);
        let mut got = Vec::new();
        let body = br#"{"result":1,"error":null,"id":7}"#;
        judge.judge(200, body, &[call(7)], false, &[], |_, o, _| got.push(o));
        assert_eq!(got, [Outcome::Ok], "a 1.0 judge judges by 1.0");
    }

    #[test]
    fn http_status_counts_only_without_a_json_rpc_body() {
        assert_eq!(
            single(
                500,
                r#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"x"},"id":5}"#
            ),
            Outcome::RpcError(-32603)
        );
        assert_eq!(single(503, "Service Unavailable"), Outcome::HttpStatus(503));
        assert_eq!(
            single(429, r#"{"message":"slow down"}"#),
            Outcome::HttpStatus(429)
        );
        assert_eq!(single(502, ""), Outcome::HttpStatus(502));
        assert_eq!(single(500, r#"{"jsonrpc":"2.0","result":1,"id":5}"#), Outcome::Ok);
    }

    #[test]
    fn notifications_expect_no_answer() {
        let (got, _) = outcomes(204, "", &[note()], false);
        assert_eq!(got, vec![Outcome::Ok]);
        let (got, _) = outcomes(200, r#"{"jsonrpc":"2.0","result":1,"id":null}"#, &[note()], false);
        assert_eq!(got, vec![Outcome::Protocol(ProtocolKind::AnswerToNotification)]);
        let (got, _) = outcomes(200, "", &[note(), note()], true);
        assert_eq!(got, vec![Outcome::Ok, Outcome::Ok]);
        let (got, _) = outcomes(500, "", &[note()], false);
        assert_eq!(got, vec![Outcome::HttpStatus(500)]);
    }

    #[test]
    fn a_batch_is_matched_by_id_in_any_order() {
        let entries = [call(10), note(), call(11), call(12)];
        let body = r#"[
            {"jsonrpc":"2.0","result":"c","id":12},
            {"jsonrpc":"2.0","error":{"code":-32602,"message":"bad"},"id":10},
            {"jsonrpc":"2.0","result":null,"id":11}
        ]"#;
        let (got, extras) = outcomes(200, body, &entries, true);
        assert_eq!(
            got,
            vec![Outcome::RpcError(-32602), Outcome::Ok, Outcome::Ok, Outcome::Ok]
        );
        assert_eq!(extras.extra_entries, 0);
    }

    #[test]
    fn a_batch_with_missing_duplicate_and_extra_entries() {
        use ProtocolKind::*;
        let entries = [call(1), call(2), call(3), call(4)];
        let body = r#"[
            {"jsonrpc":"2.0","result":1,"id":1},
            {"jsonrpc":"2.0","result":1,"id":1},
            {"jsonrpc":"2.0","result":1,"id":"3"},
            {"jsonrpc":"2.0","result":1,"id":99},
            {"jsonrpc":"2.0","result":1,"error":{"code":1,"message":""},"id":4},
            {"jsonrpc":"2.0","error":{"code":-32600,"message":"x"},"id":null}
        ]"#;
        let (got, extras) = outcomes(200, body, &entries, true);
        assert_eq!(
            got,
            vec![
                Outcome::Protocol(DuplicateEntry),
                Outcome::Protocol(MissingEntry),
                Outcome::Protocol(IdWrongType),
                Outcome::Protocol(ResultAndError),
            ]
        );
        assert_eq!(extras.extra_entries, 2);
    }

    #[test]
    fn a_batch_answered_as_a_whole() {
        let entries = [call(1), call(2)];
        let rejected = r#"{"jsonrpc":"2.0","error":{"code":-32005,"message":"limit"},"id":null}"#;
        assert_eq!(
            outcomes(200, rejected, &entries, true).0,
            vec![Outcome::RpcError(-32005); 2]
        );
        let truncated = r#"[{"jsonrpc":"2.0","result":1,"id":1},{"json"#;
        let (got, extras) = outcomes(200, truncated, &entries, true);
        assert_eq!(got, vec![Outcome::InvalidJson; 2]);
        assert_eq!(extras.extra_entries, 0);
        let single = r#"{"jsonrpc":"2.0","result":1,"id":1}"#;
        assert_eq!(
            outcomes(200, single, &entries, true).0,
            vec![Outcome::Protocol(ProtocolKind::NotAResponse); 2]
        );
        assert_eq!(
            outcomes(503, "down", &entries, true).0,
            vec![Outcome::HttpStatus(503); 2]
        );
        assert_eq!(
            outcomes(200, "", &entries, true).0,
            vec![Outcome::Protocol(ProtocolKind::NoAnswer); 2]
        );
        // A whole-batch rejection must itself be JSON-RPC 2.0.
        let old_version = r#"{"jsonrpc":"1.0","error":{"code":-32005,"message":"limit"},"id":null}"#;
        assert_eq!(
            outcomes(200, old_version, &entries, true).0,
            vec![Outcome::Protocol(ProtocolKind::NotAResponse); 2]
        );
    }

    #[test]
    fn each_batch_entry_is_handed_its_own_answer() {
        let entries = [call(1), call(2)];
        let first = r#"{"jsonrpc":"2.0","result":"0x1","id":1}"#;
        let second = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"m"},"id":2}"#;
        let body = format!("[ {second}, {first} ]");
        let mut answers = vec![String::new(); 2];
        Judge::default().judge(200, body.as_bytes(), &entries, true, &[], |i, _, answer| {
            answers[i] = String::from_utf8(answer.to_vec()).unwrap();
        });
        assert_eq!(answers, [first, second]);
    }
}
