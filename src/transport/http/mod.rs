//! JSON-RPC over HTTP/1.1: one POST per request, keep-alive, one call in
//! flight per connection, or several pipelined (`pipeline.rs`).
//!
//! Written by hand rather than with hyper's client: a load generator's
//! client does one thing, and doing it directly costs less CPU per call: a
//! request head serialized once, one write per request, buffers reused,
//! the answer parsed in place with `httparse` (measurements in
//! docs/performance-history.md). `framing.rs` holds the protocol's rules
//! as pure functions; `connection.rs` the reading and writing;
//! `target.rs` what is resolved once before the run.

mod answers;
mod connection;
mod framing;
mod pipeline;
mod target;

pub use connection::HttpConnection;
pub use pipeline::PipelinedConnection;
pub use target::HttpTarget;

/// Answers larger than this are cut off and counted as `io`.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
