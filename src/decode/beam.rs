//! Beam search over a step function, with the semantics of transformers' `generate`
//! (num_beams, length_penalty, early_stopping), so a model decodes here as it does there.
//!
//! Per input, at most `beams` running hypotheses; at the first step only one (the start
//! token). Each step scores every (running beam, allowed token) pair as
//! `beam score + token score`, takes the best `2 * beams` (ties: lower beam, then lower
//! token), and walks them in order: an end-of-sequence candidate ranked below `beams`
//! becomes a finished hypothesis scored `sum / generated_len ^ length_penalty` (EOS
//! counted, the start token not); one ranked lower is dropped; the others become the next
//! running beams until there are `beams`. With `early_stopping` an input is done once it
//! has `beams` finished hypotheses. At `max_new_tokens` the running beams are finished as
//! they are. Candidates scoring -inf are never taken (transformers may fill a beam with
//! one; here it stays empty, so an input with few valid continuations runs fewer beams).
//!
//! A token's score: `lp = log_softmax(logits)[w]`, mixed with the constraint's log prior as
//! `alpha * lp + (1 - alpha) * log_prior` when `alpha` is set, else `lp`. The softmax runs
//! over the whole vocabulary ([`ModelNorm::Vocabulary`], transformers' semantics: one
//! log-sum-exp per row, then only the allowed ids are read) or over the tokens the
//! constraint allows ([`ModelNorm::Allowed`]: the model's distribution conditioned on the
//! constraint, the one a loss normalized over the allowed tokens trains; a token that is
//! the only one allowed then scores 0, so a path is scored by its real choices alone).
//! [`beam_search_processed`] then applies transformers' logits processors to `lp` (as its
//! beam search does to `log_softmax(logits)`: [`Processors`]), so the beam scores add up
//! the processed values; [`beam_search`] (the retriever's) applies none.
//!
//! Many inputs decode together: their running beams are the rows of one model call. The
//! model keeps whatever per-row cache it has and is told which old row each new row
//! continues ([`StepModel::reorder`]). Everything here is sequential and ordered, so the
//! output depends only on the logits.

use crate::decode::processors::{Change, Processors};
use crate::decode::softmax::log_sum_exp;

/// Over which tokens the model's log-softmax is taken (`decoding.model_norm`,
/// `--model-norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelNorm {
    /// The whole vocabulary (transformers' `generate`, the paper's decoding).
    #[default]
    Vocabulary,
    /// The tokens the constraint allows at that step (unconstrained steps: the vocabulary).
    Allowed,
}

crate::limits::named_choices!(ModelNorm, "model normalization", { Vocabulary => "vocabulary", Allowed => "allowed" });

/// How to search.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchConfig {
    /// Hypotheses kept per input at each step (1: greedy).
    pub beams: usize,
    /// Finished hypotheses returned per input (at most `beams`).
    pub return_sequences: usize,
    /// A finished hypothesis scores its sum of log-probabilities divided by its length to
    /// this power (transformers' `length_penalty`).
    pub length_penalty: f64,
    /// Tokens generated at most per hypothesis.
    pub max_new_tokens: usize,
    /// Stop an input once `beams` hypotheses have finished (transformers' `early_stopping=True`).
    pub early_stopping: bool,
    /// The model's weight against the prior; `None`: the score is the model's alone.
    pub alpha: Option<f64>,
    /// Over which tokens the model's log-probabilities are normalized.
    pub model_norm: ModelNorm,
    /// The token fed first (T5: `decoder_start_token_id`); never part of a hypothesis.
    pub start_token: u32,
    /// The end-of-sequence token: a hypothesis that writes it is finished.
    pub eos_token: u32,
}

/// What a constraint allows after a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// The tokens written into the buffer (ascending), each with its log prior.
    Listed,
    /// Every token of the vocabulary, with prior 0 (unconstrained decoding).
    Everything,
}

/// The tokens a hypothesis may take next. One per input; its beams share it (and
/// whatever it caches).
pub trait Constraint {
    type State: Clone;
    type Error;
    fn start(&mut self) -> Result<Self::State, Self::Error>;
    /// Fills `out` (cleared first) with the allowed tokens and their log priors.
    fn allowed(&mut self, state: &Self::State, out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error>;
    /// The state after `token`, which `allowed` offered.
    fn advance(&mut self, state: &Self::State, token: u32) -> Result<Self::State, Self::Error>;
}

/// No constraint: every token, prior 0 (the `none` ablation).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unconstrained;

impl Constraint for Unconstrained {
    type State = ();
    type Error = std::convert::Infallible;
    fn start(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    fn allowed(&mut self, _: &(), out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error> {
        out.clear();
        Ok(Allowed::Everything)
    }
    fn advance(&mut self, _: &(), _: u32) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A decoder with a per-row cache.
pub trait StepModel {
    type Error;
    fn vocab_size(&self) -> usize;
    /// Feeds one token per row and returns the next-token logits, `rows x vocab`.
    fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error>;
    /// New row i continues old row `parents[i]` (rows may repeat, or be dropped).
    fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error>;
}

/// One finished sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Hypothesis<S> {
    /// The generated tokens (EOS included when it ended with one).
    pub tokens: Vec<u32>,
    /// `sum / generated_len ^ length_penalty`: what hypotheses are ranked by.
    pub score: f64,
    /// The sum of the token scores.
    pub sum: f64,
    /// Per token: the model's log-probability (after the processors, if any) and the log
    /// prior.
    pub token_scores: Vec<(f64, f64)>,
    /// The constraint's state after the last token.
    pub state: S,
}

/// A search failed: the model, a constraint, or logits no search can use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError<M, C> {
    /// The model's step failed.
    #[error(transparent)]
    Model(M),
    /// The constraint failed (a store read of the automaton).
    #[error(transparent)]
    Constraint(C),
    /// The step returned a logits buffer of another size than rows times vocabulary.
    #[error("the model returned {got} logits for {rows} rows of a {vocab}-token vocabulary")]
    LogitsShape {
        /// Logits returned.
        got: usize,
        /// Rows stepped.
        rows: usize,
        /// The vocabulary size.
        vocab: usize,
    },
    /// A NaN logit (a broken model or export).
    #[error("the model returned a NaN logit (row {row}, token {token})")]
    NaN {
        /// The row.
        row: usize,
        /// The token.
        token: usize,
    },
    /// The constraint allowed a token id the model has no logit for.
    #[error("the constraint offered token {token}, outside the model's {vocab}-token vocabulary")]
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// The model's vocabulary size.
        vocab: usize,
    },
}

struct Beam<S> {
    tokens: Vec<u32>,
    sum: f64,
    token_scores: Vec<(f64, f64)>,
    state: S,
}

#[derive(Clone, Copy)]
struct Candidate {
    score: f64,
    beam: usize,
    token: u32,
    lp: f64,
    prior: f64,
}

/// Best first; ties: lower beam, then lower token.
fn better(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.score.total_cmp(&a.score).then(a.beam.cmp(&b.beam)).then(a.token.cmp(&b.token))
}

/// The finished hypotheses of one input: the best `beams`, in the order they came.
struct Finished<S> {
    hyps: Vec<Hypothesis<S>>,
    beams: usize,
}

impl<S> Finished<S> {
    fn worst(&self) -> f64 {
        self.hyps.iter().map(|h| h.score).fold(f64::INFINITY, f64::min)
    }

    fn add(&mut self, h: Hypothesis<S>) {
        if self.hyps.len() < self.beams {
            self.hyps.push(h);
        } else if h.score > self.worst() {
            // Drop the worst (the first of equal worst ones, as transformers does).
            let worst = self.worst();
            if let Some(i) = self.hyps.iter().position(|x| x.score == worst) {
                self.hyps.remove(i);
            }
            self.hyps.push(h);
        }
    }

    fn full(&self) -> bool {
        self.hyps.len() >= self.beams
    }
}

fn length_normalized(sum: f64, len: usize, penalty: f64) -> f64 {
    sum / (len.max(1) as f64).powf(penalty)
}

/// log(sum(exp(row[t]))) over the listed tokens only (in range), or the first listed token
/// whose logit is NaN. Allowed sets are small: plain f64.
fn log_sum_exp_of(row: &[f32], tokens: &[(u32, f64)]) -> Result<f64, usize> {
    let mut max = f64::NEG_INFINITY;
    for &(t, _) in tokens {
        let x = row[t as usize];
        if x.is_nan() {
            return Err(t as usize);
        }
        max = max.max(x as f64);
    }
    if max.is_infinite() {
        return Ok(max);
    }
    Ok(max + tokens.iter().map(|&(t, _)| (row[t as usize] as f64 - max).exp()).sum::<f64>().ln())
}

/// Places a block's next beams (in rank order; `parents[k]` is the running beam beam `k`
/// continues, whose slot is `slots[parents[k]]`) in its `beams` slots: each beam takes its
/// parent's slot unless a better-ranked sibling has it, the others take the free slots in
/// order. Returns the old row each row of the block's next layout continues (a slot without
/// a beam continues its own row, or the block's one row while it is one row wide) and the
/// beams' slots.
fn place(parents: &[usize], slots: &[usize], first_row: usize, width: usize, beams: usize) -> (Vec<usize>, Vec<usize>) {
    let mut next_slots = vec![usize::MAX; parents.len()];
    let mut taken = vec![false; beams];
    if width == beams {
        for (k, &p) in parents.iter().enumerate() {
            let s = slots[p];
            if !taken[s] {
                taken[s] = true;
                next_slots[k] = s;
            }
        }
    }
    let mut free = (0..beams).filter(|&s| !taken[s]).collect::<Vec<_>>().into_iter();
    for slot in next_slots.iter_mut().filter(|s| **s == usize::MAX) {
        // There are as many slots as beams, and no more next beams than that.
        *slot = free.next().unwrap_or(0);
    }
    let mut row_parents: Vec<usize> = (0..beams).map(|s| first_row + s % width).collect();
    for (k, &s) in next_slots.iter().enumerate() {
        row_parents[s] = first_row + slots[parents[k]];
    }
    (row_parents, next_slots)
}

/// Per input its hypotheses, or why the search failed.
pub type SearchResult<M, C> = Result<Vec<Vec<Hypothesis<<C as Constraint>::State>>>, SearchError<<M as StepModel>::Error, <C as Constraint>::Error>>;

/// Decodes every input (one constraint each) together; per input, its best
/// `return_sequences` hypotheses, best first. The model must start with one row per input,
/// in order, fed nothing yet; after the first step it holds `beams` rows per input.
pub fn beam_search<M: StepModel, C: Constraint>(model: &mut M, constraints: &mut [C], cfg: &SearchConfig) -> SearchResult<M, C> {
    beam_search_processed(model, constraints, cfg, &Processors::default())
}

/// A step's logits as one input's block of rows sees them: its beams' rows by slot.
struct RowsOf<'l> {
    logits: &'l [f32],
    first_row: usize,
    slots: &'l [usize],
    vocab: usize,
}

/// The scratch vectors a step reuses.
struct Buffers<'b> {
    allowed: &'b mut Vec<(u32, f64)>,
    changes: &'b mut Vec<(u32, Change)>,
    cands: &'b mut Vec<Candidate>,
}

/// Every candidate continuation of one input's running beams, scored: the model's
/// log-probability (over the vocabulary or the allowed tokens), the logits processors'
/// changes, mixed with the constraint's prior by `alpha`. Into `buf.cands`.
fn score_candidates<S, C: Constraint<State = S>, E>(
    rows: &RowsOf<'_>,
    running: &[Beam<S>],
    constraint: &mut C,
    cfg: &SearchConfig,
    processors: &Processors,
    buf: &mut Buffers<'_>,
) -> Result<(), SearchError<E, C::Error>> {
    let vocab = rows.vocab;
    buf.cands.clear();
    for (b, beam) in running.iter().enumerate() {
        let row = rows.first_row + rows.slots[b];
        let r = &rows.logits[row * vocab..(row + 1) * vocab];
        let listed = constraint.allowed(&beam.state, buf.allowed).map_err(SearchError::Constraint)?;
        if listed == Allowed::Listed {
            if let Some(&(token, _)) = buf.allowed.iter().find(|&&(t, _)| t as usize >= vocab) {
                return Err(SearchError::TokenOutOfRange { token, vocab });
            }
        }
        let lse = match (cfg.model_norm, listed) {
            (ModelNorm::Allowed, Allowed::Listed) => log_sum_exp_of(r, buf.allowed).map_err(|token| SearchError::NaN { row, token })?,
            _ => log_sum_exp(r).map_err(|token| SearchError::NaN { row, token })?,
        };
        processors.changes(cfg.start_token, &beam.tokens, buf.changes);
        let changes = &*buf.changes;
        let cands = &mut *buf.cands;
        // The first change not below the last token pushed (tokens come ascending).
        let (mut at, mut last) = (0, 0);
        let mut push = |token: u32, prior: f64| {
            // Every allowed logit -inf (lse -inf): no candidate, never NaN.
            let mut lp = if lse == f64::NEG_INFINITY { f64::NEG_INFINITY } else { r[token as usize] as f64 - lse };
            if !changes.is_empty() {
                if token < last {
                    at = 0; // a constraint that listed its tokens out of order
                }
                last = token;
                while changes.get(at).is_some_and(|&(t, _)| t < token) {
                    at += 1;
                }
                if let Some(&(_, c)) = changes.get(at).filter(|&&(t, _)| t == token) {
                    lp = processors.apply_f64(c, lp);
                }
            }
            let s = match cfg.alpha {
                // alpha 1 ignores the prior outright: 0 * a -inf prior would be NaN.
                Some(a) if a < 1.0 => a * lp + (1.0 - a) * prior,
                _ => lp,
            };
            let score = beam.sum + s;
            if score > f64::NEG_INFINITY {
                cands.push(Candidate { score, beam: b, token, lp, prior });
            }
        };
        match listed {
            Allowed::Listed => buf.allowed.iter().for_each(|&(t, prior)| push(t, prior)),
            Allowed::Everything => (0..vocab as u32).for_each(|t| push(t, 0.0)),
        }
    }
    Ok(())
}

/// The next running beams of an input, and the running beam each continues.
type NextBeams<S> = (Vec<Beam<S>>, Vec<usize>);

/// The best `2 * beams` candidates, best first, become the next running beams (at most
/// `beams`) and finished hypotheses (EOS); with the running beam each next one continues.
fn select_next<S, C: Constraint<State = S>, E>(
    cands: &mut Vec<Candidate>,
    running: &[Beam<S>],
    constraint: &mut C,
    finished: &mut Finished<S>,
    cfg: &SearchConfig,
    beams: usize,
) -> Result<NextBeams<S>, SearchError<E, C::Error>> {
    let keep = 2 * beams;
    if cands.len() > keep {
        cands.select_nth_unstable_by(keep - 1, better);
        cands.truncate(keep);
    }
    cands.sort_unstable_by(better);
    let mut next: Vec<Beam<S>> = Vec::with_capacity(beams);
    let mut parents = Vec::with_capacity(beams);
    for (rank, c) in cands.iter().enumerate() {
        if c.token == cfg.eos_token && rank >= beams {
            continue; // an EOS ranked past the beams is dropped
        }
        let parent = &running[c.beam];
        let state = constraint.advance(&parent.state, c.token).map_err(SearchError::Constraint)?;
        let mut tokens = parent.tokens.clone();
        tokens.push(c.token);
        let mut token_scores = parent.token_scores.clone();
        token_scores.push((c.lp, c.prior));
        if c.token == cfg.eos_token {
            let score = length_normalized(c.score, tokens.len(), cfg.length_penalty);
            finished.add(Hypothesis { tokens, score, sum: c.score, token_scores, state });
        } else {
            next.push(Beam { tokens, sum: c.score, token_scores, state });
            parents.push(c.beam);
        }
        if next.len() == beams {
            break;
        }
    }
    Ok((next, parents))
}

/// Whether an input is done after `generated` tokens: no running beam left, or a full
/// finished set and early stopping, or (without it) transformers' heuristic: no running
/// beam can still beat the worst finished hypothesis at its current length.
fn should_stop<S>(next: &[Beam<S>], finished: &Finished<S>, cfg: &SearchConfig, generated: usize) -> bool {
    if next.is_empty() {
        true
    } else if !finished.full() {
        false
    } else if cfg.early_stopping {
        true
    } else {
        let best = next.iter().map(|b| b.sum).fold(f64::NEG_INFINITY, f64::max);
        finished.worst() >= length_normalized(best, generated, cfg.length_penalty)
    }
}

/// The next step's layout: the blocks kept (compacted once finished blocks are half of
/// them: the live blocks inside the new, shorter layout stay where they are and the ones
/// past its end move into the finished blocks' places, so the fewest blocks move), the
/// token each row is fed, and the old row each new row continues (what the model reorders).
#[allow(clippy::too_many_arguments)]
fn next_layout<S>(
    blocks: &mut Vec<usize>,
    block_parents: &[Vec<usize>],
    running: &[Vec<Beam<S>>],
    slots: &[Vec<usize>],
    done: &[bool],
    beams: usize,
    start_token: u32,
    feed: &mut Vec<u32>,
) -> Vec<usize> {
    let finished_blocks = blocks.iter().filter(|&&i| done[i]).count();
    let compact = 2 * finished_blocks >= blocks.len();
    let order: Vec<usize> = if compact {
        let len = blocks.len() - finished_blocks;
        let mut movers = (len..blocks.len()).filter(|&pos| !done[blocks[pos]]);
        (0..len).map(|pos| if done[blocks[pos]] { movers.next().unwrap_or(pos) } else { pos }).collect()
    } else {
        (0..blocks.len()).collect()
    };
    let mut parents = Vec::with_capacity(order.len() * beams);
    let mut kept = Vec::with_capacity(order.len());
    feed.clear();
    for &pos in &order {
        let i = blocks[pos];
        kept.push(i);
        parents.extend_from_slice(&block_parents[pos]);
        let at = feed.len();
        feed.resize(at + beams, start_token);
        for (beam, &slot) in running[i].iter().zip(&slots[i]) {
            feed[at + slot] = beam.tokens.last().copied().unwrap_or(start_token);
        }
    }
    *blocks = kept;
    parents
}

/// [`beam_search`] with logits processors applied to each beam's log-softmax (its sequence:
/// `cfg.start_token`, then its tokens).
pub fn beam_search_processed<M: StepModel, C: Constraint>(
    model: &mut M,
    constraints: &mut [C],
    cfg: &SearchConfig,
    processors: &Processors,
) -> SearchResult<M, C> {
    let n = constraints.len();
    let beams = cfg.beams.max(1);
    let vocab = model.vocab_size();
    let mut running: Vec<Vec<Beam<C::State>>> = Vec::with_capacity(n);
    for c in constraints.iter_mut() {
        let state = c.start().map_err(SearchError::Constraint)?;
        running.push(vec![Beam { tokens: Vec::new(), sum: 0.0, token_scores: Vec::new(), state }]);
    }
    let mut finished: Vec<Finished<C::State>> = (0..n).map(|_| Finished { hyps: Vec::new(), beams }).collect();
    let mut done = vec![false; n];
    // Rows come in blocks, one per input still in the batch, all of `width` rows: one at the
    // first step, then `beams` (rows without a live beam are fed a placeholder and their
    // logits ignored). The input of every row then stays put from step to step, so the model
    // never has to move what depends on the input alone (the cross-attention keys and
    // values, the biggest tensors); a finished input's block is dropped only once such
    // blocks are half the batch. Inside a block a beam's row is its slot, not its rank: a
    // beam takes its parent's slot when no better-ranked sibling took it, so most rows
    // continue themselves and the model moves only the rows of beams that branched.
    let mut blocks: Vec<usize> = (0..n).collect();
    // Per input, the slot of each running beam (in rank order).
    let mut slots: Vec<Vec<usize>> = vec![vec![0]; n];
    let mut width = 1;
    let mut allowed = Vec::new();
    let mut changes: Vec<(u32, Change)> = Vec::new();
    let mut cands: Vec<Candidate> = Vec::new();
    let mut feed: Vec<u32> = vec![cfg.start_token; n];
    for step in 0..cfg.max_new_tokens {
        let rows = blocks.len() * width;
        let logits = model.step(&feed).map_err(SearchError::Model)?;
        if logits.len() != rows * vocab {
            return Err(SearchError::LogitsShape { got: logits.len(), rows, vocab });
        }
        // Per block, the old row each row of the next layout continues.
        let mut block_parents: Vec<Vec<usize>> = Vec::with_capacity(blocks.len());
        for (pos, &i) in blocks.iter().enumerate() {
            let first_row = pos * width;
            if done[i] {
                block_parents.push((0..beams).map(|k| first_row + k % width).collect());
                continue;
            }
            let rows_of = RowsOf { logits, first_row, slots: &slots[i], vocab };
            score_candidates(
                &rows_of,
                &running[i],
                &mut constraints[i],
                cfg,
                processors,
                &mut Buffers { allowed: &mut allowed, changes: &mut changes, cands: &mut cands },
            )?;
            let (mut next, mut parents) = select_next(&mut cands, &running[i], &mut constraints[i], &mut finished[i], cfg, beams)?;
            if should_stop(&next, &finished[i], cfg, step + 1) {
                done[i] = true;
                // At max_new_tokens transformers finalizes the step's best candidates, EOS or
                // not, even when this step's EOS candidates filled the finished set: the
                // running beams stay for the final flush.
                if step + 1 < cfg.max_new_tokens {
                    next.clear();
                    parents.clear();
                }
            }
            let (row_parents, next_slots) = place(&parents, &slots[i], first_row, width, beams);
            block_parents.push(row_parents);
            slots[i] = next_slots;
            running[i] = next;
        }
        if done.iter().all(|&d| d) || step + 1 == cfg.max_new_tokens {
            break;
        }
        let parents = next_layout(&mut blocks, &block_parents, &running, &slots, &done, beams, cfg.start_token, &mut feed);
        width = beams;
        model.reorder(&parents).map_err(SearchError::Model)?;
    }
    // Out of steps: the running beams finish as they are.
    for i in 0..n {
        for beam in std::mem::take(&mut running[i]) {
            let score = length_normalized(beam.sum, beam.tokens.len(), cfg.length_penalty);
            finished[i].add(Hypothesis { tokens: beam.tokens, score, sum: beam.sum, token_scores: beam.token_scores, state: beam.state });
        }
    }
    Ok(finished
        .into_iter()
        .map(|f| {
            let mut hyps = f.hyps;
            // Stable: equal scores keep the order they finished in.
            hyps.sort_by(|a, b| b.score.total_cmp(&a.score));
            hyps.truncate(cfg.return_sequences.min(beams));
            hyps
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Logits that are a fixed function of the whole sequence fed so far: a row's history
    /// is kept as the model's "cache", so wrong reordering shows up as wrong scores.
    struct ToyModel {
        vocab: usize,
        seed: u64,
        rows: Vec<Vec<u32>>,
        out: Vec<f32>,
        calls: usize,
    }

    fn toy_logits(seed: u64, seq: &[u32], vocab: usize) -> Vec<f32> {
        (0..vocab)
            .map(|t| {
                // splitmix64 over the sequence: distinct sequences get unrelated values.
                let mut h = seed;
                for &x in seq.iter().chain([t as u32].iter()) {
                    h = h.wrapping_add(u64::from(x)).wrapping_add(0x9e37_79b9_7f4a_7c15);
                    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    h ^= h >> 31;
                }
                ((h >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0
            })
            .collect()
    }

    impl ToyModel {
        fn new(inputs: usize, vocab: usize, seed: u64) -> ToyModel {
            ToyModel { vocab, seed, rows: (0..inputs).map(|i| vec![1000 + i as u32]).collect(), out: Vec::new(), calls: 0 }
        }
    }

    impl StepModel for ToyModel {
        type Error = std::convert::Infallible;
        fn vocab_size(&self) -> usize {
            self.vocab
        }
        fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error> {
            assert_eq!(tokens.len(), self.rows.len(), "one token per row");
            self.calls += 1;
            self.out.clear();
            for (row, &t) in self.rows.iter_mut().zip(tokens) {
                row.push(t);
                self.out.extend(toy_logits(self.seed, row, self.vocab));
            }
            Ok(&self.out)
        }
        fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error> {
            self.rows = parents.iter().map(|&p| self.rows[p].clone()).collect();
            Ok(())
        }
    }

    fn log_softmax(l: &[f32]) -> Vec<f64> {
        let lse = log_sum_exp(l).unwrap();
        l.iter().map(|&x| x as f64 - lse).collect()
    }

    /// A constraint over an explicit set of token strings (each ending in EOS), with a
    /// prior uniform over the allowed tokens: the brute force enumerates the same set.
    #[derive(Clone)]
    struct SetConstraint {
        strings: Vec<Vec<u32>>,
    }

    impl Constraint for SetConstraint {
        type State = Vec<u32>;
        type Error = std::convert::Infallible;
        fn start(&mut self) -> Result<Vec<u32>, Self::Error> {
            Ok(Vec::new())
        }
        fn allowed(&mut self, s: &Vec<u32>, out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error> {
            let mut next: Vec<u32> = self.strings.iter().filter(|x| x.starts_with(s) && x.len() > s.len()).map(|x| x[s.len()]).collect();
            next.sort_unstable();
            next.dedup();
            let p = -(next.len() as f64).ln();
            out.clear();
            out.extend(next.into_iter().map(|t| (t, p)));
            Ok(Allowed::Listed)
        }
        fn advance(&mut self, s: &Vec<u32>, t: u32) -> Result<Vec<u32>, Self::Error> {
            let mut s = s.clone();
            s.push(t);
            Ok(s)
        }
    }

    fn cfg(beams: usize, max_new_tokens: usize, alpha: Option<f64>) -> SearchConfig {
        SearchConfig {
            beams,
            return_sequences: beams,
            length_penalty: 0.0,
            max_new_tokens,
            early_stopping: false,
            alpha,
            model_norm: ModelNorm::Vocabulary,
            start_token: 0,
            eos_token: 1,
        }
    }

    /// Every sequence of at most `max` tokens that ends in EOS or has `max` tokens, with its
    /// summed score, computed straight from the logits function.
    fn brute_force(seed: u64, input: usize, vocab: usize, max: usize, alpha: Option<f64>, set: Option<&SetConstraint>) -> Vec<(Vec<u32>, f64)> {
        brute_force_normed(seed, input, vocab, max, alpha, set, ModelNorm::Vocabulary)
    }

    /// The same, with the model's log-softmax over the allowed tokens when `norm` says so
    /// (computed here as a softmax of the allowed logits, in f64).
    fn brute_force_normed(
        seed: u64,
        input: usize,
        vocab: usize,
        max: usize,
        alpha: Option<f64>,
        set: Option<&SetConstraint>,
        norm: ModelNorm,
    ) -> Vec<(Vec<u32>, f64)> {
        let mut out = Vec::new();
        let mut stack = vec![(Vec::<u32>::new(), 0.0f64)];
        while let Some((seq, sum)) = stack.pop() {
            let mut fed = vec![1000 + input as u32, 0];
            fed.extend(&seq);
            let lp = log_softmax(&toy_logits(seed, &fed, vocab));
            let options: Vec<(u32, f64)> = match set {
                None => (0..vocab as u32).map(|t| (t, 0.0)).collect(),
                Some(c) => {
                    let mut c = c.clone();
                    let mut buf = Vec::new();
                    c.allowed(&seq, &mut buf).unwrap();
                    buf
                }
            };
            let lp = match (norm, set) {
                (ModelNorm::Allowed, Some(_)) => {
                    let logits = toy_logits(seed, &fed, vocab);
                    let z: f64 = options.iter().map(|&(t, _)| (logits[t as usize] as f64).exp()).sum();
                    let mut lp = vec![f64::NEG_INFINITY; vocab];
                    for &(t, _) in &options {
                        lp[t as usize] = logits[t as usize] as f64 - z.ln();
                    }
                    lp
                }
                _ => lp,
            };
            for (t, prior) in options {
                let s = sum + alpha.map_or(lp[t as usize], |a| a * lp[t as usize] + (1.0 - a) * prior);
                let mut next = seq.clone();
                next.push(t);
                if t == 1 || next.len() == max {
                    out.push((next, s));
                } else {
                    stack.push((next, s));
                }
            }
        }
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }

    #[test]
    fn a_beam_wider_than_the_tree_finds_the_exact_best_sequences() {
        // vocab 4 (EOS = 1), 3 steps: 40 sequences, fewer than 64 beams, so nothing is
        // pruned and (length penalty 0) the result is the exhaustive ranking.
        for seed in 0..20 {
            let mut model = ToyModel::new(2, 4, seed);
            let out = beam_search(&mut model, &mut [Unconstrained, Unconstrained], &cfg(64, 3, None)).unwrap();
            for (input, hyps) in out.iter().enumerate() {
                let want = brute_force(seed, input, 4, 3, None, None);
                assert_eq!(hyps.len(), want.len());
                for (h, (seq, sum)) in hyps.iter().zip(&want) {
                    assert_eq!(&h.tokens, seq, "seed {seed} input {input}");
                    assert!((h.sum - sum).abs() < 1e-9 && (h.score - sum).abs() < 1e-9);
                }
            }
        }
    }

    /// The processors' definitions written out over every sequence of a small tree: the
    /// beam search (wide enough to prune nothing) ranks exactly these sums. Token 0 is the
    /// start token, so it is penalized from the first step and opens a bigram.
    #[test]
    fn processed_log_softmax_matches_the_brute_force() {
        let p = Processors { no_repeat_ngram_size: 2, min_new_tokens: 2, repetition_penalty: 1.7, ends: vec![1] };
        let (vocab, max) = (4usize, 3usize);
        for seed in 0..20 {
            let mut model = ToyModel::new(1, vocab, seed);
            let out = beam_search_processed(&mut model, &mut [Unconstrained], &cfg(64, max, None), &p).unwrap();
            let mut want: Vec<(Vec<u32>, f64)> = Vec::new();
            let mut stack = vec![(Vec::<u32>::new(), 0.0f64)];
            while let Some((seq, sum)) = stack.pop() {
                let mut fed = vec![1000, 0];
                fed.extend(&seq);
                let lp = log_softmax(&toy_logits(seed, &fed, vocab));
                let ids = &fed[1..]; // the decoder's ids: the start token, then the sequence
                for t in 0..vocab as u32 {
                    let mut s = lp[t as usize];
                    if ids.contains(&t) {
                        s = if s < 0.0 { s * 1.7 } else { s / 1.7 };
                    }
                    if ids.windows(2).any(|w| w[0] == ids[ids.len() - 1] && w[1] == t) || (t == 1 && seq.len() < 2) {
                        continue; // -inf: never a candidate
                    }
                    let mut next = seq.clone();
                    next.push(t);
                    if t == 1 || next.len() == max {
                        want.push((next, sum + s));
                    } else {
                        stack.push((next, sum + s));
                    }
                }
            }
            want.sort_by(|a, b| b.1.total_cmp(&a.1));
            let got: Vec<(&Vec<u32>, f64)> = out[0].iter().map(|h| (&h.tokens, h.sum)).collect();
            assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), want.iter().map(|w| &w.0).collect::<Vec<_>>(), "seed {seed}");
            for ((_, g), (_, w)) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-9, "seed {seed}: {g} vs {w}");
            }
            for h in &out[0] {
                assert!((h.token_scores.iter().map(|x| x.0).sum::<f64>() - h.sum).abs() < 1e-9, "the processed values add up");
            }
            // Without processors, another ranking (and EOS allowed at once).
            let plain = beam_search(&mut ToyModel::new(1, vocab, seed), &mut [Unconstrained], &cfg(64, max, None)).unwrap();
            assert_ne!(plain[0].iter().map(|h| &h.tokens).collect::<Vec<_>>(), got.iter().map(|g| g.0).collect::<Vec<_>>());
        }
    }

    #[test]
    fn constrained_search_with_a_prior_matches_the_brute_force_over_the_allowed_set() {
        let set = SetConstraint { strings: vec![vec![2, 3, 1], vec![2, 4, 1], vec![2, 4, 5, 1], vec![5, 1], vec![3, 3, 3, 1]] };
        for seed in 0..20 {
            let mut model = ToyModel::new(1, 6, seed);
            let mut cs = [set.clone()];
            let out = beam_search(&mut model, &mut cs, &cfg(16, 6, Some(0.8))).unwrap();
            let want = brute_force(seed, 0, 6, 6, Some(0.8), Some(&set));
            assert_eq!(want.len(), 5);
            let got: Vec<(Vec<u32>, f64)> = out[0].iter().map(|h| (h.tokens.clone(), h.sum)).collect();
            assert_eq!(got.iter().map(|g| &g.0).collect::<Vec<_>>(), want.iter().map(|w| &w.0).collect::<Vec<_>>(), "seed {seed}");
            for (g, w) in got.iter().zip(&want) {
                assert!((g.1 - w.1).abs() < 1e-9);
            }
            // Every token score is alpha * lp + (1 - alpha) * prior, and they add up.
            for h in &out[0] {
                let total: f64 = h.token_scores.iter().map(|(lp, p)| 0.8 * lp + 0.2 * p).sum();
                assert!((total - h.sum).abs() < 1e-9);
                assert!(set.strings.contains(&h.tokens));
            }
        }
    }

    #[test]
    fn allowed_normalization_matches_the_brute_force_and_a_forced_token_scores_zero() {
        let set = SetConstraint { strings: vec![vec![2, 3, 1], vec![2, 4, 1], vec![2, 4, 5, 1], vec![5, 1], vec![3, 3, 3, 1]] };
        for seed in 0..20 {
            for alpha in [None, Some(0.7)] {
                let mut model = ToyModel::new(1, 6, seed);
                let mut c = cfg(16, 6, alpha);
                c.model_norm = ModelNorm::Allowed;
                let out = beam_search(&mut model, &mut [set.clone()], &c).unwrap();
                let want = brute_force_normed(seed, 0, 6, 6, alpha, Some(&set), ModelNorm::Allowed);
                let got: Vec<&Vec<u32>> = out[0].iter().map(|h| &h.tokens).collect();
                assert_eq!(got, want.iter().map(|w| &w.0).collect::<Vec<_>>(), "seed {seed} alpha {alpha:?}");
                for (h, w) in out[0].iter().zip(&want) {
                    assert!((h.sum - w.1).abs() < 1e-9, "seed {seed}: {} vs {}", h.sum, w.1);
                }
                // The per-step model probabilities of the allowed tokens sum to 1, so a token
                // with no alternative (3 after 3, the EOS ending [5, 1]) costs nothing.
                let h = out[0].iter().find(|h| h.tokens == [3, 3, 3, 1]).unwrap();
                assert_eq!(h.token_scores[1].0, 0.0);
                assert_eq!(h.token_scores[2].0, 0.0);
            }
        }
    }

    #[test]
    fn allowed_normalization_reports_a_nan_among_the_allowed_logits_only() {
        // vocab 4: token 3 is NaN but never allowed, so the search goes on; token 2 NaN and
        // allowed is an error naming it.
        let set = SetConstraint { strings: vec![vec![2, 1], vec![0, 1]] };
        for (nan_at, ok) in [(3usize, true), (2, false)] {
            let mut row = vec![0.5f32, -0.1, 1.0, 0.3];
            row[nan_at] = f32::NAN;
            let mut model = Scripted { steps: vec![vec![row.clone()], vec![row.clone(); 2]], at: 0, out: Vec::new(), reorders: Vec::new() };
            let mut c = cfg(2, 2, None);
            c.model_norm = ModelNorm::Allowed;
            let r = beam_search(&mut model, &mut [set.clone()], &c);
            match (ok, r) {
                (true, Ok(_)) => {}
                (false, Err(SearchError::NaN { token, .. })) => assert_eq!(token, 2),
                (_, other) => panic!("NaN at {nan_at}: {:?}", other.map(|_| ()).map_err(|e| e.to_string())),
            }
        }
    }

    /// A model whose logits are given per step and row: for hand-worked cases.
    struct Scripted {
        steps: Vec<Vec<Vec<f32>>>,
        at: usize,
        out: Vec<f32>,
        reorders: Vec<Vec<usize>>,
    }

    impl StepModel for Scripted {
        type Error = std::convert::Infallible;
        fn vocab_size(&self) -> usize {
            self.steps[0][0].len()
        }
        fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error> {
            let rows = &self.steps[self.at];
            self.at += 1;
            self.out = (0..tokens.len()).flat_map(|r| rows[r.min(rows.len() - 1)].clone()).collect();
            Ok(&self.out)
        }
        fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error> {
            self.reorders.push(parents.to_vec());
            Ok(())
        }
    }

    #[test]
    fn an_eos_ranked_past_the_beam_count_is_dropped_and_early_stopping_ends_the_input() {
        // Tokens: 0 start, 1 EOS, 2, 3; two beams, so four candidates per step; length
        // penalty 1. Probabilities are chosen so every product below is distinct.
        // Step 0: 2 (.6), 3 (.3): the running beams [2], [3].
        // Step 1: [2,EOS] .30 (rank 0: finishes), [2,2] .21 (runs), [3,EOS] .18 (rank 2 >=
        //   2 beams: dropped), [3,2] .105 (runs).
        // Step 2: [2,2,2] .0945 (runs), [2,2,EOS] .063 (rank 1: finishes), [2,2,3] .0525
        //   (runs; the beams are full). Two finished: early stopping ends the input.
        // Result: [2,EOS] ln(.30)/2 = -0.602, [2,2,EOS] ln(.063)/3 = -0.921. Had [3,EOS]
        // been kept, its ln(.18)/2 = -0.857 would be second.
        let ln = |p: f64| p.ln() as f32;
        let row = |eos: f64, two: f64, three: f64| vec![-60.0, ln(eos), ln(two), ln(three)];
        let step0 = vec![row(0.1, 0.6, 0.3)];
        let step1 = vec![row(0.5, 0.35, 0.15), row(0.6, 0.35, 0.05)];
        let step2 = vec![row(0.3, 0.45, 0.25)];
        let mut m = Scripted { steps: vec![step0, step1, step2], at: 0, out: Vec::new(), reorders: Vec::new() };
        let c = SearchConfig {
            beams: 2,
            return_sequences: 2,
            length_penalty: 1.0,
            max_new_tokens: 10,
            early_stopping: true,
            alpha: None,
            model_norm: ModelNorm::Vocabulary,
            start_token: 0,
            eos_token: 1,
        };
        let out = beam_search(&mut m, &mut [Unconstrained], &c).unwrap();
        assert_eq!(m.at, 3, "done after three steps");
        // Step 1 continues row 0 twice; step 2 continues [2] (row 0) and [3] (row 1).
        assert_eq!(m.reorders, vec![vec![0, 0], vec![0, 1]]);
        let h = &out[0];
        assert_eq!(h.iter().map(|x| x.tokens.clone()).collect::<Vec<_>>(), vec![vec![2, 1], vec![2, 2, 1]]);
        assert!((h[0].score - 0.30f64.ln() / 2.0).abs() < 1e-6, "{}", h[0].score);
        assert!((h[1].score - 0.063f64.ln() / 3.0).abs() < 1e-6, "{}", h[1].score);
    }

    /// One step allows tokens 2 and 3, token 3 with a prior of 0 probability (log -inf).
    struct BannedByPrior;

    impl Constraint for BannedByPrior {
        type State = usize;
        type Error = std::convert::Infallible;
        fn start(&mut self) -> Result<usize, Self::Error> {
            Ok(0)
        }
        fn allowed(&mut self, state: &usize, out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error> {
            out.clear();
            if *state == 0 {
                out.extend([(2, 0.0), (3, f64::NEG_INFINITY)]);
            } else {
                out.push((1, 0.0));
            }
            Ok(Allowed::Listed)
        }
        fn advance(&mut self, state: &usize, _: u32) -> Result<usize, Self::Error> {
            Ok(state + 1)
        }
    }

    #[test]
    fn alpha_one_ignores_even_a_zero_prior() {
        // Token 3 is the model's favourite (p .6 against .3 for 2) and the prior's impossible
        // one. At alpha 1 the prior does not count: [3, EOS] first, scored ln(.6 / .9) (the
        // model's softmax over the allowed 2 and 3; EOS is then forced: log 1). At alpha 0.5
        // the prior rules 3 out.
        let ln = |p: f64| p.ln() as f32;
        let step0 = vec![vec![-60.0, ln(0.1), ln(0.3), ln(0.6)]];
        let step1 = vec![vec![-60.0, 0.0, -60.0, -60.0]];
        let run = |alpha| {
            let mut m = Scripted { steps: vec![step0.clone(), step1.clone()], at: 0, out: Vec::new(), reorders: Vec::new() };
            let c = SearchConfig {
                beams: 2,
                return_sequences: 2,
                length_penalty: 0.0,
                max_new_tokens: 5,
                early_stopping: true,
                alpha: Some(alpha),
                model_norm: ModelNorm::Allowed,
                start_token: 0,
                eos_token: 1,
            };
            beam_search(&mut m, &mut [BannedByPrior], &c).unwrap().remove(0)
        };
        let h = run(1.0);
        assert_eq!(h.iter().map(|x| x.tokens.clone()).collect::<Vec<_>>(), vec![vec![3, 1], vec![2, 1]]);
        assert!((h[0].score - (0.6f64 / 0.9).ln()).abs() < 1e-6, "{}", h[0].score);
        let h = run(0.5);
        assert_eq!(h.iter().map(|x| x.tokens.clone()).collect::<Vec<_>>(), vec![vec![2, 1]]);
    }

    #[test]
    fn beams_keep_their_parents_slots() {
        // Beams 0, 1, 2 sit in slots 2, 0, 1 of a block starting at row 6. The next beams
        // continue beams 0, 0, 1: the first keeps slot 2, its sibling takes the free slot 1,
        // the third takes beam 1's slot 0. Only row 7 changes (to a copy of row 8).
        let (rows, slots) = place(&[0, 0, 1], &[2, 0, 1], 6, 3, 3);
        assert_eq!(slots, vec![2, 1, 0]);
        assert_eq!(rows, vec![6, 8, 8]);
        // Opening the beams from a one-row block: slots in rank order, every row a copy of it.
        let (rows, slots) = place(&[0, 0], &[0], 4, 1, 3);
        assert_eq!(slots, vec![0, 1]);
        assert_eq!(rows, vec![4, 4, 4]);
        // Fewer beams than slots: an empty slot continues its own row.
        let (rows, slots) = place(&[1], &[0, 1, 2], 0, 3, 3);
        assert_eq!(slots, vec![1]);
        assert_eq!(rows, vec![0, 1, 2]);
    }

    #[test]
    fn bad_logits_are_errors() {
        let mut m = Scripted { steps: vec![vec![vec![0.0, f32::NAN, 0.0]]], at: 0, out: Vec::new(), reorders: Vec::new() };
        let c = cfg(2, 3, None);
        assert!(matches!(beam_search(&mut m, &mut [Unconstrained], &c), Err(SearchError::NaN { row: 0, token: 1 })));
        struct Short;
        impl StepModel for Short {
            type Error = std::convert::Infallible;
            fn vocab_size(&self) -> usize {
                5
            }
            fn step(&mut self, _: &[u32]) -> Result<&[f32], Self::Error> {
                Ok(&[0.0; 3])
            }
            fn reorder(&mut self, _: &[usize]) -> Result<(), Self::Error> {
                Ok(())
            }
        }
        assert!(matches!(beam_search(&mut Short, &mut [Unconstrained], &c), Err(SearchError::LogitsShape { got: 3, rows: 1, vocab: 5 })));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Deciding inputs together or one at a time gives the same hypotheses: rows of
        /// finished inputs leave the batch without disturbing the others.
        #[test]
        fn batching_inputs_does_not_change_results(seed in 0u64..1000, beams in 1usize..5, inputs in 1usize..4, early: bool, lp in 0.0f64..2.0) {
            let c = SearchConfig { beams, return_sequences: beams, length_penalty: lp, max_new_tokens: 5, early_stopping: early, alpha: None, model_norm: ModelNorm::Vocabulary, start_token: 0, eos_token: 1 };
            let mut model = ToyModel::new(inputs, 5, seed);
            let mut cs = vec![Unconstrained; inputs];
            let together = beam_search(&mut model, &mut cs, &c).unwrap();
            for (i, got) in together.iter().enumerate() {
                let mut alone = ToyModel::new(1, 5, seed);
                alone.rows[0] = vec![1000 + i as u32];
                let want = beam_search(&mut alone, &mut [Unconstrained], &c).unwrap();
                prop_assert_eq!(got, &want[0]);
            }
        }
    }
}
