//! volley: load testing and benchmarking for JSON-RPC 2.0 endpoints.
//!
//! A call flows scenario → engine → transport → rpc judging → stats →
//! report; see `docs/ARCHITECTURE.md`.

pub mod check;
pub mod cli;
pub mod cmd;
pub mod compare;
pub mod endpoint;
pub mod engine;
pub mod equality;
pub mod feed;
pub mod init;
pub mod jwt;
pub mod merge;
pub mod metrics;
pub mod otlp;
pub mod output;
pub mod plan;
pub mod proc;
pub mod proxy;
pub mod redact;
pub mod report;
pub mod results;
pub mod rpc;
pub mod scenario;
pub mod serve;
pub mod stats;
pub mod sweep;
pub mod thresholds;
pub mod tls;
pub mod transport;
pub mod tui;
pub mod validate;
pub mod web;

pub use cmd::{execute, execute_into, RunError};
