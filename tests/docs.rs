//! The README and the guide: every relative link and `#heading` resolves
//! (by GitHub's anchor rules), every TOML block that stands alone loads as
//! `volley validate` loads a scenario, and every flag of every command is
//! documented somewhere a user reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory as _;
use regex::Regex;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut pages = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut pages);
    pages.sort();
    pages
}

/// A page's lines outside fenced code blocks, with their line numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// GitHub's anchor for a heading: the text without its markup, lower case,
/// every character but letters, digits, `_`, `-` and spaces dropped, each
/// space a `-`.
fn slug(heading: &str) -> String {
    let links = Regex::new(r"\[([^\]]*)\]\([^)]*\)").unwrap();
    let text = links.replace_all(heading, "$1");
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a page's headings make; a repeated one gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading.trim());
        let n = seen.entry(base.clone()).or_insert(0);
        anchors.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    anchors
}

#[test]
fn anchors_follow_githubs_rules() {
    assert_eq!(slug("JSON-RPC 1.0"), "json-rpc-10");
    assert_eq!(slug("stdio: LSP and MCP"), "stdio-lsp-and-mcp");
    assert_eq!(
        slug("Checking a file: volley validate"),
        "checking-a-file-volley-validate"
    );
    assert_eq!(slug("Are the answers the same?"), "are-the-answers-the-same");
    assert_eq!(slug("`summary.json` and [links](x.md)"), "summaryjson-and-links");
    assert_eq!(slug("snake_case  twice"), "snake_case--twice");
    let repeated = anchors("# A\n## A\n```\n# not a heading\n```\n### A\n#hashtag\n");
    assert_eq!(repeated, ["a", "a-1", "a-2"].map(String::from).into());
}

/// Every `[text](target)` in a page's prose, inline code left out.
fn links(text: &str) -> Vec<(usize, String)> {
    let code = Regex::new(r"`[^`]*`").unwrap();
    let link = Regex::new(r"\]\(([^)\s]+)(?:\s+[^)]*)?\)").unwrap();
    let mut found = Vec::new();
    for (n, line) in prose(text) {
        let line = code.replace_all(line, "");
        for captures in link.captures_iter(&line) {
            found.push((n, captures[1].to_string()));
        }
    }
    found
}

/// Why `target`, linked from `page`, does not resolve; `None` when it does.
fn broken(page: &Path, text: &str, target: &str) -> Option<String> {
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| target.starts_with(s))
    {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let (file, linked) = if path.is_empty() {
        (page.to_path_buf(), text.to_string())
    } else {
        let file = page.parent().unwrap().join(path);
        if !file.exists() {
            return Some(format!("{} does not exist", file.display()));
        }
        let linked = std::fs::read_to_string(&file).unwrap_or_default();
        (file, linked)
    };
    if anchor.is_empty() {
        return None;
    }
    if file.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "#{anchor} into {}, which is no Markdown page",
            file.display()
        ));
    }
    let known = anchors(&linked);
    (!known.contains(anchor)).then(|| format!("{} has no heading #{anchor}: {known:?}", file.display()))
}

#[test]
fn every_relative_link_and_heading_resolves() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(why) = broken(&page, &text, &target) {
                failures.push(format!("{}:{line}: ({target}): {why}", page.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 150, "only {checked} links found");
}

#[test]
fn a_broken_link_or_heading_is_found() {
    let page = root().join("docs/guide/README.md");
    let text = "# Here\n";
    assert_eq!(broken(&page, text, "#here"), None);
    assert!(broken(&page, text, "#there").is_some());
    assert_eq!(broken(&page, text, "install.md#from-source"), None);
    assert!(broken(&page, text, "install.md#from-sauce").is_some());
    assert!(broken(&page, text, "instal.md").is_some());
    assert!(broken(&page, text, "../../LICENSE-MIT#x").is_some());
    assert_eq!(broken(&page, text, "https://example.com/#nothing"), None);
    assert_eq!(
        links("[a](b.md) `[c](d.md)`\n```\n[e](f.md)\n```\n[g](h.md#i \"title\")"),
        [(1, "b.md".to_string()), (5, "h.md#i".to_string())]
    );
}

/// Each ```toml block of a page with its first line's number, and whether
/// it is marked a fragment (`<!-- fragment ... -->` on the line before).
fn toml_blocks(text: &str) -> Vec<(usize, String, bool)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "```toml" {
            let marked = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.trim_start().starts_with("<!-- fragment"));
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim_start().starts_with("```"))
                .unwrap();
            blocks.push((i + 2, lines[i + 1..end].join("\n"), marked));
            i = end;
        }
        i += 1;
    }
    blocks
}

#[test]
fn every_toml_scenario_in_the_docs_validates() {
    // A `command` names a program on PATH, as `volley validate` checks: the
    // examples name volley itself.
    let bin = Path::new(env!("CARGO_BIN_EXE_volley")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    std::env::set_var("PATH", path);
    let (mut validated, mut fragments, mut failures) = (0, 0, Vec::new());
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_stem().unwrap().to_string_lossy().into_owned();
        for (line, block, fragment) in toml_blocks(&text) {
            if fragment {
                fragments += 1;
                continue;
            }
            // As if the file lay in scenarios/: its data paths resolve there.
            let file = root().join(format!("scenarios/{name}-{line}.toml"));
            let loaded = volley::scenario::Scenario::parse(&block, &file.to_string_lossy(), &name, &|_| {
                Some("a-token".to_string())
            });
            match loaded {
                Ok(scenario) => {
                    let _ = volley::validate::describe(&scenario, &name);
                    validated += 1;
                }
                Err(error) => failures.push(format!("{}:{line}: {error}", page.display())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("{validated} TOML blocks validated, {fragments} marked as fragments");
    assert!(
        validated >= 15 && validated > 3 * fragments,
        "{validated} validated, {fragments} fragments"
    );
}

#[test]
fn a_toml_block_marked_a_fragment_is_told_apart() {
    let text = "x\n<!-- fragment: one key -->\n```toml\na = 1\n```\n\n```toml\nb = 2\nc = 3\n```\n";
    assert_eq!(
        toml_blocks(text),
        [
            (4, "a = 1".to_string(), true),
            (8, "b = 2\nc = 3".to_string(), false)
        ]
    );
}

/// The text a user reads: the README and the guide.
fn read_by_users() -> String {
    let mut text = std::fs::read_to_string(root().join("README.md")).unwrap();
    for page in pages_under("docs/guide") {
        text.push_str(&std::fs::read_to_string(page).unwrap());
    }
    text
}

#[test]
fn every_command_and_flag_is_documented() {
    let text = read_by_users();
    let mut missing = Vec::new();
    let cli = volley::cli::Cli::command();
    for command in cli.get_subcommands() {
        let name = command.get_name();
        if !text.contains(&format!("volley {name}")) {
            missing.push(format!("volley {name}"));
        }
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if !text.contains(&format!("--{long}")) {
                missing.push(format!("volley {name} --{long}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in README.md or docs/guide/: {missing:#?}"
    );
}

/// A page's prose sentences: tables, headings, code and comments left out;
/// a list item or a blank line ends one, as do `.`, `?`, `!`, `;` and `:`
/// before a space.
fn sentences(text: &str) -> Vec<String> {
    let code = Regex::new(r"`[^`]*`").unwrap();
    let link = Regex::new(r"\[([^\]]*)\]\([^)]*\)").unwrap();
    let item = Regex::new(r"^\s*([-*]|\d+\.)\s+").unwrap();
    let end = Regex::new(r"[.?!;:]\s+").unwrap();
    let mut paragraphs = vec![String::new()];
    for (_, line) in prose(text) {
        let skipped = ["|", "#", "<!--"]
            .iter()
            .any(|s| line.trim_start().starts_with(s));
        if skipped || line.trim().is_empty() || item.is_match(line) {
            paragraphs.push(String::new());
        }
        if !skipped {
            let line = item.replace(line, "");
            let line = code.replace_all(&line, "X");
            let line = link.replace_all(&line, "$1");
            paragraphs.last_mut().unwrap().push_str(&format!("{line} "));
        }
    }
    paragraphs
        .iter()
        .flat_map(|p| end.split(p).map(|s| s.trim().to_string()).collect::<Vec<_>>())
        .filter(|s| !s.is_empty())
        .collect()
}

/// One fact per sentence: none a reader must read twice. Most are under 25
/// words; none in the README or the guide is over 40.
#[test]
fn no_sentence_runs_over_forty_words() {
    let mut long = Vec::new();
    let mut pages = vec![root().join("README.md")];
    pages.extend(pages_under("docs/guide"));
    for page in pages {
        for sentence in sentences(&std::fs::read_to_string(&page).unwrap()) {
            let words = sentence.split_whitespace().count();
            if words > 40 {
                long.push(format!("{} ({words} words): {sentence}", page.display()));
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
}

fn pages_under(dir: &str) -> Vec<PathBuf> {
    pages()
        .into_iter()
        .filter(|p| p.starts_with(root().join(dir)))
        .collect()
}

#[test]
fn sentences_end_at_stops_items_and_blank_lines() {
    let text =
        "# Title\nOne two. Three `a. b` four: five\nsix.\n\n- seven\n- eight [nine](x.md).\n| a | b |\n";
    assert_eq!(
        sentences(text),
        ["One two", "Three X four", "five six", "seven", "eight nine"]
    );
}
