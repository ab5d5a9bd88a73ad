//! A dialog's messages as every layer sees them: the [`Message`] type, how a JSON message
//! is read ([`Message::from_json`]) and the most text one request may hold. At the bottom
//! of the layering, so that the model, the data set readers and the generator need not sit
//! above the linker for one type.

use crate::limits;

/// A message of a dialog.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub struct Message {
    /// Who wrote it (`speaker` or `sender` in JSON; empty when none).
    #[serde(alias = "sender", default)]
    pub speaker: String,
    /// What it says (`text` or `message` in JSON).
    #[serde(alias = "message")]
    pub text: String,
}

/// What is wrong with a message given as JSON (see [`Message::from_json`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageProblem {
    /// No text string (or the value is neither a string nor an object).
    #[error("needs a \"text\" (or \"message\") string")]
    NoText,
    /// Both `text` and `message`.
    #[error("has both \"text\" and \"message\"")]
    TwoTexts,
    /// A speaker that is neither a string nor null.
    #[error("has a \"speaker\" (or \"sender\") that is not a string")]
    SpeakerNotAString,
    /// Both `speaker` and `sender`.
    #[error("has both \"speaker\" and \"sender\"")]
    TwoSpeakers,
}

impl Message {
    /// A message as the JSON-lines inputs give it: a string (no speaker), or an object with
    /// `text` (or `message`) and optionally `speaker` (or `sender`; null is none). Field by
    /// field, so a bad speaker is not reported as a missing text.
    pub fn from_json(v: &serde_json::Value) -> Result<Message, MessageProblem> {
        use serde_json::Value;
        let obj = match v {
            Value::String(s) => return Ok(Message { speaker: String::new(), text: s.clone() }),
            Value::Object(o) => o,
            _ => return Err(MessageProblem::NoText),
        };
        let text = match (obj.get("text"), obj.get("message")) {
            (Some(_), Some(_)) => return Err(MessageProblem::TwoTexts),
            (Some(Value::String(s)), None) | (None, Some(Value::String(s))) => s.clone(),
            _ => return Err(MessageProblem::NoText),
        };
        let speaker = match (obj.get("speaker"), obj.get("sender")) {
            (Some(_), Some(_)) => return Err(MessageProblem::TwoSpeakers),
            (Some(Value::String(s)), None) | (None, Some(Value::String(s))) => s.clone(),
            (None | Some(Value::Null), None) | (None, Some(Value::Null)) => String::new(),
            _ => return Err(MessageProblem::SpeakerNotAString),
        };
        Ok(Message { speaker, text })
    }
}

/// A dialog with more text than a request may hold ([`crate::limits::DIALOG_BYTES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the dialog holds {bytes} bytes of text, more than the {limit} a request may hold (split it, or keep its last messages)")]
pub struct DialogTooLong {
    /// The dialog's text, in bytes.
    pub bytes: usize,
    /// The limit.
    pub limit: usize,
}

/// `Err` when the messages together hold more than [`crate::limits::DIALOG_BYTES`] of text.
pub fn check_dialog_size(history: &[Message]) -> Result<(), DialogTooLong> {
    let bytes: usize = history.iter().map(|m| m.text.len() + m.speaker.len()).sum();
    if bytes > limits::DIALOG_BYTES {
        return Err(DialogTooLong { bytes, limit: limits::DIALOG_BYTES });
    }
    Ok(())
}
