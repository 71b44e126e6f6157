//! Property tests: the answer judge, the scenario loader and the stream
//! framings (LSP heads, MCP event streams) never panic on arbitrary input;
//! every call is judged exactly once; a framed message is found whole
//! however the bytes are cut.

use proptest::prelude::*;
use volley::rpc::wire::next_lsp_message;
use volley::rpc::{Entry, Judge};
use volley::scenario::Scenario;
use volley::transport::sse;

fn entries(calls: usize, notifications: usize) -> Vec<Entry> {
    let mut out: Vec<Entry> = (0..calls as u64)
        .map(|i| Entry {
            method: 0,
            call: 0,
            id: Some(100 + i),
        })
        .collect();
    out.extend((0..notifications).map(|_| Entry {
        method: 0,
        call: 0,
        id: None,
    }));
    out
}

/// Bodies close to real answers, mutated: more likely to reach deep paths
/// than uniform bytes.
fn answer_like() -> impl Strategy<Value = Vec<u8>> {
    let one = (
        0u64..110,
        prop::bool::ANY,
        prop::sample::select(vec!["\"2.0\"", "\"1.0\"", "2", "null"]),
    )
        .prop_map(|(id, ok, version)| {
            if ok {
                format!(r#"{{"jsonrpc":{version},"result":"0x1","id":{id}}}"#)
            } else {
                format!(r#"{{"jsonrpc":{version},"error":{{"code":-32000,"message":"m"}},"id":"{id}"}}"#)
            }
        });
    (
        prop::collection::vec(one, 0..6),
        prop::bool::ANY,
        0usize..64,
        any::<u8>(),
    )
        .prop_map(|(items, batch, cut, noise)| {
            let mut body = if batch {
                format!("[{}]", items.join(","))
            } else {
                items.join("")
            }
            .into_bytes();
            if cut < body.len() && noise % 3 == 0 {
                body.truncate(body.len() - cut);
            }
            if noise % 5 == 0 && !body.is_empty() {
                let at = noise as usize % body.len();
                body[at] = noise;
            }
            body
        })
}

fn judged_once(body: &[u8], status: u16, calls: usize, notifications: usize, batch: bool) {
    let entries = entries(calls, notifications);
    let mut seen = vec![0u32; entries.len()];
    Judge::default().judge(status, body, &entries, batch, &[], |i, _, answer| {
        seen[i] += 1;
        assert!(answer.len() <= body.len());
    });
    assert!(
        seen.iter().all(|n| *n == 1),
        "every entry judged exactly once: {seen:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_judge_takes_any_bytes(body in prop::collection::vec(any::<u8>(), 0..512), status in 100u16..600, calls in 1usize..8, notes in 0usize..3) {
        judged_once(&body, status, calls, notes, true);
        judged_once(&body, status, 1, 0, false);
    }

    #[test]
    fn the_judge_takes_almost_answers(body in answer_like(), calls in 1usize..8, notes in 0usize..3) {
        judged_once(&body, 200, calls, notes, true);
        judged_once(&body, 200, 1, 0, false);
        judged_once(&body, 503, calls, 0, true);
    }

    #[test]
    fn the_loader_takes_any_text(text in "\\PC{0,400}") {
        let _ = Scenario::parse(&text, "fuzz.toml", "fuzz", &|_| None);
    }

    #[test]
    fn the_loader_takes_mangled_scenarios(cut in 0usize..600, noise in any::<char>(), at in 0usize..600) {
        let mut text: String = include_str!("../scenarios/ethereum-batch.toml").chars().take(600 - cut).collect();
        let at = at.min(text.chars().count());
        let byte = text.char_indices().nth(at).map_or(text.len(), |(i, _)| i);
        text.insert(byte, noise);
        let _ = Scenario::parse(&text, "fuzz.toml", "fuzz", &|_| None);
    }

    #[test]
    fn lsp_heads_take_any_bytes(input in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(Some(body)) = next_lsp_message(&input) {
            prop_assert!(body.start <= body.end && body.end <= input.len());
        }
    }

    #[test]
    fn an_lsp_message_is_found_once_it_is_whole(body in "[ -~]{0,80}", extra in "[ -~]{0,20}", cut in 0usize..200) {
        let framed = format!("Content-Length: {}\r\n\r\n{body}{extra}", body.len());
        let bytes = framed.as_bytes();
        let cut = cut.min(bytes.len());
        let found = next_lsp_message(&bytes[..cut]).unwrap();
        let head = framed.len() - body.len() - extra.len();
        if cut >= head + body.len() {
            prop_assert_eq!(found.map(|r| &bytes[r]), Some(body.as_bytes()));
        } else {
            prop_assert_eq!(found, None);
        }
    }

    #[test]
    fn event_streams_take_any_bytes(input in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = sse::decode(&input);
    }

    #[test]
    fn the_answer_is_found_among_any_other_events(
        before in prop::collection::vec("[a-z ]{0,12}", 0..4),
        after in prop::collection::vec("[a-z ]{0,12}", 0..3),
        id in 0u64..1000,
        crlf in any::<bool>(),
    ) {
        let line_end = if crlf { "\r\n" } else { "\n" };
        let event = |data: String| format!("event: message{line_end}data: {data}{line_end}{line_end}");
        let note = |text: &String| event(format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{text}"}}}}"#));
        let answer = format!(r#"{{"jsonrpc":"2.0","result":{{"n":{id}}},"id":{id}}}"#);
        let stream: String = before.iter().map(note).chain([event(answer.clone())]).chain(after.iter().map(note)).collect();
        let (body, others) = sse::decode(stream.as_bytes());
        prop_assert_eq!(&body[..], answer.as_bytes());
        prop_assert_eq!(others as usize, before.len() + after.len());
    }
}
