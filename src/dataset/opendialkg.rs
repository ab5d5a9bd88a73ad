//! OpenDialKG dialogs (the released csv): one sample per action that walks a KG path,
//! whoever took it. In the dev set about a third of those actions are the user's (the
//! user, too, picks facts from the graph), the rest the assistant's; each sample records
//! whose it is, and [`keep_samples_of`] narrows an evaluation to one side. The history is
//! every chat message before the action; the gold is the path.

use super::{DatasetError, DatasetProblem};
use crate::dialog::Message;

/// A triple as the data set gives it: (head, relation, tail).
pub type Triple = (String, String, String);

/// One dialog: its chat messages, and the samples it yields.
#[derive(Clone, Debug)]
pub struct Dialog {
    /// Its chat messages, in order.
    pub messages: Vec<Message>,
    /// Its turns with a gold path.
    pub samples: Vec<Sample>,
}

/// A turn with a gold path: the history is `messages[..upto]` of its dialog.
#[derive(Clone, Debug)]
pub struct Sample {
    /// How many messages come before the action (the history is `messages[..upto]`).
    pub upto: usize,
    /// Who took the action (`assistant` or `user` in OpenDialKG; `user` for MetaQA).
    pub speaker: String,
    /// Every gold triple, the first one starting at the entity the turn is about. A
    /// relation written with the store's reverse prefix (`~r`) is walked backwards.
    pub gold: Vec<Triple>,
    /// The exact paths that count as right (OpenDialKG: the annotated path; MetaQA: each
    /// answer triple on its own).
    pub paths: Vec<Vec<Triple>>,
    /// Gold documents by title (Wizard of Wikipedia: the checked passage's); empty where
    /// the gold is a path.
    pub documents: Vec<String>,
}

#[derive(serde::Deserialize)]
struct Action {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    sender: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

/// Reads `dialogs_*.csv` (columns `Messages, User Rating, Assistant Rating`).
pub fn read(path: &std::path::Path) -> Result<Vec<Dialog>, DatasetError> {
    let name = path;
    let mut reader = csv::Reader::from_path(path).map_err(|e| DatasetError::Io { path: name.into(), source: e.into() })?;
    let headers = reader.headers().map_err(|e| bad(name, 1, DatasetProblem::Csv(e)))?.clone();
    let col = headers.iter().position(|h| h == "Messages").ok_or_else(|| bad(name, 1, DatasetProblem::NoMessagesColumn))?;
    let mut dialogs = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            bad(name, line, DatasetProblem::Csv(e))
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let json = record.get(col).ok_or_else(|| bad(name, line, DatasetProblem::NoMessagesField))?;
        let actions: Vec<Action> = serde_json::from_str(json).map_err(|e| bad(name, line, DatasetProblem::MessagesJson(e)))?;
        let mut dialog = Dialog { messages: Vec::new(), samples: Vec::new() };
        for a in actions {
            match a.kind.as_str() {
                "chat" => dialog.messages.push(Message { speaker: a.sender, text: a.message.unwrap_or_default() }),
                "action" => {
                    if let Some(gold) = a.metadata.as_ref().and_then(path_of) {
                        if !gold.is_empty() {
                            dialog.samples.push(Sample {
                                upto: dialog.messages.len(),
                                speaker: a.sender.clone(),
                                paths: vec![gold.clone()],
                                gold,
                                documents: Vec::new(),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        dialogs.push(dialog);
    }
    Ok(dialogs)
}

/// Keeps only the samples whose action `speaker` took (`assistant`, `user`); dialogs keep
/// their messages, so histories are unchanged.
pub fn keep_samples_of(dialogs: &mut [Dialog], speaker: &str) {
    for d in dialogs {
        d.samples.retain(|s| s.speaker == speaker);
    }
}

/// Adds, as samples without a gold path, the turns whose reply follows no action: every
/// message after the first that no sample stands before, with its writer as the speaker.
/// For training a generator that also answers without knowledge (the knowledge-less
/// replies of the data set); samples stay in message order.
pub fn add_turns_without_action(dialogs: &mut [Dialog]) {
    for d in dialogs {
        let taken: std::collections::HashSet<usize> = d.samples.iter().map(|s| s.upto).collect();
        let extra: Vec<Sample> = (1..d.messages.len())
            .filter(|i| !taken.contains(i))
            .map(|upto| Sample { upto, speaker: d.messages[upto].speaker.clone(), gold: Vec::new(), paths: Vec::new(), documents: Vec::new() })
            .collect();
        d.samples.extend(extra);
        // Stable: an action's samples keep their order among themselves.
        d.samples.sort_by_key(|s| s.upto);
    }
}

/// `metadata.path = [score, [[s, r, o], ...], rendering]`.
fn path_of(metadata: &serde_json::Value) -> Option<Vec<Triple>> {
    let triples = metadata.get("path")?.get(1)?.as_array()?;
    triples
        .iter()
        .map(|t| {
            let t = t.as_array()?;
            Some((t.first()?.as_str()?.to_owned(), t.get(1)?.as_str()?.to_owned(), t.get(2)?.as_str()?.to_owned()))
        })
        .collect()
}

fn bad(path: &std::path::Path, line: u64, problem: DatasetProblem) -> DatasetError {
    DatasetError::Bad { path: path.into(), line, problem }
}
