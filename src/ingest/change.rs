//! What a change of a live update is ([`Change`]) and how a change file is read: one JSON
//! object per line ([`read_change_file`]); each bad line is an error naming its file and line.

use super::error::IngestError;
use super::InputSpec;
use std::path::{Path, PathBuf};

/// A fact named by the keys of its terms (as a TSV line names them).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FactKeys {
    /// The subject's key.
    pub subject: String,
    /// The relation's key (with the store's reverse prefix: the reverse of the rest).
    pub relation: String,
    /// The object's key.
    pub object: String,
}

/// A change with the file and line it was read from (`None`: given directly).
pub type SourcedChange = (Option<(PathBuf, u64)>, Change);

/// One change of an update.
#[derive(Clone, Debug)]
pub enum Change {
    /// Add a fact; terms the store lacks are added (plain names).
    Add(FactKeys),
    /// Retract a stored fact.
    Retract(FactKeys),
    /// Add every fact, label and alias of a file in any ingest format.
    AddFile(InputSpec),
    /// Retract every fact of a file in any ingest format.
    RetractFile(InputSpec),
    /// Delete an entity, given by key or, when no key matches, by its one name: its facts,
    /// names and aliases go; its id is never reused.
    DeleteEntity(String),
    /// Give the entity with this key a new name.
    Rename {
        /// The entity's key.
        key: String,
        /// The new name.
        name: String,
    },
    /// Add an alias (another name it is linked by) to the entity with this key.
    Alias {
        /// The entity's key.
        key: String,
        /// The alias.
        alias: String,
    },
    /// Remove an alias of the entity with this key.
    Unalias {
        /// The entity's key.
        key: String,
        /// The alias.
        alias: String,
    },
    /// Remove what the loads and updates of this source (`--source NAME`) asserted, except
    /// the facts another load or update also asserts.
    RetractSource(String),
}

impl Change {
    /// The change as the command line writes it, for reports.
    pub fn describe(&self) -> String {
        let fact = |f: &FactKeys| format!("{}\t{}\t{}", f.subject, f.relation, f.object);
        match self {
            Change::Add(f) => format!("add {}", fact(f)),
            Change::Retract(f) => format!("retract {}", fact(f)),
            Change::AddFile(s) => format!("add {}", s.display()),
            Change::RetractFile(s) => format!("retract {}", s.display()),
            Change::DeleteEntity(e) => format!("delete entity {e:?}"),
            Change::Rename { key, name } => format!("rename {key:?} to {name:?}"),
            Change::Alias { key, alias } => format!("alias {key:?} as {alias:?}"),
            Change::Unalias { key, alias } => format!("unalias {alias:?} of {key:?}"),
            Change::RetractSource(name) => format!("retract source {name:?}"),
        }
    }
}

/// Why a line of a change file is not a change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeFileProblem {
    /// Not JSON.
    #[error("invalid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// JSON, but not an object with a string `op`.
    #[error("expected a JSON object with an \"op\" string")]
    NotAChange,
    /// A field that is not a string.
    #[error("field {field:?} must be a string")]
    NotAString {
        /// The field.
        field: String,
    },
    /// A field the op does not read (a typo would otherwise be ignored).
    #[error("op {op:?} has no field {field:?}")]
    UnknownField {
        /// The op.
        op: &'static str,
        /// The field.
        field: String,
    },
    /// An `op` this build does not know.
    #[error("unknown op {op:?} (add, retract, add_file, retract_file, delete_entity, rename, alias, unalias, retract_source)")]
    UnknownOp {
        /// The op given.
        op: String,
    },
    /// A field the op needs is missing.
    #[error("op {op:?} needs the field {field:?}")]
    Missing {
        /// The op.
        op: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// Bytes that are not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// A line over the line limit.
    #[error("the line is longer than {limit} bytes")]
    TooLong {
        /// The limit.
        limit: usize,
    },
    /// A `format` that is not an ingest format.
    #[error("unknown format {format:?} (tsv, pipe or ntriples)")]
    UnknownFormat {
        /// The format given.
        format: String,
    },
}

/// Reads a change file: one JSON object per line, `{"op": ..., ...}` (blank lines skipped):
/// `add` / `retract` with `subject`, `relation`, `object`; `add_file` / `retract_file` with
/// `path` (relative to the change file's folder) and optional `format`; `delete_entity` with
/// `entity` (key or name); `rename` with `entity` (key) and `name`; `alias` / `unalias` with
/// `entity` (key) and `alias`; `retract_source` with `source`. Each change carries its line
/// for reports.
pub fn read_change_file(path: &Path) -> Result<Vec<SourcedChange>, IngestError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| IngestError::io(path, e))?;
    let reader = std::io::BufReader::new(file);
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut out = Vec::new();
    for (i, line) in reader.split(b'\n').enumerate() {
        let line_no = i as u64 + 1;
        let bytes = line.map_err(|e| IngestError::io(path, e))?;
        let fail = |problem| IngestError::ChangeFile { file: path.to_path_buf(), line: line_no, problem };
        if bytes.len() > super::input::MAX_LINE_BYTES {
            return Err(fail(ChangeFileProblem::TooLong { limit: super::input::MAX_LINE_BYTES }));
        }
        let text = std::str::from_utf8(&bytes).map_err(|_| fail(ChangeFileProblem::NotUtf8))?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let change = parse_change(text, &base).map_err(fail)?;
        out.push((Some((path.to_path_buf(), line_no)), change));
    }
    Ok(out)
}

fn parse_change(text: &str, base: &Path) -> Result<Change, ChangeFileProblem> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(ChangeFileProblem::NotJson)?;
    Change::from_json(&value, base)
}

impl Change {
    /// A change in the change file's JSON shape (`{"op": ..., ...}`, see
    /// [`read_change_file`]); file paths relative to `base`.
    pub fn from_json(value: &serde_json::Value, base: &Path) -> Result<Change, ChangeFileProblem> {
        change_of(value, base)
    }
}

fn change_of(value: &serde_json::Value, base: &Path) -> Result<Change, ChangeFileProblem> {
    let obj = value.as_object().ok_or(ChangeFileProblem::NotAChange)?;
    let op_text = obj.get("op").and_then(|v| v.as_str()).ok_or(ChangeFileProblem::NotAChange)?;
    const OPS: [(&str, &[&str]); 9] = [
        ("add", &["subject", "relation", "object"]),
        ("retract", &["subject", "relation", "object"]),
        ("add_file", &["path", "format"]),
        ("retract_file", &["path", "format"]),
        ("delete_entity", &["entity"]),
        ("rename", &["entity", "name"]),
        ("alias", &["entity", "alias"]),
        ("unalias", &["entity", "alias"]),
        ("retract_source", &["source"]),
    ];
    let (op, fields) = OPS.iter().find(|(name, _)| *name == op_text).ok_or_else(|| ChangeFileProblem::UnknownOp { op: op_text.to_owned() })?;
    if let Some(field) = obj.keys().find(|k| *k != "op" && !fields.contains(&k.as_str())) {
        return Err(ChangeFileProblem::UnknownField { op, field: field.clone() });
    }
    let get = |field: &'static str| -> Result<Option<String>, ChangeFileProblem> {
        match obj.get(field) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ChangeFileProblem::NotAString { field: field.to_owned() }),
        }
    };
    let need = |field: &'static str| -> Result<String, ChangeFileProblem> { get(field)?.ok_or(ChangeFileProblem::Missing { op, field }) };
    let fact = || -> Result<FactKeys, ChangeFileProblem> { Ok(FactKeys { subject: need("subject")?, relation: need("relation")?, object: need("object")? }) };
    let file = || -> Result<InputSpec, ChangeFileProblem> {
        let path = base.join(need("path")?);
        let mut spec = InputSpec::new(path);
        if let Some(format) = get("format")? {
            spec.format = Some(format.parse().map_err(|_| ChangeFileProblem::UnknownFormat { format })?);
        }
        Ok(spec)
    };
    Ok(match *op {
        "add" => Change::Add(fact()?),
        "retract" => Change::Retract(fact()?),
        "add_file" => Change::AddFile(file()?),
        "retract_file" => Change::RetractFile(file()?),
        "delete_entity" => Change::DeleteEntity(need("entity")?),
        "rename" => Change::Rename { key: need("entity")?, name: need("name")? },
        "alias" => Change::Alias { key: need("entity")?, alias: need("alias")? },
        "retract_source" => Change::RetractSource(need("source")?),
        _ => Change::Unalias { key: need("entity")?, alias: need("alias")? },
    })
}
