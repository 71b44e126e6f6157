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
        "check", "compare", "endpoint", "equality", "feed", "init", "merge", "metrics", "otlp", "output",
        "proxy", "report", "results", "serve", "sweep", "tui", "validate", "web",
    ],
    &["scenario"],
    &["engine", "thresholds"],
    &["plan"],
    &["transport"],
    &["jwt", "rpc", "tls"],
    &["proc", "redact", "stats"],
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

/// Tokens of Rust code: identifiers, `::`, and single punctuation marks;
/// comments, strings and character literals left out, so a `//` inside a
/// string or a path in a comment is never read as code.
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = skip_block_comment(&chars, i);
        } else if c == '"' || (c == 'r' || c == 'b') && starts_string(&chars, i) {
            i = skip_string(&chars, i);
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && next == Some(':') {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
            ('*', Some('/')) => {
                (depth, i) = (depth - 1, i + 2);
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// `r"`, `r#"`, `b"`, `br"`, `br#"` start a string at `i`.
fn starts_string(chars: &[char], i: usize) -> bool {
    let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
    ["r\"", "r#", "b\"", "br\"", "br#"]
        .iter()
        .any(|p| rest.starts_with(p))
}

fn skip_string(chars: &[char], mut i: usize) -> usize {
    let raw = chars[i] == 'r' || chars.get(i + 1) == Some(&'r');
    while chars[i] != '"' && chars[i] != '#' {
        i += 1;
    }
    let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
    i += hashes + 1;
    while i < chars.len() {
        if !raw && chars[i] == '\\' {
            i += 2;
        } else if chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|c| *c == '#') {
            return i + 1 + hashes;
        } else {
            i += 1;
        }
    }
    i
}

/// A character literal (`'x'`, `'\n'`) is skipped; a lifetime is one mark.
fn skip_char_or_lifetime(chars: &[char], i: usize) -> usize {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => i + 2 + chars[i + 2..].iter().position(|c| *c == '\'').unwrap_or(0) + 1,
        (Some(_), Some('\'')) => i + 3,
        _ => i + 1,
    }
}

/// Every top-level module a file's code names, by `crate::` (one path, a
/// `{...}` group over any lines, or a glob, named `*`) or by enough
/// `super::` to climb out of its own module. `depth` is how deep the file
/// lies below the crate (`src/stats/mod.rs`: 1, `src/stats/summary.rs`:
/// 2); inline `mod x { }` blocks add to it where they open.
fn uses_at(text: &str, depth: usize) -> BTreeSet<String> {
    let tokens = tokens(text);
    let mut found = BTreeSet::new();
    // Brace depth of each inline module still open.
    let mut inline: Vec<usize> = Vec::new();
    let mut braces = 0;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "{" => braces += 1,
            "}" => {
                braces -= 1;
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).map(String::as_str) == Some("{") => inline.push(braces),
            "crate" if tokens.get(i + 1).map(String::as_str) == Some("::") => {
                named_after(&tokens, i + 2, &mut found);
            }
            "super" => {
                let supers = tokens[i..]
                    .chunks(2)
                    .take_while(|pair| pair.len() == 2 && pair[0] == "super" && pair[1] == "::")
                    .count();
                if supers > 0 && supers >= depth + inline.len() {
                    named_after(&tokens, i + 2 * supers, &mut found);
                }
                i += 2 * supers.max(1) - 1;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The module (or, for a group, modules) named at `tokens[at]`, just
/// after a path reached the crate's root; macros go to where they live.
fn named_after(tokens: &[String], at: usize, found: &mut BTreeSet<String>) {
    let mut add = |name: &str| {
        let defined_in = MACROS.iter().find(|(m, _)| *m == name).map(|(_, d)| *d);
        found.insert(defined_in.unwrap_or(name).to_string());
    };
    match tokens.get(at).map(String::as_str) {
        Some("{") => {
            // The first name of each item at the group's own depth.
            let mut depth = 0;
            let mut first = true;
            for token in &tokens[at + 1..] {
                match token.as_str() {
                    "{" => depth += 1,
                    "}" if depth == 0 => break,
                    "}" => depth -= 1,
                    "," if depth == 0 => first = true,
                    "self" if first => first = false,
                    name if first => {
                        add(name);
                        first = false;
                    }
                    _ => {}
                }
            }
        }
        Some(name) => add(name),
        None => {}
    }
}

/// Every module named from the crate's root in a file at the root's depth
/// of one (`src/x.rs`, `src/x/mod.rs`), as the crafted cases below read.
fn uses(text: &str) -> BTreeSet<String> {
    uses_at(text, 1)
}

/// How deep a file lies below the crate: its module's path length.
fn depth_of(src: &Path, file: &Path) -> usize {
    let relative = file.strip_prefix(src).unwrap();
    let parts = relative.components().count();
    match relative.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs") => parts - 1,
        _ => parts,
    }
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
        for used in uses_at(&std::fs::read_to_string(&file).unwrap(), depth_of(src, &file)) {
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

#[test]
fn every_way_of_naming_a_module_is_read() {
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    // Groups, on one line or several, nested; `self` names nothing new.
    assert_eq!(
        uses("use crate::{engine::Control, plan::Mix};"),
        set(&["engine", "plan"])
    );
    assert_eq!(
        uses("use crate::{\n    engine::{self, Control},\n    stats,\n};"),
        set(&["engine", "stats"])
    );
    assert_eq!(
        uses("use crate::*;"),
        set(&["*"]),
        "a glob is named, and placed nowhere"
    );
    // A `//` inside a string is no comment; a path inside one is no code.
    assert_eq!(
        uses("const U: &str = \"http://x\"; type C = crate::engine::Control;"),
        set(&["engine"])
    );
    assert_eq!(
        uses("let s = \"crate::tui\"; let r = r#\"crate::tui\"#;"),
        set(&[])
    );
    assert_eq!(
        uses("/* crate::tui */ let c = '\"'; let l: &'static str = \"\";"),
        set(&[])
    );
    // Climbing out with `super`: from src/stats/summary.rs two steps reach
    // the root, one does not; an inline module takes one more.
    assert_eq!(uses_at("use super::super::engine::Control;", 2), set(&["engine"]));
    assert_eq!(uses_at("use super::verdict::Verdict;", 2), set(&[]));
    assert_eq!(
        uses_at("mod tests { use super::super::Recorder; }", 1),
        set(&["Recorder"])
    );
    assert_eq!(uses_at("mod tests { use super::*; }", 1), set(&[]));
    // A macro is placed by the module that defines it, however it is named.
    assert_eq!(uses("crate::note!(\"x\"); use crate::note;"), set(&["output"]));
}

#[test]
fn the_architecture_page_draws_the_same_layers() {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).unwrap();
    let drawing: Vec<&str> = page
        .split("## The layers")
        .nth(1)
        .and_then(|rest| rest.split("**The rule:**").next())
        .unwrap()
        .lines()
        .collect();
    let names = |line: &str| -> BTreeSet<String> {
        line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    // Each layer drawn on one line of its own, in the same order.
    let mut previous = 0;
    for layer in LAYERS {
        let line = drawing[previous..]
            .iter()
            .position(|line| layer.iter().all(|m| names(line).contains(*m)))
            .unwrap_or_else(|| {
                panic!("docs/ARCHITECTURE.md draws no line with all of {layer:?} below the layer before it")
            });
        previous += line + 1;
    }
}
