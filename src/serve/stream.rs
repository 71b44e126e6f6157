//! The built-in server over newline-delimited JSON on TCP and Unix
//! sockets: every line is handled on its own, so with added latency the
//! answers come back in another order than the requests, as a multiplexing
//! client must expect.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::handler::Handler;
use super::{ServeConfig, ServerStats};

/// Serves one connection until it closes or `stop`.
pub async fn serve_connection<S>(
    stream: S,
    config: Arc<ServeConfig>,
    stats: Arc<ServerStats>,
    started: Instant,
    seed: u64,
    stop: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, mut writer) = tokio::io::split(stream);
    let (answers, mut outbox) = mpsc::unbounded_channel::<Vec<u8>>();
    let write = tokio::spawn(async move {
        while let Some(mut answer) = outbox.recv().await {
            answer.push(b'\n');
            // Whatever else is ready goes in the same write.
            while let Ok(mut more) = outbox.try_recv() {
                more.push(b'\n');
                answer.extend_from_slice(&more);
            }
            if writer.write_all(&answer).await.is_err() {
                return;
            }
        }
    });
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(seed)));
    let mut lines = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = lines.read_until(b'\n', &mut line) => read,
            _ = stop.cancelled() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let request = std::mem::take(&mut line);
        if request.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (config, stats, rng, answers) = (config.clone(), stats.clone(), rng.clone(), answers.clone());
        tokio::spawn(async move {
            let answer = {
                let mut rng = rng.lock().unwrap_or_else(|p| p.into_inner());
                Handler {
                    config: &config,
                    stats: &stats,
                    started,
                }
                .handle(&request, &mut rng)
            };
            if !answer.hold.is_zero() {
                tokio::time::sleep(answer.hold).await;
            }
            if let Some(body) = answer.body {
                let _ = answers.send(body);
            }
        });
    }
    drop(answers);
    let _ = write.await;
}

/// Serves one WebSocket connection: a JSON-RPC message a text frame, each
/// handled on its own so answers may come back in another order.
pub async fn serve_websocket(
    stream: tokio::net::TcpStream,
    config: Arc<ServeConfig>,
    stats: Arc<ServerStats>,
    started: Instant,
    seed: u64,
    stop: CancellationToken,
) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let Ok(socket) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut frames) = socket.split();
    let (answers, mut outbox) = mpsc::unbounded_channel::<Message>();
    let write = tokio::spawn(async move {
        while let Some(message) = outbox.recv().await {
            if sink.send(message).await.is_err() {
                return;
            }
        }
    });
    let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(seed)));
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = stop.cancelled() => break,
        };
        let request: Vec<u8> = match frame {
            Some(Ok(Message::Text(text))) => text.into_bytes(),
            Some(Ok(Message::Binary(data))) => data,
            Some(Ok(Message::Ping(data))) => {
                let _ = answers.send(Message::Pong(data));
                continue;
            }
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
            Some(Ok(_)) => continue,
        };
        let (config, stats, rng, answers) = (config.clone(), stats.clone(), rng.clone(), answers.clone());
        tokio::spawn(async move {
            let answer = {
                let mut rng = rng.lock().unwrap_or_else(|p| p.into_inner());
                Handler {
                    config: &config,
                    stats: &stats,
                    started,
                }
                .handle(&request, &mut rng)
            };
            if !answer.hold.is_zero() {
                tokio::time::sleep(answer.hold).await;
            }
            if let Some(body) = answer.body {
                let _ = answers.send(Message::Text(String::from_utf8_lossy(&body).into_owned()));
            }
        });
    }
    drop(answers);
    let _ = write.await;
}
