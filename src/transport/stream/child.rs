//! A child process as a connection (stdio targets): started per
//! connection, its stderr's tail kept for when it dies, and ended at the
//! run's end the way its protocol says.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::life::ChildLife;
use super::mux::{MuxConnection, Writer};
use super::target::{StreamAddr, StreamTarget};
use crate::transport::TransportError;

/// The id of LSP's `shutdown` request at the end of a run: far above the
/// run's ids, and exact as a JavaScript number (2^53 - 1), since many
/// language servers are written in JavaScript.
const SHUTDOWN_ID: u64 = (1 << 53) - 1;
/// How long a child has to answer `shutdown` and to exit after it.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);
/// Each wait instead, once the user asked the run to stop: a child that
/// answers nothing is killed within a second of Ctrl-C, not five.
const HURRIED_WAIT: Duration = Duration::from_millis(250);

/// Set when the user asked the run to stop (Ctrl-C, SIGTERM).
static HURRY: AtomicBool = AtomicBool::new(false);

/// From now on children are given a fraction of a second to end.
pub fn hurry_shutdowns() {
    HURRY.store(true, Ordering::Relaxed);
}

/// `full`, or less once the user is waiting for the run to stop.
fn wait(full: Duration) -> Duration {
    wait_when(full, HURRY.load(Ordering::Relaxed))
}

fn wait_when(full: Duration, hurried: bool) -> Duration {
    if hurried {
        full.min(HURRIED_WAIT)
    } else {
        full
    }
}

/// How a child process ended when the run was over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildEnd {
    /// It exited by itself after the protocol's shutdown (status 0).
    Clean,
    /// It exited by itself, but with a failing status.
    Failed,
    /// It had to be killed.
    Killed,
}

impl StreamTarget {
    /// Starts the command; the child is killed and reaped when dropped.
    /// With it, its life, which its connection keeps.
    pub(super) fn spawn(&self) -> Result<(tokio::process::Child, Arc<ChildLife>), TransportError> {
        let StreamAddr::Stdio { argv, .. } = &self.addr else {
            unreachable!("a command target")
        };
        let (program, args) = argv
            .split_first()
            .expect("the scenario checks the command is not empty");
        let spawned = std::time::Instant::now();
        tokio::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.connect_error(e))
            .map(|child| {
                let life = Arc::new(ChildLife::new(child.id().unwrap_or(0), spawned));
                if child.id().is_some() {
                    let mut children = self.children.lock().unwrap_or_else(|p| p.into_inner());
                    children.push(life.clone());
                }
                (child, life)
            })
    }
}

impl MuxConnection {
    /// For a closed stdio connection: how its child ended, with the tail of
    /// its stderr. Waits a moment for a child that is on its way out.
    pub async fn child_exit(&self) -> Option<String> {
        let mut child = self.child.borrow_mut().take()?;
        let how = match tokio::time::timeout(std::time::Duration::from_millis(500), child.wait()).await {
            Ok(Ok(status)) => format!("the child exited ({status})"),
            _ => "the child closed its output".to_string(),
        };
        // The last of stderr may still be on its way through the pipe.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let tail = String::from_utf8_lossy(&self.stderr_tail.borrow())
            .trim()
            .to_string();
        Some(if tail.is_empty() {
            how
        } else {
            format!("{how}; stderr ends with: {tail}")
        })
    }

    /// Ends a stdio child the way its protocol says: LSP's `shutdown`
    /// request and `exit` notification, then stdin closed (MCP's stdio
    /// shutdown is the close alone); SIGTERM and then SIGKILL for one that
    /// does not go. `None` for a connection without a child.
    pub async fn shut_down(&self) -> Option<ChildEnd> {
        let lsp = matches!(&*self.writer.lock().await, Writer::Headed(..));
        self.child.borrow().as_ref()?;
        if let Some(life) = self.life.get() {
            // A child not yet ready is given the call timeout to say so:
            // each spawn's ready time is measured, not cut short.
            if let Some(signal) = self.ready.get() {
                let _ = tokio::time::timeout(wait(signal.wait), life.until_ready()).await;
            }
            life.ending();
        }
        if lsp && !self.closed.get() {
            let shutdown = format!(r#"{{"jsonrpc":"2.0","id":{SHUTDOWN_ID},"method":"shutdown"}}"#);
            let answered = tokio::time::timeout(
                wait(SHUTDOWN_WAIT),
                self.exchange(shutdown.into(), SHUTDOWN_ID, 1),
            );
            if answered.await.is_ok_and(|reply| reply.is_ok()) {
                let exit = br#"{"jsonrpc":"2.0","method":"exit"}"#;
                let _ = self.writer.lock().await.send(exit).await;
            }
        }
        *self.writer.lock().await = Writer::Closed;
        let mut child = self.child.borrow_mut().take()?;
        if let Ok(Ok(status)) = tokio::time::timeout(wait(SHUTDOWN_WAIT), child.wait()).await {
            return Some(if status.success() {
                ChildEnd::Clean
            } else {
                ChildEnd::Failed
            });
        }
        #[cfg(unix)]
        if let Some(pid) = child.id() {
            // SAFETY: signalling a child this process started and has not reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            if tokio::time::timeout(wait(SHUTDOWN_WAIT / 2), child.wait())
                .await
                .is_ok()
            {
                return Some(ChildEnd::Killed);
            }
        }
        let _ = child.kill().await;
        Some(ChildEnd::Killed)
    }
}

/// Keeps the last kilobyte a child writes to stderr, for when it dies.
pub(super) async fn keep_stderr_tail(
    connection: std::rc::Weak<MuxConnection>,
    mut stderr: tokio::process::ChildStderr,
) {
    const TAIL: usize = 1024;
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(connection) = connection.upgrade() else {
            return;
        };
        let mut tail = connection.stderr_tail.borrow_mut();
        tail.extend_from_slice(&chunk[..n]);
        let excess = tail.len().saturating_sub(TAIL);
        tail.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_hurried_a_childs_three_waits_add_up_to_under_a_second() {
        // (The flag itself is left alone: it is the whole process's.)
        let waits = |hurried| wait_when(SHUTDOWN_WAIT, hurried) * 2 + wait_when(SHUTDOWN_WAIT / 2, hurried);
        assert_eq!(waits(false), Duration::from_secs(5));
        assert!(waits(true) < Duration::from_secs(1), "{:?}", waits(true));
        assert_eq!(
            wait_when(Duration::from_millis(100), true),
            Duration::from_millis(100)
        );
    }
}
