//! What volley writes into the shared temporary directory (`$TMPDIR`):
//! the CA of `volley serve --tls`, and the results of a run whose own
//! directory could not be written. Another user can plant a link at a name
//! there that volley would use; volley makes a new private directory of its
//! own instead, and never writes through what was planted.

#![cfg(unix)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use common::bin::{summary_json, temp_dir, text, volley, wait_or_kill};

/// A scratch `$TMPDIR` for one test, and beside it a file or directory
/// that planted links point to.
fn scratch(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    (tmp, dir.join("victim"))
}

/// A directory volley made for itself: new, a real directory (no link),
/// inside `tmp`, and readable by this user alone.
fn assert_private_and_new(made: &Path, tmp: &Path) {
    assert_eq!(made.parent(), Some(tmp), "{}", made.display());
    let meta = std::fs::symlink_metadata(made).unwrap();
    assert!(meta.is_dir(), "{}: not a directory of its own", made.display());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "{}", made.display());
}

/// Kills `volley serve` when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_serve_ca_goes_to_a_new_private_directory_not_through_a_planted_link() {
    let (tmp, victim) = scratch("serve-ca");
    std::fs::write(&victim, "not yours to overwrite\n").unwrap();
    // Where volley used to write it, whoever made the link.
    symlink(&victim, tmp.join("volley-serve-ca.pem")).unwrap();
    let mut child = Killed(
        volley()
            .env("TMPDIR", &tmp)
            .args(["serve", "--listen", "127.0.0.1:0", "--threads", "1", "--tls"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let listening = lines.next().expect("a first line").unwrap();
    let url = (listening.split_whitespace())
        .find(|w| w.starts_with("https://"))
        .unwrap_or_else(|| panic!("no URL in {listening}"))
        .to_string();
    let said = lines.next().expect("a line naming the CA").unwrap();
    let ca = said
        .split_once("trust it with --cacert ")
        .map(|(_, path)| PathBuf::from(path.trim()))
        .unwrap_or_else(|| panic!("no CA path in {said}"));

    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "not yours to overwrite\n",
        "the planted link was followed"
    );
    assert_eq!(ca.file_name().unwrap(), "ca.pem");
    assert_private_and_new(ca.parent().unwrap(), &tmp);
    assert!(!std::fs::symlink_metadata(&ca).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&ca)
        .unwrap()
        .contains("BEGIN CERTIFICATE"));

    // The path said is the one to trust: a run with it reaches the server.
    let out = temp_dir("serve-ca-run");
    let run = volley()
        .args([
            "run",
            "--target",
            &url,
            "--method",
            "eth_chainId",
            "-n",
            "5",
            "--quiet",
        ])
        .arg("--cacert")
        .arg(&ca)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_or_kill(run, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(summary_json(&out)["summary"]["total"]["ok"], 5);
}

/// The name volley used to give the results it could not write where
/// asked: `volley-STAMP-PID` in `$TMPDIR`, STAMP the UTC second.
fn old_fallback_name(at: SystemTime, pid: u32) -> String {
    let stamp: String = (humantime::format_rfc3339_seconds(at).to_string().chars())
        .filter(|c| *c != ':' && *c != '-')
        .collect();
    format!("volley-{stamp}-{pid}")
}

#[test]
fn results_written_elsewhere_go_to_a_new_private_directory_not_through_a_planted_link() {
    let (tmp, victim) = scratch("elsewhere");
    std::fs::create_dir_all(&victim).unwrap();
    let out = tmp.parent().unwrap().join("results");
    let child = volley()
        .env("TMPDIR", &tmp)
        .args([
            "run",
            "scenarios/demo.toml",
            "-d",
            "2s",
            "--warmup",
            "0s",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The old name held the run's second and process id: a link for each
    // second the run can end in (the hang guard's 60 s and more).
    let started = SystemTime::now();
    for second in 0..120 {
        let at = started + Duration::from_secs(second);
        symlink(&victim, tmp.join(old_fallback_name(at, child.id()))).unwrap();
    }
    // Once the run has claimed its directory, a file takes its place.
    while !out.join("summary.json").exists() {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::write(&out, "not a directory").unwrap();
    let output = wait_or_kill(child, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    let elsewhere = stderr
        .lines()
        .find_map(|l| l.strip_prefix("the results were written to "))
        .and_then(|l| l.strip_suffix(" instead"))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no new place named in {stderr}"));

    let planted: Vec<_> = std::fs::read_dir(&victim).unwrap().collect();
    assert!(planted.is_empty(), "a planted link was followed: {planted:?}");
    assert_private_and_new(&elsewhere, &tmp);
    assert!(summary_json(&elsewhere)["summary"]["requests"].as_u64().unwrap() > 0);
}
