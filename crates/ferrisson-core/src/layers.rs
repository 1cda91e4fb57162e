//! The core's modules import each other without a cycle (docs/architecture.md says so): this
//! test reads every source file, takes each `crate::<module>` path (and each `crate::<Name>`
//! through the crate root's re-exports) outside comments, and fails with the cycle's imports
//! when there is one. (The length of every source file is checked in the facade's tests,
//! `client::layout`.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a line: nothing of a line comment (doc comments included).
fn code(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    line.find(" // ").map_or(line, |at| &line[..at])
}

/// The identifiers that follow `crate::` in `text`.
fn crate_paths(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if end > 0 {
            found.push(&after[..end]);
        }
        rest = &after[end..];
    }
    found
}

/// The crate root's re-exports: item name → module (`pub use module::{A, B};`).
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let flat: String = lib.lines().map(code).collect::<Vec<_>>().join(" ");
    for statement in flat.split(';') {
        let Some(at) = statement.find("pub use ") else {
            continue;
        };
        let path = statement[at + "pub use ".len()..].trim();
        if path.starts_with("crate::") || path.starts_with("tokio::") {
            continue; // the engine's own re-exports, inside `__engine`
        }
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.trim().rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    map
}

#[test]
fn the_core_modules_import_each_other_without_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    files.sort();
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let exports = root_exports(&lib);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.strip_prefix(&src).ok())
        .filter_map(|rel| rel.components().next())
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        })
        .filter(|m| m != "lib")
        .collect();
    // module → module it imports → where.
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in &files {
        let Ok(rel) = file.strip_prefix(&src) else {
            continue;
        };
        let rel_name = rel.display().to_string();
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let Some(module) = rel.components().next().map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned()
        }) else {
            continue;
        };
        if module == "lib" || module == "layers" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            for name in crate_paths(code(line)) {
                let target = if modules.contains(name) {
                    name.to_owned()
                } else if let Some(m) = exports.get(name) {
                    m.clone()
                } else {
                    continue;
                };
                if target != module {
                    edges
                        .entry(module.clone())
                        .or_default()
                        .entry(target)
                        .or_insert_with(|| format!("{rel_name}:{}", n + 1));
                }
            }
        }
    }
    // A depth-first search for a back edge; the cycle is the stack from its target.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(m.to_owned());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_owned());
        for next in edges.get(m).into_iter().flat_map(|e| e.keys()) {
            if let Some(cycle) = visit(next, edges, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    let cycle = modules
        .iter()
        .find_map(|module| visit(module, &edges, &mut done, &mut Vec::new()));
    let steps: Vec<String> = cycle
        .iter()
        .flat_map(|cycle| cycle.windows(2))
        .map(|w| format!("{} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]]))
        .collect();
    assert!(
        steps.is_empty(),
        "an import cycle in ferrisson-core: {}",
        steps.join(", ")
    );
}

#[test]
fn the_checker_sees_paths_in_code_and_not_in_comments() {
    assert_eq!(crate_paths(code("use crate::client::{A, B};")), ["client"]);
    assert_eq!(
        crate_paths(code("/// [`X`](crate::lock::X)")),
        Vec::<&str>::new()
    );
    assert_eq!(
        crate_paths(code("let x = crate::Client::new(); // crate::y")),
        ["Client"]
    );
    let exports = root_exports(
        "pub use client::Client;\npub use config::{Backoff,\n ClientConfig};\npub mod __engine { pub use crate::x::Y; }",
    );
    assert_eq!(exports.get("Client").map(String::as_str), Some("client"));
    assert_eq!(
        exports.get("ClientConfig").map(String::as_str),
        Some("config")
    );
    assert_eq!(exports.get("Y"), None);
}
