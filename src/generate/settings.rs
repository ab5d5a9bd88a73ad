//! A generation's settings: the strategy and its parameters, the logits processors, the
//! batch; `trellis.json`'s `generation` section gives the defaults (`config.rs`).

use super::encoding::InputEncoding;
use super::GenerationConfig;
use super::{sampling::Sampling, Processors};
use crate::limits::{self, OutOfRange};
use serde::{Deserialize, Serialize};

/// The decoding strategy by name (`trellis.json` `generation.strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StrategyKind {
    /// The best logit at each step.
    Greedy,
    /// Beam search ([`BeamSettings`]).
    Beam,
    /// Seeded sampling ([`Sampling`]).
    Sample,
}

/// Beam search settings (transformers' names: num_beams, num_return_sequences,
/// length_penalty, early_stopping).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BeamSettings {
    /// Beams per request (1..=64, default 4).
    pub beams: usize,
    /// Sequences returned per request (1..=`beams`, default 1).
    pub return_sequences: usize,
    /// Hypothesis scores are divided by generated_len ^ length_penalty (-100..=100, default 1).
    pub length_penalty: f64,
    /// A request is done once it has `beams` finished hypotheses (default true); else once
    /// no running beam can beat the worst of them (transformers' heuristic).
    pub early_stopping: bool,
}

impl Default for BeamSettings {
    /// 4 beams, one sequence, length penalty 1, early stopping.
    fn default() -> Self {
        BeamSettings { beams: 4, return_sequences: 1, length_penalty: 1.0, early_stopping: true }
    }
}

/// How tokens are chosen.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Strategy {
    /// The first best logit at each step.
    Greedy,
    /// Beam search.
    Beam(BeamSettings),
    /// Seeded sampling (temperature, top-k, top-p).
    Sample(Sampling),
}

/// Everything a call decodes with; [`Generator::settings`](super::Generator::settings) gives the model's defaults.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GenerateSettings {
    /// How the encoder input is written from the history and the knowledge.
    pub encoding: InputEncoding,
    /// How tokens are chosen.
    pub strategy: Strategy,
    /// Tokens written at most (1..=1024, default 64).
    pub max_new_tokens: usize,
    /// Token ids that end a sequence as EOS does.
    pub stop_ids: Vec<u32>,
    /// Non-empty texts that end a sequence once its decoded text contains one.
    pub stop: Vec<String>,
    /// Requests decoded together.
    pub batch: usize,
    /// transformers' `no_repeat_ngram_size` (0: off).
    pub no_repeat_ngram_size: usize,
    /// transformers' `min_new_tokens`: EOS and the stop ids held back until this many tokens
    /// are written (0: off).
    pub min_new_tokens: usize,
    /// transformers' `repetition_penalty` (1: off).
    pub repetition_penalty: f64,
}

impl Default for GenerateSettings {
    /// DialogGSR's encoding, greedy, at most 64 new tokens, no stops, batches of 8.
    fn default() -> Self {
        GenerateSettings {
            encoding: InputEncoding::DialogGsr,
            strategy: Strategy::Greedy,
            max_new_tokens: 64,
            stop_ids: Vec::new(),
            stop: Vec::new(),
            batch: 8,
            no_repeat_ngram_size: 0,
            min_new_tokens: 0,
            repetition_penalty: 1.0,
        }
    }
}

impl GenerateSettings {
    /// The settings `trellis.json`'s `generation` section describes.
    pub fn from_config(g: &GenerationConfig) -> GenerateSettings {
        let strategy = match g.strategy {
            StrategyKind::Greedy => Strategy::Greedy,
            StrategyKind::Beam => Strategy::Beam(BeamSettings {
                beams: g.beams,
                return_sequences: g.return_sequences,
                length_penalty: g.length_penalty,
                early_stopping: g.early_stopping,
            }),
            StrategyKind::Sample => Strategy::Sample(Sampling { temperature: g.temperature, top_k: g.top_k, top_p: g.top_p, seed: g.seed }),
        };
        GenerateSettings {
            encoding: g.encoding.clone(),
            strategy,
            max_new_tokens: g.max_new_tokens,
            stop_ids: g.stop_ids.clone(),
            stop: g.stop.clone(),
            batch: 8,
            no_repeat_ngram_size: g.no_repeat_ngram_size,
            min_new_tokens: g.min_new_tokens,
            repetition_penalty: g.repetition_penalty,
        }
    }

    /// The logits processors of these settings, for a model whose EOS is `eos`.
    pub fn processors(&self, eos: u32) -> Processors {
        let mut ends = vec![eos];
        ends.extend(&self.stop_ids);
        Processors { no_repeat_ngram_size: self.no_repeat_ngram_size, min_new_tokens: self.min_new_tokens, repetition_penalty: self.repetition_penalty, ends }
    }
}

impl GenerateSettings {
    /// Every number within its range of `crate::limits` (`return_sequences` at most `beams`).
    pub fn validate(&self) -> Result<(), OutOfRange> {
        limits::MAX_NEW_TOKENS.check_usize(self.max_new_tokens)?;
        limits::BATCH.check_usize(self.batch)?;
        limits::NO_REPEAT_NGRAM_SIZE.check_usize(self.no_repeat_ngram_size)?;
        limits::MIN_NEW_TOKENS.check_usize(self.min_new_tokens)?;
        limits::REPETITION_PENALTY.check(self.repetition_penalty)?;
        match &self.strategy {
            Strategy::Greedy => {}
            Strategy::Beam(b) => {
                limits::BEAMS.check_usize(b.beams)?;
                limits::RETURN_SEQUENCES.up_to(b.beams as u64).check_usize(b.return_sequences)?;
                limits::LENGTH_PENALTY.check(b.length_penalty)?;
            }
            Strategy::Sample(p) => {
                limits::TEMPERATURE.check(p.temperature)?;
                limits::TOP_K.check_usize(p.top_k)?;
                limits::TOP_P.check(p.top_p)?;
            }
        }
        Ok(())
    }
}

crate::limits::named_choices!(StrategyKind, "strategy", { Greedy => "greedy", Beam => "beam", Sample => "sample" });
