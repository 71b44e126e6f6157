//! One HTTP/1.1 connection carrying several requests at once (pipelining,
//! RFC 9112 §9.3.2): requests go out back to back, answers come back in
//! the order of the requests and are handed out in that order.
//!
//! The callers sharing it append their requests to one buffer; a writer
//! task sends whatever has gathered in one write, so requests made in the
//! same turn cost one system call. A reader task reads answers in order
//! (`answers.rs`) and gives each to the oldest request waiting.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use super::answers::Answers;
use super::connection::io_error;
use super::framing;
use super::HttpTarget;
use crate::tls::NetStream;
use crate::transport::{MadeHeader, Reply, TransportError};

type Answer = Result<Reply, TransportError>;

/// What the callers, the writer and the reader share.
struct Pipe {
    /// Requests framed and not yet written.
    out: Vec<u8>,
    /// The requests written or about to be, oldest first: where each
    /// answer goes.
    waiting: VecDeque<oneshot::Sender<Answer>>,
    /// Why the connection ended, once it has.
    ended: Option<String>,
    /// A caller gave up waiting (its timeout): the answers behind the one
    /// it waited for may never come (a server that hangs on a request
    /// holds every later one), so no new request joins them; those
    /// already waiting wait out their own timeouts.
    abandoned: bool,
    /// MCP's `Mcp-Session-Id`, as the server last gave it.
    session: Vec<u8>,
}

/// A pipelined connection, shared by the callers planned on it.
pub struct PipelinedConnection {
    pipe: Rc<RefCell<Pipe>>,
    wake_writer: Rc<Notify>,
    head: Bytes,
    made: std::sync::Arc<[MadeHeader]>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for PipelinedConnection {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl PipelinedConnection {
    /// Opens a connection and starts its writer and reader. Must be called
    /// inside a `LocalSet`.
    pub async fn open(target: &HttpTarget) -> Result<Rc<Self>, TransportError> {
        let stream = target.connect().await?;
        let (read, write) = tokio::io::split(stream);
        let pipe = Rc::new(RefCell::new(Pipe {
            out: Vec::with_capacity(4096),
            waiting: VecDeque::new(),
            ended: None,
            abandoned: false,
            session: Vec::new(),
        }));
        let wake_writer = Rc::new(Notify::new());
        let answers = Answers::new(read, target.max_response());
        let reader = tokio::task::spawn_local(read_answers(answers, pipe.clone(), wake_writer.clone()));
        let writer = tokio::task::spawn_local(write_requests(write, pipe.clone(), wake_writer.clone()));
        Ok(Rc::new(PipelinedConnection {
            pipe,
            wake_writer,
            head: target.head.clone(),
            made: target.made().clone(),
            tasks: [reader, writer],
        }))
    }

    /// Sends a request behind those already on the connection and waits
    /// for its answer, which comes after theirs.
    pub async fn exchange(&self, body: Bytes) -> Answer {
        let (tell, answer) = oneshot::channel();
        {
            let mut pipe = self.pipe.borrow_mut();
            let pipe = &mut *pipe;
            if let Some(why) = &pipe.ended {
                return Err(TransportError::Io(why.clone()));
            }
            framing::frame_request(&mut pipe.out, &self.head, &self.made, &pipe.session, &body);
            pipe.waiting.push_back(tell);
        }
        // Framed, it is no longer needed: the request builder's buffer is
        // reclaimed in place only once no request holds a part of it.
        drop(body);
        self.wake_writer.notify_one();
        let mut waiting = Abandoned(Some(&self.pipe));
        let answer = answer.await;
        waiting.0 = None;
        match answer {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Io("the pipelined connection ended".into())),
        }
    }

    /// Ended, or given up on by a caller: the next call opens another.
    pub fn is_closed(&self) -> bool {
        let pipe = self.pipe.borrow();
        pipe.ended.is_some() || pipe.abandoned
    }
}

/// Marks the connection abandoned when a caller stops waiting (its
/// future dropped) before its answer came.
struct Abandoned<'a>(Option<&'a RefCell<Pipe>>);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if let Some(pipe) = self.0 {
            pipe.borrow_mut().abandoned = true;
        }
    }
}

/// Ends the connection: every request still waiting is told why; the
/// writer stops at its next turn.
fn end(pipe: &RefCell<Pipe>, wake_writer: &Notify, first: Option<TransportError>, why: String) {
    let mut pipe = pipe.borrow_mut();
    pipe.ended = Some(why.clone());
    pipe.out.clear();
    let mut waiting = std::mem::take(&mut pipe.waiting);
    drop(pipe);
    if let Some(error) = first {
        if let Some(oldest) = waiting.pop_front() {
            let _ = oldest.send(Err(error));
        }
    }
    for waiter in waiting {
        let _ = waiter.send(Err(TransportError::Io(why.clone())));
    }
    wake_writer.notify_one();
}

/// Writes whatever requests have gathered, in one write each turn.
async fn write_requests(mut stream: WriteHalf<NetStream>, pipe: Rc<RefCell<Pipe>>, wake: Rc<Notify>) {
    let mut sending = Vec::with_capacity(4096);
    loop {
        wake.notified().await;
        loop {
            {
                let mut pipe = pipe.borrow_mut();
                if pipe.ended.is_some() {
                    return;
                }
                if pipe.out.is_empty() {
                    break;
                }
                std::mem::swap(&mut pipe.out, &mut sending);
            }
            let written = match stream.write_all(&sending).await {
                // TLS holds records until flushed; a plain socket's flush is free.
                Ok(()) => stream.flush().await,
                Err(e) => Err(e),
            };
            sending.clear();
            if let Err(e) = written {
                let why = io_error("sending pipelined requests", e).to_string();
                end(&pipe, &wake, None, why);
                return;
            }
        }
    }
}

/// Reads answers in order, each to the oldest request waiting.
async fn read_answers(mut answers: Answers<ReadHalf<NetStream>>, pipe: Rc<RefCell<Pipe>>, wake: Rc<Notify>) {
    loop {
        let answer = answers.read_answer().await;
        let waiting = pipe.borrow().waiting.len();
        let reply = match answer {
            Ok(reply) => reply,
            Err(error) => {
                let why = match waiting {
                    0 | 1 => error.to_string(),
                    n => format!("{error} ({} pipelined requests behind it unanswered)", n - 1),
                };
                // The call whose answer failed says so too, as an `io`
                // error (an answer too large keeps its own kind).
                let error = match error {
                    TransportError::Io(_) => TransportError::Io(why.clone()),
                    other => other,
                };
                end(&pipe, &wake, Some(error), why);
                return;
            }
        };
        let oldest = {
            let mut pipe = pipe.borrow_mut();
            if !answers.session.is_empty() && pipe.session != answers.session {
                pipe.session.clone_from(&answers.session);
            }
            pipe.waiting.pop_front()
        };
        let Some(oldest) = oldest else {
            let why = "the server sent an answer no request was waiting for".to_string();
            end(&pipe, &wake, None, why);
            return;
        };
        // A caller that gave up (its timeout) is gone: the answer is dropped.
        let _ = oldest.send(Ok(reply));
        if answers.closed {
            let left = pipe.borrow().waiting.len();
            let why = format!(
                "the server closed the connection after an answer (`Connection: close`), with {left} pipelined requests unanswered: it does not keep pipelined requests"
            );
            end(&pipe, &wake, None, why);
            return;
        }
    }
}

/// Whether the server keeps pipelined requests: two requests in one write
/// must come back as two answers, in their order, on a connection left
/// open. Asked before the run; a server that fails is refused, never
/// measured. The probe's method is one no server has, so the call changes
/// nothing; JSON-RPC answers it with its id all the same.
/// The second answer is waited for `second_within`: a server that leaves
/// the second request unanswered is refused then, saying so.
pub(in crate::transport) async fn check(
    target: &HttpTarget,
    depth: usize,
    second_within: std::time::Duration,
) -> Result<(), TransportError> {
    let stream = target.connect().await?;
    let mut answers = Answers::new(stream, target.max_response());
    let mut out = Vec::new();
    for id in PROBE_IDS {
        let body = format!(r#"{{"jsonrpc":"2.0","method":"volley_pipelineCheck","id":"{id}"}}"#);
        framing::frame_request(&mut out, &target.head, target.made(), b"", body.as_bytes());
    }
    let refuse = |why: String| {
        TransportError::Io(format!(
            "--pipeline {depth}: {} {why}; it does not keep pipelined requests: run without --pipeline",
            crate::redact::url(target.url())
        ))
    };
    answers
        .stream
        .write_all(&out)
        .await
        .map_err(|e| refuse(format!("refused two requests sent together ({e})")))?;
    answers
        .stream
        .flush()
        .await
        .map_err(|e| io_error("sending the request", e))?;
    let mut ids = Vec::new();
    for n in 0..PROBE_IDS.len() {
        if answers.closed {
            return Err(refuse("closed the connection after one answer".into()));
        }
        let reply = match n {
            0 => answers.read_answer().await?,
            _ => match tokio::time::timeout(second_within, answers.read_answer()).await {
                Ok(read) => read.map_err(|e| {
                    refuse(format!(
                        "did not answer the second of two requests sent together ({e})"
                    ))
                })?,
                Err(_) => {
                    return Err(refuse(format!(
                        "did not answer the second of two requests sent together within {}",
                        humantime::format_duration(second_within)
                    )))
                }
            },
        };
        ids.push(answer_id(&reply.body));
    }
    if ids.iter().all(Option::is_some) && ids != PROBE_IDS.map(|id| Some(id.to_string())) {
        return Err(refuse(format!(
            "answered two requests sent together out of order (ids {} then {})",
            ids[0].as_deref().unwrap_or("?"),
            ids[1].as_deref().unwrap_or("?")
        )));
    }
    Ok(())
}

const PROBE_IDS: [&str; 2] = ["volley-pipeline-1", "volley-pipeline-2"];

/// The string id of a JSON-RPC answer, if it has one.
fn answer_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: Option<String>,
    }
    serde_json::from_slice::<Id>(body).ok()?.id
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Options;
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    async fn target(listener: &TcpListener, pipeline: usize) -> HttpTarget {
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let options = Options {
            pipeline,
            ..Options::default()
        };
        HttpTarget::resolve(&url, &options).await.unwrap()
    }

    /// Reads requests off `stream` until `n` whole ones are in; their bodies.
    async fn requests(stream: &mut TcpStream, n: usize) -> Vec<String> {
        let mut input = Vec::new();
        let mut bodies = Vec::new();
        let mut at = 0;
        while bodies.len() < n {
            let mut chunk = [0u8; 4096];
            let read = stream.read(&mut chunk).await.unwrap();
            assert!(read > 0, "the client closed after {} requests", bodies.len());
            input.extend_from_slice(&chunk[..read]);
            while let Some(end) = input[at..].windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&input[at..at + end]).to_lowercase();
                let length: usize = head
                    .split("content-length: ")
                    .nth(1)
                    .unwrap()
                    .lines()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let start = at + end + 4;
                if input.len() < start + length {
                    break;
                }
                bodies.push(String::from_utf8_lossy(&input[start..start + length]).into_owned());
                at = start + length;
            }
        }
        bodies
    }

    fn answer(body: &str, close: bool) -> Vec<u8> {
        let close = if close { "Connection: close\r\n" } else { "" };
        format!(
            "HTTP/1.1 200 OK\r\n{close}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// A hang guard, not a timing assertion.
    async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(std::time::Duration::from_secs(20), f)
            .await
            .expect("hung")
    }

    /// Eight requests at once on one connection: the server reads all
    /// eight before it answers any (a client waiting for each answer would
    /// hang it), then answers in pieces that straddle answers; each caller
    /// gets its own answer.
    #[tokio::test]
    async fn requests_go_out_together_and_each_gets_its_own_answer_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = target(&listener, 8).await;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let bodies = requests(&mut stream, 8).await;
            let all: Vec<u8> = bodies.iter().flat_map(|b| answer(b, false)).collect();
            for piece in all.chunks(37) {
                stream.write_all(piece).await.unwrap();
                stream.flush().await.unwrap();
                tokio::task::yield_now().await;
            }
            bodies
        });
        let local = tokio::task::LocalSet::new();
        let replies = local
            .run_until(within(async {
                let connection = PipelinedConnection::open(&target).await.unwrap();
                let calls = (0..8).map(|n| {
                    let connection = connection.clone();
                    async move { connection.exchange(Bytes::from(format!("{{\"n\":{n}}}"))).await }
                });
                let replies = futures_util::future::join_all(calls).await;
                assert!(!connection.is_closed());
                replies
            }))
            .await;
        for (n, reply) in replies.into_iter().enumerate() {
            assert_eq!(reply.unwrap().body, format!("{{\"n\":{n}}}"));
        }
        let seen = server.await.unwrap();
        assert_eq!(seen, (0..8).map(|n| format!("{{\"n\":{n}}}")).collect::<Vec<_>>());
    }

    /// A server that closes after an answer leaves the requests behind it
    /// unanswered: each fails, saying why, and the connection is closed.
    #[tokio::test]
    async fn a_close_after_an_answer_fails_the_requests_behind_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = target(&listener, 4).await;
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let bodies = requests(&mut stream, 3).await;
            stream.write_all(&answer(&bodies[0], true)).await.unwrap();
        });
        let local = tokio::task::LocalSet::new();
        local
            .run_until(within(async {
                let connection = PipelinedConnection::open(&target).await.unwrap();
                let calls = (0..3).map(|n| connection.exchange(Bytes::from(format!("{n}"))));
                let replies = futures_util::future::join_all(calls).await;
                assert_eq!(&replies[0].as_ref().unwrap().body[..], b"0");
                for failed in &replies[1..] {
                    let error = failed.as_ref().unwrap_err().to_string();
                    assert!(error.contains("with 2 pipelined requests unanswered"), "{error}");
                }
                assert!(connection.is_closed());
            }))
            .await;
    }

    /// MCP's session: the id an answer gives goes on every request after
    /// it, and an answer without one keeps it.
    #[tokio::test]
    async fn the_session_an_answer_gives_goes_on_the_requests_after_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = target(&listener, 4).await;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut heads = Vec::new();
            for given in ["Mcp-Session-Id: s-1\r\n", "", ""] {
                let mut input = Vec::new();
                while !input.windows(6).any(|w| w == b"\r\n\r\n{}") {
                    let mut chunk = [0u8; 4096];
                    let read = stream.read(&mut chunk).await.unwrap();
                    assert!(read > 0);
                    input.extend_from_slice(&chunk[..read]);
                }
                heads.push(String::from_utf8_lossy(&input).to_lowercase());
                let answer = format!("HTTP/1.1 200 OK\r\n{given}Content-Length: 2\r\n\r\n{{}}");
                stream.write_all(answer.as_bytes()).await.unwrap();
            }
            heads
        });
        let local = tokio::task::LocalSet::new();
        local
            .run_until(within(async {
                let connection = PipelinedConnection::open(&target).await.unwrap();
                for _ in 0..3 {
                    connection.exchange(Bytes::from_static(b"{}")).await.unwrap();
                }
            }))
            .await;
        let heads = server.await.unwrap();
        let carry: Vec<bool> = heads
            .iter()
            .map(|h| h.contains("mcp-session-id: s-1\r\n"))
            .collect();
        assert_eq!(carry, [false, true, true], "{heads:?}");
    }

    /// A connection let go closes its socket: its writer and reader tasks
    /// end with it, rather than hold the socket open to the server.
    #[tokio::test]
    async fn a_connection_let_go_closes_its_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = target(&listener, 4).await;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let bodies = requests(&mut stream, 1).await;
            stream.write_all(&answer(&bodies[0], false)).await.unwrap();
            // The end of the stream: the client closed it.
            let mut rest = [0u8; 64];
            stream.read(&mut rest).await.unwrap()
        });
        let local = tokio::task::LocalSet::new();
        local
            .run_until(within(async {
                let connection = PipelinedConnection::open(&target).await.unwrap();
                assert_eq!(
                    &connection.exchange(Bytes::from_static(b"{}")).await.unwrap().body[..],
                    b"{}"
                );
                drop(connection);
                assert_eq!(server.await.unwrap(), 0, "closed, nothing more sent");
            }))
            .await;
    }

    /// A caller that stops waiting (its timeout) leaves the connection to
    /// the calls already on it: the next call opens another.
    #[tokio::test]
    async fn a_call_given_up_on_closes_the_connection_to_new_calls() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = target(&listener, 4).await;
        let _server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            requests(&mut stream, 1).await;
            std::future::pending::<()>().await;
        });
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let connection = PipelinedConnection::open(&target).await.unwrap();
                {
                    let call = connection.exchange(Bytes::from_static(b"{}"));
                    tokio::pin!(call);
                    // Polled once, so the request is on its way; then dropped.
                    assert!(futures_util::poll!(call.as_mut()).is_pending());
                    assert!(!connection.is_closed());
                }
                assert!(
                    connection.is_closed(),
                    "still taking calls behind one given up on"
                );
            })
            .await;
    }

    /// Before a run: a server that answers two requests sent together, in
    /// order, on an open connection keeps pipelining; one that closes after
    /// an answer, or answers out of order, is refused, saying so.
    #[tokio::test]
    async fn the_check_refuses_a_server_that_closes_or_answers_out_of_order() {
        // (close after the first, answer in reverse, leave the second
        // unanswered on an open connection, what the refusal says)
        for (close, swap, silent, says) in [
            (false, false, false, None),
            (true, false, false, Some("closed the connection after one answer")),
            (
                false,
                true,
                false,
                Some("out of order (ids volley-pipeline-2 then volley-pipeline-1)"),
            ),
            (
                false,
                false,
                true,
                Some("did not answer the second of two requests sent together within 300ms"),
            ),
        ] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let target = target(&listener, 16).await;
            tokio::spawn(async move {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut bodies = requests(&mut stream, 2).await;
                if swap {
                    bodies.reverse();
                }
                let answers: Vec<Vec<u8>> = bodies
                    .iter()
                    .map(|b| {
                        let id = b.split("\"id\":").nth(1).unwrap().trim_end_matches('}');
                        answer(
                            &format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601}}}}"),
                            close,
                        )
                    })
                    .collect();
                stream.write_all(&answers[0]).await.unwrap();
                if !close && !silent {
                    stream.write_all(&answers[1]).await.unwrap();
                }
                // Open, and silent, until the check is done with it.
                let _ = stream.read(&mut [0u8; 16]).await;
            });
            let checked = within(check(&target, 16, std::time::Duration::from_millis(300))).await;
            match says {
                None => checked.unwrap(),
                Some(says) => {
                    let error = checked.unwrap_err().to_string();
                    assert!(error.contains(says), "{error}");
                    assert!(error.starts_with("--pipeline 16: http://127.0.0.1:"), "{error}");
                    assert!(error.ends_with("run without --pipeline"), "{error}");
                }
            }
        }
    }
}
