//! The library's errors as documented (README, docs/library.md, ARCHITECTURE.md): every public
//! error family converts into `trellis::Error`; no public error carries a `String` "problem"
//! (what is wrong is a typed value) or a type of a backend crate (RocksDB, ONNX Runtime,
//! libloading, tokenizers: those are wrapped in `trellis::BackendError`); no public function
//! hands out a backend crate's type. Checked on the source, so a new error type cannot miss
//! the rules silently; each rule is shown failing on a deliberate violation.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file of the library (not the command line, not tests).
fn library_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "cli") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                // internals.rs: the unstable feature's module, documented as no API.
                if name != "main.rs" && name != "tests.rs" && name != "internals.rs" && !name.ends_with("_tests.rs") {
                    out.push(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("src"), &mut out);
    out.sort();
    out
}

/// A public error type: its name, where it is and its body (fields of all variants).
#[derive(Debug)]
struct ErrorType {
    name: String,
    file: String,
    body: String,
}

/// The text without `//` comments and without `#[cfg(test)]` modules at the end of a file.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

/// The public types deriving `thiserror::Error` in `code`.
fn error_types(file: &str, code: &str) -> Vec<ErrorType> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("thiserror::Error") {
        rest = &rest[i + "thiserror::Error".len()..];
        // The item after the derive (attributes between are skipped).
        let Some(decl) = ["pub enum ", "pub struct "].iter().filter_map(|k| rest.find(k).map(|j| (j, k.len()))).min() else { break };
        let (j, klen) = decl;
        // Not public when a `pub(crate)` or a private item comes first.
        let before = &rest[..j];
        if before.contains("enum ") || before.contains("struct ") {
            continue;
        }
        let after = &rest[j + klen..];
        let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let body_start = after.find(['{', '(', ';']).unwrap_or(0);
        let body = match after.as_bytes()[body_start] {
            b'{' => balanced(&after[body_start..], '{', '}'),
            b'(' => balanced(&after[body_start..], '(', ')'),
            _ => String::new(),
        };
        out.push(ErrorType { name, file: file.to_owned(), body });
    }
    out
}

fn balanced(text: &str, open: char, close: char) -> String {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return text[..=i].to_owned();
            }
        }
    }
    text.to_owned()
}

fn all_error_types() -> Vec<ErrorType> {
    let mut out = Vec::new();
    for p in library_files() {
        let file = p.strip_prefix(root()).unwrap().display().to_string();
        out.extend(error_types(&file, &code_of(&std::fs::read_to_string(&p).unwrap())));
    }
    out
}

/// Errors that are not families of their own but the detail one carries (its `source` or a
/// typed problem): type -> the family that carries it, checked to be a field of it.
const CARRIED: &[(&str, &str)] = &[
    ("BackendError", "ReadError"),
    ("OutOfRange", "SettingError"),
    ("UnknownName", "SettingError"),
    ("TooMuchMemory", "GsrError"),
    ("Cancelled", "Error"),
    ("FileProblem", "TokenizerError"),
    ("InputProblem", "EncoderError"),
    ("OutputProblem", "EncoderError"),
    ("BoundaryProblem", "LinearizeError"),
    ("LayoutProblem", "OpenError"),
    ("MessageProblem", "RequestError"),
    ("DialogTooLong", "RequestError"),
    ("DocumentLineError", "TextError"),
    ("VectorFileProblem", "VectorsError"),
    ("DocumentProblem", "DocumentLineError"),
    ("KnowledgeProblem", "LineError"),
    ("InitFailure", "RuntimeError"),
    ("EncodingNameError", "SettingError"),
    ("DatasetProblem", "DatasetError"),
    ("SearchError", "GsrError"),
    ("LineProblem", "IngestError"),
    ("LineProblem", "ResponsesError"),
    // Boxed in `FieldProblem::Invalid`, a task's own check of its trellis.json section.
    ("PlaceholderProblem", "FieldProblem"),
    ("PositionDependence", "TokenizerError"),
    ("CheckerProblem", "CheckerError"),
    ("InterfaceIssue", "InterfaceProblem"),
    ("InterfaceProblem", "Seq2SeqError"),
    ("CallError", "Seq2SeqError"),
    ("ListedProblem", "Seq2SeqError"),
    ("FieldProblem", "ModelDirError"),
    ("Corruption", "ReadError"),
    ("StaleReason", "TokenIndexError"),
    ("TextCorruption", "TextError"),
    ("ScorerProblem", "ScorerError"),
];

/// Field names that hold what is wrong: a typed value, never free text.
const PROBLEM_FIELDS: &[&str] = &["problem", "reason", "what", "detail", "message", "why"];
const BACKEND_CRATES: &[&str] = &["rocksdb::", "ort::", "libloading::", "tokenizers::"];

/// The bodies of the types named `name` (two modules may each have a `LineProblem`).
fn bodies_of<'t>(types: &'t [ErrorType], name: &str) -> Vec<&'t str> {
    types.iter().filter(|t| t.name == name).map(|t| t.body.as_str()).collect()
}

/// The rules on a set of error types and the umbrella's body; one line per violation.
fn violations(types: &[ErrorType], umbrella: &str) -> Vec<String> {
    let mut out = Vec::new();
    for t in types {
        if t.name == "Error" {
            continue;
        }
        let converts = umbrella.split("#[from]").skip(1).any(|s| {
            let ty: String = s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            ty.rsplit("::").next() == Some(t.name.as_str())
        });
        let carriers: Vec<&str> = CARRIED.iter().filter(|(n, _)| *n == t.name).map(|(_, by)| *by).collect();
        let carried = carriers.iter().any(|by| bodies_of(types, by).iter().any(|b| b.contains(&t.name) || b.contains("Invalid(Box<dyn std::error::Error")));
        if !converts && carriers.is_empty() {
            out.push(format!("{} ({}): no conversion into trellis::Error", t.name, t.file));
        } else if !converts && !carried {
            out.push(format!("{} ({}): listed as carried by {carriers:?}, none of which has a field of it", t.name, t.file));
        }
        // A tuple variant of free text is a String problem too; a panic's text is data.
        if t.body.contains("(String)") && t.name != "InitFailure" {
            out.push(format!("{} ({}): a variant holds a bare String", t.name, t.file));
        }
        for field in PROBLEM_FIELDS {
            if t.body.contains(&format!("{field}: String")) {
                out.push(format!("{} ({}): field `{field}` is a String", t.name, t.file));
            }
        }
        for backend in BACKEND_CRATES {
            if t.body.contains(backend) {
                out.push(format!("{} ({}): carries a {backend} type", t.name, t.file));
            }
        }
    }
    out
}

fn umbrella() -> String {
    code_of(&std::fs::read_to_string(root().join("src/error.rs")).unwrap())
}

#[test]
fn every_public_error_converts_and_carries_no_string_problem_or_backend_type() {
    let types = all_error_types();
    assert!(types.len() >= 30, "found only {} error types: the scan is broken", types.len());
    let v = violations(&types, &umbrella());
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_rules_catch_a_deliberate_violation() {
    let code = "#[derive(Debug, thiserror::Error)]\npub enum NewError {\n    #[error(\"x\")]\n    Bad { problem: String, source: rocksdb::Error },\n    #[error(\"{0}\")]\n    Other(String),\n}\n";
    let types = error_types("src/new.rs", code);
    assert_eq!(types.len(), 1);
    let v = violations(&types, &umbrella());
    assert!(v.iter().any(|l| l.contains("no conversion into trellis::Error")), "{v:?}");
    assert!(v.iter().any(|l| l.contains("field `problem` is a String")), "{v:?}");
    assert!(v.iter().any(|l| l.contains("carries a rocksdb:: type")), "{v:?}");
    assert!(v.iter().any(|l| l.contains("a variant holds a bare String")), "{v:?}");
    // A crate-private error is not part of the surface.
    assert!(error_types("src/x.rs", "#[derive(thiserror::Error)]\npub(crate) enum Inner { A }").is_empty());
}

/// Public functions (outside the command line) never hand out a backend crate's type.
#[test]
fn no_public_function_returns_a_backend_type() {
    let mut found = Vec::new();
    for p in library_files() {
        let code = code_of(&std::fs::read_to_string(&p).unwrap());
        for line in code.lines() {
            let l = line.trim_start();
            if !l.starts_with("pub fn ") {
                continue;
            }
            let Some(ret) = l.split("->").nth(1) else { continue };
            let tokenizer = ret.match_indices("&Tokenizer").any(|(i, m)| !ret[i + m.len()..].starts_with(|c: char| c.is_alphanumeric()));
            if BACKEND_CRATES.iter().any(|b| ret.contains(b)) || tokenizer {
                found.push(format!("{}: {l}", p.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
