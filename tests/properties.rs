//! Property tests: the answer judge and the scenario loader never panic on
//! arbitrary input, and judge every call exactly once.

use proptest::prelude::*;
use volley::rpc::{Entry, Judge};
use volley::scenario::Scenario;

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
}
