//! Any bytes a server sends as an HTTP/1.1 answer: the reader ends with an
//! answer or an error, never a panic, a hang or an answer past its limit.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tokio::io::AsyncWriteExt;
use volley::transport::HttpConnection;

const LIMIT: usize = 64 * 1024;

fuzz_target!(|answer: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, mut server) = tokio::io::duplex(answer.len() + 4096);
        server.write_all(answer).await.unwrap();
        // The server stops writing after its bytes, so a short answer ends;
        // it stays open to take the request (a dropped one fails the write
        // before any answer is read).
        server.shutdown().await.unwrap();
        let head = Bytes::from_static(b"POST / HTTP/1.1\r\nHost: fuzz\r\n");
        let mut connection = HttpConnection::over(client, head, LIMIT);
        if let Ok(reply) = connection.send(Bytes::from_static(b"{}")).await {
            assert!(reply.body.len() <= LIMIT);
        }
        drop(server);
    });
});
