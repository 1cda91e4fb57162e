//! The source tree's shape (docs/architecture.md): no source file of the facade or of a crate
//! over 800 lines, so that each stays one reader's worth. (The core's modules are checked for
//! import cycles by a unit test of its own, `layers`.)

use std::path::{Path, PathBuf};

/// Longest a source file may be.
const MAX_LINES: usize = 800;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_800_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("src"))
        .collect();
    assert!(crates.len() > 5, "the crates were not found under {root:?}");
    for dir in &crates {
        rust_files(dir, &mut files);
    }
    let too_long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines}", f.display()))
        })
        .collect();
    assert!(
        too_long.is_empty(),
        "source files over {MAX_LINES} lines (split them): {too_long:?}"
    );
}
