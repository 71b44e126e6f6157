//! The commands, one room each. Each turns its parsed flags (`cli`) into
//! work for the layers below and says what came of it; `main.rs` only
//! parses and dispatches.

pub mod call;
pub mod check;
pub mod compare;
pub mod completions;
mod execute;
pub mod init;
mod live;
pub mod man;
pub mod merge;
mod process;
pub mod record;
pub mod report;
mod rounds;
pub mod run;
pub mod serve;
pub mod sweep;
mod targets;
pub mod validate;

pub use execute::{execute, execute_into, RunError};
