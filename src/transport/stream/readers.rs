//! The reading side of a multiplexed connection: one loop per framing
//! (lines, WebSocket frames, LSP's `Content-Length`), each handing a
//! message to the request it answers, answering the server's own requests,
//! passing subscriptions' notifications on, and hanging the connection up
//! however the loop ends.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures_util::stream::SplitStream;
use futures_util::StreamExt;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::WebSocketStream;

use super::mux::{MuxConnection, Writer};
use crate::rpc::wire::{self, Message};
use crate::tls::NetStream;

/// Hangs the connection up however its reader ends: at the end of the
/// stream, past a bound, or in a panic (a bug), so that no call waits on a
/// reader that is gone and the engine reopens the connection.
struct HangUpOnExit {
    connection: std::rc::Weak<MuxConnection>,
    /// Why the reader stopped, when it chose to.
    reason: Option<String>,
}

impl HangUpOnExit {
    fn new(connection: &std::rc::Weak<MuxConnection>) -> Self {
        HangUpOnExit {
            connection: connection.clone(),
            reason: None,
        }
    }
}

impl Drop for HangUpOnExit {
    fn drop(&mut self) {
        let panicked = std::thread::panicking();
        let reason = self.reason.take().unwrap_or_else(|| {
            let why = if panicked {
                "volley's reader of this connection panicked (a bug in volley; the panic is on stderr)"
            } else {
                "volley stopped reading this connection"
            };
            why.to_string()
        });
        hang_up(&self.connection, reason, panicked);
    }
}

/// Why a byte stream's reader stopped, from what its last read gave.
fn read_ended(read: std::io::Result<usize>) -> Option<String> {
    match read {
        Ok(0) => Some("the server closed the connection".into()),
        Ok(_) => None,
        Err(e) => Some(format!("reading from the server: {e}")),
    }
}

/// Reads answers line by line and hands each to the request it answers.
pub(super) async fn read_answers(
    connection: std::rc::Weak<MuxConnection>,
    mut reader: Box<dyn AsyncRead + Unpin>,
    limit: usize,
) {
    let mut exit = HangUpOnExit::new(&connection);
    let mut input = BytesMut::with_capacity(64 * 1024);
    let mut scanned = 0;
    loop {
        while let Some(at) = input[scanned..].iter().position(|b| *b == b'\n') {
            if scanned + at > limit {
                // Whole, but too large: it came in one read, past the check below.
                exit.reason = Some(format!("a message larger than the limit of {limit} bytes"));
                return;
            }
            let line = input.split_to(scanned + at + 1).freeze();
            scanned = 0;
            let Some(connection) = connection.upgrade() else {
                return;
            };
            let line = line.slice(..line.len() - 1);
            if wire::first_significant_byte(&line).is_some() {
                deliver(&connection, line);
            }
        }
        scanned = input.len();
        if input.len() > limit {
            // An answer larger than the limit: the connection is dropped
            // rather than held; the requests waiting on it fail as `io`.
            exit.reason = Some(format!(
                "a message larger than the limit of {limit} bytes (no end of line within it)"
            ));
            return;
        }
        input.reserve(16 * 1024);
        if let Some(reason) = read_ended(reader.read_buf(&mut input).await) {
            exit.reason = Some(reason);
            return;
        }
    }
}

/// Reads WebSocket frames and hands each to the request it answers.
pub(super) async fn read_frames(
    connection: std::rc::Weak<MuxConnection>,
    mut frames: SplitStream<WebSocketStream<NetStream>>,
) {
    let mut exit = HangUpOnExit::new(&connection);
    exit.reason = Some("the server closed the connection".into());
    while let Some(frame) = frames.next().await {
        let Some(connection) = connection.upgrade() else {
            return;
        };
        match frame {
            Ok(Frame::Text(text)) => deliver(&connection, Bytes::from(text)),
            Ok(Frame::Binary(data)) => deliver(&connection, data),
            Ok(Frame::Close(_)) => {
                exit.reason = Some("the server closed the WebSocket".into());
                return;
            }
            // Past the size limit among them: tungstenite checks a frame's
            // length against it before reading the frame.
            Err(e) => {
                exit.reason = Some(format!("the WebSocket failed: {e}"));
                return;
            }
            // Pings: tungstenite queues the pong and sends it as the next
            // read begins, so an idle socket answers too (tested).
            Ok(_) => {}
        }
    }
}

/// Reads messages framed by `Content-Length` headers (LSP). Every size the
/// server names is checked by `wire::next_lsp_message_within` before it is used.
pub(super) async fn read_headed(
    connection: std::rc::Weak<MuxConnection>,
    mut reader: Box<dyn AsyncRead + Unpin>,
    limit: usize,
) {
    let mut exit = HangUpOnExit::new(&connection);
    let mut input = BytesMut::with_capacity(64 * 1024);
    loop {
        // Every complete message in the buffer first.
        loop {
            let body = match wire::next_lsp_message_within(&input, limit) {
                Ok(Some(body)) => body,
                Ok(None) => break,
                Err(e) => {
                    exit.reason = Some(format!("the server sent {e}"));
                    return;
                }
            };
            let message = input.split_to(body.end).freeze().slice(body.start..);
            let Some(connection) = connection.upgrade() else {
                return;
            };
            deliver(&connection, message);
        }
        input.reserve(16 * 1024);
        if let Some(reason) = read_ended(reader.read_buf(&mut input).await) {
            exit.reason = Some(reason);
            return;
        }
    }
}

/// A message from the server itself (it has a method): a request to the
/// client (LSP's `workspace/configuration`, `window/workDoneProgress/create`),
/// answered as the scenario says (null by default) so the server does not
/// stall; or a notification of a subscription opened on this connection
/// (geth's `eth_subscription`, and the same shape elsewhere), which goes to
/// the listener. False for anything else (counted as unsolicited).
fn from_the_server(connection: &Rc<MuxConnection>, message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        subscription: &'a RawValue,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    let Some(message) = Message::parse(message) else {
        return false;
    };
    let Some(method) = message.method else {
        return false;
    };
    let method = method_name(method);
    if message.id.is_none() {
        heard_ready(connection, &method, message.params);
    }
    if let Some(id) = message.id {
        let result = connection.server_answers.result_for(&method);
        let reply = format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{}}}"#, id);
        let connection = connection.clone();
        tokio::task::spawn_local(async move {
            let _ = connection.writer.lock().await.send(reply.as_bytes()).await;
        });
        return true;
    }
    let subscriptions = connection.subscriptions.borrow();
    if subscriptions.is_empty() {
        return false;
    }
    let Some(params) = message
        .params
        .and_then(|p| serde_json::from_str::<Params>(p).ok())
    else {
        return false;
    };
    let id = params.subscription.get().trim_matches('"');
    let Some(index) = subscriptions.iter().position(|s| &**s == id) else {
        return false;
    };
    if let Some(listener) = connection.listener.borrow_mut().as_mut() {
        listener(index, params.result.map(RawValue::get));
    }
    true
}

/// A method's name from its JSON text: unescaped where it holds an escape
/// (pylsp's JSON writes `textDocument\/publishDiagnostics`).
fn method_name(raw: &str) -> std::borrow::Cow<'_, str> {
    match raw.contains('\\') {
        true => serde_json::from_str::<String>(raw).map_or(raw.trim_matches('"').into(), Into::into),
        false => raw.trim_matches('"').into(),
    }
}

/// A stdio child's notification that may be its ready signal.
fn heard_ready(connection: &MuxConnection, method: &str, params: Option<&str>) {
    if let (Some(life), Some(signal)) = (connection.life.get(), connection.ready.get()) {
        // Once ready, later notifications (diagnostics come again and
        // again) are not parsed for it.
        if !life.is_ready() && signal.heard(method, params) {
            life.signalled();
        }
    }
}

/// Marks a connection whose reader ended as closed, saying why: the calls
/// waiting on it fail as `io`, and its writer is closed (a child sees the
/// end of its input and may exit). Borrows are tried, never forced: this
/// may run while a panic unwinds.
fn hang_up(connection: &std::rc::Weak<MuxConnection>, reason: String, panicked: bool) {
    let Some(connection) = connection.upgrade() else {
        return;
    };
    connection.closed.set(true);
    connection
        .reader_panicked
        .set(connection.reader_panicked.get() || panicked);
    if let Ok(mut because) = connection.closed_because.try_borrow_mut() {
        because.get_or_insert(reason);
    }
    // Dropped outside the borrow: each drop wakes a caller.
    let waiting = connection
        .waiting
        .try_borrow_mut()
        .map(|mut waiting| std::mem::take(&mut *waiting));
    drop(waiting);
    let probe = connection.probe.try_borrow_mut().map(|mut probe| probe.take());
    drop(probe);
    if let Ok(mut writer) = connection.writer.try_lock() {
        *writer = Writer::Closed;
    };
}

/// Finds the request an answer belongs to by its (first) id.
fn deliver(connection: &Rc<MuxConnection>, line: Bytes) {
    // A message with a method is the server's own; one that is not a
    // request or a subscription's is counted below as unsolicited.
    if line.windows(8).any(|w| w == b"\"method\"") && from_the_server(connection, &line) {
        return;
    }
    let id = answer_id(&line);
    let mut waiting = connection.waiting.borrow_mut();
    let owner = id.and_then(|id| {
        waiting
            .range(..=id)
            .next_back()
            .filter(|(first, w)| id < *first + w.calls)
            .map(|(first, _)| *first)
    });
    match owner.and_then(|first| waiting.remove(&first)) {
        Some(request) => {
            if let Some(life) = connection.life.get() {
                life.answered(connection.ready.get().is_some());
            }
            let _ = request.answer.send(line);
        }
        None => match connection.probe.borrow_mut().take() {
            Some(probe) => {
                let _ = probe.send(line);
            }
            None => connection.unsolicited.set(connection.unsolicited.get() + 1),
        },
    }
}

/// The id of an answer, or of the first entry of a batch answer that has one.
fn answer_id(line: &[u8]) -> Option<u64> {
    let id_of = |text: &[u8]| -> Option<u64> {
        let message = Message::parse(text)?;
        wire::id_number(message.id?).map(|(id, _)| id)
    };
    match wire::first_significant_byte(line)? {
        b'[' => {
            let entries: Vec<&RawValue> = serde_json::from_slice(line).ok()?;
            entries
                .into_iter()
                .find_map(|entry| id_of(entry.get().as_bytes()))
        }
        _ => id_of(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::stream::mux::Waiting;
    use tokio::sync::oneshot;

    /// A stream whose first read panics, as a bug in a reader would.
    struct PanicsOnRead;

    impl AsyncRead for PanicsOnRead {
        fn poll_read(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            panic!("a bug in a reader (on purpose, in a test)")
        }
    }

    #[tokio::test]
    async fn a_reader_that_panics_hangs_its_connection_up_and_fails_its_calls() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let (answer, in_flight) = oneshot::channel();
                connection
                    .waiting
                    .borrow_mut()
                    .insert(1, Waiting { calls: 1, answer });
                let weak = Rc::downgrade(&connection);
                let reader = tokio::task::spawn_local(read_answers(weak, Box::new(PanicsOnRead), 1024));
                assert!(reader.await.unwrap_err().is_panic());
                assert!(connection.is_closed() && connection.reader_panicked());
                assert!(in_flight.await.is_err(), "the call in flight fails");
                let later = connection.exchange(Bytes::from_static(b"{}"), 2, 1).await;
                let error = later.unwrap_err().to_string();
                assert!(error.contains("panicked"), "{error}");
            })
            .await;
    }

    #[tokio::test]
    async fn a_reader_past_a_bound_says_which() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let lsp: &[u8] = b"Content-Length: 18446744073709551615\r\n\r\n";
                read_headed(Rc::downgrade(&connection), Box::new(lsp), 1024).await;
                let error = connection.closed_because();
                assert!(
                    error.contains("18446744073709551615") && error.contains("1024"),
                    "{error}"
                );
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let line: &[u8] = &[b'x'; 2000];
                read_answers(Rc::downgrade(&connection), Box::new(line), 1024).await;
                let error = connection.closed_because();
                assert!(error.contains("larger than the limit of 1024"), "{error}");
                // Whole, ended by its newline, and read at once: still too large.
                let connection = MuxConnection::new(Writer::Closed, Default::default());
                let mut line = br#"{"jsonrpc":"2.0","id":1,"result":""#.to_vec();
                line.extend([b'x'; 2000]);
                line.extend(b"\"}\n");
                let (answer, in_flight) = oneshot::channel();
                connection
                    .waiting
                    .borrow_mut()
                    .insert(1, Waiting { calls: 1, answer });
                let line: &'static [u8] = line.leak();
                read_answers(Rc::downgrade(&connection), Box::new(line), 1024).await;
                assert!(in_flight.await.is_err(), "never delivered");
                let error = connection.closed_because();
                assert!(error.contains("larger than the limit of 1024"), "{error}");
            })
            .await;
    }

    #[test]
    fn answers_are_found_by_any_id_of_their_request() {
        assert_eq!(answer_id(br#"{"jsonrpc":"2.0","result":1,"id":7}"#), Some(7));
        assert_eq!(
            answer_id(
                br#"[{"jsonrpc":"2.0","error":{"code":1,"message":""},"id":null},{"id":"9","result":1}]"#
            ),
            Some(9)
        );
        assert_eq!(
            answer_id(br#"{"jsonrpc":"2.0","method":"eth_subscription","params":{}}"#),
            None
        );
        assert_eq!(answer_id(b"garbage"), None);
    }

    #[test]
    fn a_method_with_an_escaped_slash_is_read_as_its_name() {
        assert_eq!(
            method_name(r#""textDocument\/publishDiagnostics""#),
            "textDocument/publishDiagnostics"
        );
        assert_eq!(
            method_name(r#""workspace/configuration""#),
            "workspace/configuration"
        );
        assert_eq!(method_name(r#""\u0024/progress""#), "$/progress");
    }
}
