//! What the published crate holds, and the version the binary names: the
//! package ships the source, README, licences and CHANGELOG, never a run's
//! results, a build's output or the fuzzer's corpora.

mod common;

use std::process::Command;

use common::bin::{text, volley};

/// `cargo package --list`, offline: under `cargo test` every dependency is
/// already downloaded, so listing needs no network.
fn package_list() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo package --list failed: {}",
        text(&output.stderr)
    );
    text(&output.stdout).lines().map(str::to_string).collect()
}

/// Whether `path` may ship: under a directory the crate needs, or one of
/// the root files it names. Anything else (results/, target/, fuzz/,
/// deploy/, tests/, .github/, a stray file at the root) is a mistake.
fn may_ship(path: &str) -> bool {
    const DIRS: &[&str] = &["src/", "scenarios/", "docs/"];
    const FILES: &[&str] = &[
        "build.rs",
        "benches/hot_path.rs",
        "README.md",
        "CHANGELOG.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "Cargo.toml",
        "Cargo.toml.orig",
        "Cargo.lock",
        ".cargo_vcs_info.json",
    ];
    DIRS.iter().any(|dir| path.starts_with(dir)) || FILES.contains(&path)
}

#[test]
fn the_package_holds_the_source_readme_licences_and_changelog_and_no_output() {
    let list = package_list();
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "CHANGELOG.md",
        "LICENSE-MIT",
        "LICENSE-APACHE",
        "build.rs",
        "src/main.rs",
        "src/lib.rs",
        "src/cli.rs",
        "scenarios/demo.toml",
    ] {
        assert!(
            list.iter().any(|p| p == needed),
            "the package lacks {needed}: {list:#?}"
        );
    }
    let strays: Vec<&String> = list.iter().filter(|p| !may_ship(p)).collect();
    assert!(
        strays.is_empty(),
        "the package ships what it should not: {strays:#?}"
    );
    // What the scenarios read ships with them.
    assert!(
        list.iter().any(|p| p == "scenarios/data/captured.jsonl"),
        "{list:#?}"
    );
}

#[test]
fn the_may_ship_rule_refuses_output_and_corpora() {
    for stray in [
        "results/baseline/summary.json",
        "target/release/volley",
        "fuzz/corpus/judge/1",
        "fuzz/artifacts/judge/crash-1",
        "deploy/kubernetes/shards-job.yaml",
        "tests/cli.rs",
        ".github/workflows/ci.yml",
        "mutants.out/outcomes.json",
        "benches/peers.sh",
    ] {
        assert!(!may_ship(stray), "{stray}");
    }
}

/// `volley --version` names the package's version and the commit it was
/// built from: in a checkout with git, HEAD's short hash.
#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let output = volley().arg("--version").output().unwrap();
    assert!(output.status.success());
    let shown = text(&output.stdout);
    let prefix = format!("volley {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = shown
        .trim_end()
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `{prefix}...)`: {shown}"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let head = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output();
    match head {
        Ok(head) if root.join(".git").exists() && head.status.success() => {
            assert_eq!(commit, text(&head.stdout).trim(), "{shown}");
        }
        _ => {
            println!("no git checkout here: the commit's name is not checked against HEAD");
            assert!(!commit.is_empty(), "{shown}");
        }
    }
}
