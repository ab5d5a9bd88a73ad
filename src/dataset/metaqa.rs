//! MetaQA one-hop questions (`qa_1hop_dev.json`): one dialog of one message per line, the
//! question; every answer triple is a right path on its own. `r [inverse]` (the question
//! walks the fact backwards) is written with the reverse prefix `~`, as OpenDialKG does.

use super::opendialkg::{Dialog, Sample, Triple};
use super::{DatasetError, DatasetProblem};
use crate::dialog::Message;
use std::io::BufRead;

#[derive(serde::Deserialize)]
struct Question {
    question: String,
    triples: Vec<Gold>,
}

#[derive(serde::Deserialize)]
struct Gold {
    h: String,
    r: String,
    t: String,
}

/// Reads a MetaQA question file: one dialog of one message per question; blank lines skipped.
pub fn read(path: &std::path::Path) -> Result<Vec<Dialog>, DatasetError> {
    let file = std::fs::File::open(path).map_err(|e| DatasetError::Io { path: path.into(), source: e })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|e| DatasetError::Io { path: path.into(), source: e })?;
        // Invalid UTF-8 is a fault of the line, not a failure to read the file.
        let line = String::from_utf8(line).map_err(|e| DatasetError::Bad {
            path: path.into(),
            line: i as u64 + 1,
            problem: DatasetProblem::InvalidUtf8 { byte: e.utf8_error().valid_up_to() },
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let q: Question =
            serde_json::from_str(&line).map_err(|e| DatasetError::Bad { path: path.into(), line: i as u64 + 1, problem: DatasetProblem::NotAQuestion(e) })?;
        let gold: Vec<Triple> = q
            .triples
            .into_iter()
            .map(|g| match g.r.strip_suffix(" [inverse]") {
                Some(base) => (g.h, format!("~{base}"), g.t),
                None => (g.h, g.r, g.t),
            })
            .collect();
        if gold.is_empty() {
            continue;
        }
        let paths = gold.iter().map(|t| vec![t.clone()]).collect();
        // The question marks its entity with brackets; linking reads the text as it is.
        let text = q.question.replace(['[', ']'], "");
        out.push(Dialog {
            messages: vec![Message { speaker: "user".into(), text }],
            samples: vec![Sample { upto: 1, speaker: "user".into(), gold, paths, documents: Vec::new() }],
        });
    }
    Ok(out)
}
