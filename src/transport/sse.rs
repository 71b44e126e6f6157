//! MCP's streamable HTTP may answer a POST with a server-sent-event
//! stream instead of a JSON body: the answer is one event among others
//! (log messages, progress, requests to the client). This finds it.

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::rpc::wire::{self, Message};

/// The answer carried by an event stream, and how many other messages
/// came with it. Several answers (to a batch) are joined into an array; an
/// event stream without one gives an empty body, judged as no answer.
/// No event can be larger than the answer limit: the stream is the body
/// the transport read, which it held to that limit.
pub fn decode(stream: &[u8]) -> (Bytes, u64) {
    let mut answers: Vec<Vec<u8>> = Vec::new();
    let mut others = 0;
    for data in events(stream) {
        if is_answer(&data) {
            answers.push(data);
        } else if wire::first_significant_byte(&data).is_some() {
            others += 1;
        }
    }
    let body = match answers.len() {
        0 => Bytes::new(),
        1 => Bytes::from(answers.pop().expect("one answer")),
        _ => {
            let mut joined = b"[".to_vec();
            for (i, answer) in answers.iter().enumerate() {
                if i > 0 {
                    joined.push(b',');
                }
                joined.extend_from_slice(entries(answer));
            }
            joined.push(b']');
            Bytes::from(joined)
        }
    };
    (body, others)
}

/// A batch answer's entries without their brackets; a single answer whole.
fn entries(answer: &[u8]) -> &[u8] {
    let trimmed = answer.trim_ascii();
    match (trimmed.first(), trimmed.last()) {
        (Some(b'['), Some(b']')) => &trimmed[1..trimmed.len() - 1],
        _ => answer,
    }
}

/// The data of each event: its `data:` lines joined by newlines, as the
/// event-stream format says. Other fields (`event`, `id`, `retry`) and
/// comments are of no use here.
fn events(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    for line in stream.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            events.extend(data.take());
            continue;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(at) => (&line[..at], &line[at + 1..]),
            None => (line, &b""[..]),
        };
        if field == b"data" {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            match data.as_mut() {
                Some(data) => {
                    data.push(b'\n');
                    data.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            }
        }
    }
    // A stream cut before its last blank line still delivered that event.
    events.extend(data);
    events
}

/// A response (or a batch of them), not a request or notification.
fn is_answer(data: &[u8]) -> bool {
    let single = |raw: &RawValue| {
        Message::parse(raw.get().as_bytes())
            .is_some_and(|m| m.method.is_none() && (m.result.is_some() || m.error.is_some()))
    };
    match wire::first_significant_byte(data) {
        Some(b'[') => serde_json::from_slice::<Vec<&RawValue>>(data)
            .is_ok_and(|entries| entries.first().is_some_and(|first| single(first))),
        Some(b'{') => serde_json::from_slice::<&RawValue>(data).is_ok_and(single),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn the_answer_is_found_among_other_events() {
        let stream = b": keep-alive\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\nid: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"result\":{},\"id\":3}\n\n";
        let (body, others) = decode(stream);
        assert_eq!(&body[..], b"{\"jsonrpc\":\"2.0\",\n\"result\":{},\"id\":3}");
        assert_eq!(others, 1);
    }

    #[test]
    fn several_answers_become_one_batch_and_none_an_empty_body() {
        let stream = b"data: {\"result\":1,\"id\":1}\n\ndata: {\"error\":{},\"id\":2}\n\ndata: [{\"id\":3,\"result\":0}]";
        let (body, others) = decode(stream);
        assert_eq!(
            &body[..],
            b"[{\"result\":1,\"id\":1},{\"error\":{},\"id\":2},{\"id\":3,\"result\":0}]"
        );
        assert_eq!(others, 0);
        let (body, others) = decode(b"data: {\"method\":\"ping\",\"id\":9}\n\n");
        assert!(body.is_empty());
        assert_eq!(others, 1);
    }
}
