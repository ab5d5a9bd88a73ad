//! External sort of id triples within a memory budget.
//!
//! Triples collect in a buffer; a full buffer is sorted, deduplicated and written as two
//! runs, one in (s, r, o) order and one in (o, r, s) order. The final streams merge the runs
//! (k-way, deduplicating), or come straight from the buffer when nothing was spilled.

use super::error::IngestError;
use rayon::slice::ParallelSliceMut;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub type Triple = [u32; 3];

/// Which stream: subject-major (outgoing adjacency) or object-major (incoming adjacency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// (s, r, o)
    Spo,
    /// (o, r, s), yielded as (o, r, s)
    Ops,
}

fn reorder(t: Triple, order: Order) -> Triple {
    match order {
        Order::Spo => t,
        Order::Ops => [t[2], t[1], t[0]],
    }
}

pub struct TripleSorter {
    buf: Vec<Triple>,
    /// The budget in bytes, shared with whatever else the caller holds (`push`'s `other`).
    budget: usize,
    dir: PathBuf,
    runs: Vec<(PathBuf, PathBuf)>,
    /// Triples pushed (with duplicates).
    pushed: u64,
    /// The most triples the buffer holds, whatever the budget leaves it.
    max_buffer: usize,
}

const RUN_BUFFER_BYTES: usize = 1 << 20;

/// A refilling buffer whose capacity passes its limit by this many triples (or an eighth of
/// the limit, if less) is shrunk to the limit.
const SHRINK_SLACK_TRIPLES: usize = 1 << 20;

/// The buffer never gets smaller than this, whatever else uses the budget.
const MIN_BUFFER_TRIPLES: usize = 1024;

impl TripleSorter {
    /// `budget_bytes`: memory for the buffer (12 bytes a triple) and for whatever the
    /// caller reports as `other` on each push (its dictionaries).
    pub fn new(budget_bytes: usize, dir: PathBuf) -> TripleSorter {
        TripleSorter { buf: Vec::new(), budget: budget_bytes, dir, runs: Vec::new(), pushed: 0, max_buffer: usize::MAX }
    }

    /// Caps the buffer at `triples` (at least 1), below the budget's share and below
    /// `MIN_BUFFER_TRIPLES`: a run is spilled every `triples` pushes, so tests and
    /// measurements can exercise the merge of many runs on small inputs.
    pub fn with_max_buffer(mut self, triples: usize) -> TripleSorter {
        self.max_buffer = triples.max(1);
        self
    }

    /// Adds a triple. `other`: bytes the caller holds under the same budget; the buffer
    /// spills to a run once it and `other` together pass the budget.
    pub fn push(&mut self, t: Triple, other: usize) -> Result<(), IngestError> {
        let limit = (self.budget.saturating_sub(other) / std::mem::size_of::<Triple>()).max(MIN_BUFFER_TRIPLES).min(self.max_buffer);
        if self.buf.len() >= limit {
            self.spill()?;
            // The caller's share grew: give the memory back rather than refill it.
            self.buf.shrink_to(limit);
        } else if self.buf.capacity() >= limit + (limit / 8).min(SHRINK_SLACK_TRIPLES) {
            // The caller's share grew while the buffer refills after a spill: the pages of
            // its last fill are still written, so they count whatever its length; give back
            // those past the new limit now, not at the next spill (a large vector shrinks in
            // place, by mremap, without a copy).
            self.buf.shrink_to(limit);
        }
        if self.buf.len() == self.buf.capacity() {
            // Grow by doubling, never past the limit, so the buffer stays inside the budget.
            let room = limit.saturating_sub(self.buf.len()).max(1);
            self.buf.reserve_exact(self.buf.len().max(MIN_BUFFER_TRIPLES.min(limit)).min(room));
        }
        self.buf.push(t);
        self.pushed += 1;
        Ok(())
    }

    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Bytes the sorter holds while its triples are written: the buffer, or one read
    /// buffer per run file of both orders.
    pub fn heap_bytes(&self) -> usize {
        self.buf.capacity() * std::mem::size_of::<Triple>() + self.runs.len() * 2 * RUN_BUFFER_BYTES
    }

    fn write_run(&self, path: &PathBuf, order: Order) -> Result<(), IngestError> {
        let f = File::create(path).map_err(|e| IngestError::io(path, e))?;
        let mut w = BufWriter::with_capacity(RUN_BUFFER_BYTES, f);
        for t in &self.buf {
            for x in reorder(*t, order) {
                w.write_all(&x.to_le_bytes()).map_err(|e| IngestError::io(path, e))?;
            }
        }
        w.flush().map_err(|e| IngestError::io(path, e))?;
        Ok(())
    }

    fn spill(&mut self) -> Result<(), IngestError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let n = self.runs.len();
        let spo = self.dir.join(format!("run-{n:04}.spo"));
        let ops = self.dir.join(format!("run-{n:04}.ops"));
        self.buf.par_sort_unstable();
        self.buf.dedup();
        self.write_run(&spo, Order::Spo)?;
        self.buf.par_sort_unstable_by_key(|t| reorder(*t, Order::Ops));
        self.write_run(&ops, Order::Ops)?;
        tracing::debug!(run = n, triples = self.buf.len(), elapsed_ms = started.elapsed().as_millis() as u64, "spilled a sorted run");
        self.buf.clear();
        self.runs.push((spo, ops));
        Ok(())
    }

    /// Ends the push phase. With spilled runs, the rest of the buffer is spilled too and
    /// its memory freed, so the merge phase holds only the run buffers.
    pub fn finish(&mut self) -> Result<(), IngestError> {
        if !self.runs.is_empty() {
            self.spill()?;
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Removes the run files of `order` once they are merged, so a load's disk peak holds
    /// one order's runs beside its SST files, not both (24 bytes a triple). Streaming that
    /// order again is then an error.
    pub fn remove_runs(&mut self, order: Order) -> Result<(), IngestError> {
        for (spo, ops) in &self.runs {
            let path = if order == Order::Spo { spo } else { ops };
            std::fs::remove_file(path).map_err(|e| IngestError::io(path, e))?;
        }
        Ok(())
    }

    /// Streams the distinct triples in `order` (reordered as the order names them).
    pub fn for_each(&mut self, order: Order, mut f: impl FnMut(Triple) -> Result<(), IngestError>) -> Result<(), IngestError> {
        if self.runs.is_empty() {
            match order {
                Order::Spo => self.buf.par_sort_unstable(),
                Order::Ops => self.buf.par_sort_unstable_by_key(|t| reorder(*t, Order::Ops)),
            }
            let mut prev = None;
            for &t in &self.buf {
                if prev != Some(t) {
                    f(reorder(t, order))?;
                    prev = Some(t);
                }
            }
            return Ok(());
        }
        let mut readers = Vec::with_capacity(self.runs.len());
        for (spo, ops) in &self.runs {
            let path = if order == Order::Spo { spo } else { ops };
            let file = File::open(path).map_err(|e| IngestError::io(path, e))?;
            readers.push((BufReader::with_capacity(RUN_BUFFER_BYTES, file), path.clone()));
        }
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (i, (r, path)) in readers.iter_mut().enumerate() {
            if let Some(t) = read_triple(r, path)? {
                heap.push(Reverse((t, i)));
            }
        }
        let mut prev = None;
        while let Some(Reverse((t, i))) = heap.pop() {
            if prev != Some(t) {
                f(t)?;
                prev = Some(t);
            }
            let (r, path) = &mut readers[i];
            if let Some(next) = read_triple(r, path)? {
                heap.push(Reverse((next, i)));
            }
        }
        Ok(())
    }
}

fn read_triple(r: &mut BufReader<File>, path: &Path) -> Result<Option<Triple>, IngestError> {
    let mut b = [0u8; 12];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some([
            u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
        ])),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(IngestError::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn collect(s: &mut TripleSorter, order: Order) -> Vec<Triple> {
        let mut out = Vec::new();
        s.for_each(order, |t| {
            out.push(t);
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn a_refilling_buffer_gives_back_what_the_caller_s_growth_takes() {
        let dir = tempfile::tempdir().unwrap();
        let budget = 1_200_000; // 100,000 triples
        let mut s = TripleSorter::new(budget, dir.path().to_path_buf());
        for i in 0..100_001u32 {
            s.push([i, 0, i], 0).unwrap();
        }
        // The buffer filled to the budget, spilled and refills.
        assert_eq!(s.runs(), 1);
        assert!(s.buf.capacity() * 12 >= budget, "{}", s.buf.capacity());
        // The caller now holds half the budget: the buffer keeps at most the rest (and an
        // eighth of it as slack), at once, not after its next spill.
        s.push([7, 7, 7], budget / 2).unwrap();
        assert_eq!(s.runs(), 1);
        let limit = budget / 2 / 12;
        assert!(s.buf.capacity() <= limit + limit / 8, "{} > {}", s.buf.capacity(), limit + limit / 8);
        assert_eq!(s.buf.len(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        #[test]
        fn spilled_and_in_memory_sorts_agree_with_a_btreeset(
            triples in proptest::collection::vec((0u32..50, 0u32..4, 0u32..50), 0..3000),
            tiny_budget: bool,
        ) {
            let dir = tempfile::tempdir().unwrap();
            // 1024 triples is the smallest buffer: a tiny budget forces several runs.
            let budget = if tiny_budget { 1 } else { 1 << 20 };
            let mut s = TripleSorter::new(budget, dir.path().to_path_buf());
            for &(a, b, c) in &triples {
                s.push([a, b, c], 0).unwrap();
            }
            s.finish().unwrap();
            let spo: Vec<Triple> = triples.iter().map(|&(a, b, c)| [a, b, c]).collect::<BTreeSet<_>>().into_iter().collect();
            let ops: Vec<Triple> = triples.iter().map(|&(a, b, c)| [c, b, a]).collect::<BTreeSet<_>>().into_iter().collect();
            prop_assert_eq!(collect(&mut s, Order::Spo), spo);
            let files = std::fs::read_dir(dir.path()).unwrap().count();
            prop_assert_eq!(files, 2 * s.runs());
            // The merged order's runs go; the other order still streams in full.
            s.remove_runs(Order::Spo).unwrap();
            let left: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            prop_assert_eq!(left.len(), s.runs());
            prop_assert!(left.iter().all(|f| f.ends_with(".ops")));
            prop_assert_eq!(collect(&mut s, Order::Ops), ops);
            if tiny_budget && triples.len() > 1024 {
                prop_assert!(s.runs() >= 2);
            }
        }

        #[test]
        fn a_capped_buffer_spills_a_run_every_cap_triples(
            triples in proptest::collection::vec((0u32..30, 0u32..3, 0u32..30), 1..600),
            cap in 1usize..50,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut s = TripleSorter::new(1 << 30, dir.path().to_path_buf()).with_max_buffer(cap);
            for &(a, b, c) in &triples {
                s.push([a, b, c], 0).unwrap();
            }
            s.finish().unwrap();
            // A buffer that never fills is never spilled; otherwise the last, partial one is too.
            let expected_runs = if triples.len() > cap { triples.len().div_ceil(cap) } else { 0 };
            prop_assert_eq!(s.runs(), expected_runs);
            let spo: Vec<Triple> = triples.iter().map(|&(a, b, c)| [a, b, c]).collect::<BTreeSet<_>>().into_iter().collect();
            let ops: Vec<Triple> = triples.iter().map(|&(a, b, c)| [c, b, a]).collect::<BTreeSet<_>>().into_iter().collect();
            prop_assert_eq!(collect(&mut s, Order::Spo), spo);
            prop_assert_eq!(collect(&mut s, Order::Ops), ops);
        }
    }
}
