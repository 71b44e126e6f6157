//! The house's rule, checked on the source: every `crate::` path in a
//! module points down the layers (or across, within one), and no two
//! top-level modules reach each other in a cycle. The layers, from the top:
//! `docs/ARCHITECTURE.md` draws the same list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top to bottom. A module may use its own layer's modules and any below.
const LAYERS: &[&[&str]] = &[
    &["cli", "cmd"],
    &[
        "check", "compare", "init", "metrics", "output", "report", "results", "serve", "tui", "validate",
    ],
    &["scenario"],
    &["engine", "thresholds"],
    &["plan"],
    &["transport"],
    &["rpc", "tls"],
    &["stats"],
];

/// Macros exported at the crate's root, by the module that defines them.
const MACROS: &[(&str, &str)] = &[("note", "output")];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a source file belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every `crate::NAME` in a file's code (comments left out), as NAME.
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                let module = MACROS.iter().find(|(m, _)| rest.starts_with(&format!("{m}!")));
                found.insert(module.map_or(name, |(_, defined_in)| defined_in.to_string()));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// Which modules each module uses: `module -> {used}`, and every use that
/// points up, as `file: module -> used`.
fn edges(src: &Path) -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut upward = Vec::new();
    for file in files {
        let module = module_of(src, &file);
        if module == "main" || module == "lib" {
            continue;
        }
        let from =
            layer_of(&module).unwrap_or_else(|| panic!("module `{module}` is in no layer: add it to LAYERS"));
        for used in uses(&std::fs::read_to_string(&file).unwrap()) {
            if used == module {
                continue;
            }
            let to = layer_of(&used)
                .unwrap_or_else(|| panic!("`crate::{used}` in {}: no such layer", file.display()));
            if to < from {
                upward.push(format!("{}: {module} -> {used}", file.display()));
            }
            graph.entry(module.clone()).or_default().insert(used);
        }
    }
    (graph, upward)
}

/// A cycle among the modules, if there is one, as the path around it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut around = path[at..].to_vec();
            around.push(node.to_string());
            return Some(around);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn every_use_points_down_the_layers() {
    let (_, upward) = edges(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        upward.is_empty(),
        "uses that point up the layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn no_two_modules_use_each_other() {
    let (graph, _) = edges(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert_eq!(cycle(&graph), None);
}

#[test]
fn every_module_has_a_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    assert!(modules.len() > 10, "{modules:?}");
    for module in modules {
        assert!(layer_of(module).is_some(), "`{module}` is in no layer");
    }
}

#[test]
fn the_check_sees_a_backwards_use_and_a_cycle() {
    // The rule's own machinery, on crafted text: a check that could never
    // fail would pass on any house.
    assert_eq!(
        uses("use crate::engine::Control; // crate::tui\nlet x = crate::stats::micros(d);"),
        BTreeSet::from(["engine".to_string(), "stats".to_string()])
    );
    let graph = BTreeMap::from([
        ("engine".to_string(), BTreeSet::from(["stats".to_string()])),
        ("stats".to_string(), BTreeSet::from(["engine".to_string()])),
    ]);
    assert_eq!(
        cycle(&graph),
        Some(vec![
            "engine".to_string(),
            "stats".to_string(),
            "engine".to_string()
        ])
    );
    assert!(layer_of("stats") > layer_of("engine"));
}
