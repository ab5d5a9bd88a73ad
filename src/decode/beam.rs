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
    /// Every token but those written into the buffer (ascending; their priors ignored),
    /// with prior 0. The model's log-probabilities stay normalized over the whole
    /// vocabulary, so a hypothesis that takes no banned token scores as it would
    /// unconstrained.
    AllBut,
}

/// Every token but a fixed few, prior 0: the generator's ban of placeholders that name
/// nothing in a request's knowledge. A tokenizer that writes a placeholder as a lone space
/// piece then the placeholder (`▁`, `[E1]`) would still leave the space and stop there:
/// after `space`, the end token is banned too, so a hypothesis that committed to a
/// placeholder must write one it has, or something else, and one that cannot loses to the
/// other beams.
#[derive(Clone, Debug, Default)]
pub struct BannedTokens {
    banned: Vec<u32>,
    /// `banned` with the end token, for the step after `space`.
    after_space: Vec<u32>,
    space: Option<u32>,
}

impl BannedTokens {
    /// Bans `tokens` (any order, repeats allowed); after `space` (when given), `eos` too.
    pub fn new(mut tokens: Vec<u32>, space: Option<u32>, eos: u32) -> BannedTokens {
        tokens.sort_unstable();
        tokens.dedup();
        let mut after_space = tokens.clone();
        if space.is_some() && !tokens.is_empty() {
            after_space.push(eos);
            after_space.sort_unstable();
            after_space.dedup();
        }
        BannedTokens { banned: tokens, after_space, space }
    }

    /// The tokens banned after `last` (the previous token), ascending.
    pub fn after(&self, last: Option<u32>) -> &[u32] {
        if last.is_some() && last == self.space {
            &self.after_space
        } else {
            &self.banned
        }
    }
}

impl Constraint for BannedTokens {
    /// The last token taken.
    type State = Option<u32>;
    type Error = std::convert::Infallible;
    fn start(&mut self) -> Result<Option<u32>, Self::Error> {
        Ok(None)
    }
    fn allowed(&mut self, last: &Option<u32>, out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error> {
        out.clear();
        let banned = self.after(*last);
        if banned.is_empty() {
            return Ok(Allowed::Everything);
        }
        out.extend(banned.iter().map(|&t| (t, 0.0)));
        Ok(Allowed::AllBut)
    }
    fn advance(&mut self, _: &Option<u32>, token: u32) -> Result<Option<u32>, Self::Error> {
        Ok(Some(token))
    }
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
    /// Whether the next step can compute only listed tokens' logits
    /// ([`step_listed`](Self::step_listed)).
    fn lists_logits(&self) -> bool {
        false
    }
    /// Feeds one token per row and returns per row the logits of its `k` listed tokens
    /// (`listed` is `rows x k`, row-major), `rows x k`. Called only while
    /// [`lists_logits`](Self::lists_logits); the default is the whole step, whose length the
    /// search refuses.
    fn step_listed(&mut self, tokens: &[u32], listed: &[u32], k: usize) -> Result<&[f32], Self::Error> {
        let _ = (listed, k);
        self.step(tokens)
    }
}

/// A listed step's tokens per row are a multiple of this, whatever the longest allowed set
/// (each row's ids padded with token 0): a float listed graph computes in chunks of this
/// many ids (tools/train/listed_logits.py), so a row's logits are the same bits whatever
/// the other rows allow.
pub const LISTED_MULTIPLE: usize = 16;

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
    /// The step returned a logits buffer of another size than rows times logits per row.
    #[error("the model returned {got} logits for {rows} rows of {vocab} logits each")]
    LogitsShape {
        /// Logits returned.
        got: usize,
        /// Rows stepped.
        rows: usize,
        /// Logits per row: the vocabulary size, or a listed step's tokens per row.
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

/// A row's logits: the whole vocabulary's (indexed by token) or a listed step's (indexed by
/// the token's place in its allowed list).
#[derive(Clone, Copy)]
struct RowLogits<'l> {
    row: &'l [f32],
    listed: bool,
}

impl RowLogits<'_> {
    /// The logit of `token`, the `j`-th of the allowed list.
    fn of(&self, j: usize, token: u32) -> f32 {
        if self.listed {
            self.row[j]
        } else {
            self.row[token as usize]
        }
    }
}

/// log(sum(exp(logit))) over the listed tokens only (in range), or the first listed token
/// whose logit is NaN. Allowed sets are small: plain f64.
fn log_sum_exp_of(row: RowLogits<'_>, tokens: &[(u32, f64)]) -> Result<f64, usize> {
    let mut max = f64::NEG_INFINITY;
    for (j, &(t, _)) in tokens.iter().enumerate() {
        let x = row.of(j, t);
        if x.is_nan() {
            return Err(t as usize);
        }
        max = max.max(x as f64);
    }
    if max.is_infinite() {
        return Ok(max);
    }
    Ok(max + tokens.iter().enumerate().map(|(j, &(t, _))| (row.of(j, t) as f64 - max).exp()).sum::<f64>().ln())
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

/// What a constraint allowed after one running beam: the kind and the tokens with their
/// log priors.
type AllowedSet = (Allowed, Vec<(u32, f64)>);

/// A constraint's listed tokens must have logits: a token past the model's vocabulary is an
/// error, not an index out of bounds.
fn in_vocabulary<M, C>(allowed: &[(u32, f64)], vocab: usize) -> Result<(), SearchError<M, C>> {
    match allowed.iter().find(|&&(t, _)| t as usize >= vocab) {
        Some(&(token, _)) => Err(SearchError::TokenOutOfRange { token, vocab }),
        None => Ok(()),
    }
}

/// A step's logits as one input's block of rows sees them: its beams' rows by slot.
struct RowsOf<'l> {
    logits: &'l [f32],
    first_row: usize,
    slots: &'l [usize],
    vocab: usize,
    /// Logits per row: `vocab`, or a listed step's tokens per row.
    stride: usize,
    /// A listed step's logits (every beam's allowed set is `Listed`).
    listed: bool,
    /// Per running beam, what the constraint allowed, found before the step (`None`: asked
    /// here).
    allowed: Option<&'l [AllowedSet]>,
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
        let r = RowLogits { row: &rows.logits[row * rows.stride..(row + 1) * rows.stride], listed: rows.listed };
        let (listed, allowed) = match rows.allowed {
            Some(pre) => (pre[b].0, &pre[b].1[..]),
            None => (constraint.allowed(&beam.state, buf.allowed).map_err(SearchError::Constraint)?, &buf.allowed[..]),
        };
        if listed == Allowed::Listed {
            in_vocabulary(allowed, vocab)?;
        }
        let lse = match (cfg.model_norm, listed) {
            (ModelNorm::Allowed, Allowed::Listed) => log_sum_exp_of(r, allowed).map_err(|token| SearchError::NaN { row, token })?,
            _ => log_sum_exp(r.row).map_err(|token| SearchError::NaN { row, token })?,
        };
        processors.changes(cfg.start_token, &beam.tokens, buf.changes);
        let changes = &*buf.changes;
        let cands = &mut *buf.cands;
        // The first change not below the last token pushed (tokens come ascending).
        let (mut at, mut last) = (0, 0);
        let mut push = |token: u32, logit: f32, prior: f64| {
            // Every allowed logit -inf (lse -inf): no candidate, never NaN.
            let mut lp = if lse == f64::NEG_INFINITY { f64::NEG_INFINITY } else { logit as f64 - lse };
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
            Allowed::Listed => allowed.iter().enumerate().for_each(|(j, &(t, prior))| push(t, r.of(j, t), prior)),
            // Only listed sets reach a listed step: the others read the whole vocabulary row.
            Allowed::Everything => (0..vocab as u32).for_each(|t| push(t, r.row[t as usize], 0.0)),
            Allowed::AllBut => {
                let mut banned = allowed.iter().map(|&(t, _)| t).peekable();
                for t in 0..vocab as u32 {
                    while banned.next_if(|&b| b < t).is_some() {}
                    if banned.next_if_eq(&t).is_none() {
                        push(t, r.row[t as usize], 0.0);
                    }
                }
            }
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
    // Per block, per running beam: what the constraint allows, asked before a step that can
    // compute only those tokens' logits (then `listed_ids`, `rows x k`, is what it computes).
    let mut pre: Vec<Vec<AllowedSet>> = Vec::new();
    let mut listed_ids: Vec<u32> = Vec::new();
    for step in 0..cfg.max_new_tokens {
        let rows = blocks.len() * width;
        let asks_first = cfg.model_norm == ModelNorm::Allowed && model.lists_logits();
        pre.clear();
        let mut k = 0;
        if asks_first {
            for &i in &blocks {
                let mut lists = Vec::with_capacity(if done[i] { 0 } else { running[i].len() });
                if !done[i] {
                    for beam in &running[i] {
                        let kind = constraints[i].allowed(&beam.state, &mut allowed).map_err(SearchError::Constraint)?;
                        if kind == Allowed::Listed {
                            in_vocabulary(&allowed, vocab)?;
                        }
                        k = k.max(allowed.len());
                        lists.push((kind, allowed.clone()));
                    }
                }
                pre.push(lists);
            }
        }
        let listed = asks_first && pre.iter().flatten().all(|(kind, _)| *kind == Allowed::Listed);
        let stride = if listed { k.max(1).div_ceil(LISTED_MULTIPLE) * LISTED_MULTIPLE } else { vocab };
        let logits = if listed {
            // Rows without a beam (and a finished input's) compute token 0's logit, unread.
            listed_ids.clear();
            listed_ids.resize(rows * stride, 0);
            for (pos, &i) in blocks.iter().enumerate() {
                for ((_, list), &slot) in pre[pos].iter().zip(&slots[i]) {
                    let at = (pos * width + slot) * stride;
                    for (j, &(t, _)) in list.iter().enumerate() {
                        listed_ids[at + j] = t;
                    }
                }
            }
            model.step_listed(&feed, &listed_ids, stride).map_err(SearchError::Model)?
        } else {
            model.step(&feed).map_err(SearchError::Model)?
        };
        if logits.len() != rows * stride {
            return Err(SearchError::LogitsShape { got: logits.len(), rows, vocab: stride });
        }
        // Per block, the old row each row of the next layout continues.
        let mut block_parents: Vec<Vec<usize>> = Vec::with_capacity(blocks.len());
        for (pos, &i) in blocks.iter().enumerate() {
            let first_row = pos * width;
            if done[i] {
                block_parents.push((0..beams).map(|k| first_row + k % width).collect());
                continue;
            }
            let rows_of =
                RowsOf { logits, first_row, slots: &slots[i], vocab, stride, listed, allowed: pre.get(pos).filter(|_| asks_first).map(Vec::as_slice) };
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
#[path = "beam_tests.rs"]
mod tests;
