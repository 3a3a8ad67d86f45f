//! The layer rule of ARCHITECTURE.md: an import never points from a lower
//! layer to a higher one.
//!
//! Reads every file under `src/`, resolves every path its code writes
//! (comments, doc comments and `#[cfg(test)]` modules excluded: tests may
//! use the whole runtime) to the module it names — `crate::` paths, and
//! relative ones: `super::`, `self::`, child modules declared in the file
//! (`mod x; pub use x::Y;`) and names the module imports, followed through
//! re-exports to the module that defines the item — maps both ends to their
//! layers and fails on every upward edge that is not in [`KNOWN`]. [`KNOWN`]
//! listed the upward edges the code had while the layering was being
//! finished (issue 8, section 2); it is empty now. An entry that no longer
//! occurs fails the check too, so the list could only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Layers, bottom to top (ARCHITECTURE.md, "Layers").
const LAYERS: &[(&str, u8)] = &[
    ("sync", 0),
    ("error", 0),
    ("datatype", 0),
    ("ffi", 0),
    ("sys", 0),
    ("hardware", 0),
    ("identity", 0),
    ("trace", 0),
    ("grow", 0),
    ("sched", 1),
    ("p2p", 2),
    ("transport", 2),
    ("comm", 3),
    ("coll", 4),
    ("rma", 4),
    ("communicator", 5),
    ("point_to_point", 5),
    ("collective", 5),
    ("request", 5),
    ("hls", 5),
    ("hybrid", 5),
    ("thread", 5),
    ("environment", 5),
    ("topology", 5),
    ("window", 5),
    ("malleable", 5),
    ("runtime", 6),
    ("launch", 6),
];

/// Files whose layer is not their module's.
const FILE_LAYERS: &[(&str, u8)] = &[("runtime/job.rs", 5)];

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
    ("attribute", "communicator"),
];

/// Upward edges tolerated: (file, module it imports). Empty since the
/// layers were separated (issue 8, section 2), relative paths included;
/// never added to.
const KNOWN: &[(&str, &str)] = &[];

/// A layer table: [`SRC`]'s, or a synthetic one in the checker's own
/// tests.
struct Layers {
    modules: &'static [(&'static str, u8)],
    files: &'static [(&'static str, u8)],
    root_names: &'static [(&'static str, &'static str)],
}

/// The layers of `src/` (ARCHITECTURE.md, "Layers").
const SRC: Layers = Layers {
    modules: LAYERS,
    files: FILE_LAYERS,
    root_names: ROOT_NAMES,
};

impl Layers {
    /// The layer of a file of [`Layers::files`], by its module path
    /// (`runtime::job`).
    fn file_layer_of_module(&self, module: &str) -> Option<u8> {
        self.files
            .iter()
            .find(|(f, _)| module_path_of_file(f).join("::") == module)
            .map(|&(_, l)| l)
    }

    fn layer_of_module(&self, module: &str) -> Option<u8> {
        if module == "lib" {
            return Some(0);
        }
        if let Some(l) = self.file_layer_of_module(module) {
            return Some(l);
        }
        self.modules
            .iter()
            .find(|(m, _)| *m == module)
            .map(|&(_, l)| l)
    }

    fn layer_of_file(&self, file: &str) -> u8 {
        if let Some(&(_, l)) = self.files.iter().find(|(f, _)| *f == file) {
            return l;
        }
        let module = file.split('/').next().unwrap().trim_end_matches(".rs");
        self.layer_of_module(module).unwrap_or_else(|| {
            panic!(
                "src/{file}: module `{module}` has no layer; add it to LAYERS and ARCHITECTURE.md"
            )
        })
    }
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

// ---------------------------------------------------------------------------
// Paths and what they name.
//
// A file's code is read as tokens; every path it writes (in `use` trees and
// in code) is resolved to a path from the crate root the way rustc resolves
// its first name: `crate::`, `self::`, `super::` (also `super::super::`),
// a child module declared in the same module (`mod x;` or `mod x { .. }`,
// inline modules being scopes of their own), or a name the module imports
// (`use crate::coll::create as split; split::Ask`). Paths of other crates
// (`std::`, `corosensei::`) and of local items resolve to nothing. A
// resolved path is then followed through re-exports (`comm::Communicator`,
// which `comm/mod.rs` re-exports from `communicator.rs`, is
// `comm::communicator::Communicator`), so an import names the module that
// defines the item, not the one that passes it on.
// ---------------------------------------------------------------------------

/// A module path from the crate root: `["comm", "communicator"]`.
type ModPath = Vec<String>;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other,
}

/// The tokens of `code` that paths are made of (strings, chars and numbers
/// are skipped; lifetimes leave a harmless identifier).
fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
            continue;
        }
        match ch {
            _ if ch.is_ascii_digit() => {
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                continue;
            }
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '\u{..}'), else a lifetime.
                if c.get(i + 1) == Some(&'\\') {
                    i += 2;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 2;
                }
            }
            ':' if c.get(i + 1) == Some(&':') => {
                out.push(Tok::Sep);
                i += 1;
            }
            '{' => out.push(Tok::Open),
            '}' => out.push(Tok::Close),
            ',' => out.push(Tok::Comma),
            ';' => out.push(Tok::Semi),
            '*' => out.push(Tok::Star),
            _ if ch.is_whitespace() => {}
            _ => out.push(Tok::Other),
        }
        i += 1;
    }
    out
}

/// What one module (a file, or an inline `mod x { .. }`) declares.
#[derive(Debug, Default)]
struct Scope {
    /// Child modules (`mod x;`, `mod x { .. }`).
    children: BTreeSet<String>,
    /// Names brought in by `use` (any visibility: a child module sees its
    /// parent's private imports through `super::`), with their path as
    /// written in this scope.
    imports: BTreeMap<String, Vec<String>>,
}

/// The modules of a crate, as far as paths need them.
#[derive(Debug, Default)]
struct Crate {
    scopes: BTreeMap<ModPath, Scope>,
}

/// A path written in a file: the module it is written in, and its names.
#[derive(Debug)]
struct Written {
    scope: ModPath,
    path: Vec<String>,
}

fn is_ident(t: Option<&Tok>) -> bool {
    matches!(t, Some(Tok::Ident(_)))
}

/// Index of the `}` that closes the `{` at `open`.
fn closing(t: &[Tok], open: usize) -> usize {
    let mut depth = 0;
    for (i, tok) in t.iter().enumerate().skip(open) {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// The leaves of a `use` tree: (path, the name it is bound to). A glob
/// leaf ends in `*` and binds nothing; `{self, ..}` names the prefix.
fn use_tree(t: &[Tok], prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let mut path = prefix.to_vec();
    let mut i = usize::from(t.first() == Some(&Tok::Sep));
    loop {
        match t.get(i) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
            }
            Some(Tok::Open) => {
                let end = closing(t, i);
                let group = &t[i + 1..end.min(t.len())];
                let (mut depth, mut start) = (0, 0);
                for (j, tok) in group.iter().enumerate() {
                    match tok {
                        Tok::Open => depth += 1,
                        Tok::Close => depth -= 1,
                        Tok::Comma if depth == 0 => {
                            use_tree(&group[start..j], &path, out);
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                use_tree(&group[start..], &path, out);
                return;
            }
            Some(Tok::Star) => {
                path.push("*".to_string());
                out.push((path, None));
                return;
            }
            _ => break,
        }
        if t.get(i) != Some(&Tok::Sep) {
            break;
        }
        i += 1;
    }
    if path.len() == prefix.len() {
        return; // an empty item (trailing comma)
    }
    if path.last().is_some_and(|s| s == "self") && path.len() > 1 {
        path.pop();
    }
    let name = match (t.get(i), t.get(i + 1)) {
        (Some(Tok::Ident(a)), Some(Tok::Ident(b))) if a == "as" => b.clone(),
        _ => path.last().unwrap().clone(),
    };
    out.push((path, Some(name)));
}

/// Reads one file of module `module` into `krate` (its scopes, children and
/// imports) and returns the paths it writes.
fn parse_file(krate: &mut Crate, module: &[String], code: &str) -> Vec<Written> {
    let t = tokens(code);
    let mut stack: Vec<(ModPath, i32)> = vec![(module.to_vec(), 0)];
    krate.scopes.entry(module.to_vec()).or_default();
    let mut depth = 0;
    let mut written = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let scope = stack.last().unwrap().0.clone();
        let after_sep = i > 0 && t[i - 1] == Tok::Sep;
        match &t[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if stack.len() > 1 && depth == stack.last().unwrap().1 {
                    stack.pop();
                }
            }
            Tok::Ident(k) if k == "mod" && !after_sep => {
                if let Some(Tok::Ident(name)) = t.get(i + 1) {
                    let name = name.clone();
                    krate
                        .scopes
                        .get_mut(&scope)
                        .unwrap()
                        .children
                        .insert(name.clone());
                    if t.get(i + 2) == Some(&Tok::Open) {
                        let mut child = scope.clone();
                        child.push(name);
                        krate.scopes.entry(child.clone()).or_default();
                        stack.push((child, depth));
                        depth += 1;
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(k) if k == "use" && !after_sep => {
                let end = (i..t.len()).find(|&j| t[j] == Tok::Semi).unwrap_or(t.len());
                let mut leaves = Vec::new();
                use_tree(&t[i + 1..end], &[], &mut leaves);
                for (mut path, name) in leaves {
                    if path.last().is_some_and(|s| s == "*") {
                        path.pop();
                    } else if let Some(name) = name.filter(|n| n != "_") {
                        let imports = &mut krate.scopes.get_mut(&scope).unwrap().imports;
                        imports.insert(name, path.clone());
                    }
                    written.push(Written {
                        scope: scope.clone(),
                        path,
                    });
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(first)
                if !after_sep && t.get(i + 1) == Some(&Tok::Sep) && is_ident(t.get(i + 2)) =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while t.get(j) == Some(&Tok::Sep) {
                    match t.get(j + 1) {
                        Some(Tok::Ident(s)) => path.push(s.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                written.push(Written { scope, path });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    written
}

impl Crate {
    /// The path from the crate root that `path`, written in `scope`, names;
    /// `None` for a path into another crate or to a local item.
    fn resolve(&self, scope: &[String], path: &[String], fuel: u32) -> Option<ModPath> {
        let (first, mut rest) = path.split_first()?;
        let mut base: ModPath = match first.as_str() {
            "crate" => Vec::new(),
            "self" => scope.to_vec(),
            "super" => {
                let mut base = scope[..scope.len().checked_sub(1)?].to_vec();
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                base
            }
            name => {
                let s = self.scopes.get(scope)?;
                if s.children.contains(name) {
                    let mut base = scope.to_vec();
                    base.push(name.to_string());
                    base
                } else {
                    let target = s.imports.get(name)?;
                    if fuel == 0 || target.first() == Some(first) && target.len() == 1 {
                        return None;
                    }
                    self.resolve(scope, target, fuel - 1)?
                }
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// `path` followed through re-exports: where a module along it imports
    /// the next name, that import's target (the crate root's own
    /// re-exports are [`ROOT_NAMES`]'s).
    fn canonical(&self, mut path: ModPath) -> ModPath {
        'follow: for _ in 0..16 {
            for i in 1..path.len() {
                let Some(scope) = self.scopes.get(&path[..i]) else {
                    break; // inside an item
                };
                if scope.children.contains(&path[i]) {
                    continue;
                }
                if let Some(target) = scope.imports.get(&path[i]) {
                    if let Some(mut to) = self.resolve(&path[..i], target, 16) {
                        to.extend(path[i + 1..].iter().cloned());
                        if to != path {
                            path = to;
                            continue 'follow;
                        }
                    }
                }
                break;
            }
            break;
        }
        path
    }
}

/// The module path of a file of `src/`: `comm/mod.rs` is `comm`,
/// `comm/attribute.rs` is `comm::attribute`, `lib.rs` is the root.
fn module_path_of_file(file: &str) -> ModPath {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

impl Layers {
    /// The module whose layer `path` (from the crate root) gets: its
    /// longest prefix with a layer of its own (`runtime::job`), else its
    /// first name, a module or a name of the crate root.
    fn module_of_path(&self, path: &[String]) -> Option<String> {
        for n in (2..=path.len()).rev() {
            let module = path[..n].join("::");
            if self.file_layer_of_module(&module).is_some() {
                return Some(module);
            }
        }
        let name = path.first()?;
        if self.layer_of_module(name).is_some() {
            return Some(name.clone());
        }
        self.root_names
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, m)| m.to_string())
    }
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

/// Every file of `src/`: (path under `src/`, text), in path order.
fn src_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let file = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (file, fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// Every upward edge of `files`: (file, module, file's layer, module's
/// layer).
fn upward_edges(layers: &Layers, files: &[(String, String)]) -> Vec<(String, String, u8, u8)> {
    let mut krate = Crate::default();
    let written: Vec<(&str, Vec<Written>)> = files
        .iter()
        .map(|(file, text)| {
            let module = module_path_of_file(file);
            (
                file.as_str(),
                parse_file(&mut krate, &module, &code_of(text)),
            )
        })
        .collect();
    let mut edges = Vec::new();
    for (file, paths) in written {
        if file == "lib.rs" {
            continue; // the crate root re-exports every layer
        }
        let from = layers.layer_of_file(file);
        for Written { scope, path } in paths {
            let Some(path) = krate.resolve(&scope, &path, 16) else {
                continue; // another crate's, or a local item
            };
            let Some(module) = layers.module_of_path(&krate.canonical(path)) else {
                continue; // a macro or item defined at the root of no layer
            };
            let to = layers.layer_of_module(&module).unwrap();
            if to > from && !edges.iter().any(|(f, m, _, _)| f == file && *m == module) {
                edges.push((file.to_string(), module, from, to));
            }
        }
    }
    edges
}

#[test]
fn no_import_points_upward() {
    let edges = upward_edges(&SRC, &src_files());
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

// The checker's own tests, on synthetic crates: modules `low` (L0), `mid`
// (L1) and `high` (L2), and `mid/api.rs` at L2 (an upper file inside a
// lower module, as `runtime/job.rs` is a lower file inside `runtime`).

const TEST_LAYERS: Layers = Layers {
    modules: &[("low", 0), ("mid", 1), ("high", 2)],
    files: &[("mid/api.rs", 2)],
    root_names: &[("Rank", "lib"), ("api", "mid")],
};

fn edges_of(files: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|&(f, t)| (f.to_string(), t.to_string()))
        .collect();
    upward_edges(&TEST_LAYERS, &files)
        .into_iter()
        .map(|(f, m, _, _)| (f, m))
        .collect()
}

fn edges(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|&(f, m)| (f.to_string(), m.to_string()))
        .collect()
}

const LIB: &str = "mod low;\nmod mid;\nmod high;\npub use mid::api;\n";
const MID: &str = "mod api;\nmod core;\n";

#[test]
fn the_checker_sees_upward_crate_paths() {
    let low = "use crate::low::X;\n// use crate::high::Y;\nuse crate::{mid::M, high::H};\n\
               #[cfg(test)]\nmod tests {\n    use crate::high::run;\n}\n\
               fn f() { crate::high::send(); let s = \"crate::high::Z\"; }\n";
    assert_eq!(
        edges_of(&[("lib.rs", LIB), ("low/mod.rs", low), ("mid/mod.rs", MID)]),
        edges(&[("low/mod.rs", "mid"), ("low/mod.rs", "high")])
    );
    // Comments, strings and test modules alone: nothing.
    let quiet = "// use crate::high::Y;\nfn f() { let s = \"crate::high::Z\"; }\n\
                 #[cfg(test)]\nmod tests {\n    use crate::high::run;\n}\n";
    assert!(edges_of(&[("lib.rs", LIB), ("low/mod.rs", quiet)]).is_empty());
}

/// `super::` (and `super::super::`, `self::`) name modules as rustc does.
#[test]
fn the_checker_resolves_super_and_self() {
    let core = "use super::api::Api;\n";
    assert_eq!(
        edges_of(&[("lib.rs", LIB), ("mid/mod.rs", MID), ("mid/core.rs", core)]),
        edges(&[("mid/core.rs", "mid::api")])
    );
    let low = "mod inner;\n";
    let inner = "fn f() { super::super::high::go(); self::g(); }\n";
    assert_eq!(
        edges_of(&[
            ("lib.rs", LIB),
            ("low/mod.rs", low),
            ("low/inner.rs", inner)
        ]),
        edges(&[("low/inner.rs", "high")])
    );
    // Inside an inline module, `super` is the file's module.
    let sealed = "mod sealed {\n    pub trait S { fn f(&self) -> super::super::api::Api; }\n}\n\
                  fn g() -> super::Low { todo!() }\n";
    assert_eq!(
        edges_of(&[
            ("lib.rs", LIB),
            ("mid/mod.rs", MID),
            ("mid/core.rs", sealed),
        ]),
        edges(&[("mid/core.rs", "mid::api")])
    );
}

/// A module that re-exports its upper child (`mod api; pub use api::Api;`)
/// imports from it; and a path through the re-export names the child.
#[test]
fn the_checker_sees_child_module_re_exports() {
    let mid = "mod api;\nmod core;\npub use api::{Api, Other as Renamed};\npub use core::Core;\n";
    let low = "use crate::mid::Renamed;\nfn f() -> crate::mid::Core { todo!() }\n";
    assert_eq!(
        edges_of(&[("lib.rs", LIB), ("mid/mod.rs", mid), ("low/mod.rs", low)]),
        edges(&[
            ("mid/mod.rs", "mid::api"),
            ("low/mod.rs", "mid::api"),
            ("low/mod.rs", "mid"),
        ])
    );
    // Through an imported name, as rustc resolves it.
    let alias = "use crate::mid as m;\nfn f() -> m::Api { todo!() }\n";
    assert_eq!(
        edges_of(&[("lib.rs", LIB), ("mid/mod.rs", mid), ("low/mod.rs", alias)]),
        edges(&[
            ("mid/mod.rs", "mid::api"),
            ("low/mod.rs", "mid::api"),
            ("low/mod.rs", "mid")
        ])
    );
}

/// Nested groups: `use a::{b::{c, d}}` is `a::b::c` and `a::b::d`.
#[test]
fn the_checker_reads_nested_use_groups() {
    let mut krate = Crate::default();
    let written = parse_file(
        &mut krate,
        &["mid".to_string()],
        "mod api;\nuse api::{inner::{c, d as e}, self};\nuse crate::{low::{x, y::{z, *}}, high::H};\n",
    );
    let resolved: BTreeSet<String> = written
        .iter()
        .filter_map(|w| krate.resolve(&w.scope, &w.path, 16))
        .map(|p| p.join("::"))
        .collect();
    let expected: BTreeSet<String> = [
        "mid::api::inner::c",
        "mid::api::inner::d",
        "mid::api",
        "low::x",
        "low::y::z",
        "low::y",
        "high::H",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(resolved, expected);
    let mid = "mod api;\nuse api::{inner::{c, d}};\n";
    assert_eq!(
        edges_of(&[("lib.rs", LIB), ("mid/mod.rs", mid)]),
        edges(&[("mid/mod.rs", "mid::api")])
    );
}
