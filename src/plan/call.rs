//! Call templates and the request bodies built from them, written into one
//! reused buffer.
//!
//! Everything that does not change between calls (version, method, fixed
//! params) is serialized once into a template; per call only the id and the
//! closing brace are written.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use rand::RngExt;
use serde_json::Value;

use super::Template;
use crate::rpc::{Entry, Version};

/// A call with everything but its id (and generated params) serialized.
#[derive(Clone, Debug)]
pub struct CallTemplate {
    /// `{"jsonrpc":"2.0","method":"m"`: no params, no closing brace.
    head: Box<[u8]>,
    params: Params,
    version: Version,
}

#[derive(Clone, Debug)]
enum Params {
    None,
    Fixed(Box<[u8]>),
    Generated(Arc<Template>),
}

impl CallTemplate {
    /// A call with fixed params.
    pub fn new(version: Version, method: &str, params: Option<&Value>) -> Self {
        let params = match params {
            Some(params) => Params::Fixed(
                serde_json::to_vec(params)
                    .expect("a JSON value always serializes")
                    .into(),
            ),
            None => Params::None,
        };
        Self::build(version, method, params)
    }

    /// A call whose params may hold generated values.
    pub fn generated(version: Version, method: &str, params: Option<Arc<Template>>) -> Self {
        let params = match params {
            None => Params::None,
            Some(template) => match template.fixed() {
                Some(fixed) => Params::Fixed(fixed.into()),
                None => Params::Generated(template),
            },
        };
        Self::build(version, method, params)
    }

    fn build(version: Version, method: &str, params: Params) -> Self {
        let mut head = Vec::with_capacity(64);
        head.extend_from_slice(match version {
            Version::V2 => br#"{"jsonrpc":"2.0","method":"#.as_slice(),
            Version::V1 => br#"{"method":"#.as_slice(),
        });
        serde_json::to_writer(&mut head, method).expect("a string always serializes");
        let params = match (version, params) {
            // 1.0's params are always an array, if an empty one.
            (Version::V1, Params::None) => Params::Fixed(b"[]".as_slice().into()),
            (_, params) => params,
        };
        CallTemplate {
            head: head.into_boxed_slice(),
            params,
            version,
        }
    }

    /// The JSON-RPC the call is written in, which its answer is judged by.
    pub fn version(&self) -> Version {
        self.version
    }
}

/// A call sent once on each new connection before it joins the load (a
/// protocol's handshake, a subscription), outside the figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SetupCall {
    pub method: String,
    pub params: Option<Value>,
    pub notification: bool,
    /// From `[[subscribe]]`: opens a subscription whose notifications are
    /// counted.
    pub subscribe: bool,
    /// Its notifications' values go to the head race (`race = "POINTER"`).
    pub race: bool,
}

impl SetupCall {
    pub fn template(&self, version: Version) -> CallTemplate {
        CallTemplate::new(version, &self.method, self.params.as_ref())
    }
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

    pub fn push<R: RngExt>(&mut self, template: &CallTemplate, entry: Entry, rng: &mut R) {
        self.push_with(template, entry, rng, &super::Vars::NONE);
    }

    /// As [`RequestBuilder::push`], a flow's variables read from `vars`.
    pub fn push_with<R: RngExt>(
        &mut self,
        template: &CallTemplate,
        entry: Entry,
        rng: &mut R,
        vars: &super::Vars,
    ) {
        if self.batch && !self.entries.is_empty() {
            self.buf.put_u8(b',');
        }
        self.buf.put_slice(&template.head);
        match &template.params {
            Params::None => {}
            Params::Fixed(params) => {
                self.buf.put_slice(br#","params":"#);
                self.buf.put_slice(params);
            }
            Params::Generated(params) => {
                self.buf.put_slice(br#","params":"#);
                params.write_with(&mut self.buf, rng, vars);
            }
        }
        match entry.id {
            Some(id) => {
                self.buf.put_slice(br#","id":"#);
                self.buf.put_slice(itoa::Buffer::new().format(id).as_bytes());
                self.buf.put_u8(b'}');
            }
            // 1.0 says a notification by its null id; 2.0 by having none.
            None if template.version == Version::V1 => self.buf.put_slice(br#","id":null}"#),
            None => self.buf.put_u8(b'}'),
        }
        self.entries.push(entry);
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
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use serde_json::json;

    fn call(id: Option<u64>) -> Entry {
        Entry {
            method: 0,
            call: 0,
            id,
        }
    }

    #[test]
    fn single_call_body_is_valid_json_rpc() {
        let template = CallTemplate::new(Version::V2, "eth_getBalance", Some(&json!(["0xab", "latest"])));
        let mut builder = RequestBuilder::default();
        builder.begin(false);
        builder.push(&template, call(Some(42)), &mut SmallRng::seed_from_u64(0));
        let body = builder.finish();
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            json!({"jsonrpc":"2.0","method":"eth_getBalance","params":["0xab","latest"],"id":42})
        );
    }

    #[test]
    fn batch_has_notifications_without_id() {
        let echo = CallTemplate::new(Version::V2, "echo", None);
        let mut builder = RequestBuilder::default();
        builder.begin(true);
        let rng = &mut SmallRng::seed_from_u64(0);
        builder.push(&echo, call(Some(7)), rng);
        builder.push(&echo, call(None), rng);
        builder.push(&echo, call(Some(8)), rng);
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
    fn version_1_calls_have_no_version_member_and_a_null_id_for_notifications() {
        let with_params = CallTemplate::new(Version::V1, "getblockhash", Some(&json!([7])));
        let without = CallTemplate::new(Version::V1, "getblockcount", None);
        let rng = &mut SmallRng::seed_from_u64(0);
        let mut builder = RequestBuilder::default();
        let mut body = |template: &CallTemplate, id: Option<u64>| {
            builder.begin(false);
            builder.push(template, call(id), rng);
            serde_json::from_slice::<Value>(&builder.finish()).unwrap()
        };
        assert_eq!(
            body(&with_params, Some(3)),
            json!({"method":"getblockhash","params":[7],"id":3})
        );
        assert_eq!(
            body(&without, None),
            json!({"method":"getblockcount","params":[],"id":null})
        );
        assert_eq!(without.version(), Version::V1);
    }

    #[test]
    fn method_names_are_escaped() {
        let template = CallTemplate::new(Version::V2, "we\"ird", Some(&json!({"a": 1})));
        let mut builder = RequestBuilder::default();
        builder.begin(false);
        builder.push(&template, call(Some(1)), &mut SmallRng::seed_from_u64(0));
        let value: Value = serde_json::from_slice(&builder.finish()).unwrap();
        assert_eq!(value["method"], "we\"ird");
        assert_eq!(value["params"], json!({"a": 1}));
    }
}
