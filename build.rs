//! Names the commit volley was built from, for `volley --version`.
//!
//! Where the commit comes from, first that answers:
//! 1. `git rev-parse --short HEAD`, when the package root has a `.git`
//!    (a directory, or a file in a git worktree);
//! 2. the `VOLLEY_COMMIT` environment variable (a container build, which
//!    has no `.git`);
//! 3. `.cargo_vcs_info.json`, which `cargo package` writes into a crate
//!    (so `cargo install volley` names the commit it was published from);
//! 4. "unknown".
//!
//! Only the package root's own `.git` counts: `cargo package` builds its
//! tarball inside `target/package/`, where git would otherwise find the
//! repository above and name a commit the tarball may not hold.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A commit name is at most a full SHA-256 object name; anything longer,
/// or with other characters, is not one.
const MAX_COMMIT_LEN: usize = 64;

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into()));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=VOLLEY_COMMIT");
    let commit = from_git(&root)
        .or_else(from_env)
        .or_else(|| from_vcs_info(&root))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=VOLLEY_COMMIT={commit}");
}

/// The short hash of HEAD, and the files to watch so that a commit or a
/// checkout builds again. `None` without a `.git` or without git.
fn from_git(root: &Path) -> Option<String> {
    if !root.join(".git").exists() {
        return None;
    }
    let commit = clean(&git(root, &["rev-parse", "--short", "HEAD"])?)?;
    // HEAD names the branch; the branch's ref (loose, or in packed-refs)
    // moves on a commit; logs/HEAD moves on every commit, checkout and
    // reset. In a worktree these live in two directories, which
    // `--git-path` resolves.
    let mut watched = vec![
        "HEAD".to_string(),
        "logs/HEAD".to_string(),
        "packed-refs".to_string(),
    ];
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(root, &["rev-parse", "--git-path", &name]) {
            let path = root.join(path);
            // A path that does not exist would make cargo run this script
            // on every build.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(text.trim().to_string())
}

fn from_env() -> Option<String> {
    clean(&std::env::var("VOLLEY_COMMIT").ok()?)
}

/// The `"sha1"` of the `git` object in `.cargo_vcs_info.json`, shortened as
/// git shortens it. Read by hand: a build script with no dependencies
/// builds everywhere the crate does.
fn from_vcs_info(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join(".cargo_vcs_info.json")).ok()?;
    let after = text.split_once("\"sha1\"")?.1;
    let value = after.split_once('"')?.1.split_once('"')?.0;
    clean(value.get(..7)?)
}

/// A commit name as it may be shown: hex digits and letters, `-`, `.`, `_`
/// (a tag or `v0.2.0-3-gabc1234`), never empty, never long. Anything else
/// is dropped rather than printed.
fn clean(text: &str) -> Option<String> {
    let text = text.trim();
    let fits = !text.is_empty()
        && text.len() <= MAX_COMMIT_LEN
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    fits.then(|| text.to_string())
}
