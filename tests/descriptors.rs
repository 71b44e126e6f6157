//! A run that needs more open files than the process may have is refused
//! before anything is sent, naming the limit and how to raise it; below
//! the hard limit, the soft one is raised and the run goes.

mod common;

use std::process::Command;

use common::bin::{temp_dir, text};

/// `volley ARGS` under a soft limit of 128 open files and a hard one of
/// `hard`.
fn volley_limited(hard: u32, args: &str, out: &std::path::Path) -> std::process::Output {
    let volley = env!("CARGO_BIN_EXE_volley");
    let script = format!(
        "ulimit -Sn 128 && ulimit -Hn {hard} && exec {volley} {args} --no-tui -q --out {}",
        out.display()
    );
    Command::new("sh").args(["-c", &script]).output().unwrap()
}

#[test]
fn a_run_past_the_file_limit_is_refused_before_anything_is_sent() {
    let out = temp_dir("descriptors-refused");
    let output = volley_limited(
        256,
        "run --target builtin --method eth_chainId -c 300 -d 1s",
        &out,
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "300 connections need about 664 open files, but the limit is 256: raise it with `ulimit -n 664`"
        ),
        "{stderr}"
    );
    assert!(!out.join("summary.json").exists(), "nothing was run");
}

#[test]
fn the_soft_limit_is_raised_for_a_run_that_fits_under_the_hard_one() {
    // 150 connections need 364 open files: past the soft 128, within the
    // hard 512.
    let out = temp_dir("descriptors-raised");
    let output = volley_limited(
        512,
        "run --target builtin --method eth_chainId -c 150 --requests 300",
        &out,
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json = common::bin::summary_json(&out);
    assert_eq!(json["summary"]["total"]["ok"], 300);
}

#[test]
fn a_server_elsewhere_takes_one_open_file_a_connection() {
    // 150 connections to a server of its own process need 214 here: within
    // the hard 256 (the built-in server's ends would make it 364).
    let (mut server, url) = common::bin::serve(&[]);
    let out = temp_dir("descriptors-elsewhere");
    let output = volley_limited(
        256,
        &format!("run --target {url} --method eth_chainId -c 150 --requests 300"),
        &out,
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(common::bin::summary_json(&out)["summary"]["total"]["ok"], 300);
}
