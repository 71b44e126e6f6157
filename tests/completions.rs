//! `volley completions SHELL`: a script per shell, made from the clap
//! definitions; the bash one is loaded in bash and asked to complete.

mod common;

use std::process::Command;

use common::bin::{text, volley};

fn script(shell: &str) -> String {
    let output = volley().args(["completions", shell]).output().unwrap();
    assert!(output.status.success(), "{shell}: {}", text(&output.stderr));
    text(&output.stdout)
}

#[test]
fn every_shell_gets_a_script_naming_the_commands_and_their_flags() {
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let script = script(shell);
        for word in ["volley", "sweep", "completions", "target", "slo"] {
            assert!(script.contains(word), "{shell}'s script lacks {word}");
        }
    }
}

/// Loaded in bash, the script registers itself for `volley` and completes
/// a command's name and a flag's.
#[test]
fn bash_loads_the_script_and_completes_a_command_and_a_flag() {
    if Command::new("bash").arg("--version").output().is_err() {
        println!("bash is not installed: the bash script is not loaded here");
        return;
    }
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_volley"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let steps = r#"
        source <(volley completions bash)
        complete -p volley
        COMP_WORDS=(volley sw); COMP_CWORD=1; _volley volley sw volley
        echo "command: ${COMPREPLY[*]}"
        COMP_WORDS=(volley run --tar); COMP_CWORD=2; _volley volley --tar run
        echo "flag: ${COMPREPLY[*]}"
    "#;
    let output = Command::new("bash")
        .args(["-c", steps])
        .env("PATH", path)
        .output()
        .unwrap();
    let said = text(&output.stdout);
    assert!(output.status.success(), "{said}{}", text(&output.stderr));
    assert!(said.contains("-F _volley volley\n"), "{said}");
    assert!(said.contains("command: sweep\n"), "{said}");
    assert!(said.contains("flag: --target\n"), "{said}");
}

#[test]
fn an_unknown_shell_is_refused_naming_the_ones_there_are() {
    let output = volley().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = text(&output.stderr);
    assert!(said.contains("'tcsh'"), "{said}");
    assert!(said.contains("bash, elvish, fish, powershell, zsh"), "{said}");
}
