//! The grounded response generator: an exported T5 (the retriever's runtime, model layout
//! and session pool: [`Seq2Seq`]) writes a response from the dialog history and the
//! retrieved knowledge.
//!
//! - The encoder input is written by an [`InputEncoding`] (DialogGSR's, SURGE's naive
//!   concatenation, Invariant, Efficient or a template; [`encoding`] states each exactly),
//!   from the last `input.turns` messages of the history (`trellis.json`). Longer than
//!   `input.max_tokens` ids (after the tokenizer's `</s>`): the oldest message is dropped,
//!   again while it is still too long and more than one message is left; then, still too
//!   long, the last `max_tokens - 1` ids before the final `</s>` are kept, then the `</s>`.
//! - Decoding, as transformers' `generate` does it: greedy (the first best logit at each
//!   step), beam search (`decode::beam`, unconstrained: num_beams, length_penalty,
//!   early_stopping, num_return_sequences), or seeded sampling ([`sampling`]: temperature,
//!   top-k, top-p); at most `max_new_tokens` tokens.
//! - Logits processors, as transformers defines them ([`Processors`]: `repetition_penalty`,
//!   `no_repeat_ngram_size`, `min_new_tokens`, over the decoder's ids, the start token
//!   included): greedy search and sampling apply them to the raw logits before the argmax or
//!   the warpers, beam search to the log-softmax, as transformers does. `min_new_tokens`
//!   holds back EOS and the stop ids (a stop text can still end a reply sooner, as
//!   transformers' `stop_strings` can).
//! - A sequence ends at the model's EOS, at a stop id (kept in `tokens` like EOS), or once
//!   its decoded text contains a stop text. Greedy and sampling stop there; beam search
//!   ends hypotheses at EOS only and its returned sequences are cut at the first stop
//!   afterwards (their scores stay the search's). `text` is the decoded tokens without the
//!   final EOS or stop id and special tokens, cut before the first stop text.
//! - Scores: greedy and sampling, the sum of the model's log-probabilities
//!   (`log_softmax(logits)`, before any processor or warper) of the tokens written; beam
//!   search, the hypothesis score `sum / generated_len ^ length_penalty` over the processed
//!   log-probabilities (transformers' `sequences_scores`).
//!
//! Requests decode together, `batch` at a time: their rows (one per request, or `beams`)
//! are the rows of one decoder call; a request that ends leaves the batch. A sampled
//! request draws from its own generator, seeded by its `seed` (else the settings'), so its
//! tokens do not depend on what else is in the batch.

pub mod config;
pub mod delex;
pub mod encoding;
mod error;
mod input;
mod request;
pub mod sampling;
mod settings;
pub mod targets;

pub use error::GenerateError;
pub use input::encoder_input_of;
pub use request::{EncoderInput, Finish, Generated, GenerationInput};
pub use settings::{BeamSettings, GenerateSettings, Strategy, StrategyKind};

pub use config::GenerationConfig;
pub use encoding::{InputEncoding, KnowledgePath, KnowledgeProblem, Template, TemplateError, Triple};
pub use sampling::{Sampling, SplitMix64};

use crate::decode::beam::{beam_search_processed, BannedTokens, SearchConfig};
pub use crate::decode::processors::Processors;
use crate::limits::{self};
use crate::model::dir::{ModelDir, TaskSection};
use crate::model::session::{RuntimeOptions, Seq2Seq, SessionGuard, SessionSteps};
use std::path::Path;

/// A response generator: the model (a pool of sessions) and its defaults. `Send + Sync`;
/// build once, call from many threads (each call takes a session from the pool).
pub struct Generator {
    model: Seq2Seq,
    defaults: GenerateSettings,
    /// `generation.delexicalize` of `trellis.json`: part of the model, not of a call's settings.
    delexicalize: Option<delex::DelexConfig>,
    /// The placeholders' token ids, in order (empty without `delexicalize`): decoding bans
    /// those past a request's last entity, which would name nothing.
    placeholder_ids: Vec<u32>,
    /// The tokenizer's lone space piece (`▁`), which it writes before a placeholder.
    space_id: Option<u32>,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator").field("model", &self.model).field("defaults", &self.defaults).finish()
    }
}

const _: () = {
    const fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Generator>();
};

/// One sequence being written by greedy search or sampling.
#[derive(Default)]
struct Running {
    tokens: Vec<u32>,
    score: f64,
    finish: Option<Finish>,
}

/// log(sum(exp(row))) in f64, or the index of a NaN.
fn log_sum_exp(row: &[f32]) -> Result<f64, usize> {
    if let Some(i) = row.iter().position(|x| x.is_nan()) {
        return Err(i);
    }
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max.is_infinite() {
        return Ok(f64::from(max));
    }
    let max = f64::from(max);
    Ok(max + row.iter().map(|&x| (f64::from(x) - max).exp()).sum::<f64>().ln())
}

/// The first index of the largest value (torch.argmax's choice among equal maxima).
fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best as u32
}

impl Generator {
    /// Reads the model directory (refused unless its `trellis.json` says `"task":
    /// "generator"`), loads the runtime and builds the session pool.
    pub fn open(dir: &Path, opts: &RuntimeOptions) -> Result<Generator, GenerateError> {
        limits::check_runtime(opts.threads, opts.sessions)?;
        let model_dir = ModelDir::open(dir, opts.layout)?;
        if !model_dir.has_trellis_file() {
            return Err(GenerateError::NoTrellisFile { model: dir.into() });
        }
        if model_dir.trellis().task != GenerationConfig::TASK {
            return Err(GenerateError::NotAGenerator { model: dir.into(), task: model_dir.trellis().task.clone() });
        }
        let config: GenerationConfig = model_dir.section()?;
        let model = Seq2Seq::with_dir(model_dir, opts)?;
        // Each placeholder is one token (checked when the directory was read).
        let placeholder_ids = config.delexicalize.iter().flat_map(|d| d.placeholders.iter()).filter_map(|p| model.dir().tokenizer().token_to_id(p)).collect();
        let space_id = model.dir().tokenizer().token_to_id("\u{2581}");
        let generator = Generator { model, defaults: GenerateSettings::from_config(&config), delexicalize: config.delexicalize, placeholder_ids, space_id };
        generator.check(&generator.defaults)?;
        Ok(generator)
    }

    /// The defaults of `trellis.json` (a starting point for a call's settings).
    pub fn settings(&self) -> &GenerateSettings {
        &self.defaults
    }

    /// The model and its session pool.
    pub fn model(&self) -> &Seq2Seq {
        &self.model
    }

    fn dir(&self) -> &ModelDir {
        self.model.dir()
    }

    /// Refuses settings no search can run with: every number within its range of
    /// `crate::limits`, stop ids inside the vocabulary, stop texts not empty.
    pub fn check(&self, s: &GenerateSettings) -> Result<(), GenerateError> {
        s.validate()?;
        let vocab = self.model.config().vocab_size;
        if let Some(&token) = s.stop_ids.iter().find(|&&t| t >= vocab) {
            return Err(GenerateError::StopIdOutOfRange { token, vocab });
        }
        if s.stop.iter().any(String::is_empty) {
            return Err(GenerateError::EmptyStop);
        }
        Ok(())
    }

    /// How many requests of `settings` decode together: `settings.batch`, or fewer when
    /// their beams' attention caches and logits would pass `limits::DECODE_MEMORY_BUDGET`.
    pub fn batch_for(&self, settings: &GenerateSettings) -> Result<usize, GenerateError> {
        let cfg = self.model.config();
        let shape = limits::DecoderShape { layers: cfg.num_decoder_layers, heads: cfg.num_heads, d_kv: cfg.d_kv, vocab: cfg.vocab_size as usize };
        let rows = match &settings.strategy {
            Strategy::Beam(b) => b.beams,
            Strategy::Greedy | Strategy::Sample(_) => 1,
        };
        Ok(limits::batch_that_fits(
            shape,
            settings.batch,
            rows,
            crate::model::session::padded_batch_length(self.dir().trellis().input.max_tokens),
            settings.max_new_tokens,
        )?)
    }

    /// The encoder input of a request (the module's documentation states the rules).
    pub fn encoder_input(&self, input: &GenerationInput<'_>, encoding: &InputEncoding) -> Result<EncoderInput, GenerateError> {
        self.encoder_input_at(0, input, encoding)
    }

    fn encoder_input_at(&self, index: usize, input: &GenerationInput<'_>, encoding: &InputEncoding) -> Result<EncoderInput, GenerateError> {
        encoder_input_of(self.dir(), self.delexicalize.as_ref(), index, input, encoding)
    }

    /// Generates for many requests; per request its sequences, best first (one for greedy
    /// and sampling, `return_sequences` for beam search).
    pub fn generate_batch(&self, inputs: &[GenerationInput<'_>], settings: &GenerateSettings) -> Result<Vec<Vec<Generated>>, GenerateError> {
        self.check(settings)?;
        let mut out = Vec::with_capacity(inputs.len());
        let batch = self.batch_for(settings)?;
        for (c, chunk) in inputs.chunks(batch).enumerate() {
            let mut ids = Vec::with_capacity(chunk.len());
            let mut names = Vec::with_capacity(chunk.len());
            for (k, input) in chunk.iter().enumerate() {
                let e = self.encoder_input_at(c * batch + k, input, &settings.encoding)?;
                ids.push(e.ids);
                names.push(e.names);
            }
            // A placeholder past the request's entities would be removed from the reply and
            // leave a hole in it: it is never written.
            let eos = self.model.config().eos_token_id;
            let banned: Vec<BannedTokens> = names
                .iter()
                .map(|n: &Vec<String>| BannedTokens::new(self.placeholder_ids.get(n.len()..).unwrap_or_default().to_vec(), self.space_id, eos))
                .collect();
            let mut guard = self.model.session()?;
            let got: Vec<Vec<Generated>> = match &settings.strategy {
                Strategy::Beam(b) => self.beam(&mut guard, &ids, banned, b, settings)?,
                Strategy::Greedy => self.stepwise(&mut guard, &ids, &banned, None, &[], settings)?.into_iter().map(|g| vec![g]).collect(),
                Strategy::Sample(p) => {
                    let seeds: Vec<u64> = chunk.iter().map(|i| i.seed.unwrap_or(p.seed)).collect();
                    self.stepwise(&mut guard, &ids, &banned, Some(p), &seeds, settings)?.into_iter().map(|g| vec![g]).collect()
                }
            };
            match &self.delexicalize {
                None => out.extend(got),
                Some(cfg) => out.extend(got.into_iter().zip(&names).map(|(seqs, names)| {
                    seqs.into_iter()
                        .map(|mut g| {
                            g.text = delex::relexicalize(&g.text, &cfg.placeholders, names);
                            g
                        })
                        .collect()
                })),
            }
        }
        Ok(out)
    }

    /// Greedy search or sampling: one row per request, a request's row leaves the batch
    /// when it ends.
    fn stepwise(
        &self,
        guard: &mut SessionGuard<'_>,
        ids: &[Vec<u32>],
        banned: &[BannedTokens],
        sampling: Option<&Sampling>,
        seeds: &[u64],
        settings: &GenerateSettings,
    ) -> Result<Vec<Generated>, GenerateError> {
        let cfg = self.model.config();
        let vocab = cfg.vocab_size as usize;
        let n = ids.len();
        let enc = guard.encode(ids)?;
        let mut live: Vec<usize> = (0..n).collect();
        let mut state = guard.start(&enc, &live)?;
        let mut feed = vec![cfg.decoder_start_token_id; n];
        let mut seqs: Vec<Running> = (0..n).map(|_| Running::default()).collect();
        let mut rngs: Vec<SplitMix64> = seeds.iter().map(|&s| SplitMix64::new(s)).collect();
        let (mut scores, mut order) = (Vec::new(), Vec::new());
        let processors = settings.processors(cfg.eos_token_id);
        let (mut processed, mut changes) = (Vec::new(), Vec::new());
        for step in 0..settings.max_new_tokens {
            let logits = guard.step(&mut state, &feed)?;
            if logits.len() != live.len() * vocab {
                return Err(GenerateError::LogitsShape { got: logits.len(), rows: live.len(), vocab });
            }
            let mut parents = Vec::with_capacity(live.len());
            let mut next = Vec::with_capacity(live.len());
            feed.clear();
            for (r, &i) in live.iter().enumerate() {
                let row = &logits[r * vocab..(r + 1) * vocab];
                let lse = log_sum_exp(row).map_err(|token| GenerateError::NaN { row: r, token })?;
                if !lse.is_finite() {
                    return Err(GenerateError::NoFiniteLogit { row: r });
                }
                // The processors see the raw logits, the warpers what they leave.
                let ban = banned[i].after(seqs[i].tokens.last().copied());
                let chosen_from = if processors.is_off() && ban.is_empty() {
                    row
                } else {
                    processed.clear();
                    processed.extend_from_slice(row);
                    if !processors.is_off() {
                        processors.process_f32(cfg.decoder_start_token_id, &seqs[i].tokens, &mut processed, &mut changes);
                    }
                    for &t in ban {
                        if let Some(l) = processed.get_mut(t as usize) {
                            *l = f32::NEG_INFINITY;
                        }
                    }
                    &processed[..]
                };
                let token = match sampling {
                    None => argmax(chosen_from),
                    Some(p) => {
                        sampling::warp(chosen_from, p, &mut scores, &mut order);
                        sampling::draw(&scores, rngs[i].next_f64()).ok_or(GenerateError::NoFiniteLogit { row: r })?
                    }
                };
                if chosen_from[token as usize] == f32::NEG_INFINITY {
                    // The processors banned every token (stop ids covering the vocabulary).
                    return Err(GenerateError::NoFiniteLogit { row: r });
                }
                let seq = &mut seqs[i];
                seq.tokens.push(token);
                seq.score += f64::from(row[token as usize]) - lse;
                match self.ends(&seq.tokens, settings)? {
                    Some(f) => seq.finish = Some(f),
                    None => {
                        next.push(i);
                        parents.push(r);
                        feed.push(token);
                    }
                }
            }
            if next.is_empty() || step + 1 == settings.max_new_tokens {
                break;
            }
            guard.reorder(&mut state, &parents)?;
            live = next;
        }
        seqs.into_iter().map(|s| self.generated(s.tokens, s.score, s.finish.unwrap_or(Finish::Length), settings)).collect()
    }

    /// Beam search, unconstrained; the sequences cut at their first stop afterwards.
    fn beam(
        &self,
        guard: &mut SessionGuard<'_>,
        ids: &[Vec<u32>],
        mut banned: Vec<BannedTokens>,
        b: &BeamSettings,
        settings: &GenerateSettings,
    ) -> Result<Vec<Vec<Generated>>, GenerateError> {
        let cfg = self.model.config();
        let enc = guard.encode(ids)?;
        let rows: Vec<usize> = (0..ids.len()).collect();
        let state = guard.start(&enc, &rows)?;
        let mut steps = SessionSteps { guard, state, vocab: cfg.vocab_size as usize };
        let search = SearchConfig {
            beams: b.beams,
            return_sequences: b.return_sequences,
            length_penalty: b.length_penalty,
            max_new_tokens: settings.max_new_tokens,
            early_stopping: b.early_stopping,
            alpha: None,
            model_norm: crate::decode::beam::ModelNorm::Vocabulary,
            start_token: cfg.decoder_start_token_id,
            eos_token: cfg.eos_token_id,
        };
        let hyps = beam_search_processed(&mut steps, &mut banned, &search, &settings.processors(cfg.eos_token_id))?;
        let mut out = Vec::with_capacity(hyps.len());
        for hs in hyps {
            let mut v = Vec::with_capacity(hs.len());
            for h in hs {
                let mut tokens = h.tokens;
                let mut finish = Finish::Length;
                for k in 1..=tokens.len() {
                    if let Some(f) = self.ends(&tokens[..k], settings)? {
                        finish = f;
                        tokens.truncate(k);
                        break;
                    }
                }
                v.push(self.generated(tokens, h.score, finish, settings)?);
            }
            out.push(v);
        }
        Ok(out)
    }

    /// Whether a sequence ends after its last token, and why.
    fn ends(&self, tokens: &[u32], settings: &GenerateSettings) -> Result<Option<Finish>, GenerateError> {
        let Some(&last) = tokens.last() else { return Ok(None) };
        if last == self.model.config().eos_token_id {
            return Ok(Some(Finish::Eos));
        }
        if settings.stop_ids.contains(&last) {
            return Ok(Some(Finish::Stop));
        }
        if !settings.stop.is_empty() {
            let text = self.decode(tokens)?;
            if settings.stop.iter().any(|s| text.contains(s.as_str())) {
                return Ok(Some(Finish::Stop));
            }
        }
        Ok(None)
    }

    fn decode(&self, tokens: &[u32]) -> Result<String, GenerateError> {
        self.dir()
            .tokenizer()
            .decode(tokens, true)
            .map_err(|source| GenerateError::Decode { tokens: tokens.to_vec(), source: crate::backend::tokenizers(source) })
    }

    fn generated(&self, tokens: Vec<u32>, score: f64, finish: Finish, settings: &GenerateSettings) -> Result<Generated, GenerateError> {
        let eos = self.model.config().eos_token_id;
        let body = match tokens.last() {
            Some(&t) if t == eos || settings.stop_ids.contains(&t) => &tokens[..tokens.len() - 1],
            _ => &tokens[..],
        };
        let mut text = self.decode(body)?;
        if let Some(at) = settings.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
            text.truncate(at);
        }
        Ok(Generated { text, tokens, score, finish })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_best_and_lse_is_exact() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -5.0]), 1);
        let row = [0.5f32, -1.25, 2.0, 0.0];
        let want = row.iter().map(|&x| f64::from(x).exp()).sum::<f64>().ln();
        assert!((log_sum_exp(&row).unwrap() - want).abs() < 1e-12);
        assert_eq!(log_sum_exp(&[0.0, f32::NAN]), Err(1));
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 2]), Ok(f64::NEG_INFINITY));
    }

    #[test]
    fn settings_follow_the_generation_section() {
        let mut g = GenerationConfig::default();
        let s = GenerateSettings::from_config(&g);
        assert_eq!(s.strategy, Strategy::Beam(BeamSettings { beams: 5, return_sequences: 1, length_penalty: 1.5, early_stopping: true }));
        assert_eq!((s.encoding, s.max_new_tokens, s.batch), (InputEncoding::DialogGsr, 64, 8));
        g.strategy = StrategyKind::Sample;
        g.top_k = 10;
        g.seed = 3;
        assert_eq!(GenerateSettings::from_config(&g).strategy, Strategy::Sample(Sampling { temperature: 1.0, top_k: 10, top_p: 1.0, seed: 3 }));
        g.strategy = StrategyKind::Greedy;
        assert_eq!(GenerateSettings::from_config(&g).strategy, Strategy::Greedy);
        (g.no_repeat_ngram_size, g.min_new_tokens, g.repetition_penalty, g.stop_ids) = (3, 4, 1.25, vec![7]);
        let s = GenerateSettings::from_config(&g);
        assert_eq!((s.no_repeat_ngram_size, s.min_new_tokens, s.repetition_penalty), (3, 4, 1.25));
        // min_new_tokens holds back EOS and the stop ids.
        assert_eq!(s.processors(1), Processors { no_repeat_ngram_size: 3, min_new_tokens: 4, repetition_penalty: 1.25, ends: vec![1, 7] });
    }
}
