//! The reading pipeline of one input, on three kinds of threads:
//!
//! ```text
//! reader thread          parser pool (rayon)          this thread
//! decompress, cut   -->  parse chunks in parallel -->  intern names -> ids, push id
//! into line chunks       into records (in order)       triples into the external sorter
//! ```
//!
//! Both channels are bounded, so a slow stage holds the ones before it back and memory
//! stays bounded whatever the input's size.

use super::build::Loading;
use super::error::IngestError;
use super::input::{open_input, Chunk, LineChunker};
use super::naming::blank_prefix;
use super::parse::{parse_chunk, ParseConfig, ParsedChunk};
use super::InputSpec;
use crate::progress::{Progress, Unit, Work};
use crate::store::meta::InputRecord;
use rayon::prelude::*;
use std::sync::atomic::Ordering;

impl Loading<'_> {
    pub(super) fn read_input(&mut self, index: usize, count: usize, spec: &InputSpec) -> Result<(), IngestError> {
        let file = spec.display();
        let opened = open_input(spec)?;
        let format = opened.format;
        let total_bytes = opened.size;
        let consumed = opened.consumed.clone();
        let cfg = ParseConfig {
            format,
            reverse_prefix: self.loader.reverse_prefix.clone(),
            lang: self.loader.lang.clone(),
            blank_prefix: blank_prefix(self.load_number, index + 1),
        };
        let threads = self.loader.threads;
        // A pool of our own, so `--threads` holds for the parsers whatever the host does
        // with rayon's global pool.
        let pool =
            rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("trellis-parse-{i}")).build().map_err(IngestError::ThreadPool)?;
        let monitor = self.loader.monitor.clone();
        let mut record = InputRecord { path: file.clone(), format: format.name().into(), ..Default::default() };
        let facts_before = self.report.facts_read;
        let result = std::thread::scope(|scope| -> Result<(), IngestError> {
            let (chunk_tx, chunk_rx) = crossbeam_channel::bounded::<Result<Chunk, IngestError>>(threads * 2);
            let (parsed_tx, parsed_rx) = crossbeam_channel::bounded::<Result<Vec<ParsedChunk>, IngestError>>(2);
            let reader_file = file.clone();
            scope.spawn(move || {
                let mut chunker = LineChunker::new(opened, reader_file);
                loop {
                    match chunker.next_chunk() {
                        Ok(Some(c)) => {
                            if chunk_tx.send(Ok(c)).is_err() {
                                return;
                            }
                        }
                        Ok(None) => return,
                        Err(e) => {
                            let _ = chunk_tx.send(Err(e));
                            return;
                        }
                    }
                }
            });
            let cfg = &cfg;
            let pool = &pool;
            scope.spawn(move || {
                // Batches of chunks parsed in parallel, handed on in input order.
                while let Ok(first) = chunk_rx.recv() {
                    let mut batch = vec![first];
                    while batch.len() < threads * 2 {
                        match chunk_rx.try_recv() {
                            Ok(c) => batch.push(c),
                            Err(_) => break,
                        }
                    }
                    let failed = batch.iter().position(|c| c.is_err());
                    let err = failed.map(|i| batch.drain(i..).next().expect("index in range"));
                    let chunks: Vec<Chunk> = batch.into_iter().map(|c| c.expect("errors drained")).collect();
                    let parsed: Vec<ParsedChunk> = pool.install(|| chunks.into_par_iter().map(|c| parse_chunk(c, cfg)).collect());
                    if parsed_tx.send(Ok(parsed)).is_err() {
                        return;
                    }
                    if let Some(Err(e)) = err {
                        let _ = parsed_tx.send(Err(e));
                        return;
                    }
                }
            });
            for batch in parsed_rx {
                monitor.check().map_err(|_| IngestError::Cancelled)?;
                for chunk in batch? {
                    record.lines += chunk.lines;
                    self.take_chunk(&file, chunk, &mut record)?;
                }
                if monitor.reports() {
                    let bytes = consumed.load(Ordering::Relaxed);
                    // Steps: one per input, both adjacency directions, the commit.
                    let p = Progress::new(Work::Load, (index + 1, count + 3), format!("read {file}"), bytes, total_bytes, Unit::Bytes);
                    self.progress(p.with_facts(self.report.facts_read));
                }
            }
            Ok(())
        });
        result?;
        record.facts_read = self.report.facts_read - facts_before;
        self.report.inputs.push(record);
        Ok(())
    }
}
