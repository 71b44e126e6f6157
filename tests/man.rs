//! `volley man`: the manual page renders in `man` (where it is installed),
//! and `--dir` writes a page per command.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::bin::{temp_dir, text, volley};

/// `man -l -` over `page`, as a reader sees it; `None` without man.
fn rendered(page: &[u8]) -> Option<(bool, String, String)> {
    let mut man = Command::new("man")
        .args(["--warnings", "-l", "-"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    man.stdin.take().unwrap().write_all(page).unwrap();
    let output = man.wait_with_output().unwrap();
    Some((
        output.status.success(),
        text(&output.stdout),
        text(&output.stderr),
    ))
}

#[test]
fn the_manual_page_renders_in_man() {
    let output = volley().arg("man").output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).starts_with(".ie"),
        "roff: {}",
        text(&output.stdout)
    );
    let Some((ok, page, warnings)) = rendered(&output.stdout) else {
        println!("man is not installed (apt-get install man-db groff): the page is not rendered here");
        return;
    };
    assert!(ok, "{warnings}");
    assert!(warnings.is_empty(), "groff warned: {warnings}");
    for part in [
        "NAME",
        "volley - Load testing",
        "SUBCOMMANDS",
        "volley-run(1)",
        "volley-man(1)",
    ] {
        assert!(page.contains(part), "the page lacks {part}: {page}");
    }
    assert!(
        page.contains(&format!("volley {}", volley::cli::VERSION)),
        "{page}"
    );
}

/// `--dir` writes a page per command; `volley run`'s holds the flag rule as
/// a list of its own, each rule a bullet.
#[test]
fn the_dir_holds_a_page_per_command_with_its_after_help_as_a_section() {
    let dir = temp_dir("man");
    let output = volley().args(["man", "--dir"]).arg(&dir).output().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let listed = text(&output.stdout);
    for command in [
        "volley",
        "volley-run",
        "volley-serve",
        "volley-completions",
        "volley-man",
    ] {
        let path = dir.join(format!("{command}.1"));
        assert!(path.is_file(), "{command}.1 missing: {listed}");
        assert!(listed.contains(&path.display().to_string()), "{listed}");
    }
    let run = std::fs::read(dir.join("volley-run.1")).unwrap();
    assert!(
        text(&run).contains(".SH \"FLAGS AND A SCENARIO FILE\""),
        "{}",
        text(&run)
    );
    if let Some((ok, page, warnings)) = rendered(&run) {
        assert!(ok && warnings.is_empty(), "{warnings}");
        // man justifies lines: the spaces between words vary.
        let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
        for rule in volley::cli::FLAG_RULE.lines().skip(1) {
            let first_words: String = rule.trim_start_matches("- ").chars().take(30).collect();
            assert!(
                page.contains(&format!("• {first_words}")),
                "no bullet `{first_words}`: {page}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dir_that_cannot_be_made_is_an_error_naming_the_flag() {
    let file = temp_dir("man-file");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "a file in the way").unwrap();
    let output = volley().args(["man", "--dir"]).arg(&file).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("--dir"), "{}", text(&output.stderr));
    std::fs::remove_file(&file).unwrap();
}
