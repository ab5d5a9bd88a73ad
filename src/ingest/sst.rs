//! The SST sink: sorted key-value streams into SST files that the commit ingests.

use super::error::IngestError;
use crate::backend::RocksResult;
use crate::store::schema::{self, *};
use rocksdb::{Cache, SstFileWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// The options of every column family, for SST writers (which borrow them), so ingested
/// files carry the same filters and prefix extractors as files RocksDB writes itself.
pub(super) struct SstOptions {
    by_cf: Vec<(&'static str, rocksdb::Options)>,
    dir: PathBuf,
    files: std::sync::atomic::AtomicU64,
}

impl SstOptions {
    /// The load's temporary directory, where its SST files and sorted runs go.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(super) fn new(cache: &Cache, dir: &Path) -> SstOptions {
        SstOptions {
            by_cf: COLUMN_FAMILIES
                .iter()
                .map(|spec| {
                    let mut opts = schema::cf_options(spec, cache);
                    // Ingested files land in the bottom level, and the SST writer compresses
                    // with `cf_options`' bottommost compression: ZSTD, a hot family's LZ4.
                    if !spec.hot && !matches!(spec.name, CF_ADJACENCY | CF_DEGREES) {
                        // A zstd dictionary per file, sampled from its blocks: names repeat
                        // words across blocks more than within one. Id lists gain ~1% from
                        // it for 10% of the load's time, so they go without. Raw samples, not
                        // a trained dictionary: training (FASTCOVER) costs ~100 ms a file.
                        opts.set_compression_options(-14, 3, 0, 16 << 10);
                        opts.set_zstd_max_train_bytes(0);
                    }
                    (spec.name, opts)
                })
                .collect(),
            dir: dir.to_path_buf(),
            files: Default::default(),
        }
    }
}

/// Keys per SST file. RocksDB's filter builder keeps a hash per key (two with a prefix
/// extractor) until the file is finished: rotating files bounds that memory.
const MAX_SST_ENTRIES: u64 = 1_000_000;

/// SST files being written for one column family, in key order, rotated every
/// `MAX_SST_ENTRIES` keys (no file at all for no entries).
pub(super) struct SstSink<'o> {
    writer: Option<SstFileWriter<'o>>,
    set: &'o SstOptions,
    cf: &'static str,
    opts: &'o rocksdb::Options,
    in_file: u64,
    files: Vec<PathBuf>,
}

impl<'o> SstSink<'o> {
    pub(super) fn new(set: &'o SstOptions, cf: &'static str) -> Result<SstSink<'o>, IngestError> {
        let opts = &set.by_cf.iter().find(|(name, _)| *name == cf).expect("known column family").1;
        Ok(SstSink { writer: None, set, cf, opts, in_file: 0, files: Vec::new() })
    }

    pub(super) fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), IngestError> {
        if self.in_file >= MAX_SST_ENTRIES {
            self.finish_file()?;
        }
        if self.writer.is_none() {
            let n = self.set.files.fetch_add(1, Ordering::Relaxed);
            let path = self.set.dir.join(format!("{}-{n:05}.sst", self.cf));
            let w = SstFileWriter::create(self.opts);
            w.open(&path).rocks()?;
            self.writer = Some(w);
            self.files.push(path);
        }
        self.writer.as_mut().expect("opened above").put(key, value).rocks()?;
        self.in_file += 1;
        Ok(())
    }

    fn finish_file(&mut self) -> Result<(), IngestError> {
        if let Some(mut w) = self.writer.take() {
            w.finish().rocks()?;
        }
        self.in_file = 0;
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<Vec<PathBuf>, IngestError> {
        self.finish_file()?;
        Ok(self.files)
    }
}

pub(super) fn write_sorted<'a>(set: &SstOptions, cf: &'static str, entries: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Result<Vec<PathBuf>, IngestError> {
    let mut sink = SstSink::new(set, cf)?;
    for (k, v) in entries {
        sink.put(k, v)?;
    }
    sink.finish()
}

#[cfg(test)]
mod tests {
    use crate::ingest::{BulkLoader, InputSpec};
    use crate::store::schema::COLUMN_FAMILIES;
    use crate::Store;

    /// A loaded store's files: a hot family's (`CfSpec::hot`, the names read for every
    /// candidate) in LZ4, every other family's in ZSTD, as the loader writes the bottom level
    /// (the files it ingests; `meta`'s few keys are written and flushed to level 0, in LZ4).
    #[test]
    fn the_loader_writes_hot_families_in_lz4_and_the_rest_in_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let tsv = dir.path().join("g.tsv");
        let lines: String = (0..2000).map(|i| format!("entity {i}\tlinked_to\tentity {}\n", (i * 7 + 3) % 2000)).collect();
        std::fs::write(&tsv, lines).unwrap();
        BulkLoader::new(dir.path().join("kg")).load(&[InputSpec::new(&tsv)]).unwrap();
        let store = Store::open_read_only(dir.path().join("kg")).unwrap();
        let files = store.db().live_files().unwrap();
        let mut seen = Vec::new();
        for spec in COLUMN_FAMILIES {
            for f in files.iter().filter(|f| f.column_family_name == spec.name && f.level > 0) {
                let bytes = std::fs::read(store.generation_dir().join(f.name.trim_start_matches('/'))).unwrap();
                // The properties block is uncompressed; its key `rocksdb.compression` (stored
                // as a suffix of the key before it, `rocksdb.comparator`) is followed by its
                // value, the file's compression.
                let has = |word: &[u8]| bytes.windows(word.len()).any(|w| w == word);
                let (want, not): (&[u8], &[u8]) = if spec.hot { (b"ressionLZ4", b"ressionZSTD") } else { (b"ressionZSTD", b"ressionLZ4") };
                assert!(has(want) && !has(not), "{}: {} is not {}", spec.name, f.name, String::from_utf8_lossy(&want[7..]));
                seen.push(spec.name);
            }
        }
        for family in ["entities", "adjacency", "names"] {
            assert!(seen.contains(&family), "no {family} file was checked: {seen:?}");
        }
    }
}
