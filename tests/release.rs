//! The release: the workflow builds the five targets, and its packing
//! script makes the archives `cargo binstall` looks for, each holding the
//! binary, README, licences, CHANGELOG, completions and man pages, with a
//! .sha256 that `sha256sum -c` accepts.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::bin::{temp_dir, text};
use yaml_rust2::YamlLoader;

const TARGETS: [&str; 5] = [
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "aarch64-apple-darwin",
    "x86_64-apple-darwin",
    "x86_64-pc-windows-msvc",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_workflow_builds_the_five_targets_on_a_version_tag() {
    let text = std::fs::read_to_string(root().join(".github/workflows/release.yml")).unwrap();
    let doc = &YamlLoader::load_from_str(&text).unwrap()[0];
    let tags: Vec<&str> = doc["on"]["push"]["tags"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert_eq!(tags, ["v*"]);
    let mut built: Vec<&str> = doc["jobs"]["build"]["strategy"]["matrix"]["include"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|row| row["target"].as_str())
        .collect();
    built.sort_unstable();
    let mut wanted = TARGETS.to_vec();
    wanted.sort_unstable();
    assert_eq!(built, wanted);
}

/// `[package.metadata.binstall]`'s templates for `target`: the archive's
/// file name and the binary's path inside it.
fn binstall(target: &str) -> (String, String) {
    let manifest: toml::Table = std::fs::read_to_string(root().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let meta = &manifest["package"]["metadata"]["binstall"];
    let chosen = meta["overrides"]
        .get(target)
        .and_then(|o| o.get("pkg-url"))
        .unwrap_or(&meta["pkg-url"]);
    let fill = |template: &str| {
        template
            .replace("{ repo }", "https://github.com/volley-rs/volley")
            .replace("{ name }", "volley")
            .replace("{ version }", env!("CARGO_PKG_VERSION"))
            .replace("{ target }", target)
            .replace("{ bin }", "volley")
            .replace(
                "{ binary-ext }",
                if target.contains("windows") { ".exe" } else { "" },
            )
    };
    let url = fill(chosen.as_str().unwrap());
    let prefix = format!(
        "https://github.com/volley-rs/volley/releases/download/v{}/",
        env!("CARGO_PKG_VERSION")
    );
    let file = url
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{url}"))
        .to_string();
    (file, fill(meta["bin-dir"].as_str().unwrap()))
}

fn tools_missing() -> Option<&'static str> {
    ["bash", "tar", "zip", "unzip", "sha256sum"]
        .into_iter()
        .find(|tool| Command::new(tool).arg("--help").output().is_err())
}

/// Runs the packing script with this build as the host's volley and a
/// small stand-in for each target's binary (packing a debug build five
/// times is slow, and the script never runs them); returns the output
/// directory.
fn pack(work: &Path) -> PathBuf {
    let bins = work.join("bins");
    for target in TARGETS {
        let dir = bins.join(format!("bin-{target}"));
        std::fs::create_dir_all(&dir).unwrap();
        let name = if target.contains("windows") {
            "volley.exe"
        } else {
            "volley"
        };
        std::fs::write(dir.join(name), format!("volley for {target}")).unwrap();
    }
    let out = work.join("dist");
    let output = Command::new("bash")
        .arg(".github/scripts/package-release.sh")
        .arg(env!("CARGO_PKG_VERSION"))
        .arg(env!("CARGO_BIN_EXE_volley"))
        .arg(&bins)
        .arg(&out)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    out
}

fn listing(archive: &Path) -> String {
    let output = if archive.extension().is_some_and(|e| e == "zip") {
        Command::new("unzip").arg("-Z1").arg(archive).output().unwrap()
    } else {
        Command::new("tar").arg("-tvzf").arg(archive).output().unwrap()
    };
    assert!(output.status.success(), "{}", text(&output.stderr));
    text(&output.stdout)
}

#[test]
fn each_archive_is_where_binstall_looks_and_holds_what_a_user_needs() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the archives are not packed here");
        return;
    }
    let work = temp_dir("release");
    let out = pack(&work);
    for target in TARGETS {
        let (file, bin) = binstall(target);
        let archive = out.join(&file);
        assert!(archive.is_file(), "{file} missing");
        let check = Command::new("sha256sum")
            .args(["-c", &format!("{file}.sha256")])
            .current_dir(&out)
            .output()
            .unwrap();
        assert!(check.status.success(), "{}", text(&check.stdout));
        let listed = listing(&archive);
        let dir = bin.split('/').next().unwrap();
        let mut wanted = vec![bin.clone()];
        for part in ["README.md", "CHANGELOG.md", "LICENSE-MIT", "LICENSE-APACHE"] {
            wanted.push(format!("{dir}/{part}"));
        }
        for part in [
            "volley.bash",
            "_volley",
            "volley.fish",
            "_volley.ps1",
            "volley.elv",
        ] {
            wanted.push(format!("{dir}/complete/{part}"));
        }
        for page in ["volley.1", "volley-run.1", "volley-completions.1"] {
            wanted.push(format!("{dir}/doc/{page}"));
        }
        for part in wanted {
            assert!(
                listed.lines().any(|l| l.ends_with(&part)),
                "{file} lacks {part}:\n{listed}"
            );
        }
        if !target.contains("windows") {
            let line = listed.lines().find(|l| l.ends_with(&bin)).unwrap();
            assert!(line.starts_with("-rwxr-xr-x"), "{bin} is not executable: {line}");
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
}

#[test]
fn the_script_refuses_a_binary_of_another_version() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the script is not run here");
        return;
    }
    let work = temp_dir("release-version");
    std::fs::create_dir_all(work.join("bins/bin-x86_64-unknown-linux-musl")).unwrap();
    let output = Command::new("bash")
        .args([
            ".github/scripts/package-release.sh",
            "9.9.9",
            env!("CARGO_BIN_EXE_volley"),
        ])
        .arg(work.join("bins"))
        .arg(work.join("dist"))
        .current_dir(root())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        text(&output.stderr).contains("not volley 9.9.9"),
        "{}",
        text(&output.stderr)
    );
    assert!(!work.join("dist").exists());
    std::fs::remove_dir_all(&work).unwrap();
}
