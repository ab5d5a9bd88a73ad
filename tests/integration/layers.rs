//! The layering of ARCHITECTURE.md, checked on the source: every `crate::` path of a library
//! module names a module of a lower layer (never its own layer, never a higher one), every
//! top-level module has a layer, and the command line's modules import each other without a
//! cycle. A deliberate upward import and a deliberate cycle are shown to fail.
//!
//! What is read: the `crate::` paths outside comments, including grouped ones
//! (`crate::{a, b::c}`) and the crate root's re-exports (`crate::Error` is the `error`
//! module's); for `src/cli`, the `super::NAME` and `crate::cli::NAME` paths between its files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The layers of ARCHITECTURE.md's ```layers block, top first: module name -> rank (0 = top).
fn declared_layers() -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let start = text.find("```layers\n").expect("ARCHITECTURE.md has a ```layers block");
    let body = &text[start + "```layers\n".len()..];
    let body = &body[..body.find("```").expect("the layers block ends")];
    let mut out = BTreeMap::new();
    for (rank, line) in body.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        for name in line.split_whitespace() {
            assert!(out.insert(name.to_owned(), rank).is_none(), "{name} is in two layers");
        }
    }
    out
}

/// The text without `//` comments (line and doc comments).
fn code_of(text: &str) -> String {
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// The items of a `{...}` group (its text after the `{`), split at the commas of its own
/// level: nested groups stay whole (`b::{c, d}` is one item).
fn group_items(group: &str) -> Vec<String> {
    let (mut depth, mut item, mut out) = (0usize, String::new(), Vec::new());
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    out.push(item);
    out.into_iter().map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()).collect()
}

fn first_segment(path: &str) -> String {
    path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The first path segment after each `crate::`, grouped paths expanded (nested groups read
/// whole), and the `super::` paths of the file at `module_path` (its modules from the
/// crate root: `["retrieve", "gsr"]` for src/retrieve/gsr.rs) that climb to the crate root
/// (`super::super::eval` there names `eval`).
fn crate_references_of(code: &str, module_path: &[String]) -> Vec<String> {
    let mut out = crate_references(code);
    let bytes = code.as_bytes();
    let inline = inline_module_depths(code);
    let mut at = 0;
    while let Some(i) = code[at..].find("super::") {
        let start = at + i;
        at = start + "super::".len();
        // Only the first `super::` of a chain, not one preceded by a path segment.
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_' || code[..start].ends_with("::")) {
            continue;
        }
        let mut rest = &code[start..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        at = code.len() - rest.len();
        // A file's module path and the inline modules around the path (`mod tests { ... }`);
        // `super` climbs one module per `super`.
        if ups < module_path.len() + inline[start] {
            continue; // stays inside its top-level module
        }
        out.extend(first_segments(rest));
    }
    out.retain(|n| !n.is_empty());
    out
}

/// The first segment of the path that `rest` starts with, or of each item when it starts
/// a `{...}` group.
fn first_segments(rest: &str) -> Vec<String> {
    match rest.strip_prefix('{') {
        Some(group) => group_items(group).iter().map(|i| first_segment(i)).collect(),
        None => vec![first_segment(rest)],
    }
}

/// For every byte of `code`, how many inline modules (`mod name { ... }`) enclose it.
fn inline_module_depths(code: &str) -> Vec<usize> {
    let mut out = vec![0; code.len() + 1];
    let (mut braces, mut open_mods, mut pending) = (0usize, Vec::<usize>::new(), false);
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if code.is_char_boundary(i) && code[i..].starts_with("mod ") && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')) {
            let rest = &code[i + 4..];
            let name_len = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').count();
            if rest[name_len..].trim_start().starts_with('{') {
                pending = true;
            }
        }
        match bytes[i] {
            b'{' => {
                braces += 1;
                if pending {
                    open_mods.push(braces);
                    pending = false;
                }
            }
            b'}' => {
                if open_mods.last() == Some(&braces) {
                    open_mods.pop();
                }
                braces = braces.saturating_sub(1);
            }
            _ => {}
        }
        out[i] = open_mods.len();
        i += 1;
    }
    out
}

/// The first path segment after each `crate::`, grouped paths expanded.
fn crate_references(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `my_crate::`, not the crate root
        }
        out.extend(first_segments(rest));
    }
    out.retain(|n| !n.is_empty());
    out
}

/// Items the crate root re-exports (`pub use module::{A, B}` in lib.rs): item -> module.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in code_of(lib).lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else { continue };
        let rest = rest.trim_end_matches(';');
        let Some((module, items)) = rest.split_once("::") else { continue };
        for item in items.trim_start_matches('{').trim_end_matches('}').split(',') {
            let item = item.trim();
            if !item.is_empty() {
                out.insert(item.to_owned(), module.to_owned());
            }
        }
    }
    out
}

/// A library source file: its top-level module and its text.
struct Source {
    file: String,
    module: String,
    /// Its modules from the crate root (`["retrieve", "gsr"]`; a `mod.rs` is its folder's).
    path: Vec<String>,
    text: String,
}

fn library_sources() -> Vec<Source> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = root().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let first = rel.split('/').next().unwrap().trim_end_matches(".rs").to_owned();
            if first == "cli" || first == "main" || first == "lib" {
                return None;
            }
            let mut path: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
            if path.last().is_some_and(|l| l == "mod") {
                path.pop();
            }
            Some(Source { file: format!("src/{rel}"), module: first, path, text: std::fs::read_to_string(&p).unwrap() })
        })
        .collect()
}

/// Every import that breaks the layering, as `file: a -> b (why)`.
fn layer_violations(sources: &[Source], layers: &BTreeMap<String, usize>, reexports: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = BTreeSet::new();
    for s in sources {
        let Some(&from) = layers.get(&s.module) else {
            out.insert(format!("{}: module `{}` has no layer in ARCHITECTURE.md", s.file, s.module));
            continue;
        };
        for name in crate_references_of(&code_of(&s.text), &s.path) {
            let target = reexports.get(&name).cloned().unwrap_or(name);
            if target == s.module {
                continue;
            }
            let Some(&to) = layers.get(&target) else {
                // Neither a module nor a re-export: a path the check cannot place.
                out.insert(format!("{}: {} -> `{target}`, not a module of the layers or a re-export of the crate root", s.file, s.module));
                continue;
            };
            if to <= from {
                let why = if to == from { "same layer" } else { "upward" };
                out.insert(format!("{}: {} -> {} ({why})", s.file, s.module, target));
            }
        }
    }
    out.into_iter().collect()
}

/// The command line's modules (`src/cli/NAME.rs`) and the ones each imports.
fn cli_graph(extra: Option<(&str, &str)>) -> BTreeMap<String, BTreeSet<String>> {
    let dir = root().join("src/cli");
    let names: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "mod")
        .collect();
    let mut graph = BTreeMap::new();
    for n in &names {
        let mut text = code_of(&std::fs::read_to_string(dir.join(format!("{n}.rs"))).unwrap());
        if let Some((file, line)) = extra {
            if file == n {
                text.push('\n');
                text.push_str(line);
            }
        }
        let mut deps = BTreeSet::new();
        for prefix in ["super::", "crate::cli::"] {
            for (i, _) in text.match_indices(prefix) {
                let name: String = text[i + prefix.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if names.contains(&name) && &name != n {
                    deps.insert(name);
                }
            }
        }
        graph.insert(n.clone(), deps);
    }
    graph
}

/// A cycle of the graph, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(n: &str, graph: &BTreeMap<String, BTreeSet<String>>, state: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) -> Option<Vec<String>> {
        state.insert(n.to_owned(), 1);
        stack.push(n.to_owned());
        for d in &graph[n] {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|x| x == d).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(d, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn reexports() -> BTreeMap<String, String> {
    root_reexports(&std::fs::read_to_string(root().join("src/lib.rs")).unwrap())
}

#[test]
fn the_library_imports_only_downward() {
    let layers = declared_layers();
    let sources = library_sources();
    assert!(sources.len() > 50, "found {} library files", sources.len());
    let v = layer_violations(&sources, &layers, &reexports());
    assert!(v.is_empty(), "imports against the layering of ARCHITECTURE.md:\n{}", v.join("\n"));
    // Every layer names a module that exists (a renamed module must be renamed there too).
    let modules: BTreeSet<&str> = sources.iter().map(|s| s.module.as_str()).collect();
    for name in layers.keys() {
        assert!(modules.contains(name.as_str()), "ARCHITECTURE.md's layers name `{name}`, which is not a module of src/");
    }
}

#[test]
fn an_upward_import_fails_the_check() {
    let layers = declared_layers();
    let mut sources = library_sources();
    let store = sources.iter_mut().find(|s| s.file == "src/store/mod.rs").unwrap();
    store.text.push_str("\nuse crate::eval::pipeline; // a deliberate upward import\n");
    let link = sources.iter_mut().find(|s| s.file == "src/link/mod.rs").unwrap();
    link.text.push_str("\nfn f() { let _ = crate::{ids::EntityId, graph::pcst::PcstError::NoClusters}; }\n");
    let v = layer_violations(&sources, &layers, &reexports());
    assert_eq!(v, ["src/link/mod.rs: link -> graph (same layer)", "src/store/mod.rs: store -> eval (upward)"]);
    // The root's re-exports count as their module.
    sources.iter_mut().find(|s| s.file == "src/ids.rs").unwrap().text.push_str("\nfn g(_: crate::Error) {}\n");
    let v = layer_violations(&sources, &layers, &reexports());
    assert!(v.contains(&"src/ids.rs: ids -> error (upward)".to_owned()), "{v:?}");
    // A comment is not an import.
    let mut sources = library_sources();
    sources.iter_mut().find(|s| s.file == "src/ids.rs").unwrap().text.push_str("\n// see crate::eval for the users\n");
    assert!(layer_violations(&sources, &layers, &reexports()).is_empty());
}

#[test]
fn the_holes_of_a_text_check_are_closed() {
    let layers = declared_layers();
    let with = |file: &str, line: &str| {
        let mut sources = library_sources();
        sources.iter_mut().find(|s| s.file == file).unwrap().text.push_str(line);
        layer_violations(&sources, &layers, &reexports())
    };
    // An upward import through `super::super::`.
    assert_eq!(with("src/retrieve/gsr.rs", "\nuse super::super::eval::pipeline;\n"), ["src/retrieve/gsr.rs: retrieve -> eval (upward)"]);
    // `super::` inside its own top-level module is no import of another.
    assert!(with("src/retrieve/gsr.rs", "\nuse super::bm25;\n").is_empty());
    // After the first `}` of a nested group.
    assert_eq!(with("src/store/mod.rs", "\nuse crate::{ids::{EntityId, RelationId}, eval::pipeline};\n"), ["src/store/mod.rs: store -> eval (upward)"]);
    // An unknown first segment is reported, not skipped.
    assert_eq!(
        with("src/ids.rs", "\nfn h(_: crate::nowhere::Thing) {}\n"),
        ["src/ids.rs: ids -> `nowhere`, not a module of the layers or a re-export of the crate root"]
    );
}

/// python/'s Rust uses the library as any outside program would: its public surface, never
/// the unstable `internals` feature's module.
#[test]
fn the_python_package_uses_the_public_surface_only() {
    let dir = root().join("python/src");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let code = code_of(&std::fs::read_to_string(&p).unwrap());
        if code.contains("trellis::internals") || code.contains("crate::internals") {
            found.push(p.display().to_string());
        }
    }
    assert!(found.is_empty(), "{found:?}");
    let manifest = std::fs::read_to_string(root().join("python/Cargo.toml")).unwrap();
    assert!(!manifest.contains("internals"), "python/Cargo.toml turns on the internals feature");
}

#[test]
fn the_command_line_modules_have_no_cycle() {
    let graph = cli_graph(None);
    assert!(graph.len() > 10, "{graph:?}");
    assert_eq!(find_cycle(&graph), None);
    // `eval pipeline` uses the shared dialog options; the reverse would close a cycle.
    let cycle = find_cycle(&cli_graph(Some(("dialogs", "use super::eval_pipeline::EvalPipelineArgs;")))).expect("a cycle");
    assert_eq!(cycle.first(), cycle.last());
    assert!(cycle.contains(&"dialogs".to_owned()) && cycle.contains(&"eval_pipeline".to_owned()), "{cycle:?}");
}
