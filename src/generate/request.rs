//! What a generation takes (the dialog and its knowledge) and gives (the replies, and the
//! encoder input it wrote).

use super::encoding::KnowledgePath;
use crate::dialog::Message;
use serde::Serialize;

/// One request: the dialog so far and the knowledge to ground the response in.
#[derive(Clone, Copy, Debug)]
pub struct GenerationInput<'a> {
    /// The dialog so far, oldest message first.
    pub history: &'a [Message],
    /// The knowledge paths to ground the response in.
    pub knowledge: &'a [KnowledgePath],
    /// The sampling seed of this request (default: the settings').
    pub seed: Option<u64>,
}

impl<'a> GenerationInput<'a> {
    /// A request with the settings' seed.
    pub fn new(history: &'a [Message], knowledge: &'a [KnowledgePath]) -> GenerationInput<'a> {
        GenerationInput { history, knowledge, seed: None }
    }
}

/// Why a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Finish {
    /// The model's EOS.
    Eos,
    /// A stop id or a stop text.
    Stop,
    /// `max_new_tokens` reached.
    Length,
}

/// One generated response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Generated {
    /// The response: the decoded tokens without the final EOS or stop id and special
    /// tokens, cut before the first stop text.
    pub text: String,
    /// The generated ids (the start token not included; the final EOS or stop id included).
    pub tokens: Vec<u32>,
    /// Greedy and sampling: the sum of the model's log-probabilities of the tokens written;
    /// beam search: the hypothesis score (`sum / generated_len ^ length_penalty`).
    pub score: f64,
    /// Why the sequence ended.
    pub finish: Finish,
}

/// An encoder input as the generator makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncoderInput {
    /// The text tokenized (after the oldest messages were dropped).
    pub text: String,
    /// The token ids of `text` (after any cut).
    pub ids: Vec<u32>,
    /// Messages dropped from the front of the history window to fit `max_tokens`.
    pub dropped_messages: usize,
    /// Whether the ids were still too long and cut from the left.
    pub cut: bool,
    /// With `generation.delexicalize`, the knowledge's names its placeholders stand for
    /// (`names[k]` for `placeholders[k]`; [`delex`](super::delex)); else empty.
    pub names: Vec<String>,
}
