//! The calls a beam search makes on a lent session set: encode a batch once, start a decoder
//! state, step it (one token or several per row, on the plain or the binding path), read the
//! logits.

use super::error::{cache_error, CallError, OutputProblem, Seq2SeqError};
use super::pool::SessionGuard;
use super::reorder::gather_host;
use super::Result;
use crate::decode::LISTED_MULTIPLE;
use crate::model::cache::Kv;
use crate::model::interface::{type_name, Stage};
use ort::session::SessionInputValue;
use ort::value::{DynValue, Tensor, TensorElementType, TensorRef, ValueType};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// One session's decoder as the beam search sees it (`StepModel`):
/// the session and one request batch's decoder state.
pub struct SessionSteps<'g, 'm> {
    /// The session the steps run on.
    pub guard: &'g mut SessionGuard<'m>,
    /// The batch's decoder state (rows, KV cache, last logits).
    pub state: DecoderState,
    /// The model's vocabulary size (logits per row).
    pub vocab: usize,
}

impl Drop for SessionSteps<'_, '_> {
    fn drop(&mut self) {
        self.guard.recycle(&mut self.state);
    }
}

impl crate::decode::beam::StepModel for SessionSteps<'_, '_> {
    type Error = Seq2SeqError;
    fn vocab_size(&self) -> usize {
        self.vocab
    }
    fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Seq2SeqError> {
        self.guard.step(&mut self.state, tokens)
    }
    fn lists_logits(&self) -> bool {
        self.guard.model.lists_logits() && !self.state.self_kv.is_empty()
    }
    fn step_listed(&mut self, tokens: &[u32], listed: &[u32], per_row: usize) -> Result<&[f32], Seq2SeqError> {
        self.guard.step_listed(&mut self.state, tokens, listed, per_row)
    }
    fn reorder(&mut self, parents: &[usize]) -> Result<(), Seq2SeqError> {
        self.guard.reorder(&mut self.state, parents)
    }
}

/// A batch encoded once: the encoder output and the attention mask of the padded batch.
pub struct Encoded {
    batch: usize,
    seq: usize,
    hidden: Arc<DynValue>,
    mask: Vec<i64>,
}

impl Encoded {
    /// Inputs encoded.
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// Padded input length.
    pub fn seq_len(&self) -> usize {
        self.seq
    }
    /// The encoder output, `[batch x seq x d_model]` row-major (CPU).
    pub fn hidden_states(&self) -> Result<&[f32]> {
        self.hidden.try_extract_tensor::<f32>().map(|(_, d)| d).map_err(|e| Seq2SeqError::Output {
            path: PathBuf::new(),
            name: "last_hidden_state".into(),
            problem: OutputProblem::Extract(e.into()),
        })
    }
}

/// A decoder input: a value, or a host buffer with its shape.
enum Input<'a> {
    Value(&'a DynValue),
    Host(&'a [i64], &'a [f32]),
}

impl<'a> Input<'a> {
    /// A cache tensor: the value itself when it is fed whole, else a view of its rows.
    fn of(kv: &'a Kv) -> Result<Input<'a>> {
        match kv.whole_value() {
            Some(v) => Ok(Input::Value(v)),
            None => Ok(Input::Host(&kv.shape, kv.data().map_err(cache_error)?)),
        }
    }
}

/// A decoder's state: one row per hypothesis, each tied to an input of the batch.
pub struct DecoderState {
    /// row -> input index of the batch.
    pub(super) rows: Vec<usize>,
    pub(super) seq: usize,
    /// `[rows x seq]`.
    pub(super) mask: DynValue,
    /// `[rows x seq x d_model]`, shared with the encoding while the rows are its inputs.
    pub(super) hidden: Arc<DynValue>,
    pub(super) past_len: usize,
    /// Self-attention K/V per layer (key, value), `[rows x heads x past x d_kv]`; empty
    /// before the first step.
    pub(super) self_kv: Vec<Kv>,
    /// Host buffers for reorders that add rows, reused: a fresh allocation of the cache's
    /// size cost more than the copy itself (page faults). Taken from the session's slot at
    /// `start` and given back by `recycle`.
    pub(super) pool: Vec<Vec<f32>>,
    /// Per cache tensor, the row an in-place reorder saves to turn a cycle of rows.
    pub(super) scratch: Vec<Vec<f32>>,
    /// Cross-attention K/V, `[rows x heads x seq x d_kv]`, from the first step.
    pub(super) cross_kv: Vec<Kv>,
    pub(super) logits: Option<DynValue>,
    pub(super) last_t: usize,
}

impl DecoderState {
    /// Decoder rows (hypotheses) in the state.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }
    /// The input index of each row.
    pub fn row_inputs(&self) -> &[usize] {
        &self.rows
    }
    /// Tokens fed so far (the start token included).
    pub fn past_len(&self) -> usize {
        self.past_len
    }
}

/// Every batch's padded length is a multiple of this ([`SessionGuard::encode`] says why).
pub const PAD_MULTIPLE: usize = 8;

/// The length a batch whose longest input has `longest` tokens is padded to.
pub fn padded_batch_length(longest: usize) -> usize {
    longest.div_ceil(PAD_MULTIPLE) * PAD_MULTIPLE
}

pub(super) fn host_tensor<T: ort::value::PrimitiveTensorElementType + std::fmt::Debug + Clone + 'static>(shape: Vec<i64>, data: Vec<T>) -> Result<DynValue> {
    Tensor::from_array((shape, data)).map(|t| t.into_dyn()).map_err(|source| Seq2SeqError::Internal { what: "input tensor", source: source.into() })
}

fn shape_of(v: &DynValue) -> Vec<i64> {
    match v.dtype() {
        ValueType::Tensor { shape, .. } => shape.to_vec(),
        _ => Vec::new(),
    }
}

impl SessionGuard<'_> {
    /// Encodes a batch once: pads with the pad id, masks the padding. Input ids must be
    /// in the vocabulary; no input may be empty.
    ///
    /// The batch is padded to its longest input rounded up to a multiple of
    /// [`PAD_MULTIPLE`]: then a request's numbers do not depend on the other requests of its
    /// batch. The cause is ONNX Runtime's kernel for a one-row product with a transposed
    /// matrix (`MlasSgemmKernelM1TransposeBAvx`, every decoder step's cross-attention
    /// scores): it takes the key positions four at a time, then two, then one, and each
    /// group sums its lanes in another order, so a position's score changed in the last bit
    /// with the padded length modulo 4 (`tools/reference/ort_padding.py` shows it on the
    /// shipped models; `docs/batch-jobs.md`). With every padded length a multiple of 4, every
    /// real position is scored in a group of four whatever the batch, and trailing groups of
    /// padding add exact zeros. 8 leaves a margin for kernels that group by 8.
    pub fn encode(&mut self, inputs: &[Vec<u32>]) -> Result<Encoded> {
        let cfg = self.model.config().clone();
        if inputs.is_empty() {
            return Err(CallError::EmptyBatch.into());
        }
        if let Some(index) = inputs.iter().position(Vec::is_empty) {
            return Err(CallError::EmptyInput { index }.into());
        }
        if let Some(&token) = inputs.iter().flatten().find(|&&t| t >= cfg.vocab_size) {
            return Err(CallError::TokenOutOfRange { token, vocab: cfg.vocab_size }.into());
        }
        let longest = inputs.iter().map(Vec::len).max().unwrap_or(0);
        let (b, s) = (inputs.len(), padded_batch_length(longest));
        let mut ids = vec![i64::from(cfg.pad_token_id); b * s];
        let mut mask = vec![0i64; b * s];
        for (i, inp) in inputs.iter().enumerate() {
            for (j, &t) in inp.iter().enumerate() {
                ids[i * s + j] = i64::from(t);
                mask[i * s + j] = 1;
            }
        }
        let shape = vec![b as i64, s as i64];
        let ids_v = host_tensor(shape.clone(), ids)?;
        let mask_v = host_tensor(shape, mask.clone())?;
        let path = self.model.encoder_path.clone();
        let session = &mut self.slot().encoder;
        let inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![("input_ids".into(), (&ids_v).into()), ("attention_mask".into(), (&mask_v).into())];
        let mut outputs = session.run(inputs).map_err(|source| Seq2SeqError::Run { path: path.clone(), source: source.into() })?;
        let hidden = outputs.remove("last_hidden_state").ok_or_else(|| Seq2SeqError::Output {
            path: path.clone(),
            name: "last_hidden_state".into(),
            problem: OutputProblem::NotReturned,
        })?;
        let expected = vec![b as i64, s as i64, cfg.d_model as i64];
        check_f32(&path, "last_hidden_state", &hidden, &expected)?;
        Ok(Encoded { batch: b, seq: s, hidden: Arc::new(hidden), mask })
    }

    /// A decoder state with one row per entry of `rows` (row -> input index of `enc`).
    pub fn start(&mut self, enc: &Encoded, rows: &[usize]) -> Result<DecoderState> {
        if rows.is_empty() {
            return Err(CallError::NoRows.into());
        }
        if let Some((row, &input)) = rows.iter().enumerate().find(|(_, &i)| i >= enc.batch) {
            return Err(CallError::NoSuchInput { row, input, batch: enc.batch }.into());
        }
        let s = enc.seq;
        let mut mask = Vec::with_capacity(rows.len() * s);
        for &r in rows {
            mask.extend_from_slice(&enc.mask[r * s..(r + 1) * s]);
        }
        let mask = host_tensor(vec![rows.len() as i64, s as i64], mask)?;
        let identity = rows.len() == enc.batch && rows.iter().enumerate().all(|(i, &r)| i == r);
        let hidden = if identity { Arc::clone(&enc.hidden) } else { Arc::new(gather_host::<f32>(&enc.hidden, rows, "encoder_hidden_states")?) };
        Ok(DecoderState {
            rows: rows.to_vec(),
            seq: s,
            mask,
            hidden,
            past_len: 0,
            self_kv: Vec::new(),
            pool: std::mem::take(&mut self.slot().pool),
            scratch: Vec::new(),
            cross_kv: Vec::new(),
            logits: None,
            last_t: 0,
        })
    }

    /// Feeds one token per row (the first call: the decoder start token) and returns the
    /// logits of that position, `[rows x vocab]` row-major.
    pub fn step<'s>(&mut self, state: &'s mut DecoderState, tokens: &[u32]) -> Result<&'s [f32]> {
        self.step_many(state, tokens, 1)
    }

    /// Feeds `per_row` tokens to every row in one decoder call (`tokens` is
    /// `[rows x per_row]` row-major) and returns the logits of all of them,
    /// `[rows x per_row x vocab]`. Equal, up to float rounding, to `per_row` single steps.
    pub fn step_many<'s>(&mut self, state: &'s mut DecoderState, tokens: &[u32], per_row: usize) -> Result<&'s [f32]> {
        self.run_step(state, tokens, per_row, None)
    }

    /// A cached step (one token per row) on the listed-logits graph: row r's logits are
    /// those of `listed[r * k..(r + 1) * k]`, `[rows x k]` row-major. `k` is a multiple of
    /// 16 ([`LISTED_MULTIPLE`](crate::decode::LISTED_MULTIPLE)): a float listed graph
    /// computes in chunks of 16 ids, which keeps a row's logits the same bits at any `k`.
    /// Needs a model with
    /// `decoder_listed_model.onnx` ([`Seq2Seq::lists_logits`](super::Seq2Seq::lists_logits))
    /// and a state past its first step.
    pub fn step_listed<'s>(&mut self, state: &'s mut DecoderState, tokens: &[u32], listed: &[u32], k: usize) -> Result<&'s [f32]> {
        self.run_step(state, tokens, 1, Some((listed, k)))
    }

    fn run_step<'s>(&mut self, state: &'s mut DecoderState, tokens: &[u32], per_row: usize, listed: Option<(&[u32], usize)>) -> Result<&'s [f32]> {
        let t0 = Instant::now();
        let model = self.model;
        let cfg = model.config();
        let rows = state.rows.len();
        if per_row == 0 || tokens.len() != rows * per_row {
            return Err(CallError::TokenCount { got: tokens.len(), rows, per_row }.into());
        }
        if let Some(&token) = tokens.iter().find(|&&t| t >= cfg.vocab_size) {
            return Err(CallError::TokenOutOfRange { token, vocab: cfg.vocab_size }.into());
        }
        let stage = match (state.self_kv.is_empty(), listed) {
            (true, None) => Stage::First,
            (false, None) => Stage::WithPast,
            (false, Some(_)) => Stage::Listed,
            (true, Some(_)) => return Err(CallError::ListedFirstStep.into()),
        };
        let io = match stage {
            Stage::First => &model.first_io,
            Stage::WithPast => &model.with_past_io,
            Stage::Listed => model.listed_io.as_ref().ok_or(CallError::NoListedGraph)?,
        };
        let mut listed_ids = None;
        let mut width = cfg.vocab_size as usize;
        if let Some((ids, k)) = listed {
            if k == 0 || ids.len() != rows * k {
                return Err(CallError::ListedCount { got: ids.len(), rows, k }.into());
            }
            if k % LISTED_MULTIPLE != 0 {
                return Err(CallError::ListedWidth { k, multiple: LISTED_MULTIPLE }.into());
            }
            if let Some(&token) = ids.iter().find(|&&t| t >= cfg.vocab_size) {
                return Err(CallError::TokenOutOfRange { token, vocab: cfg.vocab_size }.into());
            }
            listed_ids = Some(host_tensor(vec![rows as i64, k as i64], ids.iter().map(|&t| i64::from(t)).collect())?);
            width = k;
        }
        let ids = host_tensor(vec![rows as i64, per_row as i64], tokens.iter().map(|&t| i64::from(t)).collect())?;
        let (h, dkv) = (cfg.num_heads as i64, cfg.d_kv as i64);
        // The merged graph takes every input on both branches: the first step gets empty
        // pasts (its branch does not read them) and use_cache_branch = false.
        let mut dummies = Vec::new();
        let mut branch = None;
        if io.merged {
            branch = Some(host_tensor(vec![1], vec![stage == Stage::WithPast])?);
            if stage == Stage::First {
                for _ in 0..4 * model.names.layers {
                    dummies.push(host_tensor(vec![rows as i64, h, 0, dkv], Vec::<f32>::new())?);
                }
            }
        }
        let mut inputs: Vec<(&str, Input<'_>)> = vec![("input_ids", Input::Value(&ids))];
        if io.takes_mask {
            inputs.push(("encoder_attention_mask", Input::Value(&state.mask)));
        }
        if io.takes_hidden {
            inputs.push(("encoder_hidden_states", Input::Value(&state.hidden)));
        }
        if let Some(b) = &branch {
            inputs.push(("use_cache_branch", Input::Value(b)));
        }
        if let Some(l) = &listed_ids {
            inputs.push(("allowed_ids", Input::Value(l)));
        }
        if io.merged || stage != Stage::First {
            let names = &model.names;
            if stage == Stage::First {
                let (selfs, crosses) = dummies.split_at(2 * names.layers);
                inputs.extend(names.past_self.iter().map(String::as_str).zip(selfs.iter().map(Input::Value)));
                inputs.extend(names.past_cross.iter().map(String::as_str).zip(crosses.iter().map(Input::Value)));
            } else {
                for (name, kv) in names.past_self.iter().zip(&state.self_kv).chain(names.past_cross.iter().zip(&state.cross_kv)) {
                    inputs.push((name.as_str(), Input::of(kv)?));
                }
            }
        }
        let want_cross = stage == Stage::First;
        let mut wanted: Vec<&str> = vec!["logits"];
        wanted.extend(model.names.present_self.iter().map(String::as_str));
        if want_cross {
            wanted.extend(model.names.present_cross.iter().map(String::as_str));
        }
        let path = io.path.clone();
        let run_err = |source: ort::Error| Seq2SeqError::Run { path: path.clone(), source: source.into() };
        let slot = self.slot.as_mut().expect("a guard holds its slot until dropped");
        let session = match (stage, slot.with_past.as_mut(), slot.listed.as_mut()) {
            (Stage::Listed, _, Some(s)) => s,
            (Stage::Listed, _, None) => return Err(CallError::NoListedGraph.into()),
            (Stage::WithPast, Some(s), _) => s,
            _ => &mut slot.first,
        };
        let t_run;
        let run_ns;
        let mut taken: Vec<Option<DynValue>>;
        match slot.binding.as_mut() {
            None => {
                let mut list: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::with_capacity(inputs.len());
                for (n, v) in &inputs {
                    let value = match v {
                        Input::Value(v) => SessionInputValue::from(*v),
                        Input::Host(shape, data) => SessionInputValue::from(
                            TensorRef::from_array_view((shape.to_vec(), *data))
                                .map_err(|source| Seq2SeqError::Internal { what: "cache view", source: source.into() })?,
                        ),
                    };
                    list.push((Cow::Borrowed(*n), value));
                }
                t_run = Instant::now();
                let mut outputs = session.run(list).map_err(run_err)?;
                run_ns = t_run.elapsed().as_nanos() as u64;
                taken = wanted.iter().map(|n| outputs.remove(n)).collect();
            }
            Some(b) => {
                let binding = match (stage, b.with_past.as_mut(), b.listed.as_mut()) {
                    (Stage::Listed, _, Some(l)) => l,
                    (Stage::Listed, _, None) => return Err(CallError::NoListedGraph.into()),
                    (Stage::WithPast, Some(wp), _) => wp,
                    _ => &mut b.first,
                };
                binding.clear();
                for (n, v) in &inputs {
                    match v {
                        Input::Value(v) => binding.bind_input(*n, *v).map_err(run_err)?,
                        // Not made on this path (its reorders stay on the device); bound by copy.
                        Input::Host(shape, data) => binding.bind_input(*n, &host_tensor(shape.to_vec(), data.to_vec())?).map_err(run_err)?,
                    }
                }
                binding.bind_output_to_device("logits", &b.host_memory).map_err(run_err)?;
                for n in &wanted[1..] {
                    binding.bind_output_to_device(*n, &b.kv_memory).map_err(run_err)?;
                }
                t_run = Instant::now();
                let mut outputs = session.run_binding(binding).map_err(run_err)?;
                run_ns = t_run.elapsed().as_nanos() as u64;
                taken = wanted.iter().map(|n| outputs.remove(n)).collect();
            }
        }
        // Check every output's shape before keeping anything: a model that disagrees with
        // config.json is an error here, never an out-of-bounds read later.
        let v = width as i64;
        let (r, t, past) = (rows as i64, per_row as i64, state.past_len as i64);
        let missing = |name: &str| Seq2SeqError::Output { path: path.clone(), name: name.into(), problem: OutputProblem::NotReturned };
        let logits = taken[0].take().ok_or_else(|| missing("logits"))?;
        check_f32(&path, "logits", &logits, &[r, t, v])?;
        let n_self = 2 * model.names.layers;
        let mut new_self = Vec::with_capacity(n_self);
        for (k, name) in model.names.present_self.iter().enumerate() {
            let val = taken[1 + k].take().ok_or_else(|| missing(name))?;
            check_shape(&path, name, &val, &[r, h, past + t, dkv])?;
            new_self.push(val);
        }
        if want_cross {
            let mut cross = Vec::with_capacity(n_self);
            for (k, name) in model.names.present_cross.iter().enumerate() {
                let val = taken[1 + n_self + k].take().ok_or_else(|| missing(name))?;
                check_shape(&path, name, &val, &[r, h, state.seq as i64, dkv])?;
                cross.push(Kv::from_ort(val));
            }
            state.cross_kv = cross;
        }
        for old in std::mem::replace(&mut state.self_kv, new_self.into_iter().map(Kv::from_ort).collect()) {
            old.recycle(&mut state.pool);
        }
        state.past_len += per_row;
        state.last_t = per_row;
        state.logits = Some(logits);
        let total = t0.elapsed().as_nanos() as u64;
        model.counters.steps.fetch_add(1, Ordering::Relaxed);
        if stage == Stage::Listed {
            model.counters.listed_steps.fetch_add(1, Ordering::Relaxed);
        }
        model.counters.tokens.fetch_add((rows * per_row) as u64, Ordering::Relaxed);
        model.counters.run_ns.fetch_add(run_ns, Ordering::Relaxed);
        model.counters.outside_ns.fetch_add(total.saturating_sub(run_ns), Ordering::Relaxed);
        Self::logits(state)
    }

    /// The logits of the last step (`[rows x per_row x vocab]`; after a listed step
    /// `[rows x k]`).
    pub fn logits(state: &DecoderState) -> Result<&[f32]> {
        let l = state.logits.as_ref().ok_or(CallError::NoLogits)?;
        l.try_extract_tensor::<f32>().map(|(_, d)| d).map_err(|e| Seq2SeqError::Output {
            path: PathBuf::new(),
            name: "logits".into(),
            problem: OutputProblem::Extract(e.into()),
        })
    }
}

fn check_shape(path: &Path, name: &str, v: &DynValue, expected: &[i64]) -> Result<()> {
    let found = shape_of(v);
    if found != expected {
        return Err(Seq2SeqError::OutputShape { path: path.into(), name: name.into(), expected: expected.to_vec(), found });
    }
    match v.dtype() {
        ValueType::Tensor { ty: TensorElementType::Float32, .. } => Ok(()),
        other => Err(Seq2SeqError::Output { path: path.into(), name: name.into(), problem: OutputProblem::NotFloat { found: type_name(other) } }),
    }
}

fn check_f32(path: &Path, name: &str, v: &DynValue, expected: &[i64]) -> Result<()> {
    check_shape(path, name, v, expected)
}
