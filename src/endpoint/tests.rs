use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// A hang guard, not a timing assertion: what a broken rule would wait for.
const GUARD: Duration = Duration::from_secs(20);

#[test]
fn only_loopback_is_served_unless_the_flag_says_so() {
    for view in [View::Metrics, View::Page] {
        assert_eq!(view.check_address("127.0.0.1:0".parse().unwrap(), false), Ok(()));
        assert_eq!(view.check_address("[::1]:9000".parse().unwrap(), false), Ok(()));
        let error = view
            .check_address("0.0.0.0:9000".parse().unwrap(), false)
            .unwrap_err();
        assert!(error.starts_with(&format!("{} 0.0.0.0:9000: not a loopback address", view.flag())));
        assert!(error.contains(view.public_flag()), "{error}");
        assert_eq!(view.check_address("0.0.0.0:9000".parse().unwrap(), true), Ok(()));
    }
    let page = View::Page.check_address("0.0.0.0:9465".parse().unwrap(), false);
    // As docs/guide/live.md shows it.
    assert_eq!(
        page.unwrap_err(),
        "--web-listen 0.0.0.0:9465: not a loopback address, and the page shows the targets' URLs to whoever \
         reaches it; give --web-listen-public to serve it there anyway, or listen on 127.0.0.1"
    );
}

#[test]
fn a_host_is_let_in_when_it_names_loopback() {
    for host in [
        "localhost",
        "LocalHost:9464",
        "127.0.0.1",
        "127.0.0.1:9464",
        "127.1.2.3:1",
        "[::1]",
        "[::1]:9465",
        "[::ffff:127.0.0.1]:80",
    ] {
        assert!(loopback_host(host), "{host}");
    }
    for host in [
        "",
        "evil.example",
        "evil.example:9464",
        "localhost.evil.example",
        "10.0.0.1:9464",
        "0.0.0.0:9464",
        "[::]:9465",
        "[fe80::1]",
        "127.0.0.1.nip.io",
    ] {
        assert!(!loopback_host(host), "{host}");
    }
}

/// An endpoint on a free loopback port with `limits`, answering `ok` to
/// each request, or a stream of ten chunks for `/stream`.
async fn start(limits: Limits) -> SocketAddr {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = |request: Request<Incoming>| async move {
        if request.uri().path() != "/stream" {
            return respond(StatusCode::OK, "text/plain", "ok\n");
        }
        let chunks = futures_util::stream::unfold(0, |n| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let chunk = hyper::body::Frame::data(Bytes::from(format!("chunk {n}\n")));
            (n < 10).then_some((Ok::<_, Infallible>(chunk), n + 1))
        });
        Response::new(http_body_util::StreamBody::new(chunks).boxed_unsync())
    };
    let access = Access {
        view: View::Metrics,
        public: false,
    };
    tokio::spawn(serve_within(
        listener,
        limits,
        access,
        handler,
        CancellationToken::new(),
    ));
    addr
}

/// Sends `request` on a new connection and reads until the server closes.
async fn ask(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(GUARD, stream.read_to_string(&mut answer))
        .await
        .expect("hang guard")
        .unwrap();
    answer
}

/// Reads until the server closes `stream`: no bytes, and no hang.
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(GUARD, stream.read(&mut byte)).await {
        Ok(read) => read.map_or(true, |n| n == 0),
        Err(_) => false,
    }
}

fn get(path: &str, host: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

#[tokio::test]
async fn a_newcomer_takes_the_slot_of_the_connection_idle_longest() {
    // No idle rule in the way: only the slots are tested.
    let addr = start(Limits {
        slots: 2,
        head: Duration::from_secs(600),
    })
    .await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let answer = ask(addr, &get("/", "127.0.0.1")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed(&mut first).await, "the first, idle longest, gave its slot");
}

#[tokio::test]
async fn a_connection_that_sends_no_request_head_is_closed_but_a_stream_goes_on() {
    let addr = start(Limits {
        slots: 8,
        head: Duration::from_millis(200),
    })
    .await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert!(closed(&mut silent).await, "nothing sent");
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    assert!(closed(&mut slow).await, "half a head sent");
    // Ten chunks, a tenth of a second apart: the stream outlives the wait
    // for a head twice over, and is read whole.
    let streamed = ask(addr, &get("/stream", "localhost")).await;
    assert!(
        streamed.contains("chunk 0\n") && streamed.contains("chunk 9\n"),
        "{streamed}"
    );
}

#[tokio::test]
async fn a_keep_alive_connection_idle_after_its_answer_is_closed() {
    let addr = start(Limits {
        slots: 8,
        head: Duration::from_millis(200),
    })
    .await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(GUARD, stream.read(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(
        answer[..n].ends_with(b"ok\n"),
        "{:?}",
        String::from_utf8_lossy(&answer[..n])
    );
    assert!(closed(&mut stream).await);
}

#[tokio::test]
async fn a_host_elsewhere_is_refused() {
    let addr = start(Limits {
        slots: 8,
        head: HEAD_TIMEOUT,
    })
    .await;
    let refused = ask(addr, &get("/", "rebound.example:9464")).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(
        refused.contains("--metrics-listen-public lets any Host in"),
        "{refused}"
    );
    let answered = ask(addr, &get("/", &addr.to_string())).await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    let no_host = ask(addr, "GET / HTTP/1.0\r\n\r\n").await;
    assert!(no_host.starts_with("HTTP/1.0 200"), "{no_host}");
}
