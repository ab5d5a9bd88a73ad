//! Training targets of the response generator (`trellis targets` with a generator's model
//! directory): for each OpenDialKG turn with a gold path and a reply, the encoder input the
//! generator will see at run time (the same function [`Generator`](super::Generator) calls,
//! with the turn's gold path as the knowledge and the model's default encoding) and the
//! reply as the token ids it should write (the tokenizer's encoding, EOS last).

use super::encoding::{KnowledgePath, Triple};
use super::{encoder_input_of, GenerateError, GenerationConfig, GenerationInput};
use crate::dataset::opendialkg::{Dialog, Sample};
use crate::ingest::tokenizer::TokenizerError;
use crate::model::dir::ModelDir;

/// One turn's training example.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ResponseTarget {
    /// The dialog's index in the file (0-based).
    pub dialog: usize,
    /// The number of messages before the reply.
    pub upto: usize,
    /// Who wrote the reply.
    pub speaker: String,
    /// The encoder input: the history `messages[..upto]` and the gold path.
    pub input_ids: Vec<u32>,
    /// The reply `messages[upto]`, EOS included; empty when `skipped` says why not.
    pub target_ids: Vec<u32>,
    /// Why there is no example: `no_reply` (the action is not followed by a message of the
    /// same speaker) or `bad_path` (the gold triples are not a path of 1 or 2 chained triples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
}

/// The gold knowledge of a turn as the generator takes it: each annotated path, in order.
pub fn gold_knowledge(sample: &Sample) -> Vec<KnowledgePath> {
    sample.paths.iter().map(|p| p.iter().map(|(h, r, t)| Triple::new(h.as_str(), r.as_str(), t.as_str())).collect()).collect()
}

/// The reply that follows a turn's action: the next message, when the same speaker wrote it.
pub fn reply_of<'d>(dialog: &'d Dialog, sample: &Sample) -> Option<&'d str> {
    dialog.messages.get(sample.upto).filter(|m| m.speaker == sample.speaker).map(|m| m.text.as_str())
}

/// The example of one turn (`dialog_index` is the dialog's position in its file).
pub fn response_target(
    dir: &ModelDir,
    config: &GenerationConfig,
    dialog_index: usize,
    dialog: &Dialog,
    sample: &Sample,
) -> Result<ResponseTarget, GenerateError> {
    let mut out = ResponseTarget {
        dialog: dialog_index,
        upto: sample.upto,
        speaker: sample.speaker.clone(),
        input_ids: Vec::new(),
        target_ids: Vec::new(),
        skipped: None,
    };
    let Some(reply) = reply_of(dialog, sample) else {
        out.skipped = Some("no_reply");
        return Ok(out);
    };
    let knowledge = gold_knowledge(sample);
    if knowledge.iter().any(|p| super::encoding::check_path(p).is_err()) {
        out.skipped = Some("bad_path");
        return Ok(out);
    }
    let history = &dialog.messages[..sample.upto.min(dialog.messages.len())];
    out.input_ids = encoder_input_of(dir, config.delexicalize.as_ref(), 0, &GenerationInput::new(history, &knowledge), &config.encoding)?.ids;
    // With delexicalization the reply names the knowledge's entities by placeholder, as the
    // model is to write them.
    let reply = match &config.delexicalize {
        Some(cfg) => super::delex::Delexicalizer::new(cfg, &knowledge).text(reply),
        None => reply.to_owned(),
    };
    let reply = reply.as_str();
    let ids =
        dir.tokenizer().encode(reply, true).map_err(|source| TokenizerError::Encode { text: reply.to_owned(), source: crate::backend::tokenizers(source) })?;
    out.target_ids = ids.get_ids().to_vec();
    Ok(out)
}
