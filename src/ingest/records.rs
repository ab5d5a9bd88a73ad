//! External sort of (key, value) byte records under a memory cap, for the tables a load
//! writes from its dictionaries (entity and relation keys, `names` entries): they grow with
//! the entity count and are written after the facts are read, beside the interned
//! dictionary. Records are held in one arena up to the cap, then sorted and written to a run
//! file; the runs are merged when the table is written.

use super::error::IngestError;
use super::sst::SstSink;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// A record read back from a run: its key and value.
type Record = (Vec<u8>, Vec<u8>);

/// Read and write buffer of one run file.
const RUN_BUFFER_BYTES: usize = 1 << 20;
/// The smallest read buffer of a run while runs merge.
const MIN_MERGE_BUFFER_BYTES: usize = 64 << 10;
/// A key's length is kept in 24 bits (keys come from lines of at most 1 MiB).
const MAX_KEY_BYTES: usize = (1 << 24) - 1;

pub(super) struct RecordSorter {
    /// Key then value of each record, back to back.
    bytes: Vec<u8>,
    /// start (40 bits) << 24 | key length (24 bits).
    spans: Vec<u64>,
    value_len: usize,
    cap: usize,
    dir: PathBuf,
    prefix: &'static str,
    runs: Vec<PathBuf>,
}

impl RecordSorter {
    /// Records whose values are all `value_len` bytes; runs go to `dir` as `prefix-N.run`
    /// before the memory held (the records, 8 bytes more each for its span, and the room
    /// their vectors grow into) would pass `cap` bytes.
    pub(super) fn new(dir: &Path, prefix: &'static str, value_len: usize, cap: usize) -> RecordSorter {
        RecordSorter { bytes: Vec::new(), spans: Vec::new(), value_len, cap, dir: dir.to_path_buf(), prefix, runs: Vec::new() }
    }

    /// Bytes held (allocated, not only used) once `more` record bytes and one span are
    /// added: a full vector grows to twice its size, and the old and new allocations both
    /// live while it copies.
    fn resident_after(&self, more: usize) -> usize {
        let grown = |len: usize, capacity: usize, add: usize| if len + add > capacity { capacity + (2 * capacity).max(len + add) } else { capacity };
        grown(self.bytes.len(), self.bytes.capacity(), more) + grown(self.spans.len(), self.spans.capacity(), 1) * 8
    }

    pub(super) fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), IngestError> {
        if key.len() > MAX_KEY_BYTES || value.len() != self.value_len {
            return Err(IngestError::io(
                self.dir.join(self.prefix),
                std::io::Error::other(format!("a {}-byte record key or a {}-byte value (expected {})", key.len(), value.len(), self.value_len)),
            ));
        }
        if !self.spans.is_empty() && self.resident_after(key.len() + value.len()) > self.cap {
            self.spill()?;
        }
        let start = self.bytes.len() as u64;
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.spans.push(start << 24 | key.len() as u64);
        Ok(())
    }

    fn record(&self, span: u64) -> (&[u8], &[u8]) {
        let start = (span >> 24) as usize;
        let key_end = start + (span & 0xff_ffff) as usize;
        (&self.bytes[start..key_end], &self.bytes[key_end..key_end + self.value_len])
    }

    fn sort(&mut self) {
        let mut spans = std::mem::take(&mut self.spans);
        spans.par_sort_unstable_by(|&a, &b| self.record(a).cmp(&self.record(b)));
        self.spans = spans;
    }

    fn spill(&mut self) -> Result<(), IngestError> {
        self.sort();
        let path = self.dir.join(format!("{}-{:04}.run", self.prefix, self.runs.len()));
        let file = File::create(&path).map_err(|e| IngestError::io(&path, e))?;
        let mut w = BufWriter::with_capacity(RUN_BUFFER_BYTES, file);
        for &span in &self.spans {
            let (key, value) = self.record(span);
            w.write_all(&(key.len() as u32).to_le_bytes()).map_err(|e| IngestError::io(&path, e))?;
            w.write_all(key).map_err(|e| IngestError::io(&path, e))?;
            w.write_all(value).map_err(|e| IngestError::io(&path, e))?;
        }
        w.flush().map_err(|e| IngestError::io(&path, e))?;
        self.runs.push(path);
        self.bytes.clear();
        self.spans.clear();
        Ok(())
    }

    /// Writes the records in key order to `sink`, one per key: of records with equal keys,
    /// the one with the smallest value. Returns how many were written and how many sorted
    /// runs they went through. Run files are removed.
    pub(super) fn write_unique(self, sink: &mut SstSink<'_>) -> Result<(u64, usize), IngestError> {
        self.for_each_unique(|key, value| sink.put(key, value))
    }

    /// [`Self::write_unique`] to any writer.
    fn for_each_unique(mut self, mut write: impl FnMut(&[u8], &[u8]) -> Result<(), IngestError>) -> Result<(u64, usize), IngestError> {
        let mut written = 0u64;
        let mut last: Vec<u8> = Vec::new();
        let mut put = |key: &[u8], value: &[u8]| -> Result<(), IngestError> {
            if written > 0 && last == key {
                return Ok(());
            }
            write(key, value)?;
            written += 1;
            last.clear();
            last.extend_from_slice(key);
            Ok(())
        };
        if self.runs.is_empty() {
            self.sort();
            for &span in &self.spans {
                let (key, value) = self.record(span);
                put(key, value)?;
            }
            return Ok((written, 0));
        }
        if !self.spans.is_empty() {
            self.spill()?;
        }
        self.bytes = Vec::new();
        self.spans = Vec::new();
        // The runs' read buffers share the cap (at most 1 MiB each, at least 64 KiB).
        let buffer = (self.cap / self.runs.len()).clamp(MIN_MERGE_BUFFER_BYTES, RUN_BUFFER_BYTES);
        let mut readers = Vec::with_capacity(self.runs.len());
        for path in &self.runs {
            let file = File::open(path).map_err(|e| IngestError::io(path, e))?;
            readers.push(RunReader { path: path.clone(), input: BufReader::with_capacity(buffer, file), value_len: self.value_len });
        }
        // Smallest (key, value) first; the run index breaks no ties that matter (equal
        // records are the same bytes).
        let mut heap = BinaryHeap::new();
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(rec) = r.next()? {
                heap.push(Reverse((rec, i)));
            }
        }
        while let Some(Reverse(((key, value), i))) = heap.pop() {
            put(&key, &value)?;
            if let Some(rec) = readers[i].next()? {
                heap.push(Reverse((rec, i)));
            }
        }
        for path in &self.runs {
            std::fs::remove_file(path).map_err(|e| IngestError::io(path, e))?;
        }
        Ok((written, self.runs.len()))
    }
}

struct RunReader {
    path: PathBuf,
    input: BufReader<File>,
    value_len: usize,
}

impl RunReader {
    /// The next (key, value), or `None` at the end of the run.
    fn next(&mut self) -> Result<Option<Record>, IngestError> {
        let mut len = [0u8; 4];
        // The end of the run only at a record's first byte: a run cut off inside a record
        // is damaged.
        let mut got = 0;
        while got < len.len() {
            match self.input.read(&mut len[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(IngestError::io(&self.path, std::io::Error::other("a run this load wrote ends inside a record: the file is damaged"))),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(IngestError::io(&self.path, e)),
            }
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_KEY_BYTES {
            return Err(IngestError::io(&self.path, std::io::Error::other(format!("a {len}-byte key in a run this load wrote: the file is damaged"))));
        }
        let mut key = vec![0u8; len];
        self.input.read_exact(&mut key).map_err(|e| IngestError::io(&self.path, e))?;
        let mut value = vec![0u8; self.value_len];
        self.input.read_exact(&mut value).map_err(|e| IngestError::io(&self.path, e))?;
        Ok(Some((key, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sorted(records: &[(Vec<u8>, u8)], cap: usize) -> (Vec<Record>, usize) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RecordSorter::new(dir.path(), "t", 1, cap);
        for (k, v) in records {
            s.push(k, &[*v]).unwrap();
            // Past its first record, what the sorter holds (allocated) stays within the cap.
            let held = s.bytes.capacity() + s.spans.capacity() * 8;
            assert!(s.spans.len() < 2 || held <= cap, "{held} bytes held, cap {cap}");
        }
        let mut out = Vec::new();
        let (n, runs) = s
            .for_each_unique(|k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok(())
            })
            .unwrap();
        assert_eq!(n as usize, out.len());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "run files are removed");
        (out, runs)
    }

    #[test]
    fn a_key_that_prefixes_another_sorts_first_and_the_smallest_value_wins() {
        let recs: Vec<(Vec<u8>, u8)> = vec![(b"ab".to_vec(), 2), (b"a".to_vec(), 9), (b"ab".to_vec(), 1), (b"a\x00".to_vec(), 0), (b"a".to_vec(), 3)];
        for cap in [0, 12, 1 << 20] {
            let (out, _) = sorted(&recs, cap);
            let want: Vec<(Vec<u8>, Vec<u8>)> = vec![(b"a".to_vec(), vec![3]), (b"a\x00".to_vec(), vec![0]), (b"ab".to_vec(), vec![1])];
            assert_eq!(out, want, "cap {cap}");
        }
    }

    #[test]
    fn a_run_cut_off_inside_a_record_is_an_error_naming_it() {
        for cut in [2, 6, 8] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = RecordSorter::new(dir.path(), "t", 4, 0);
            for k in [b"bb".as_slice(), b"a", b"c"] {
                s.push(k, &[0, 0, 0, 1]).unwrap();
            }
            // Cap 0: every record but the last went to a run of its own.
            let run = dir.path().join("t-0000.run");
            let len = std::fs::metadata(&run).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(&run).unwrap().set_len(len - cut).unwrap();
            let err = s.for_each_unique(|_, _| Ok(())).unwrap_err().to_string();
            assert!(err.contains("t-0000.run"), "{err}");
        }
    }

    proptest::proptest! {
        /// In memory or through runs, the same records as a map keeping each key's smallest value.
        #[test]
        fn runs_and_memory_agree_with_a_map(records in proptest::collection::vec((proptest::collection::vec(0u8..4, 0..6), 0u8..3), 0..400), cap in 0usize..300) {
            let mut want: BTreeMap<Vec<u8>, u8> = BTreeMap::new();
            for (k, v) in &records {
                let e = want.entry(k.clone()).or_insert(*v);
                *e = (*e).min(*v);
            }
            let want: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().map(|(k, v)| (k, vec![v])).collect();
            let (out, runs) = sorted(&records, cap);
            proptest::prop_assert_eq!(&out, &want);
            let (all_in_memory, none) = sorted(&records, usize::MAX);
            proptest::prop_assert_eq!(none, 0);
            proptest::prop_assert_eq!(all_in_memory, want);
            if records.len() > 1 && cap < 10 {
                proptest::prop_assert!(runs > 0);
            }
        }
    }
}
