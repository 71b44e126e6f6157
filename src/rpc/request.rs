//! Request bodies, written into one reused buffer.
//!
//! Everything that does not change between calls (version, method, fixed
//! params) is serialized once into a template; per call only the id and the
//! closing brace are written.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

/// A call with everything but its id already serialized.
#[derive(Clone, Debug)]
pub struct CallTemplate {
    /// `{"jsonrpc":"2.0","method":"m","params":[...]` without the closing brace.
    head: Box<[u8]>,
}

impl CallTemplate {
    pub fn new(method: &str, params: Option<&Value>) -> Self {
        let mut head = Vec::with_capacity(64);
        head.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
        serde_json::to_writer(&mut head, method).expect("a string always serializes");
        if let Some(params) = params {
            head.extend_from_slice(br#","params":"#);
            serde_json::to_writer(&mut head, params).expect("a JSON value always serializes");
        }
        CallTemplate {
            head: head.into_boxed_slice(),
        }
    }
}

/// One call inside the request being built: what the judge needs to
/// attribute an answer to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Index of the method in the run's method table.
    pub method: u16,
    /// `None` for a notification.
    pub id: Option<u64>,
}

/// Builds one request (a single call or a batch) at a time, reusing its
/// buffers. Ids of the calls in one request are consecutive, which lets the
/// judge match a batch answer by subtraction instead of hashing.
#[derive(Default)]
pub struct RequestBuilder {
    buf: BytesMut,
    entries: Vec<Entry>,
    batch: bool,
}

impl RequestBuilder {
    pub fn begin(&mut self, batch: bool) {
        self.entries.clear();
        self.batch = batch;
        if self.buf.capacity() < 256 {
            self.buf.reserve(4096);
        }
        if batch {
            self.buf.put_u8(b'[');
        }
    }

    pub fn push(&mut self, template: &CallTemplate, method: u16, id: Option<u64>) {
        if self.batch && !self.entries.is_empty() {
            self.buf.put_u8(b',');
        }
        self.buf.put_slice(&template.head);
        match id {
            Some(id) => {
                self.buf.put_slice(br#","id":"#);
                self.buf.put_slice(itoa::Buffer::new().format(id).as_bytes());
                self.buf.put_u8(b'}');
            }
            None => self.buf.put_u8(b'}'),
        }
        self.entries.push(Entry { method, id });
    }

    /// The finished body. The buffer's memory is reclaimed for the next
    /// request once the returned `Bytes` is dropped.
    pub fn finish(&mut self) -> Bytes {
        if self.batch {
            self.buf.put_u8(b']');
        }
        self.buf.split().freeze()
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn is_batch(&self) -> bool {
        self.batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn single_call_body_is_valid_json_rpc() {
        let template = CallTemplate::new("eth_getBalance", Some(&json!(["0xab", "latest"])));
        let mut builder = RequestBuilder::default();
        builder.begin(false);
        builder.push(&template, 0, Some(42));
        let body = builder.finish();
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            json!({"jsonrpc":"2.0","method":"eth_getBalance","params":["0xab","latest"],"id":42})
        );
    }

    #[test]
    fn batch_has_notifications_without_id() {
        let call = CallTemplate::new("echo", None);
        let mut builder = RequestBuilder::default();
        builder.begin(true);
        builder.push(&call, 0, Some(7));
        builder.push(&call, 0, None);
        builder.push(&call, 0, Some(8));
        let body = builder.finish();
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            json!([
                {"jsonrpc":"2.0","method":"echo","id":7},
                {"jsonrpc":"2.0","method":"echo"},
                {"jsonrpc":"2.0","method":"echo","id":8}
            ])
        );
        assert_eq!(builder.entries().len(), 3);
    }

    #[test]
    fn method_names_are_escaped() {
        let template = CallTemplate::new("we\"ird", Some(&json!({"a": 1})));
        let mut builder = RequestBuilder::default();
        builder.begin(false);
        builder.push(&template, 0, Some(1));
        let value: Value = serde_json::from_slice(&builder.finish()).unwrap();
        assert_eq!(value["method"], "we\"ird");
        assert_eq!(value["params"], json!({"a": 1}));
    }
}
