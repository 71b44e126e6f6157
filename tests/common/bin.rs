//! The real binary, as a user runs it: the command, a scratch directory, a
//! `volley serve` on a free port, and a guard against a run that hangs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// `volley`, run from the project's root (where `scenarios/` is).
pub fn volley() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_volley"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// A path for a test's files under Cargo's own temporary directory for
/// tests (in `target/`, not `/tmp`), not yet made.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("volley-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn summary_json(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// Starts `volley serve` on a free port with `args`; returns the child and
/// its URL.
pub fn serve(args: &[&str]) -> (Child, String) {
    let (child, first) = serve_saying(args);
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .expect("the address is printed")
        .to_string();
    (child, url)
}

/// A hang guard, not a timing assertion: a broken build hangs forever.
pub fn wait_or_kill(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("volley did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `volley` with `args`, its output captured, under the hang guard.
pub fn run_guarded(args: &[&str], out: &Path) -> Output {
    let child = volley()
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_or_kill(child, Duration::from_secs(60))
}

/// `volley serve` on a free loopback port, and the first line it printed.
pub fn serve_saying(args: &[&str]) -> (Child, String) {
    let mut child = volley()
        .args(["serve", "--listen", "127.0.0.1:0", "--threads", "1"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    (child, first)
}

/// Kills the run when a test fails before it ended: a run left behind
/// would go on against servers gone with the test.
pub struct Guard(pub Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The addresses a run with `--metrics-listen` and `--web-listen` says it
/// serves at: (metrics, page), read from its stderr, which a thread goes on
/// draining.
pub fn live_addresses(stderr: ChildStderr) -> (String, String) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let (mut metrics, mut page) = (None, None);
    while metrics.is_none() || page.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the addresses are said");
        let address = |prefix: &str| {
            let rest = line.strip_prefix(prefix)?;
            Some(
                rest.trim_end_matches('/')
                    .trim_end_matches("/metrics")
                    .to_string(),
            )
        };
        metrics = metrics.or(address("volley: metrics at http://"));
        page = page.or(address("volley: live page at http://"));
    }
    (metrics.unwrap(), page.unwrap())
}
