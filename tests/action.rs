//! The repository's GitHub Action (`action.yml`): a composite action whose
//! every `${{ inputs.X }}` is declared and every output names a step that
//! writes it; its scripts, run here as the runner would: the install checks
//! the archive's sha256, the run and the comparison say how they went in
//! their outputs.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::bin::{temp_dir, text};
use yaml_rust2::{Yaml, YamlLoader};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> (String, Yaml) {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    (text, doc)
}

/// Every `${{ NAMESPACE.NAME` in `text`: the names after the namespace.
fn referenced(text: &str, namespace: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("${{") {
        let inside = &text[at + 3..];
        let inside = &inside[..inside.find("}}").unwrap_or(inside.len())];
        for part in inside.split(|c: char| !(c.is_alphanumeric() || "._-".contains(c))) {
            if let Some(name) = part.strip_prefix(&format!("{namespace}.")) {
                names.insert(name.split('.').next().unwrap().to_string());
            }
        }
    }
    names
}

fn keys(yaml: &Yaml) -> BTreeSet<String> {
    yaml.as_hash()
        .map(|h| h.keys().filter_map(|k| k.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// What each step's script writes to `$GITHUB_OUTPUT`: `echo "NAME=`.
fn outputs_written(doc: &Yaml) -> BTreeMap<String, String> {
    let mut written = BTreeMap::new();
    for step in doc["runs"]["steps"].as_vec().unwrap() {
        let (Some(id), Some(run)) = (step["id"].as_str(), step["run"].as_str()) else {
            continue;
        };
        let script = match run.split('"').find(|p| p.contains(".github/action/")) {
            Some(path) => std::fs::read_to_string(root().join(path.trim_start_matches("$ACTION_PATH/")))
                .unwrap_or_else(|_| panic!("step {id} runs {path}, which does not exist")),
            None => run.to_string(),
        };
        written.insert(id.to_string(), script);
    }
    written
}

#[test]
fn the_action_is_composite_and_every_name_it_uses_is_declared() {
    let (text, doc) = read("action.yml");
    assert_eq!(doc["runs"]["using"].as_str(), Some("composite"));
    let inputs = keys(&doc["inputs"]);
    for input in &inputs {
        assert!(
            doc["inputs"][input.as_str()]["description"].as_str().is_some(),
            "{input}"
        );
    }
    let used = referenced(&text, "inputs");
    assert!(used.len() >= 8, "{used:?}");
    for name in &used {
        assert!(
            inputs.contains(name),
            "${{{{ inputs.{name} }}}} is not a declared input"
        );
    }
    for name in &inputs {
        assert!(used.contains(name), "input {name} is declared and never used");
    }
    let ids: BTreeSet<String> = doc["runs"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect();
    for step in referenced(&text, "steps") {
        assert!(ids.contains(&step), "steps.{step} names no step");
    }
    let scripts = outputs_written(&doc);
    for (name, output) in doc["outputs"].as_hash().unwrap() {
        let value = output["value"].as_str().unwrap();
        let (step, wanted) = value
            .trim_start_matches("${{ steps.")
            .trim_end_matches(" }}")
            .split_once(".outputs.")
            .unwrap_or_else(|| panic!("{name:?}: {value} is not a step's output"));
        assert!(
            ids.contains(step),
            "output {name:?} names step {step}, which does not exist"
        );
        let script = &scripts[step];
        assert!(
            script.contains(&format!("echo \"{wanted}=")),
            "step {step} never writes {wanted}"
        );
    }
}

/// Every variable a step's script reads is in that step's `env`, but for
/// GitHub's own (`GITHUB_*`, `RUNNER_*`), bash's, and those read with a
/// default of their own (`${VOLLEY_RELEASES:-https://…}`): the run step
/// once left out `BASELINE`, and its check of `baseline` beside
/// `baseline-target` could never fire.
#[test]
fn every_variable_a_script_reads_is_given_by_its_step() {
    let (_, doc) = read("action.yml");
    let scripts = outputs_written(&doc);
    for step in doc["runs"]["steps"].as_vec().unwrap() {
        let Some(id) = step["id"].as_str() else { continue };
        let given = keys(&step["env"]);
        let script = &scripts[id];
        let mut read = BTreeSet::new();
        for (at, _) in script.match_indices('$') {
            let rest = script[at + 1..].trim_start_matches('{');
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let defaulted = rest[name.len()..].starts_with(":-") && !rest[name.len()..].starts_with(":-}");
            if name.len() > 1 && !defaulted {
                read.insert(name);
            }
        }
        for name in read {
            let github = ["GITHUB_", "RUNNER_"].iter().any(|p| name.starts_with(p));
            if github || name == "PIPESTATUS" {
                continue;
            }
            assert!(
                given.contains(&name),
                "step {id}'s script reads ${name}, which its env never gives"
            );
        }
    }
}

/// The action installs the release it was published with, by default.
#[test]
fn the_action_installs_this_version_by_default() {
    let (_, doc) = read("action.yml");
    assert_eq!(
        doc["inputs"]["version"]["default"].as_str(),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn perf_yml_uses_the_action_built_from_source_with_declared_inputs() {
    let (_, action) = read("action.yml");
    let (_, perf) = read(".github/workflows/perf.yml");
    let step = perf["jobs"]["perf"]["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .expect("perf.yml uses ./")
        .clone();
    assert_eq!(step["with"]["build-from-source"].as_str(), Some("true"));
    let declared = keys(&action["inputs"]);
    for given in keys(&step["with"]) {
        assert!(
            declared.contains(&given),
            "perf.yml gives {given}, which action.yml does not declare"
        );
    }
}

/// A runner's environment for a script: its output and path files, its
/// temporary directory.
struct Runner {
    dir: PathBuf,
}

impl Runner {
    fn new(name: &str) -> Runner {
        let dir = temp_dir(name);
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        Runner { dir }
    }

    fn script(&self, name: &str, env: &[(&str, &str)]) -> Output {
        let mut command = Command::new("bash");
        command
            .arg(root().join(".github/action").join(name))
            .current_dir(root())
            .env("GITHUB_OUTPUT", self.dir.join("output"))
            .env("GITHUB_PATH", self.dir.join("path"))
            .env("GITHUB_STEP_SUMMARY", self.dir.join("summary.md"))
            .env("RUNNER_TEMP", self.dir.join("tmp"))
            .env("ACTION_PATH", root());
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    }

    fn outputs(&self) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.dir.join("output")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

fn tools_missing() -> Option<&'static str> {
    ["bash", "tar", "zip", "sha256sum", "curl", "xargs"]
        .into_iter()
        .find(|tool| Command::new(tool).arg("--version").output().is_err())
}

/// A release directory as GitHub serves it (`download/vX.Y.Z/`), packed by
/// the release's own script; the Linux x86_64 binary a stand-in script that
/// says its version.
fn releases(runner: &Runner) -> PathBuf {
    let version = env!("CARGO_PKG_VERSION");
    let bins = runner.dir.join("bins/bin-x86_64-unknown-linux-musl");
    std::fs::create_dir_all(&bins).unwrap();
    std::fs::write(
        bins.join("volley"),
        format!("#!/bin/sh\necho 'volley {version} (commit stand-in)'\n"),
    )
    .unwrap();
    let download = runner.dir.join(format!("releases/download/v{version}"));
    let packed = Command::new("bash")
        .arg(".github/scripts/package-release.sh")
        .arg(version)
        .arg(env!("CARGO_BIN_EXE_volley"))
        .arg(runner.dir.join("bins"))
        .arg(&download)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(packed.status.success(), "{}", text(&packed.stderr));
    runner.dir.join("releases")
}

#[test]
fn install_checks_the_sha256_and_puts_the_release_on_the_path() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the install script is not run here");
        return;
    }
    let runner = Runner::new("action-install");
    let releases = format!("file://{}", releases(&runner).display());
    let linux = [
        ("RUNNER_OS", "Linux"),
        ("RUNNER_ARCH", "X64"),
        ("VOLLEY_RELEASES", &releases),
    ];
    fn with<'a>(linux: &[(&'a str, &'a str)], version: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut env = linux.to_vec();
        env.push(("VOLLEY_VERSION", version));
        env
    }
    let installed = runner.script(
        "install.sh",
        &with(&linux, &format!("v{}", env!("CARGO_PKG_VERSION"))),
    );
    assert!(installed.status.success(), "{}", text(&installed.stderr));
    assert!(
        text(&installed.stdout).contains("(commit stand-in)"),
        "the installed binary ran"
    );
    let bin = runner.outputs()["bin"].clone();
    assert!(bin.ends_with("-x86_64-unknown-linux-musl/volley"), "{bin}");
    let on_path = std::fs::read_to_string(runner.dir.join("path")).unwrap();
    assert_eq!(
        on_path.trim(),
        Path::new(&bin).parent().unwrap().to_str().unwrap()
    );

    // An archive that does not match its .sha256 is not installed.
    let archive = runner.dir.join(format!(
        "releases/download/v{0}/volley-v{0}-x86_64-unknown-linux-musl.tar.gz",
        env!("CARGO_PKG_VERSION")
    ));
    let mut bytes = std::fs::read(&archive).unwrap();
    bytes.push(0);
    std::fs::write(&archive, bytes).unwrap();
    std::fs::remove_file(runner.dir.join("output")).unwrap();
    let tampered = runner.script("install.sh", &with(&linux, env!("CARGO_PKG_VERSION")));
    assert!(!tampered.status.success());
    assert!(
        text(&tampered.stderr).contains("does not match its sha256"),
        "{}",
        text(&tampered.stderr)
    );
    assert!(!runner.outputs().contains_key("bin"));

    let bad = runner.script("install.sh", &with(&linux, "1.0; rm -rf /"));
    assert!(
        text(&bad.stderr).contains("version: '1.0; rm -rf /' is not a version"),
        "{}",
        text(&bad.stderr)
    );
    let missing = runner.script("install.sh", &with(&linux, "0.0.1"));
    assert!(
        text(&missing.stderr).contains("cannot download"),
        "{}",
        text(&missing.stderr)
    );
    let riscv = runner.script(
        "install.sh",
        &[("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "RISCV64")],
    );
    assert!(
        text(&riscv.stderr).contains("set build-from-source: true"),
        "{}",
        text(&riscv.stderr)
    );
    std::fs::remove_dir_all(&runner.dir).unwrap();
}

/// The run step against the built-in server: thresholds one a line, args
/// with quotes; the step passes whatever the run's exit, and says it.
#[test]
fn run_writes_the_results_junit_and_summary_and_says_how_it_went() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the run script is not run here");
        return;
    }
    let runner = Runner::new("action-run");
    let out = runner.dir.join("results");
    let run = |thresholds: &str, out: &Path| {
        runner.script(
            "run.sh",
            &[
                ("VOLLEY", env!("CARGO_BIN_EXE_volley")),
                ("TARGET", "builtin"),
                ("THRESHOLDS", thresholds),
                ("ARGS", "--method 'eth_chainId' -n 40 --concurrency \"4\""),
                ("OUT_DIR", out.to_str().unwrap()),
            ],
        )
    };
    let passed = run("  p99 < 5s\n\nerror_rate == 0\n", &out);
    assert!(passed.status.success(), "{}", text(&passed.stderr));
    let outputs = runner.outputs();
    assert_eq!(outputs["exit-code"], "0", "{}", text(&passed.stderr));
    let verdict = if Command::new("jq").arg("--version").output().is_ok() {
        "valid"
    } else {
        "unknown"
    };
    assert_eq!(outputs["verdict"], verdict);
    assert_eq!(outputs["result-dir"], out.join("run").to_str().unwrap());
    assert!(out.join("run/summary.json").is_file());
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(
        junit.contains("p99 &lt; 5s") && junit.contains("error_rate == 0"),
        "{junit}"
    );
    assert!(std::fs::read_to_string(out.join("summary.md"))
        .unwrap()
        .contains("### volley"));
    let summary = std::fs::read_to_string(runner.dir.join("summary.md")).unwrap();
    assert!(summary.contains("### volley"), "the step summary: {summary}");

    // Compared with itself, a run too short to judge is not said to have
    // held: whether it regressed is unknown, never `false`.
    std::fs::remove_file(runner.dir.join("output")).unwrap();
    let run_dir = out.join("run");
    let compared = runner.script(
        "compare.sh",
        &[
            ("VOLLEY", env!("CARGO_BIN_EXE_volley")),
            ("BASELINE", run_dir.to_str().unwrap()),
            ("CURRENT", run_dir.to_str().unwrap()),
            ("OUT_DIR", out.to_str().unwrap()),
        ],
    );
    assert!(compared.status.success(), "{}", text(&compared.stderr));
    let outputs = runner.outputs();
    let said = text(&compared.stdout);
    assert_eq!(outputs["regressed"], "unknown", "{said}");
    assert_eq!(outputs["result"], "inconclusive", "{said}");
    assert_eq!(outputs["exit-code"], "2", "{said}");
    assert!(out.join("compare-junit.xml").is_file());

    std::fs::remove_file(runner.dir.join("output")).unwrap();
    let failed = run("calls > 1000000", &runner.dir.join("failing"));
    assert!(
        failed.status.success(),
        "the step itself passes: {}",
        text(&failed.stderr)
    );
    assert_eq!(runner.outputs()["exit-code"], "2");
    std::fs::remove_dir_all(&runner.dir).unwrap();
}

/// With `baseline-target`, the run step runs A/B rounds: the baseline's
/// server against the candidate's, round by round.
#[test]
fn run_with_a_baseline_target_runs_ab_rounds() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the run script is not run here");
        return;
    }
    let runner = Runner::new("action-ab");
    let out = runner.dir.join("results");
    let ran = runner.script(
        "run.sh",
        &[
            ("VOLLEY", env!("CARGO_BIN_EXE_volley")),
            ("TARGET", "builtin"),
            ("BASELINE_TARGET", "builtin"),
            ("ROUNDS", "2"),
            ("ARGS", "--method eth_chainId --rate 50 -d 2s"),
            ("OUT_DIR", out.to_str().unwrap()),
        ],
    );
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    let outputs = runner.outputs();
    assert_eq!(outputs["exit-code"], "0", "{}", text(&ran.stderr));
    if Command::new("jq").arg("--version").output().is_ok() {
        assert_eq!(outputs["verdict"], "valid");
    }
    let summary = std::fs::read_to_string(out.join("run/summary.json")).unwrap();
    assert!(summary.contains("\"order\": \"AB BA\""), "{summary}");
    assert!(std::fs::read_to_string(out.join("summary.md"))
        .unwrap()
        .contains("### volley A/B rounds"));
    // Without the candidate's endpoint, the step says so.
    std::fs::remove_file(runner.dir.join("output")).unwrap();
    let alone = runner.script(
        "run.sh",
        &[
            ("VOLLEY", env!("CARGO_BIN_EXE_volley")),
            ("BASELINE_TARGET", "builtin"),
            ("OUT_DIR", out.to_str().unwrap()),
        ],
    );
    assert!(text(&alone.stderr).contains("baseline-target needs target"));
    assert_eq!(runner.outputs()["exit-code"], "1");
    std::fs::remove_dir_all(&runner.dir).unwrap();
}

/// The run step passes `--require-valid` once, whether `args` has it or not:
/// a gate never passes figures that cannot be trusted.
#[test]
fn run_requires_a_valid_verdict_once() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the run script is not run here");
        return;
    }
    let runner = Runner::new("action-require-valid");
    let fake = runner.dir.join("fake-volley");
    let said = runner.dir.join("said");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n", said.display()),
    )
    .unwrap();
    let mut mode = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&fake, mode).unwrap();
    for args in ["--method eth_chainId", "--require-valid --method eth_chainId"] {
        let out = runner.dir.join("out");
        let ran = runner.script(
            "run.sh",
            &[
                ("VOLLEY", fake.to_str().unwrap()),
                ("TARGET", "builtin"),
                ("ARGS", args),
                ("OUT_DIR", out.to_str().unwrap()),
            ],
        );
        assert!(ran.status.success(), "{}", text(&ran.stderr));
        let words = std::fs::read_to_string(&said).unwrap();
        assert_eq!(
            words.lines().filter(|w| *w == "--require-valid").count(),
            1,
            "{args}: {words}"
        );
    }
    std::fs::remove_dir_all(&runner.dir).unwrap();
}

/// A stand-in for volley that prints `line` as compare's last and exits
/// with `code`.
fn fake_compare(dir: &Path, line: &str, code: u8) -> PathBuf {
    let path = dir.join(format!("fake-{code}-{}", line.len()));
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho \"args: $*\"\necho '{line}'\nexit {code}\n"),
    )
    .unwrap();
    let mut mode = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
    std::fs::set_permissions(&path, mode).unwrap();
    path
}

#[test]
fn compare_says_whether_the_run_regressed_and_never_guesses() {
    if let Some(tool) = tools_missing() {
        println!("{tool} is not installed: the compare script is not run here");
        return;
    }
    let runner = Runner::new("action-compare");
    let out = runner.dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let cases = [
        (
            "result: REGRESSION (a change past its limit)",
            2,
            "regression",
            "true",
        ),
        ("result: no regression", 0, "no-regression", "false"),
        (
            "result: INCONCLUSIVE: 1 change past its limit",
            2,
            "inconclusive",
            "unknown",
        ),
        (
            "result: CANNOT COMPARE: the current run is invalid",
            2,
            "cannot-compare",
            "unknown",
        ),
        (
            "error: results/x/summary.json: missing field",
            1,
            "error",
            "unknown",
        ),
    ];
    for (line, code, result, regressed) in cases {
        let _ = std::fs::remove_file(runner.dir.join("output"));
        let fake = fake_compare(&runner.dir, line, code);
        let said = runner.script(
            "compare.sh",
            &[
                ("VOLLEY", fake.to_str().unwrap()),
                ("BASELINE", "base"),
                ("CURRENT", "current"),
                ("COMPARE_ARGS", "--max-regression 'p99=20%+1ms'"),
                ("OUT_DIR", out.to_str().unwrap()),
            ],
        );
        assert!(said.status.success(), "{line}: {}", text(&said.stderr));
        let outputs = runner.outputs();
        assert_eq!(outputs["result"], result, "{line}");
        assert_eq!(outputs["regressed"], regressed, "{line}");
        assert_eq!(outputs["exit-code"], code.to_string(), "{line}");
        let shown = std::fs::read_to_string(out.join("compare.txt")).unwrap();
        assert!(
            shown.contains("--max-regression p99=20%+1ms\n"),
            "the args, unquoted: {shown}"
        );
    }
    std::fs::remove_dir_all(&runner.dir).unwrap();
}
