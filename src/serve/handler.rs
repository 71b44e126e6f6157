//! JSON-RPC 2.0 processing for the built-in server, following the spec to
//! the letter: batches, notifications, and the reserved error codes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::RngExt;
use serde_json::value::RawValue;

use super::chain::Chain;
use super::methods::{self, MethodResult};
use super::{ServeConfig, ServerStats};
use crate::rpc::wire::{self, Message};

const PARSE_ERROR: (i64, &str) = (-32700, "Parse error");
const INVALID_REQUEST: (i64, &str) = (-32600, "Invalid Request");
/// The result of a method named by `--differ`: unlike any server's.
pub const DIFFERENT_RESULT: &str = r#""volley serve --differ""#;
/// The code of errors injected by `--error-rate`.
pub const INJECTED_ERROR: (i64, &str) = (-32000, "Injected error");

/// What to send back for one HTTP request.
pub struct Answer {
    /// `None`: nothing to answer (only notifications).
    pub body: Option<Vec<u8>>,
    /// Time to hold the answer (added latency and `sleep` calls).
    pub hold: Duration,
}

pub struct Handler<'a> {
    pub config: &'a ServeConfig,
    pub stats: &'a ServerStats,
    pub started: Instant,
}

impl Handler<'_> {
    pub fn handle(&self, body: &[u8], rng: &mut SmallRng) -> Answer {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let mut hold = self.config.latency.sample(rng);
        let arrived = Instant::now();
        let mut calls = 1;
        let body = match wire::first_significant_byte(body) {
            Some(b'[') => match serde_json::from_slice::<Vec<&RawValue>>(body) {
                Ok(batch) if batch.is_empty() => Some(self.error(INVALID_REQUEST, "null")),
                Ok(batch) => {
                    calls = u32::try_from(batch.len()).unwrap_or(u32::MAX);
                    self.batch(&batch, rng, &mut hold)
                }
                Err(_) => Some(self.error(PARSE_ERROR, "null")),
            },
            Some(b'{') => match serde_json::from_slice::<&RawValue>(body) {
                Ok(one) => self.one(one, rng, &mut hold),
                Err(_) => Some(self.error(PARSE_ERROR, "null")),
            },
            _ => match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Ok(_) => Some(self.error(INVALID_REQUEST, "null")),
                Err(_) => Some(self.error(PARSE_ERROR, "null")),
            },
        };
        if let Some(capacity) = &self.config.capacity {
            hold += capacity.wait(calls, arrived);
        }
        Answer { body, hold }
    }

    fn batch(&self, batch: &[&RawValue], rng: &mut SmallRng, hold: &mut Duration) -> Option<Vec<u8>> {
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        let mut answers: Vec<Vec<u8>> = batch.iter().filter_map(|one| self.one(one, rng, hold)).collect();
        if answers.is_empty() {
            // An all-notification batch gets nothing at all, not `[]`.
            return None;
        }
        if self.config.shuffle_batches {
            answers.shuffle(rng);
        }
        let mut out = Vec::with_capacity(answers.iter().map(|a| a.len() + 1).sum::<usize>() + 2);
        out.push(b'[');
        for (i, answer) in answers.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(answer);
        }
        out.push(b']');
        Some(out)
    }

    /// One request object; `None` for a notification.
    fn one(&self, raw: &RawValue, rng: &mut SmallRng, hold: &mut Duration) -> Option<Vec<u8>> {
        let Some(msg) = Message::parse(raw.get().as_bytes()) else {
            return Some(self.error(INVALID_REQUEST, "null"));
        };
        let id = match msg.id {
            None => None,
            Some(id)
                if id.starts_with(['"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
                    || id == "null" =>
            {
                Some(id)
            }
            // An id of another type cannot be echoed: the spec says null.
            Some(_) => return Some(self.error(INVALID_REQUEST, "null")),
        };
        let method = msg
            .method
            .and_then(|m| serde_json::from_str::<std::borrow::Cow<str>>(m).ok());
        let params_ok = msg.params.is_none_or(|p| p.starts_with(['[', '{']));
        let (Some(method), true, true) = (method, params_ok, wire::is_version_2(msg.jsonrpc)) else {
            return Some(self.error(INVALID_REQUEST, id.unwrap_or("null")));
        };
        let result: MethodResult = if method.starts_with("rpc.") {
            Err(methods::METHOD_NOT_FOUND)
        } else if self.config.differ.iter().any(|m| *m == method) {
            Ok(DIFFERENT_RESULT.into())
        } else {
            let chain = Chain {
                config: self.config,
                stats: self.stats,
                started: self.started,
            };
            methods::call(&method, msg.params, &chain, hold)
        };
        if method == "resources/read" && result.is_ok() {
            self.stats.resources_read.fetch_add(1, Ordering::Relaxed);
        }
        let Some(id) = id else {
            self.stats.notifications.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        if self.config.count_duplicate_ids {
            self.stats.note_id(id);
        }
        if self.config.error_rate > 0.0 && rng.random_bool(self.config.error_rate) {
            self.stats.injected_errors.fetch_add(1, Ordering::Relaxed);
            return Some(self.error(INJECTED_ERROR, id));
        }
        Some(match result {
            Ok(result) => {
                let mut out = Vec::with_capacity(result.len() + id.len() + 32);
                out.extend_from_slice(br#"{"jsonrpc":"2.0","result":"#);
                out.extend_from_slice(result.as_bytes());
                out.extend_from_slice(br#","id":"#);
                out.extend_from_slice(id.as_bytes());
                out.push(b'}');
                out
            }
            Err(error) => self.error(error, id),
        })
    }

    fn error(&self, (code, message): (i64, &str), id: &str) -> Vec<u8> {
        self.stats.error_answers.fetch_add(1, Ordering::Relaxed);
        format!(r#"{{"jsonrpc":"2.0","error":{{"code":{code},"message":"{message}"}},"id":{id}}}"#)
            .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::{json, Value};

    fn answer(config: &ServeConfig, body: &str) -> (Option<Value>, ServerStats) {
        let stats = ServerStats::default();
        let handler = Handler {
            config,
            stats: &stats,
            started: Instant::now(),
        };
        let mut rng = SmallRng::seed_from_u64(1);
        let answer = handler.handle(body.as_bytes(), &mut rng);
        (
            answer
                .body
                .map(|b| serde_json::from_slice(&b).expect("the server answers JSON")),
            stats,
        )
    }

    fn plain(body: &str) -> Option<Value> {
        answer(&ServeConfig::default(), body).0
    }

    fn error(code: i64, id: Value) -> Value {
        let message = match code {
            -32700 => "Parse error",
            -32600 => "Invalid Request",
            -32601 => "Method not found",
            _ => "Invalid params",
        };
        json!({"jsonrpc":"2.0","error":{"code":code,"message":message},"id":id})
    }

    #[test]
    fn follows_the_spec_examples() {
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"add","params":[42,-23],"id":1}"#),
            Some(json!({"jsonrpc":"2.0","result":19,"id":1}))
        );
        assert_eq!(plain(r#"{"jsonrpc":"2.0","method":"add","params":[1,2]}"#), None);
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"foobar","id":"1"}"#),
            Some(error(-32601, json!("1")))
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#),
            Some(error(-32700, Value::Null))
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#),
            Some(error(-32600, Value::Null))
        );
        assert_eq!(plain("[]"), Some(error(-32600, Value::Null)));
        assert_eq!(plain("[1]"), Some(json!([error(-32600, Value::Null)])));
        assert_eq!(plain("[1,2,3]").unwrap().as_array().unwrap().len(), 3);
        assert_eq!(
            plain(r#"[{"jsonrpc":"2.0","method":"add","params":[1,2,4],"id":"1"},{"jsonrpc":"2.0","method"#),
            Some(error(-32700, Value::Null))
        );
        assert_eq!(
            plain(r#"[{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","method":"add","params":[7]}]"#),
            None
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"1.0","method":"echo","id":3}"#),
            Some(error(-32600, json!(3)))
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"echo","id":{"a":1}}"#),
            Some(error(-32600, Value::Null))
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"add","params":["x"],"id":4}"#),
            Some(error(-32602, json!(4)))
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"rpc.discover","id":5}"#),
            Some(error(-32601, json!(5)))
        );
        assert_eq!(
            plain(r#"{"jsonrpc":"2.0","method":"echo","id":null}"#),
            Some(json!({"jsonrpc":"2.0","result":null,"id":null}))
        );
    }

    #[test]
    fn a_mixed_batch_answers_each_call_once() {
        let body = r#"[
            {"jsonrpc":"2.0","method":"add","params":[1,2,4],"id":"1"},
            {"jsonrpc":"2.0","method":"echo","params":[7]},
            {"jsonrpc":"2.0","method":"add","params":[42,23],"id":"2"},
            {"foo":"boo"},
            {"jsonrpc":"2.0","method":"foo.get","params":{"name":"myself"},"id":"5"},
            {"jsonrpc":"2.0","method":"eth_chainId","id":"9"}
        ]"#;
        let (got, stats) = answer(&ServeConfig::default(), body);
        let got = got.unwrap();
        assert_eq!(
            got,
            json!([
                {"jsonrpc":"2.0","result":7,"id":"1"},
                {"jsonrpc":"2.0","result":65,"id":"2"},
                error(-32600, Value::Null),
                error(-32601, json!("5")),
                {"jsonrpc":"2.0","result":"0x539","id":"9"}
            ])
        );
        assert_eq!(stats.calls.load(Ordering::Relaxed), 4);
        assert_eq!(stats.notifications.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn injected_errors_are_counted() {
        let config = ServeConfig {
            error_rate: 1.0,
            ..ServeConfig::default()
        };
        let (got, stats) = answer(&config, r#"{"jsonrpc":"2.0","method":"echo","id":8}"#);
        assert_eq!(got.unwrap()["error"]["code"], json!(-32000));
        assert_eq!(stats.injected_errors.load(Ordering::Relaxed), 1);
        let (got, stats) = answer(&config, r#"{"jsonrpc":"2.0","method":"echo"}"#);
        assert_eq!(got, None);
        assert_eq!(stats.injected_errors.load(Ordering::Relaxed), 0);
    }
}
