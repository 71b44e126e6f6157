//! volley: load testing and benchmarking for JSON-RPC 2.0 endpoints.
//!
//! A call flows scenario → engine → transport → rpc judging → stats →
//! report; see `docs/ARCHITECTURE.md`.

pub mod cli;
pub mod engine;
pub mod report;
pub mod rpc;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod stats;
pub mod transport;

pub use run::{execute, run_command, serve_command, RunError};
