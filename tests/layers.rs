//! The layer rule of ARCHITECTURE.md: an import never points from a lower
//! layer to a higher one.
//!
//! Reads every file under `src/`, finds the `crate::<module>` paths of its
//! code (comments, doc comments and `#[cfg(test)]` modules excluded: tests
//! may use the whole runtime), maps both ends to their layers and fails on
//! every upward edge that is not in [`KNOWN`]. [`KNOWN`] listed the upward
//! edges the code had while the layering was being finished (issue 8,
//! section 2); it is empty now. An entry that no longer occurs fails the
//! check too, so the list could only shrink.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Layers, bottom to top (ARCHITECTURE.md, "Layers").
const LAYERS: &[(&str, u8)] = &[
    ("sync", 0),
    ("error", 0),
    ("datatype", 0),
    ("hardware", 0),
    ("identity", 0),
    ("sched", 1),
    ("p2p", 2),
    ("transport", 2),
    ("comm", 3),
    ("coll", 4),
    ("rma", 4),
    ("point_to_point", 5),
    ("collective", 5),
    ("request", 5),
    ("hls", 5),
    ("hybrid", 5),
    ("thread", 5),
    ("environment", 5),
    ("topology", 5),
    ("malleable", 5),
    ("trace", 5),
    ("runtime", 6),
    ("launch", 6),
];

/// Files whose layer is not their module's.
const FILE_LAYERS: &[(&str, u8)] = &[
    ("runtime/job.rs", 5),
    // The public communicator API over the core (`Communicator`,
    // `SimpleCommunicator`, `CartesianCommunicator`): it creates
    // communicators, which is `coll`'s (L4).
    ("comm/communicator.rs", 5),
    ("comm/cartesian.rs", 5),
];

/// Names defined or re-exported at the crate root, by the module that
/// defines them (`lib` for the root's own constants and type aliases).
const ROOT_NAMES: &[(&str, &str)] = &[
    ("Rank", "lib"),
    ("Tag", "lib"),
    ("Count", "lib"),
    ("Address", "lib"),
    ("ANY_SOURCE", "lib"),
    ("ANY_TAG", "lib"),
    ("TAG_UB", "lib"),
    ("UNDEFINED", "lib"),
    ("traits", "lib"),
    ("Error", "error"),
    ("Runtime", "runtime"),
    ("run", "runtime"),
    ("launch", "runtime"),
    ("StackGuard", "runtime"),
    ("initialize", "environment"),
    ("initialize_with_threading", "environment"),
    ("Threading", "environment"),
    ("Universe", "environment"),
    ("parallel_for", "hybrid"),
    ("rank_local", "hls"),
    ("sleep", "sched"),
    ("yield_now", "sched"),
    ("attribute", "comm"),
];

/// Upward edges tolerated: (file, module it imports). Empty since the
/// layers were separated (issue 8, section 2); never added to.
const KNOWN: &[(&str, &str)] = &[];

fn layer_of_module(module: &str) -> Option<u8> {
    if module == "lib" {
        return Some(0);
    }
    if let Some(&(_, l)) = FILE_LAYERS
        .iter()
        .find(|(f, _)| f.trim_end_matches(".rs").replace('/', "::") == module)
    {
        return Some(l);
    }
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

fn layer_of_file(file: &str) -> u8 {
    if let Some(&(_, l)) = FILE_LAYERS.iter().find(|(f, _)| *f == file) {
        return l;
    }
    let module = module_of_file(file);
    layer_of_module(&module).unwrap_or_else(|| {
        panic!("src/{file}: module `{module}` has no layer; add it to LAYERS and ARCHITECTURE.md")
    })
}

fn module_of_file(file: &str) -> String {
    let first = file.split('/').next().unwrap();
    first.trim_end_matches(".rs").to_string()
}

/// The module a `crate::<path>` refers to: a submodule with a layer of its
/// own (`runtime::job`), else the path's first name.
fn module_of_name(path: &str) -> Option<String> {
    if path.contains("::") && layer_of_module(path).is_some() {
        return Some(path.to_string());
    }
    let name = path.split("::").next().unwrap();
    if layer_of_module(name).is_some() {
        return Some(name.to_string());
    }
    ROOT_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, m)| m.to_string())
}

/// The file's code without comments and without `#[cfg(test)]` items.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            // Skip the item that follows: up to its matching closing brace,
            // or to the end of a one-line item.
            let mut depth = 0i32;
            let mut opened = false;
            for next in lines.by_ref() {
                let code = next.split("//").next().unwrap();
                for c in code.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                if (opened && depth == 0) || (!opened && code.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let code = match line.find("//") {
            // A `//` inside a string is rare in this crate's imports; cut
            // only when it is not inside quotes.
            Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The first two names `a::b` of every `crate::a::b...` path (or `a` alone),
/// also inside `use crate::{a::b, c, ...}` groups.
fn crate_names(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top_level(&group[..end]) {
                let name = path_head(item.trim());
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        } else {
            let name = path_head(rest);
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// `a::b` of a path starting `a::b`, or `a` of one starting `a`.
fn path_head(s: &str) -> String {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let first = ident(s);
    match s[first.len()..].strip_prefix("::") {
        Some(rest) if !ident(rest).is_empty() => format!("{first}::{}", ident(rest)),
        _ => first,
    }
}

fn matching_brace(s: &str) -> usize {
    let mut depth = 1;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    s.len()
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every upward edge of `src/`: (file, module, file's layer, module's layer).
fn upward_edges() -> Vec<(String, String, u8, u8)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut edges = Vec::new();
    for path in files {
        let file = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if file == "lib.rs" {
            continue; // the crate root re-exports every layer
        }
        let from = layer_of_file(&file);
        let own = module_of_file(&file);
        let code = code_of(&fs::read_to_string(&path).unwrap());
        for name in crate_names(&code) {
            let Some(module) = module_of_name(&name) else {
                continue; // a macro or item defined at the root of no layer
            };
            if module == own || module.split("::").next() == Some(own.as_str()) {
                continue;
            }
            let to = layer_of_module(&module).unwrap();
            if to > from && !edges.iter().any(|(f, m, _, _)| *f == file && *m == module) {
                edges.push((file.clone(), module, from, to));
            }
        }
    }
    edges
}

#[test]
fn no_import_points_upward() {
    let edges = upward_edges();
    let mut errors = Vec::new();
    for (file, module, from, to) in &edges {
        if !KNOWN.contains(&(file.as_str(), module.as_str())) {
            errors.push(format!(
                "src/{file} (layer L{from}) imports crate::{module} (layer L{to})"
            ));
        }
    }
    for &(file, module) in KNOWN {
        if !edges.iter().any(|(f, m, _, _)| f == file && m == module) {
            errors.push(format!(
                "KNOWN lists src/{file} -> crate::{module}, which no longer occurs: remove it"
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "layer rule (ARCHITECTURE.md, \"Layers\") broken:\n  {}",
        errors.join("\n  ")
    );
}

#[test]
fn the_checker_sees_upward_imports() {
    let code = code_of(
        "use crate::sync::Mutex;\n// use crate::runtime::Job;\nuse crate::{coll::Round, error::Error};\n\
         #[cfg(test)]\nmod tests {\n    use crate::runtime::run;\n}\nfn f() { crate::p2p::send(); }\n",
    );
    let names = crate_names(&code);
    let expected: BTreeSet<String> = ["sync::Mutex", "coll::Round", "error::Error", "p2p::send"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, expected);
}
