//! Any bytes a server sends on a multiplexed connection, as NDJSON lines or
//! LSP-framed messages: each call waiting on it ends with an answer or an
//! error once the server hangs up, never a panic or a hang, and no answer
//! is larger than the limit.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tokio::io::AsyncWriteExt;
use volley::transport::MuxConnection;

const LIMIT: usize = 4096;

fuzz_target!(|input: &[u8]| {
    let Some((&mode, answer)) = input.split_first() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let (client, mut server) = tokio::io::duplex(answer.len() + 64 * 1024);
        let (reader, writer) = tokio::io::split(client);
        let connection = MuxConnection::over(reader, writer, mode & 1 == 1, LIMIT);
        // Ids 1 to 3 in flight, as a batch of three and a single call.
        let batch = connection.exchange(Bytes::from_static(b"[1,2,3]"), 1, 3);
        let single = connection.exchange(Bytes::from_static(b"{}"), 4, 1);
        let serve = async {
            server.write_all(answer).await.unwrap();
            // The end of the server's output: every call still waiting fails.
            server.shutdown().await.unwrap();
            server
        };
        let (batch, single, _server) = tokio::join!(batch, single, serve);
        for reply in [batch, single].into_iter().flatten() {
            assert!(reply.body.len() <= LIMIT + 1);
        }
        assert!(connection.is_closed(), "the hang-up is seen");
    });
});
