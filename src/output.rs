//! Where a run's results go, claimed before anything is sent, and printing
//! that survives a closed stdout.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The file that claims a result directory: created with `create_new` when
/// the run is set up (so two runs can never share a directory, and an
/// unwritable one is found before anything is sent), then written with the
/// run's figures at the end.
const CLAIM_FILE: &str = "summary.json";

/// A result directory this run owns.
#[derive(Debug)]
pub struct OutputDir {
    pub path: PathBuf,
    /// Made by this run, so removed again if the run never happens.
    created: bool,
}

impl OutputDir {
    /// Claims `out` (which must be new or empty), or a new directory
    /// `results/<stamp>-<scenario>[-N]`, atomically: of two runs started at
    /// once, one gets it and the other is refused or takes the next name.
    pub fn claim(out: Option<&Path>, stamp: &str, scenario: &str) -> anyhow::Result<OutputDir> {
        match out {
            Some(dir) => Self::claim_given(dir),
            None => Self::claim_default(stamp, scenario),
        }
    }

    fn claim_given(dir: &Path) -> anyhow::Result<OutputDir> {
        let shown = dir.display();
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)
                .with_context(|| format!("--out {shown}: cannot create {}", parent.display()))?;
        }
        let created = match fs::create_dir(dir) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if !dir.is_dir() {
                    anyhow::bail!("--out {shown}: a file is in the way (not a directory)");
                }
                if fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false) {
                    anyhow::bail!(
                        "--out {shown}: the directory already holds files; choose a new one so no result is overwritten"
                    );
                }
                false
            }
            Err(e) => return Err(e).with_context(|| format!("--out {shown}: cannot create the directory")),
        };
        let claimed = OutputDir {
            path: dir.to_path_buf(),
            created,
        };
        claimed.take_claim().inspect_err(|_| claimed.remove_dir())?;
        Ok(claimed)
    }

    fn claim_default(stamp: &str, scenario: &str) -> anyhow::Result<OutputDir> {
        let name: String = scenario
            .chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => c,
                _ => '_',
            })
            .collect();
        let results = Path::new("results");
        fs::create_dir_all(results)
            .context("cannot create the results directory `results/` (give --out DIR)")?;
        let base = results.join(format!("{stamp}-{name}"));
        for n in 1u32.. {
            let path = match n {
                1 => base.clone(),
                n => PathBuf::from(format!("{}-{n}", base.display())),
            };
            match fs::create_dir(&path) {
                Ok(()) => {
                    let claimed = OutputDir { path, created: true };
                    claimed.take_claim().inspect_err(|_| claimed.remove_dir())?;
                    return Ok(claimed);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot create {} (give --out DIR)", path.display()))
                }
            }
        }
        unreachable!("some name in 1.. is free")
    }

    fn take_claim(&self) -> anyhow::Result<()> {
        let file = self.path.join(CLAIM_FILE);
        match File::options().write(true).create_new(true).open(&file) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => anyhow::bail!(
                "--out {}: another run is writing there; choose a new directory",
                self.path.display()
            ),
            Err(e) => Err(e).with_context(|| format!("cannot write into {}", self.path.display())),
        }
    }

    /// Gives the directory back when the run never happened: the claim file
    /// goes, and the directory too if this run made it.
    pub fn release(self) {
        self.release_written(&[]);
    }

    /// Gives the directory back when the run's files went elsewhere: the
    /// claim file goes with `written`, the files the run wrote there as it
    /// went, and the directory too if this run made it.
    pub fn release_written(self, written: &[&str]) {
        for name in [CLAIM_FILE].iter().chain(written) {
            let _ = fs::remove_file(self.path.join(name));
        }
        self.remove_dir();
    }

    fn remove_dir(&self) {
        if self.created {
            let _ = fs::remove_dir(&self.path);
        }
    }
}

/// Appends `text` to the file at `path`, made if missing (a CI job's step
/// summary, which earlier steps may have written to).
pub fn append(path: &Path, text: &str) -> io::Result<()> {
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
}

/// The files CI reads, where asked: `--summary-md` (the Markdown is also
/// appended to `$GITHUB_STEP_SUMMARY` when that is set, as in GitHub
/// Actions) and `--junit`. Each text is made only when it is written.
pub fn write_ci_files(
    summary_md: Option<&Path>,
    junit: Option<&Path>,
    markdown: impl FnOnce() -> String,
    junit_xml: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let step_summary = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty());
    if summary_md.is_some() || step_summary.is_some() {
        let text = markdown();
        if let Some(path) = summary_md {
            fs::write(path, &text).with_context(|| format!("--summary-md {}", path.display()))?;
        }
        if let Some(path) = step_summary {
            append(Path::new(&path), &text)
                .with_context(|| format!("$GITHUB_STEP_SUMMARY {}", path.to_string_lossy()))?;
        }
    }
    if let Some(path) = junit {
        fs::write(path, junit_xml()).with_context(|| format!("--junit {}", path.display()))?;
    }
    Ok(())
}

/// Writes `text` to stdout. A closed stdout (`| head`, `| true`) is not an
/// error worth a panic: the results are already on disk, so it returns
/// false and the caller stops printing.
pub fn print(text: &str) -> bool {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_ok()
}

/// Writes `text` and a newline to stderr. Like [`print`], a closed stderr
/// (`2>&1 | head`) must not panic a run whose results are still to be
/// written, so failures are dropped: there is nowhere left to report them.
pub fn note(text: &str) {
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.write_all(b"\n"))
        .and_then(|()| stderr.flush());
}

/// `eprintln!` that survives a closed stderr (see [`note`]).
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::output::note(&format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("volley-output-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_directory_is_claimed_once() {
        let dir = scratch("once");
        let first = OutputDir::claim(Some(&dir), "s", "x").expect("the first run claims it");
        let second = OutputDir::claim(Some(&dir), "s", "x").expect_err("the second is refused");
        assert!(second.to_string().contains("already holds files"), "{second}");
        first.release();
        assert!(!dir.exists(), "a claim never used is given back");
    }

    #[test]
    fn runs_started_in_the_same_second_take_different_directories() {
        let stamp = format!("test{}", std::process::id());
        let claims: Vec<OutputDir> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| OutputDir::claim(None, &stamp, "same").unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut paths: Vec<&PathBuf> = claims.iter().map(|c| &c.path).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), 4, "{paths:?}");
        claims.into_iter().for_each(OutputDir::release);
    }

    #[test]
    fn a_file_in_the_way_is_named_before_the_run() {
        let dir = scratch("file");
        fs::write(&dir, "data").unwrap();
        let error = OutputDir::claim(Some(&dir), "s", "x").expect_err("a file is not a directory");
        assert!(error.to_string().contains("a file is in the way"), "{error}");
        assert_eq!(
            fs::read_to_string(&dir).unwrap(),
            "data",
            "the file is left alone"
        );
        fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn an_empty_directory_given_stays_after_release() {
        let dir = scratch("empty");
        fs::create_dir(&dir).unwrap();
        OutputDir::claim(Some(&dir), "s", "x").unwrap().release();
        assert!(dir.is_dir(), "a directory the user made is not removed");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        fs::remove_dir(&dir).unwrap();
    }
}
