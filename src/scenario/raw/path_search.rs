//! Finding a stdio target's program before a run starts it.

use std::path::Path;

/// Whether `program` can be started: a path to a file, or a name found in
/// one of PATH's directories.
pub(super) fn is_installed(program: &str) -> bool {
    let path = Path::new(program);
    if path.components().count() > 1 {
        return path.is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|dirs| std::env::split_paths(&dirs).any(|dir| dir.join(program).is_file()))
}
