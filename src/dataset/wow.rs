//! Wizard of Wikipedia dialogs (ParlAI's JSON: an array of dialogs, each with
//! `chosen_topic` and `dialog`, a list of turns with `speaker` (`0_Wizard`,
//! `1_Apprentice`, ...), `text` and, on the wizard's turns, `checked_passage`, a map whose
//! value is the title of the passage the wizard read). One sample per wizard turn with a
//! checked passage and at least one turn before it; its gold is that title
//! ([`Sample::documents`]), as the query producer's paper scores it. Turns whose passage
//! is `no_passages_used` have no gold and no sample. Speakers become `wizard` and
//! `apprentice`; the topic is not a message (the paper drops the topic turn). Every other
//! field (retrieved passages, personas) is skipped unread.

use super::opendialkg::{Dialog, Sample};
use super::{DatasetError, DatasetProblem};
use crate::dialog::Message;
use std::collections::BTreeMap;

/// The passage value that marks a turn answered from no passage.
const NO_PASSAGE: &str = "no_passages_used";

#[derive(serde::Deserialize)]
struct WowDialog {
    dialog: Vec<WowTurn>,
}

#[derive(serde::Deserialize)]
struct WowTurn {
    speaker: String,
    text: String,
    #[serde(default)]
    checked_passage: BTreeMap<String, String>,
}

/// `0_Wizard` -> `wizard`: the role without its seat number.
fn role(speaker: &str) -> String {
    let bare = speaker.split_once('_').map_or(speaker, |(seat, role)| if seat.chars().all(|c| c.is_ascii_digit()) { role } else { speaker });
    bare.to_lowercase()
}

/// Reads a Wizard of Wikipedia file (`train.json`, `valid_topic_split.json`,
/// `test_topic_split.json`, ...). The file is parsed as a stream: passages are skipped,
/// not held.
pub fn read(path: &std::path::Path) -> Result<Vec<Dialog>, DatasetError> {
    let file = std::fs::File::open(path).map_err(|e| DatasetError::Io { path: path.into(), source: e })?;
    let dialogs: Vec<WowDialog> = serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
        if e.is_io() {
            DatasetError::Io { path: path.into(), source: e.into() }
        } else {
            DatasetError::Bad { path: path.into(), line: e.line() as u64, problem: DatasetProblem::NotWizardOfWikipedia(e) }
        }
    })?;
    Ok(dialogs
        .into_iter()
        .map(|d| {
            let mut out = Dialog { messages: Vec::with_capacity(d.dialog.len()), samples: Vec::new() };
            for turn in d.dialog {
                let speaker = role(&turn.speaker);
                let mut titles: Vec<String> = turn.checked_passage.into_values().filter(|t| t != NO_PASSAGE && !t.trim().is_empty()).collect();
                titles.dedup();
                let upto = out.messages.len();
                if speaker == "wizard" && upto > 0 && !titles.is_empty() {
                    out.samples.push(Sample { upto, speaker: speaker.clone(), gold: Vec::new(), paths: Vec::new(), documents: titles });
                }
                out.messages.push(Message { speaker, text: turn.text });
            }
            out
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::role;

    #[test]
    fn roles_lose_their_seat_numbers() {
        assert_eq!(role("0_Wizard"), "wizard");
        assert_eq!(role("1_Apprentice"), "apprentice");
        assert_eq!(role("Wizard"), "wizard");
        assert_eq!(role("the_wizard"), "the_wizard");
    }
}
