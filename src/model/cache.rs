//! The decoder's attention caches on the host, and how a beam reorder moves their rows.
//!
//! A reorder between decoder steps says: new row `i` continues old row `parents[i]`. In a
//! beam search most rows continue themselves (on the t5-small benchmark about 72% of them),
//! and rows drop out when inputs finish, so a reorder that never adds rows is done in place:
//! only the rows whose parent is another row are written, each once every row that reads its
//! old contents has read them; only a cycle of rows (beams trading places) saves one row. A
//! reorder that adds rows (the beams opening after the first step) gathers into a buffer
//! taken from a pool, so no step pays the page faults of a fresh allocation of the cache's
//! size. The tensors are independent of each other: the session reorders them on several
//! threads ([`crate::model::host`]). The shapes were checked against the model's config when
//! the step returned them.

use crate::model::host::map_split;
use ort::value::DynValue;

/// Where a cache tensor's rows live: ONNX Runtime's output of the last step (fed back as it
/// is, or written in place by a reorder), or a buffer of the decoder state.
pub(crate) enum KvBuf {
    Ort(DynValue),
    Host(Vec<f32>),
}

/// One cache tensor, `[rows x heads x len x d_kv]`. `shape` is what the next step is fed:
/// after an in-place reorder that dropped rows it covers a prefix of the buffer.
pub(crate) struct Kv {
    pub buf: KvBuf,
    pub shape: Vec<i64>,
}

/// A cache tensor's data could not be read as `f32` host memory.
#[derive(Debug)]
pub(crate) struct NotHostF32(pub ort::Error);

impl Kv {
    /// An output of ONNX Runtime, fed back whole.
    pub fn from_ort(value: DynValue) -> Kv {
        let shape = match value.dtype() {
            ort::value::ValueType::Tensor { shape, .. } => shape.to_vec(),
            _ => Vec::new(),
        };
        Kv { buf: KvBuf::Ort(value), shape }
    }

    /// Elements `shape` covers.
    pub fn len(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }

    /// The value itself when it is fed whole (no view needed).
    pub fn whole_value(&self) -> Option<&DynValue> {
        match &self.buf {
            KvBuf::Ort(v) if matches!(v.dtype(), ort::value::ValueType::Tensor { shape, .. } if shape[..] == self.shape[..]) => Some(v),
            _ => None,
        }
    }

    /// The value itself when it is fed whole, else the tensor back.
    pub fn into_whole_value(self) -> Result<DynValue, Kv> {
        if self.whole_value().is_none() {
            return Err(self);
        }
        match self.buf {
            KvBuf::Ort(v) => Ok(v),
            buf => Err(Kv { buf, shape: self.shape }),
        }
    }

    /// The elements `shape` covers.
    pub fn data(&self) -> Result<&[f32], NotHostF32> {
        let len = self.len();
        let all = match &self.buf {
            KvBuf::Ort(v) => v.try_extract_tensor::<f32>().map_err(NotHostF32)?.1,
            KvBuf::Host(d) => &d[..],
        };
        Ok(&all[..len.min(all.len())])
    }

    /// The whole buffer, writable.
    fn buffer_mut(&mut self) -> Result<&mut [f32], NotHostF32> {
        match &mut self.buf {
            KvBuf::Ort(v) => Ok(v.try_extract_tensor_mut::<f32>().map_err(NotHostF32)?.1),
            KvBuf::Host(d) => Ok(&mut d[..]),
        }
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.rows_and_row().1
    }

    /// Rows and elements per row.
    fn rows_and_row(&self) -> (usize, usize) {
        let rows = self.shape.first().map_or(0, |&r| r.max(0) as usize);
        (rows, self.len().checked_div(rows).unwrap_or(0))
    }

    /// The elements a buffer must hold for a reorder to `parents` that adds rows, or `None`
    /// when the reorder is done in place.
    pub fn growth(&self, parents: &[usize]) -> Option<usize> {
        let (rows, row) = self.rows_and_row();
        (parents.len() > rows).then_some(parents.len() * row)
    }

    /// Applies a reorder (new row `i` = old row `parents[i]`, every parent below the current
    /// row count): in place when it adds no rows, else into `fresh`, a buffer the caller
    /// took from its pool for the [`growth`](Self::growth) (so that several tensors can be
    /// reordered on several threads). `scratch` holds the row an in-place reorder saves to
    /// turn a cycle. Returns the host buffer it gave up (the old one of a grown tensor, or
    /// an unused `fresh`), for the pool.
    pub fn reorder_with(&mut self, parents: &[usize], fresh: Option<Vec<f32>>, scratch: &mut Vec<f32>) -> Result<Option<Vec<f32>>, NotHostF32> {
        let (rows, row) = self.rows_and_row();
        let given_up = if parents.len() > rows {
            let mut out = fresh.unwrap_or_default();
            gather_rows(self.data()?, row, parents, &mut out);
            match std::mem::replace(&mut self.buf, KvBuf::Host(out)) {
                KvBuf::Host(old) => Some(old),
                KvBuf::Ort(_) => None,
            }
        } else {
            let buffer = self.buffer_mut()?;
            permute_rows_in_place(&mut buffer[..rows * row], row, parents, scratch);
            fresh
        };
        if let Some(first) = self.shape.first_mut() {
            *first = parents.len() as i64;
        }
        Ok(given_up)
    }

    /// Gives its host buffer back to `pool`.
    pub fn recycle(self, pool: &mut Vec<Vec<f32>>) {
        if let KvBuf::Host(d) = self.buf {
            pool.push(d);
        }
    }
}

/// A reorder moving fewer cache elements than this runs on one thread (4 MB of f32):
/// starting and joining a thread took about 40 us on the benchmark machine, the time of
/// copying some 0.5 MB from memory (1.5 MB inside the cache).
const SPLIT_MIN_ELEMENTS: usize = 1 << 20;

/// The threads worth using for reordering `tensors` to `parents`, up to `threads`: all of
/// them for the big moves (the beams opening, a compaction of the cross-attention tensors),
/// one for the small ones.
pub(crate) fn split_threads(tensors: &[&mut Kv], parents: &[usize], threads: usize) -> usize {
    let moved_rows = parents.iter().enumerate().filter(|&(i, &p)| i != p).count();
    let moved = moved_rows * tensors.iter().map(|kv| kv.row_len()).sum::<usize>();
    if moved >= SPLIT_MIN_ELEMENTS {
        threads
    } else {
        1
    }
}

/// Reorders `tensors` (independent of each other) to `parents`, dealt over `threads` threads
/// ([`map_split`]). The buffers growing tensors gather into are taken from `pool` first and
/// the buffers given up go back to it; `scratch` gets one saved row per tensor.
pub(crate) fn reorder_all(
    tensors: Vec<&mut Kv>,
    parents: &[usize],
    pool: &mut Vec<Vec<f32>>,
    scratch: &mut Vec<Vec<f32>>,
    threads: usize,
) -> Result<(), NotHostF32> {
    scratch.resize_with(tensors.len().max(scratch.len()), Vec::new);
    let fresh: Vec<Option<Vec<f32>>> = tensors.iter().map(|kv| kv.growth(parents).map(|len| take_buffer(pool, len))).collect();
    let jobs: Vec<_> = tensors.into_iter().zip(fresh).zip(scratch.iter_mut()).collect();
    let mut failed = None;
    for given_up in map_split(jobs, threads, |((kv, fresh), scratch)| kv.reorder_with(parents, fresh, scratch)) {
        match given_up {
            Ok(Some(old)) => pool.push(old),
            Ok(None) => {}
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    failed.map_or(Ok(()), Err)
}

/// A buffer for `len` elements from `pool`: the smallest that holds them without growing
/// (so the self-attention cache, small when the beams open, does not take the
/// cross-attention cache's big buffers and leave it a fresh allocation), else a new one.
pub(crate) fn take_buffer(pool: &mut Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    let fits = pool.iter().enumerate().filter(|(_, b)| b.capacity() >= len).min_by_key(|(_, b)| b.capacity()).map(|(i, _)| i);
    if let Some(i) = fits {
        return pool.swap_remove(i);
    }
    // None fits: the largest is given up (growing it could copy what it holds) for a new
    // buffer with room for somewhat longer inputs, so the next batches' growth reuses it.
    if let Some(i) = pool.iter().enumerate().max_by_key(|(_, b)| b.capacity()).map(|(i, _)| i) {
        pool.swap_remove(i);
    }
    Vec::with_capacity(len + len / 4)
}

/// `out` = the rows `parents` of `src` (rows of `row` elements), in that order.
pub(crate) fn gather_rows(src: &[f32], row: usize, parents: &[usize], out: &mut Vec<f32>) {
    out.clear();
    out.reserve(parents.len() * row);
    for &p in parents {
        out.extend_from_slice(&src[p * row..(p + 1) * row]);
    }
}

/// Rewrites the first `parents.len()` rows of `data` so that row `i` holds what row
/// `parents[i]` held (every parent below `data.len() / row`, `parents.len()` no more than
/// that). Writes only the rows whose parent is another row, each once its old contents have
/// been read by every row that continues it; only a cycle of rows (beams trading places)
/// needs one row saved into `scratch`.
pub(crate) fn permute_rows_in_place(data: &mut [f32], row: usize, parents: &[usize], scratch: &mut Vec<f32>) {
    let n = parents.len();
    if row == 0 {
        return;
    }
    let moves = |i: usize| parents[i] != i;
    // Per kept row, how many other rows still have to read its old contents.
    let mut readers = vec![0u32; n];
    for (i, &p) in parents.iter().enumerate() {
        if p != i && p < n {
            readers[p] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| moves(i) && readers[i] == 0).collect();
    let mut written = vec![false; n];
    let mut write = |i: usize, data: &mut [f32], ready: &mut Vec<usize>, readers: &mut [u32]| {
        let p = parents[i];
        data.copy_within(p * row..(p + 1) * row, i * row);
        written[i] = true;
        if p < n && moves(p) {
            readers[p] -= 1;
            if readers[p] == 0 {
                ready.push(p);
            }
        }
    };
    while let Some(i) = ready.pop() {
        write(i, data, &mut ready, &mut readers);
    }
    // What is left are cycles (each row read by the next one around): save one row, shift
    // the others along the cycle, and give the saved contents to the row that reads it.
    scratch.clear();
    for start in 0..n {
        if !moves(start) || written[start] {
            continue;
        }
        scratch.extend_from_slice(&data[start * row..(start + 1) * row]);
        let mut i = start;
        loop {
            let p = parents[i];
            if p == start {
                data[i * row..(i + 1) * row].copy_from_slice(&scratch[..row]);
                written[i] = true;
                break;
            }
            data.copy_within(p * row..(p + 1) * row, i * row);
            written[i] = true;
            i = p;
        }
        scratch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rows_of(data: &[f32], row: usize) -> Vec<Vec<f32>> {
        data.chunks(row).map(<[f32]>::to_vec).collect()
    }

    #[test]
    fn a_beam_reorder_by_hand() {
        // Rows a b c d e; new rows: a a b a c. Row 4 is written first (nobody reads it),
        // then row 2 (its reader, 4, has read it), then rows 1 and 3: no row is saved.
        let mut data = vec![0., 0., 1., 1., 2., 2., 3., 3., 4., 4.];
        let mut scratch = Vec::new();
        permute_rows_in_place(&mut data, 2, &[0, 0, 1, 0, 2], &mut scratch);
        assert_eq!(data, vec![0., 0., 0., 0., 1., 1., 0., 0., 2., 2.]);
    }

    #[test]
    fn beams_trading_places() {
        // A cycle 0 <- 1 <- 2 <- 0 with row 3 reading row 1 and row 4 keeping itself.
        let mut data = vec![0., 1., 2., 3., 4.];
        let mut scratch = Vec::new();
        permute_rows_in_place(&mut data, 1, &[1, 2, 0, 1, 4], &mut scratch);
        assert_eq!(data, vec![1., 2., 0., 1., 4.]);
    }

    #[test]
    fn dropping_rows_keeps_a_prefix() {
        let mut data = vec![0., 1., 2., 3., 4., 5.];
        let mut scratch = Vec::new();
        permute_rows_in_place(&mut data, 1, &[5, 3], &mut scratch);
        assert_eq!(&data[..2], &[5., 3.]);
        assert!(scratch.is_empty(), "rows past the kept ones are read in place");
    }

    #[test]
    fn a_buffer_is_the_smallest_that_fits() {
        let mut pool = vec![Vec::with_capacity(100), Vec::with_capacity(10), Vec::with_capacity(50)];
        assert_eq!(take_buffer(&mut pool, 40).capacity(), 50);
        assert_eq!(take_buffer(&mut pool, 400).capacity(), 500, "none fits: a new one with room to spare");
        assert_eq!(pool.len(), 1, "the largest was given up for it");
        assert_eq!(take_buffer(&mut pool, 1).capacity(), 10);
        assert_eq!(take_buffer(&mut pool, 0).capacity(), 0, "an empty pool gives a new buffer");
    }

    #[test]
    fn only_big_moves_are_split() {
        // Two tensors of 4 rows of 2^17 elements: a row moved is 2^18 elements of both.
        let make = || Kv { buf: KvBuf::Host(vec![0.0; 4 << 17]), shape: vec![4, 1, 1, 1 << 17] };
        let (mut a, mut b) = (make(), make());
        let tensors = [&mut a, &mut b];
        assert_eq!(split_threads(&tensors, &[0, 1, 2, 3], 4), 1, "nothing moves");
        assert_eq!(split_threads(&tensors, &[0, 0, 2, 2], 4), 1, "2 rows: 2^19 elements, under 2^20");
        assert_eq!(split_threads(&tensors, &[1, 0, 3, 2], 4), 4, "4 rows: 2^20 elements");
        assert_eq!(split_threads(&tensors, &[0, 0, 0, 0, 0, 0], 2), 2, "growth: 5 new rows");
    }

    proptest! {
        /// The in-place reorder equals a gather into a new buffer, for any parents (repeats,
        /// drops, cycles) that add no rows.
        #[test]
        fn in_place_equals_a_gather(rows in 1usize..12, row in 1usize..5, picks in proptest::collection::vec(0usize..1000, 1..12)) {
            let data: Vec<f32> = (0..rows * row).map(|x| x as f32).collect();
            let parents: Vec<usize> = picks.iter().take(rows).map(|&p| p % rows).collect();
            let mut expected = Vec::new();
            gather_rows(&data, row, &parents, &mut expected);
            let mut in_place = data.clone();
            let mut scratch = Vec::new();
            permute_rows_in_place(&mut in_place, row, &parents, &mut scratch);
            prop_assert_eq!(rows_of(&in_place[..parents.len() * row], row), rows_of(&expected, row));
        }

        /// Several tensors reordered together, on one thread or several, each end as a
        /// gather of its rows; the grown ones' old buffers go back to the pool.
        #[test]
        fn tensors_reordered_together(rows in 1usize..6, picks in proptest::collection::vec(0usize..1000, 1..15), threads in 1usize..4) {
            let lens = [2usize, 7, 3, 5];
            let parents: Vec<usize> = picks.iter().map(|&p| p % rows).collect();
            let make = || lens.iter().enumerate().map(|(k, &row)| {
                let data: Vec<f32> = (0..rows * row).map(|x| (x + 1000 * k) as f32).collect();
                Kv { buf: KvBuf::Host(data), shape: vec![rows as i64, 1, 1, row as i64] }
            }).collect::<Vec<_>>();
            let mut tensors = make();
            let (mut pool, mut scratch) = (Vec::new(), Vec::new());
            reorder_all(tensors.iter_mut().collect(), &parents, &mut pool, &mut scratch, threads).unwrap();
            for (kv, before) in tensors.iter().zip(make()) {
                let mut expected = Vec::new();
                gather_rows(before.data().unwrap(), before.row_len(), &parents, &mut expected);
                prop_assert_eq!(kv.data().unwrap(), &expected[..]);
            }
            prop_assert_eq!(pool.len(), if parents.len() > rows { lens.len() } else { 0 });
        }

        /// A host tensor's reorder, growing or not, leaves the gathered rows and shape.
        #[test]
        fn kv_reorder_grows_and_shrinks(rows in 1usize..6, picks in proptest::collection::vec(0usize..1000, 1..15)) {
            let row = 3;
            let data: Vec<f32> = (0..rows * row).map(|x| x as f32).collect();
            let parents: Vec<usize> = picks.iter().map(|&p| p % rows).collect();
            let mut expected = Vec::new();
            gather_rows(&data, row, &parents, &mut expected);
            let mut kv = Kv { buf: KvBuf::Host(data), shape: vec![rows as i64, 1, 1, row as i64] };
            let (mut pool, mut scratch) = (Vec::new(), Vec::new());
            let growth = kv.growth(&parents);
            prop_assert_eq!(growth, (parents.len() > rows).then_some(parents.len() * row));
            let fresh = growth.map(|len| take_buffer(&mut pool, len));
            let given_up = kv.reorder_with(&parents, fresh, &mut scratch).unwrap();
            prop_assert_eq!(&kv.shape, &vec![parents.len() as i64, 1, 1, row as i64]);
            prop_assert_eq!(kv.data().unwrap(), &expected[..]);
            prop_assert_eq!(given_up.is_some(), parents.len() > rows, "a grown tensor gives up its old buffer");
        }
    }
}
