//! The process around a command: its exit codes, the signals that stop it,
//! and the open-files limit its connections need.

use std::time::SystemTime;

use anyhow::Context;

use super::execute::timestamp;

/// Exit codes of a run stopped by a signal, as shells report them.
pub const EXIT_SIGINT: u8 = 130;
pub const EXIT_SIGTERM: u8 = 143;
/// The run completed but its files went elsewhere (see the error).
pub const EXIT_RESULTS_ELSEWHERE: u8 = 3;
/// The run completed, but a check asked for failed (`--require-valid`).
pub const EXIT_FAILED_CHECK: u8 = 2;
/// A connection task panicked (a bug in volley); the figures are complete otherwise.
pub const EXIT_BUG: u8 = 70;

/// Open files each connection to `target` takes in this process: its
/// socket, and the built-in server's end of it too when that runs here; a
/// stdio child's three pipes.
pub fn descriptors_each(target: &crate::scenario::TargetSpec) -> u64 {
    match target {
        crate::scenario::TargetSpec::Builtin => 2,
        crate::scenario::TargetSpec::Command { .. } => 3,
        _ => 1,
    }
}

/// Makes room for `connections` connections of `each` open files under the
/// open-files limit, raising the soft limit up to the hard one when needed.
pub fn ensure_descriptors(connections: usize, each: u64) -> anyhow::Result<()> {
    // A few for the runtime, the listener of an in-process server, files.
    let needed = (connections as u64).saturating_mul(each).saturating_add(64);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= needed {
        return Ok(());
    }
    let raised = libc::rlimit {
        rlim_cur: needed.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let now = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        raised.rlim_cur
    } else {
        // Refused (macOS caps the soft limit below an infinite hard one, a
        // sandbox may forbid it): what holds is the limit as it was.
        limit.rlim_cur
    };
    if now < needed {
        anyhow::bail!(
            "{connections} connections need about {needed} open files, but the limit is {now}: raise it with `ulimit -n {needed}`"
        );
    }
    Ok(())
}

/// Raises the soft open-files limit by `extra` as far as the hard one
/// allows, quietly: room for the connections the live endpoints may hold,
/// beside the run's own that `ensure_descriptors` made room for. Short of
/// it, an endpoint gives an idle connection's descriptor back when an
/// accept fails.
pub fn make_room_for(extra: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: limit.rlim_cur.saturating_add(extra).min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    if raised.rlim_cur > limit.rlim_cur {
        // SAFETY: setrlimit reads the struct it is given. Refused, the
        // limit stays as it was, which is no worse.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
}

/// A directory made new in the temporary directory, named `prefix` and
/// random letters, readable by this user alone (on Unix), and kept. The
/// temporary directory is shared: a name there that others can guess could
/// be theirs already, a link to a file or directory of their choosing, and
/// writing through it would write there. A directory made new is ours.
pub fn private_temp_dir(prefix: &str) -> std::io::Result<std::path::PathBuf> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    Ok(builder.tempdir()?.keep())
}

/// A runtime for a command's main thread, and its signals already caught.
pub fn runtime_with_signals() -> anyhow::Result<(tokio::runtime::Runtime, Signals)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let signals = {
        let _runtime = runtime.enter();
        Signals::listen().context("cannot listen for signals")?
    };
    Ok((runtime, signals))
}

/// Ctrl-C and SIGTERM, caught from the moment `listen` returns: a signal
/// sent just after a readiness line is handled, not fatal.
#[cfg(unix)]
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl Signals {
    /// Must be called inside a tokio runtime.
    pub fn listen() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    pub async fn recv(&mut self) -> u8 {
        tokio::select! {
            _ = self.interrupt.recv() => EXIT_SIGINT,
            _ = self.terminate.recv() => EXIT_SIGTERM,
        }
    }
}

#[cfg(not(unix))]
pub struct Signals;

#[cfg(not(unix))]
impl Signals {
    pub fn listen() -> std::io::Result<Signals> {
        Ok(Signals)
    }

    pub async fn recv(&mut self) -> u8 {
        let _ = tokio::signal::ctrl_c().await;
        EXIT_SIGINT
    }
}

/// The run's start as a directory name: `20261130T234501Z`.
pub fn dir_stamp() -> String {
    timestamp(SystemTime::now())
        .chars()
        .filter(|c| *c != ':' && *c != '-')
        .collect()
}
