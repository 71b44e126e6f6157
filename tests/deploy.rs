//! `deploy/kubernetes/` and the Dockerfile: parsed, and what volley relies
//! on asserted (an Indexed Job whose size is the shards' count, one start
//! time for every pod, each shard's own result directory on one shared
//! volume, a scenario that loads and splits), then validated against
//! Kubernetes' schemas when `kubernetes-validate` is installed.

use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

fn manifest(name: &str) -> Yaml {
    let text = std::fs::read_to_string(deploy_dir().join(name)).unwrap();
    let mut docs = YamlLoader::load_from_str(&text).unwrap();
    assert_eq!(docs.len(), 1, "{name}: one resource");
    docs.remove(0)
}

fn strings(yaml: &Yaml) -> Vec<String> {
    yaml.as_vec()
        .unwrap_or_else(|| panic!("a list: {yaml:?}"))
        .iter()
        .map(|y| y.as_str().unwrap().to_string())
        .collect()
}

/// The value after `flag` in an argument list.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} in {args:?}"));
    &args[at + 1]
}

fn env_named<'a>(container: &'a Yaml, name: &str) -> &'a Yaml {
    container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("env {name}"))
}

/// Volume name → what backs it, and mount path → volume name.
fn volumes(pod: &Yaml) -> Vec<(String, String)> {
    let container = &pod["containers"][0];
    container["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|mount| {
            let name = mount["name"].as_str().unwrap();
            let volume = pod["volumes"]
                .as_vec()
                .unwrap()
                .iter()
                .find(|v| v["name"].as_str() == Some(name))
                .unwrap_or_else(|| panic!("volume {name}"));
            let source = match (
                volume["configMap"]["name"].as_str(),
                volume["persistentVolumeClaim"]["claimName"].as_str(),
            ) {
                (Some(map), _) => format!("configMap/{map}"),
                (_, Some(claim)) => format!("pvc/{claim}"),
                _ => panic!("{name}: neither a ConfigMap nor a claim"),
            };
            (mount["mountPath"].as_str().unwrap().to_string(), source)
        })
        .collect()
}

#[test]
fn the_shards_job_is_indexed_and_sized_as_its_shards() {
    let job = manifest("shards-job.yaml");
    assert_eq!(job["kind"].as_str(), Some("Job"));
    let spec = &job["spec"];
    assert_eq!(
        spec["completionMode"].as_str(),
        Some("Indexed"),
        "JOB_COMPLETION_INDEX is set only then"
    );
    let completions = spec["completions"].as_i64().unwrap();
    assert_eq!(
        spec["parallelism"].as_i64(),
        Some(completions),
        "every shard at once"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let container = &pod["containers"][0];
    let args = strings(&container["args"]);
    assert_eq!(args[0], "run");
    assert_eq!(
        after(&args, "--shards"),
        completions.to_string(),
        "--shards N is the Job's size"
    );
    assert_eq!(after(&args, "--start-at"), "$(START_AT)");
    let start_at = env_named(container, "START_AT");
    assert!(
        start_at["value"].as_str().is_some(),
        "one value, the same in every pod"
    );
    assert_eq!(
        after(&args, "--out"),
        "/results/shard-$(SHARD_INDEX)",
        "a directory per shard"
    );
    assert_eq!(
        env_named(container, "SHARD_INDEX")["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.annotations['batch.kubernetes.io/job-completion-index']")
    );
    let scenario = after(&args, "run");
    let mounts = volumes(pod);
    assert!(
        mounts.contains(&("/scenario".into(), "configMap/volley-scenario".into())),
        "{mounts:?}"
    );
    assert!(
        mounts.contains(&("/results".into(), "pvc/volley-results".into())),
        "{mounts:?}"
    );
    assert!(scenario.starts_with("/scenario/"), "{scenario}");
}

#[test]
fn the_merge_reads_every_shards_directory_from_the_same_volume() {
    let job = manifest("merge-job.yaml");
    let pod = &job["spec"]["template"]["spec"];
    let script = strings(&pod["containers"][0]["args"]).join(" ");
    assert!(
        script.contains("volley merge /results/shard-* --out /results/merged"),
        "{script}"
    );
    assert!(volumes(pod).contains(&("/results".into(), "pvc/volley-results".into())));
    let claim = manifest("results-pvc.yaml");
    assert_eq!(claim["metadata"]["name"].as_str(), Some("volley-results"));
    assert_eq!(
        strings(&claim["spec"]["accessModes"]),
        ["ReadWriteMany"],
        "every pod writes to it"
    );
    let shards = manifest("shards-job.yaml");
    let image = |job: &Yaml| {
        job["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(image(&job), image(&shards), "one image");
}

#[test]
fn the_configmaps_scenario_loads_and_splits_over_the_shards() {
    let map = manifest("scenario-configmap.yaml");
    assert_eq!(map["metadata"]["name"].as_str(), Some("volley-scenario"));
    let text = map["data"]["scenario.toml"].as_str().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("scenario.toml");
    std::fs::write(&file, text).unwrap();
    let shards = manifest("shards-job.yaml")["spec"]["completions"]
        .as_i64()
        .unwrap() as u32;
    for index in [0, shards - 1] {
        let flags = volley::scenario::Overrides {
            shard: Some(volley::plan::Shard::new(index, shards).unwrap()),
            seed: Some(1),
            ..Default::default()
        };
        let scenario = volley::scenario::Scenario::with_flags(Some(&file), &flags).unwrap();
        assert!(
            scenario.compile().plan.connections >= 1,
            "each shard has a connection"
        );
    }
}

#[test]
fn the_dockerfile_builds_volley_into_a_small_runtime_image() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile")).unwrap();
    let stages: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage: {stages:?}");
    assert!(text.contains("cargo build --release --locked --bin volley"));
    assert!(text.contains("COPY --from=build /src/target/release/volley /usr/local/bin/volley"));
    assert!(text.contains("ENTRYPOINT [\"volley\"]"));
    assert!(stages[1].contains("slim"), "{}", stages[1]);
}

/// Against Kubernetes' own schemas, where the validator is installed (the
/// PyPI package `kubernetes-validate`; `.ci/run` installs it).
#[test]
fn the_manifests_pass_kubernetes_schemas() {
    let files: Vec<PathBuf> = std::fs::read_dir(deploy_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert_eq!(files.len(), 4, "{files:?}");
    let Ok(output) = std::process::Command::new("kubernetes-validate")
        .arg("--strict")
        .args(&files)
        .output()
    else {
        eprintln!("kubernetes-validate is not installed: the schemas are not checked here");
        return;
    };
    let said =
        String::from_utf8_lossy(&output.stderr).into_owned() + &String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
    assert_eq!(said.matches("passed").count(), files.len(), "{said}");
}
