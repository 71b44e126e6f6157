//! Multiplexed JSON-RPC: newline-delimited JSON over TCP (`tcp://`) or a
//! Unix socket (`unix:///path`, the framing of geth's IPC), one message a
//! frame over WebSocket (`ws://`, `wss://`), or a child process's stdio
//! (NDJSON or LSP's `Content-Length`; see `child`). Many calls are in flight on one
//! connection; answers come in any order and are matched by id, and
//! messages that answer nothing (subscription notifications) are counted,
//! never taken for answers.
//!
//! `target.rs` resolves and connects, `mux.rs` is the connection callers
//! share, `readers.rs` reads what the server sends, `child.rs` runs a
//! stdio target's process and `life.rs` keeps what its life came to.

mod child;
mod life;
mod mux;
mod readers;
mod target;

pub use child::{hurry_shutdowns, ChildEnd};
pub use life::ChildLife;
pub use mux::MuxConnection;
pub use target::{StreamAddr, StreamTarget};
