//! What the page says of each finished run (its verdict, its warnings),
//! and the result files it links to, served read-only. Only the files the
//! runs wrote are served, each looked up by its whole name in a list made
//! once the files are written: no part of a request is ever joined to a
//! path, so no request reaches anything else.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::report::RunReport;

/// The page saved into the results directory at the end.
pub const SAVED_PAGE: &str = "live.html";

/// A target's run as it ended.
#[derive(Clone, Debug, Serialize)]
pub struct Ended {
    pub valid: bool,
    /// The verdict line, as the table prints it.
    pub verdict: String,
    pub warnings: Vec<String>,
    /// Its `report.html`, relative to the results' root (see [`Served`]).
    pub report: Option<String>,
    #[serde(skip)]
    pub dir: PathBuf,
}

impl Ended {
    pub fn of(report: &RunReport, dir: &Path) -> Ended {
        let summary = &report.summary;
        Ended {
            valid: summary.verdict.valid,
            verdict: crate::report::verdict_line(summary),
            warnings: summary.warnings.iter().map(|w| w.to_string()).collect(),
            report: None,
            dir: dir.to_path_buf(),
        }
    }
}

/// The result files served, by their path relative to the root: the
/// directory that holds every run's (one run's own; the comparison's,
/// above each target's).
#[derive(Clone, Debug, Default)]
pub struct Served {
    pub root: Option<PathBuf>,
    pub files: BTreeMap<String, PathBuf>,
}

impl Served {
    /// The files now in `dirs` (each run's directory) and in their root,
    /// plain files only (no link, no directory), and `also` in the root
    /// (the page, about to be saved there).
    pub fn list(dirs: &[PathBuf], also: &[&str]) -> Served {
        let Some(root) = common_root(dirs) else {
            return Served::default();
        };
        let mut files = BTreeMap::new();
        for dir in std::iter::once(&root).chain(dirs) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let plain = entry.file_type().is_ok_and(|t| t.is_file());
                let path = entry.path();
                if let (true, Some(name)) = (plain, relative(&root, &path)) {
                    files.insert(name, path);
                }
            }
        }
        for name in also {
            files.insert(name.to_string(), root.join(name));
        }
        Served {
            root: Some(root),
            files,
        }
    }

    /// `dir`'s `report.html`, by the name the page links to, if served.
    pub fn report_of(&self, dir: &Path) -> Option<String> {
        let root = self.root.as_ref()?;
        let name = relative(root, &dir.join("report.html"))?;
        self.files.contains_key(&name).then_some(name)
    }

    /// The file served as `name`, if one is.
    pub fn get(&self, name: &str) -> Option<&Path> {
        self.files.get(name).map(PathBuf::as_path)
    }
}

/// `path` relative to `root`, with `/` between parts, if it is under it
/// by plain names (UTF-8, no `..`).
fn relative(root: &Path, path: &Path) -> Option<String> {
    let rest = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = (rest.components())
        .map(|c| match c {
            Component::Normal(part) => part.to_str(),
            _ => None,
        })
        .collect();
    Some(parts?.join("/")).filter(|name| !name.is_empty())
}

/// The deepest directory that holds every one of `dirs`.
fn common_root(dirs: &[PathBuf]) -> Option<PathBuf> {
    let mut root = dirs.first()?.clone();
    for dir in &dirs[1..] {
        while !dir.starts_with(&root) {
            root = root.parent()?.to_path_buf();
        }
    }
    Some(root)
}

/// A file's type by its name, as the browser is told it.
pub fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("csv") => "text/csv; charset=utf-8",
        Some("json") => "application/json",
        Some("hlog") | Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_runs_plain_files_are_served_by_their_names() {
        let root = std::env::temp_dir().join(format!("volley-web-served-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (a, b) = (root.join("a"), root.join("b"));
        for dir in [&a, &b, &a.join("deeper")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for file in [
            root.join("report.html"),
            a.join("report.html"),
            b.join("summary.json"),
        ] {
            std::fs::write(file, "x").unwrap();
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", a.join("passwd")).unwrap();
        let served = Served::list(&[a.clone(), b.clone()], &[SAVED_PAGE]);
        let names: Vec<&str> = served.files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["a/report.html", "b/summary.json", "live.html", "report.html"]
        );
        assert_eq!(served.report_of(&a).as_deref(), Some("a/report.html"));
        assert_eq!(served.report_of(&b), None);
        for asked in [
            "a/../report.html",
            "../etc/passwd",
            "a/passwd",
            "a/deeper",
            "/report.html",
            "",
        ] {
            assert!(served.get(asked).is_none(), "{asked}");
        }
        let one = Served::list(std::slice::from_ref(&a), &[]);
        assert_eq!(one.root.as_deref(), Some(a.as_path()));
        assert_eq!(one.report_of(&a).as_deref(), Some("report.html"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
