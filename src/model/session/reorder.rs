//! The KV cache between decoder steps: rows reordered in place on the host (`model::cache`,
//! split over the model's cores) or with the `Gather` graph on the device, and a finished
//! state's buffers kept for the next.

use super::error::{cache_error, CallError, OutputProblem, Seq2SeqError};
use super::pool::SessionGuard;
use super::steps::{host_tensor, DecoderState};
use super::Result;
use crate::model::cache::{reorder_all, split_threads, Kv};
use ort::value::DynValue;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Copies whole rows (axis 0) of a CPU tensor: new row i is old row `parents[i]`.
pub(super) fn gather_host<T: ort::value::PrimitiveTensorElementType + std::fmt::Debug + Copy + 'static>(
    v: &DynValue,
    parents: &[usize],
    what: &str,
) -> Result<DynValue> {
    let (shape, data) = v.try_extract_tensor::<T>().map_err(|e| Seq2SeqError::Output {
        path: PathBuf::from("<cache reorder>"),
        name: what.into(),
        problem: OutputProblem::Extract(e.into()),
    })?;
    let rows = shape.first().copied().unwrap_or(0).max(0) as usize;
    let row = data.len().checked_div(rows).unwrap_or(0);
    let mut out = Vec::with_capacity(parents.len() * row);
    for &p in parents {
        out.extend_from_slice(&data[p * row..(p + 1) * row]);
    }
    let mut new_shape = shape.to_vec();
    if let Some(first) = new_shape.first_mut() {
        *first = parents.len() as i64;
    }
    host_tensor(new_shape, out)
}

impl SessionGuard<'_> {
    /// New row i continues old row `parents[i]` (the count may shrink when inputs finish,
    /// or grow when beams open). Gathers the self-attention cache (nothing when every row
    /// keeps its place), and the cross-attention K/V, mask and encoder states only when the
    /// row -> input mapping changes.
    pub fn reorder(&mut self, state: &mut DecoderState, parents: &[usize]) -> Result<()> {
        let t0 = Instant::now();
        let old = state.rows.len();
        if parents.is_empty() {
            return Err(CallError::NoRows.into());
        }
        if let Some((row, &parent)) = parents.iter().enumerate().find(|(_, &p)| p >= old) {
            return Err(CallError::NoSuchParent { row, parent, rows: old }.into());
        }
        if parents.len() == old && parents.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(());
        }
        let new_rows: Vec<usize> = parents.iter().map(|&p| state.rows[p]).collect();
        let inputs_changed = new_rows != state.rows;
        let on_device = self.slot.as_ref().is_some_and(|s| s.binding.is_some());
        if on_device {
            state.self_kv = self.gather_kv(std::mem::take(&mut state.self_kv), parents)?;
            if inputs_changed {
                state.cross_kv = self.gather_kv(std::mem::take(&mut state.cross_kv), parents)?;
            }
        } else {
            // The cross-attention rows depend on the input alone: they move only when the
            // inputs of the rows change.
            let cross = if inputs_changed { state.cross_kv.len() } else { 0 };
            let tensors: Vec<&mut Kv> = state.self_kv.iter_mut().chain(state.cross_kv.iter_mut().take(cross)).collect();
            let threads = split_threads(&tensors, parents, self.model.host_threads);
            reorder_all(tensors, parents, &mut state.pool, &mut state.scratch, threads).map_err(cache_error)?;
        }
        if inputs_changed {
            state.mask = gather_host::<i64>(&state.mask, parents, "encoder_attention_mask")?;
            // After the first step the encoder states are read again only by a with-past
            // graph that takes them (the cross-attention K/V stand for them otherwise).
            if state.self_kv.is_empty() || self.model.with_past_io.takes_hidden {
                state.hidden = Arc::new(gather_host::<f32>(&state.hidden, parents, "encoder_hidden_states")?);
            }
        }
        state.rows = new_rows;
        state.logits = None;
        self.model.counters.outside_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Gives a finished state's host cache buffers to this session's slot, for its next
    /// state (the state is left without a cache).
    pub fn recycle(&mut self, state: &mut DecoderState) {
        let mut pool = std::mem::take(&mut state.pool);
        for kv in state.self_kv.drain(..).chain(state.cross_kv.drain(..)) {
            kv.recycle(&mut pool);
        }
        // The biggest, enough for one state's self- and cross-attention tensors and their
        // growth.
        pool.sort_by_key(|b| std::cmp::Reverse(b.capacity()));
        pool.truncate(8 * self.model.names.layers);
        let slot = self.slot();
        if slot.pool.len() < pool.len() {
            slot.pool = pool;
        }
    }

    /// Reorders cache tensors on the device (the binding path) with the Gather graph.
    fn gather_kv(&mut self, kv: Vec<Kv>, parents: &[usize]) -> Result<Vec<Kv>> {
        if kv.is_empty() {
            return Ok(kv);
        }
        let kv = kv
            .into_iter()
            .map(|t| match t.into_whole_value() {
                Ok(v) => Ok(v),
                Err(t) => host_tensor(t.shape.clone(), t.data().map_err(cache_error)?.to_vec()),
            })
            .collect::<Result<Vec<DynValue>>>()?;
        let slot = self.slot.as_mut().expect("a guard holds its slot until dropped");
        let Some(b) = slot.binding.as_mut() else {
            return Err(Seq2SeqError::Internal {
                what: "cache reorder (no I/O binding)",
                source: ort::Error::new("the device path was taken without a binding").into(),
            });
        };
        // On the device: one Gather graph call for all layers' tensors.
        let internal = |source: ort::Error| Seq2SeqError::Internal { what: "cache reorder", source: source.into() };
        let idx = host_tensor(vec![parents.len() as i64], parents.iter().map(|&p| p as i64).collect())?;
        let binding = &mut b.gather_binding;
        binding.clear();
        binding.bind_input("idx", &idx).map_err(internal)?;
        for (k, v) in kv.iter().enumerate() {
            binding.bind_input(format!("x{k}"), v).map_err(internal)?;
            binding.bind_output_to_device(format!("y{k}"), &b.kv_memory).map_err(internal)?;
        }
        let mut outputs = b.gather.run_binding(binding).map_err(internal)?;
        (0..kv.len())
            .map(|k| {
                outputs.remove(format!("y{k}")).map(Kv::from_ort).ok_or_else(|| Seq2SeqError::Output {
                    path: PathBuf::from("<cache reorder>"),
                    name: format!("y{k}"),
                    problem: OutputProblem::NotReturned,
                })
            })
            .collect()
    }
}
