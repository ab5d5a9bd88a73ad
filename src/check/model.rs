//! The checker file (`checker.json`): the relation lexicon learned from training dialogs
//! and how functional each relation is in the graph it was learned on
//! (`tools/train/check_lexicon.py` writes it; `models/check-opendialkg` ships one).

use crate::files::{read_limited, FileProblem};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The checker file's name in a model directory.
pub const CHECKER_FILE: &str = "checker.json";
/// The most a checker file may hold (the shipped one is under 100 KB).
pub const CHECKER_LIMIT: u64 = 16 << 20;
/// Longest cue, in words.
pub const MAX_CUE_WORDS: usize = 4;

/// A checker file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckerError {
    /// It cannot be read.
    #[error("{path}: {problem}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: FileProblem,
    },
    /// It is not a checker file.
    #[error("{path}: not a fact checker file: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: CheckerProblem,
    },
}

/// What is wrong with a checker file's content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckerProblem {
    /// Not the expected JSON.
    #[error("{0}")]
    Json(serde_json::Error),
    /// Another format or task.
    #[error("format {format} task {task:?}; this build reads format 1, task \"fact-check\"")]
    Kind {
        /// Its format.
        format: u32,
        /// Its task.
        task: String,
    },
    /// A cue that is empty or longer than [`MAX_CUE_WORDS`] words.
    #[error("relation {relation:?}: cue {cue:?} must have 1 to {MAX_CUE_WORDS} words")]
    Cue {
        /// The relation.
        relation: String,
        /// The cue.
        cue: String,
    },
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8 at byte {byte}")]
    Utf8 {
        /// Offset of the first invalid byte.
        byte: usize,
    },
    /// A one-word cue that is a function word ("the"): it would make nearly every phrase
    /// name its relation.
    #[error("relation {relation:?}: cue {cue:?} is a function word (src/check/function_words.rs)")]
    FunctionWord {
        /// The relation.
        relation: String,
        /// The cue.
        cue: String,
    },
    /// Counts that cannot be (more single-object subjects than subjects).
    #[error("relation {relation:?}: single_object must be at most subjects, single_subject at most objects")]
    Counts {
        /// The relation.
        relation: String,
    },
}

/// How many subjects and objects a relation has in the graph, and how many of them have a
/// single other end: a relation is functional when almost every subject has one object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelationCounts {
    /// Subjects with at least one fact of the relation.
    pub subjects: u64,
    /// Of them, those with exactly one object.
    pub single_object: u64,
    /// Objects with at least one fact of the relation.
    pub objects: u64,
    /// Of them, those with exactly one subject.
    pub single_subject: u64,
}

/// A relation is functional (one object per subject) when at least this share of its
/// subjects has one object...
pub const FUNCTIONAL_SHARE: f64 = 0.9;
/// ... and it has at least this many subjects (a rare relation tells too little).
pub const FUNCTIONAL_MIN: u64 = 20;

impl RelationCounts {
    /// Whether each subject has one object (nearly always).
    pub fn functional(&self) -> bool {
        self.subjects >= FUNCTIONAL_MIN && self.single_object as f64 >= FUNCTIONAL_SHARE * self.subjects as f64
    }

    /// Whether each object has one subject (nearly always).
    pub fn inverse_functional(&self) -> bool {
        self.objects >= FUNCTIONAL_MIN && self.single_subject as f64 >= FUNCTIONAL_SHARE * self.objects as f64
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: u32,
    task: String,
    #[serde(default)]
    cues: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    relations: BTreeMap<String, RelationCounts>,
    #[serde(default)]
    trained_on: Option<serde_json::Value>,
}

/// A checker model: learned cues per relation name, and each relation's counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckerModel {
    pub(crate) cues: BTreeMap<String, Vec<String>>,
    pub(crate) relations: BTreeMap<String, RelationCounts>,
}

impl CheckerModel {
    /// Reads `path`: a `checker.json`, or a directory holding one.
    pub fn from_path(path: &Path) -> Result<CheckerModel, CheckerError> {
        let file = if path.is_dir() { path.join(CHECKER_FILE) } else { path.to_path_buf() };
        let bytes = read_limited(&file, CHECKER_LIMIT).map_err(|problem| CheckerError::File { path: file.clone(), problem })?;
        let invalid = |problem| CheckerError::Invalid { path: file.clone(), problem };
        let text = std::str::from_utf8(&bytes).map_err(|e| invalid(CheckerProblem::Utf8 { byte: e.valid_up_to() }))?;
        // A byte-order mark says nothing about the content (as every JSON input here).
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        CheckerModel::from_json(text).map_err(invalid)
    }

    /// Parses a checker file's text; the error says what is wrong.
    pub fn from_json(text: &str) -> Result<CheckerModel, CheckerProblem> {
        let f: File = serde_json::from_str(text).map_err(CheckerProblem::Json)?;
        let _ = f.trained_on;
        if f.format != 1 || f.task != "fact-check" {
            return Err(CheckerProblem::Kind { format: f.format, task: f.task });
        }
        for (relation, cues) in &f.cues {
            for cue in cues {
                let n = cue.split_whitespace().count();
                if n == 0 || n > MAX_CUE_WORDS {
                    return Err(CheckerProblem::Cue { relation: relation.clone(), cue: cue.clone() });
                }
                if n == 1 && super::function_words::is_function_word(&cue.trim().to_lowercase()) {
                    return Err(CheckerProblem::FunctionWord { relation: relation.clone(), cue: cue.clone() });
                }
            }
        }
        for (relation, c) in &f.relations {
            if c.single_object > c.subjects || c.single_subject > c.objects {
                return Err(CheckerProblem::Counts { relation: relation.clone() });
            }
        }
        Ok(CheckerModel { cues: f.cues, relations: f.relations })
    }

    /// The counts of the relation named `name`, if the file has them.
    pub fn counts(&self, name: &str) -> Option<RelationCounts> {
        self.relations.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_file_and_refuses_each_kind_of_bad_content() {
        let ok = r#"{"format": 1, "task": "fact-check", "cues": {"directed_by": ["directed", "directed by"]},
            "relations": {"directed_by": {"subjects": 100, "single_object": 95, "objects": 50, "single_subject": 20}}}"#;
        let m = CheckerModel::from_json(ok).unwrap();
        let c = m.counts("directed_by").unwrap();
        assert!(c.functional() && !c.inverse_functional());
        assert!(!RelationCounts { subjects: 10, single_object: 10, objects: 0, single_subject: 0 }.functional());
        assert!(matches!(CheckerModel::from_json(r#"{"format": 2, "task": "fact-check"}"#), Err(CheckerProblem::Kind { .. })));
        assert!(matches!(CheckerModel::from_json(r#"{"format": 1, "task": "fact-check", "cues": {"r": [" "]}}"#), Err(CheckerProblem::Cue { .. })));
        assert!(matches!(
            CheckerModel::from_json(
                r#"{"format": 1, "task": "fact-check", "relations": {"r": {"subjects": 1, "single_object": 2, "objects": 0, "single_subject": 0}}}"#
            ),
            Err(CheckerProblem::Counts { .. })
        ));
        assert!(matches!(CheckerModel::from_json("{"), Err(CheckerProblem::Json(_))));
        assert!(matches!(CheckerModel::from_json(r#"{"format": 1, "task": "fact-check", "cues": {"r": ["The"]}}"#), Err(CheckerProblem::FunctionWord { .. })));
        assert!(matches!(CheckerModel::from_json(r#"{"format": 1, "task": "fact-check", "extra": 1}"#), Err(CheckerProblem::Json(_))));
    }
}
