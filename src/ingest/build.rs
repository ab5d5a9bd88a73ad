//! The load's steps in order: open the current generation, read every input (see
//! `pipeline`), write the new generation's SST files (dictionaries and adjacency on two
//! threads), ingest them into a fresh generation, update the metadata and commit.

use super::dict::Interner;
use super::dictionaries::Tables;
use super::error::IngestError;
use super::sort::{Triple, TripleSorter};
use super::sst::SstOptions;
use super::tokens::ChangedTerms;
use super::{adjacency, BulkLoader, InputSpec, LoadReport};
use crate::backend::RocksResult;
use crate::progress::{Progress, Unit, Work};
use crate::store::error::OpenError;
use crate::store::generation::NextGeneration;
use crate::store::meta::{LoadRecord, Meta};
use crate::store::schema::{self, *};
use crate::store::{layout, open_options, read_meta, read_version, write_meta};
use rocksdb::{Cache, IngestExternalFileOptions, DB};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Share of the memory budget for the sort buffer and the dictionaries together. What
/// else a load holds is bounded independently of the input (chunks in flight, parsed
/// records, run and SST writer buffers, RocksDB caches: under 200 MB together).
const SORT_SHARE: f64 = 1.0;

/// The dictionaries' sorts hold at least this much, however full the budget is.
const MIN_RECORD_CAP: usize = 16 << 20;

/// What a load holds between its steps.
pub(super) struct Loading<'a> {
    pub(super) loader: &'a mut BulkLoader,
    pub(super) old: Option<&'a DB>,
    pub(super) entities: Interner,
    pub(super) relations: Interner,
    pub(super) labels: HashMap<String, String>,
    pub(super) aliases: Vec<(String, String)>,
    pub(super) sorter: TripleSorter,
    pub(super) rejects: Option<std::io::BufWriter<std::fs::File>>,
    pub(super) rejects_path: PathBuf,
    pub(super) report: LoadReport,
    /// This load's number, counted from 1 (its place in the store's `loads` records).
    pub(super) load_number: usize,
    /// Bytes the dictionaries' key and `names` sorts may hold before spilling sorted runs:
    /// what the budget leaves beside the dictionaries and the triple sorter.
    pub(super) record_cap: usize,
}

/// A first load that fails leaves the directory as it found it (removed, when the load
/// created it): a directory with a `LOCK` and nothing else is not a store, and would be
/// taken for one. Its default rejects file goes too: it is named after a generation that
/// was never committed. A rejects file the caller named stays (it lists the input's bad
/// lines, which are still bad, at a place the caller chose).
pub(super) fn run(loader: BulkLoader, inputs: &[InputSpec]) -> Result<LoadReport, IngestError> {
    let dir = loader.dir.clone();
    let before = layout::BeforeFirstLoad::look(&dir);
    let lock = match layout::lock_writer(&dir) {
        Ok(lock) => lock,
        Err(e) => {
            if let Some(before) = before {
                before.remove_created_dirs();
            }
            return Err(e.into());
        }
    };
    let result = run_locked(loader, inputs);
    match (result, before) {
        (Err(e), Some(before)) => {
            before.remove_debris(lock, &[&default_rejects_name(1)]);
            Err(e)
        }
        (result, _) => result,
    }
}

fn default_rejects_name(generation: u64) -> String {
    format!("rejected-{}.tsv", layout::generation_name(generation))
}

fn run_locked(mut loader: BulkLoader, inputs: &[InputSpec]) -> Result<LoadReport, IngestError> {
    let started = Instant::now();
    let dir = loader.dir.clone();
    let current = layout::current_generation(&dir)?;
    // Leftovers of a crashed load or migration.
    layout::remove_stale(&dir, current.as_ref().map(|(_, p)| p.as_path()))?;
    let cache = Cache::new_lru_cache(32 << 20);
    let old = match &current {
        Some((_, gen)) => {
            let mut opts = open_options();
            // The old generation may be open in readers: never rewrite its files.
            opts.set_disable_auto_compactions(true);
            // Check the version without touching the generation: a store of another format
            // must stay exactly as it is.
            let version = {
                let db = DB::open_cf_descriptors_read_only(&opts, gen, schema::existing_descriptors(gen, &cache).rocks()?, false).rocks()?;
                read_version(&db)?
            };
            if version > FORMAT_VERSION {
                return Err(OpenError::TooNew { path: dir.clone(), found: version, supported: FORMAT_VERSION }.into());
            }
            if version < FORMAT_VERSION {
                return Err(OpenError::NeedsMigration { path: dir.clone(), found: version, current: FORMAT_VERSION }.into());
            }
            Some(DB::open_cf_descriptors_read_only(&opts, gen, schema::descriptors(&cache), false).rocks()?)
        }
        None => None,
    };
    let old_meta = match &old {
        Some(db) => Some(read_meta(db)?),
        None => None,
    };
    let next_gen = current.as_ref().map_or(1, |(n, _)| n + 1);
    let tmp = tempfile::Builder::new().prefix("tmp-").tempdir_in(&dir).map_err(|e| IngestError::io(&dir, e))?;
    let budget = loader.memory_mb << 20;
    let rejects_path = loader.rejects.clone().unwrap_or_else(|| dir.join(default_rejects_name(next_gen)));
    let base_entities = old_meta.as_ref().map_or(0, |m| m.entities as u32);
    let base_relations = old_meta.as_ref().map_or(0, |m| m.relations as u32);
    let mut state = Loading {
        old: old.as_ref(),
        entities: Interner::new(base_entities),
        relations: Interner::new(base_relations),
        labels: HashMap::new(),
        aliases: Vec::new(),
        sorter: {
            let sorter = TripleSorter::new((budget as f64 * SORT_SHARE) as usize, tmp.path().to_path_buf());
            match loader.sort_run_triples {
                Some(cap) => sorter.with_max_buffer(cap),
                None => sorter,
            }
        },
        rejects: None,
        rejects_path,
        report: LoadReport {
            inputs: Vec::new(),
            facts_read: 0,
            new_facts: 0,
            new_entities: 0,
            new_relations: 0,
            new_aliases: 0,
            rejected: BTreeMap::new(),
            rejects_file: None,
            unused_labels: 0,
            entities: 0,
            relations: 0,
            facts: 0,
            sort_runs: 0,
            dictionary_runs: 0,
            token_indexes: Default::default(),
            text_index: Default::default(),
            elapsed: Default::default(),
        },
        load_number: old_meta.as_ref().map_or(0, |m| m.loads.len()) + 1,
        record_cap: 0,
        loader: &mut loader,
    };
    for (index, spec) in inputs.iter().enumerate() {
        state.read_input(index, inputs.len(), spec)?;
        state.loader.monitor.check().map_err(|_| IngestError::Cancelled)?;
    }
    tracing::info!(
        facts = state.report.facts_read,
        entities = state.entities.new_count(),
        dictionary_bytes = state.entities.heap_bytes() + state.relations.heap_bytes(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "parsed inputs"
    );
    if let Some(mut w) = state.rejects.take() {
        w.flush().map_err(|e| IngestError::io(&state.rejects_path, e))?;
        state.report.rejects_file = Some(state.rejects_path.clone());
    }
    state.sorter.finish()?;
    state.report.sort_runs = state.sorter.runs();

    // Write the new generation.
    let sst_options = SstOptions::new(&cache, tmp.path());
    let files = state.write_tables(&sst_options)?;
    tracing::info!(sort_runs = state.report.sort_runs, elapsed_ms = started.elapsed().as_millis() as u64, "wrote SST files");
    // The last check: past it the load commits.
    state.loader.monitor.check().map_err(|_| IngestError::Cancelled)?;
    let next = NextGeneration::begin(&dir, current.as_ref().map(|(_, p)| p.as_path()), next_gen, &cache)?;
    let db = &next.db;
    let inputs_count = inputs.len();
    state.progress(Progress::new(Work::Load, (inputs_count + 3, inputs_count + 3), "commit", 0, None, Unit::Facts));
    for (cf, paths) in &files.ssts {
        if paths.is_empty() {
            continue;
        }
        let mut io = IngestExternalFileOptions::default();
        io.set_move_files(true);
        let handle = db.cf_handle(cf).expect("column family exists");
        db.ingest_external_file_cf_opts(handle, &io, paths.clone()).rocks()?;
    }
    tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "ingested SST files");
    // Any new or possibly renamed term makes token indexes built before this load stale.
    let dictionaries_changed = state.report.new_entities + state.report.new_relations > 0 || !files.label_updates.is_empty();
    let (label_names, relabeled) = state.apply_label_updates(db, files.label_updates)?;
    let before = old_meta.clone().unwrap_or_default();
    let mut meta = old_meta.unwrap_or_else(|| Meta {
        format_version: FORMAT_VERSION,
        created_by: crate::store::build_name(),
        reverse_prefix: state.loader.reverse_prefix.clone(),
        ..Meta::default()
    });
    meta.format_version = FORMAT_VERSION;
    meta.updated_by = crate::store::build_name();
    meta.entities += state.report.new_entities;
    meta.relations += state.report.new_relations;
    meta.facts += state.report.new_facts;
    meta.names = (meta.names + files.new_names).saturating_add_signed(label_names);
    meta.aliases += state.report.new_aliases;
    meta.dictionary_epoch += u64::from(dictionaries_changed);
    meta.loads.push(LoadRecord {
        committed_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        inputs: state.report.inputs.clone(),
        new_facts: state.report.new_facts,
        new_entities: state.report.new_entities,
        new_relations: state.report.new_relations,
        rejected_lines: state.report.rejected_total(),
        source: state.loader.source.clone(),
        update: None,
    });
    // The token indexes follow the load: its new names and relabeled entities are encoded,
    // nothing else (a first load has no index yet).
    let changed = ChangedTerms {
        entities: std::iter::once(before.entities as u32..meta.entities as u32).chain(relabeled.iter().map(|&e| e..e + 1)).collect(),
        relations: std::iter::once(before.relations as u32..meta.relations as u32).collect(),
        retired: Vec::new(),
    };
    state.report.token_indexes = super::tokens::follow_write(db, &before, &meta, &changed, &state.loader.monitor)?;
    // A load can touch any part of the store: a text index it had is left stale (named
    // when opened) for `index-text` to rebuild.
    if crate::text::index_dir(next.staging_dir()).is_dir() {
        state.report.text_index = crate::text::TextUpkeep::Stale;
    }
    write_meta(db, &meta)?;
    let mut report = state.report;
    // Past this point a cancel is refused (`Monitor::cancel` returns false) and the load
    // commits; before it, a cancel leaves the store unchanged.
    let monitor = state.loader.monitor.clone();
    let committing = monitor.commit_point().map_err(|_| IngestError::Cancelled)?;
    drop(old);
    next.commit()?;
    drop(committing);
    drop(tmp);
    report.entities = meta.entities;
    report.relations = meta.relations;
    report.facts = meta.facts;
    report.elapsed = started.elapsed();
    Ok(report)
}

impl Loading<'_> {
    pub(super) fn progress(&self, p: Progress) {
        self.loader.monitor.report(&p);
    }

    /// Builds every SST file of the load and counts what is new.
    fn write_tables(&mut self, set: &SstOptions) -> Result<Tables, IngestError> {
        // Adjacency (from the sorter) and dictionaries (from the interners) are independent:
        // write them on two threads. The adjacency thread reports progress (steps after
        // the inputs' reading steps).
        let mut sorter = std::mem::replace(&mut self.sorter, TripleSorter::new(0, PathBuf::new()));
        let monitor = self.loader.monitor.clone();
        let inputs = self.report.inputs.len();
        let old = self.old;
        let load = u32::try_from(self.load_number).unwrap_or(u32::MAX);
        self.record_cap = match self.loader.sort_run_triples {
            // The tests' small runs apply to these sorts too.
            Some(triples) => triples.saturating_mul(std::mem::size_of::<Triple>()).max(4096),
            None => {
                let held = self.entities.heap_bytes() + self.relations.heap_bytes() + sorter.heap_bytes();
                (self.loader.memory_mb << 20).saturating_sub(held).max(MIN_RECORD_CAP)
            }
        };
        let (adjacency, dictionaries) = std::thread::scope(|scope| {
            let adjacency = scope.spawn(|| adjacency::write_adjacency_both(&mut sorter, old, set, &monitor, inputs, load));
            let dictionaries = self.write_dictionaries(set);
            (adjacency.join().expect("adjacency writer does not panic"), dictionaries)
        });
        self.sorter = sorter;
        let (adj_files, new_facts) = adjacency?;
        let mut tables = dictionaries?;
        self.report.new_facts = new_facts;
        tables.ssts.extend(adj_files);
        Ok(tables)
    }
}
