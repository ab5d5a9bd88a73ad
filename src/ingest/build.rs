//! The load itself: parse into the dictionaries and the sorter, write SST files, commit.

use super::dict::Interner;
use super::error::{IngestError, LineError};
use super::input::{open_input, Chunk, LineChunker};
use super::parse::{parse_chunk, ParseConfig, ParsedChunk, Record, TermRef};
use super::sort::{Order, TripleSorter};
use super::{BulkLoader, InputSpec, LoadReport, OnError, Progress, ProgressFn};
use crate::error::StoreError;
use crate::ids::{Direction, EntityId, RelationId};
use crate::normalize::normalize_name;
use crate::store::codec::{self, NameTarget, TermKind, TermRecord};
use crate::store::meta::{InputRecord, LoadRecord, Meta};
use crate::store::schema::{self, *};
use crate::store::generation::NextGeneration;
use crate::store::{idlist, layout, open_options, read_meta, read_version, write_meta};
use rayon::prelude::*;
use rocksdb::{Cache, IngestExternalFileOptions, SstFileWriter, WriteBatch, DB};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Share of the memory budget for the sort buffer and the dictionaries together. What
/// else a load holds is bounded independently of the input (chunks in flight, parsed
/// records, run and SST writer buffers, RocksDB caches: under 200 MB together).
const SORT_SHARE: f64 = 1.0;

struct Loading<'a> {
    loader: &'a mut BulkLoader,
    old: Option<&'a DB>,
    entities: Interner,
    relations: Interner,
    labels: HashMap<String, String>,
    aliases: Vec<(String, String)>,
    sorter: TripleSorter,
    rejects: Option<std::io::BufWriter<std::fs::File>>,
    rejects_path: PathBuf,
    report: LoadReport,
}

pub(super) fn run(mut loader: BulkLoader, inputs: &[InputSpec]) -> Result<LoadReport, IngestError> {
    let started = Instant::now();
    let dir = loader.dir.clone();
    let _lock = layout::lock_writer(&dir)?;
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
                let db = DB::open_cf_descriptors_read_only(&opts, gen, schema::existing_descriptors(gen, &cache)?, false)?;
                read_version(&db)?
            };
            if version > FORMAT_VERSION {
                return Err(StoreError::TooNew { path: dir.clone(), found: version, supported: FORMAT_VERSION }.into());
            }
            if version < FORMAT_VERSION {
                return Err(StoreError::NeedsMigration { path: dir.clone(), found: version, current: FORMAT_VERSION }.into());
            }
            Some(DB::open_cf_descriptors(&opts, gen, schema::descriptors(&cache))?)
        }
        None => None,
    };
    let old_meta = match &old {
        Some(db) => Some(read_meta(db)?),
        None => None,
    };
    let next_gen = current.as_ref().map_or(1, |(n, _)| n + 1);
    let tmp = tempfile::Builder::new().prefix("tmp-").tempdir_in(&dir).map_err(|e| IngestError::io(dir.display(), e))?;
    let budget = loader.memory_mb << 20;
    let rejects_path = loader
        .rejects
        .clone()
        .unwrap_or_else(|| dir.join(format!("rejected-{}.tsv", layout::generation_name(next_gen))));
    let base_entities = old_meta.as_ref().map_or(0, |m| m.entities as u32);
    let base_relations = old_meta.as_ref().map_or(0, |m| m.relations as u32);
    let mut state = Loading {
        old: old.as_ref(),
        entities: Interner::new(base_entities),
        relations: Interner::new(base_relations),
        labels: HashMap::new(),
        aliases: Vec::new(),
        sorter: TripleSorter::new((budget as f64 * SORT_SHARE) as usize, tmp.path().to_path_buf()),
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
            elapsed: Default::default(),
        },
        loader: &mut loader,
    };
    for (index, spec) in inputs.iter().enumerate() {
        state.read_input(index, inputs.len(), spec)?;
    }
    tracing::info!(
        facts = state.report.facts_read,
        entities = state.entities.new_count(),
        dictionary_bytes = state.entities.heap_bytes() + state.relations.heap_bytes(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "parsed inputs"
    );
    if let Some(mut w) = state.rejects.take() {
        w.flush().map_err(|e| IngestError::io(state.rejects_path.display(), e))?;
        state.report.rejects_file = Some(state.rejects_path.clone());
    }
    state.sorter.finish()?;
    state.report.sort_runs = state.sorter.runs();

    // Write the new generation.
    let sst_options = SstOptions::new(&cache, tmp.path());
    let files = state.write_tables(&sst_options)?;
    tracing::info!(sort_runs = state.report.sort_runs, elapsed_ms = started.elapsed().as_millis() as u64, "wrote SST files");
    let next = NextGeneration::begin(&dir, old.as_ref(), next_gen, &cache)?;
    let db = &next.db;
    state.progress(&Progress::Committing);
    for (cf, paths) in &files.ssts {
        if paths.is_empty() {
            continue;
        }
        let mut io = IngestExternalFileOptions::default();
        io.set_move_files(true);
        let handle = db.cf_handle(cf).expect("column family exists");
        db.ingest_external_file_cf_opts(handle, &io, paths.clone())?;
    }
    tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "ingested SST files");
    // Any new or possibly renamed term makes token indexes built before this load stale.
    let dictionaries_changed = state.report.new_entities + state.report.new_relations > 0 || !files.label_updates.is_empty();
    let label_names = state.apply_label_updates(db, files.label_updates)?;
    let mut meta = old_meta.unwrap_or_else(|| Meta {
        format_version: FORMAT_VERSION,
        created_by: crate::build_name(),
        reverse_prefix: state.loader.reverse_prefix.clone(),
        ..Meta::default()
    });
    meta.format_version = FORMAT_VERSION;
    meta.updated_by = crate::build_name();
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
    });
    write_meta(db, &meta)?;
    let mut report = state.report;
    drop(old);
    next.commit()?;
    drop(tmp);
    report.entities = meta.entities;
    report.relations = meta.relations;
    report.facts = meta.facts;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// `names` entries of a load in one arena (key bytes then the flag byte), so millions of
/// names cost their bytes plus 8, not an allocation each.
#[derive(Default)]
struct NameEntries {
    bytes: Vec<u8>,
    /// start (40 bits) << 24 | length including the flag byte (24 bits).
    spans: Vec<u64>,
}

impl NameEntries {
    fn push(&mut self, key: &[u8], flag: u8) {
        let start = self.bytes.len() as u64;
        self.bytes.extend_from_slice(key);
        self.bytes.push(flag);
        self.spans.push(start << 24 | (key.len() as u64 + 1));
    }

    fn get(&self, span: u64) -> &[u8] {
        let start = (span >> 24) as usize;
        &self.bytes[start..start + (span & 0xff_ffff) as usize]
    }

    /// (key, value) of an entry.
    fn entry(&self, span: u64) -> (&[u8], &[u8]) {
        let b = self.get(span);
        b.split_at(b.len() - 1)
    }

    /// Entries in key order, one per key: a primary name (flag 0) sorts before an alias
    /// (flag 1) of the same key and wins.
    fn sorted_unique(&mut self) -> Vec<u64> {
        let mut spans = std::mem::take(&mut self.spans);
        spans.par_sort_unstable_by(|&a, &b| self.get(a).cmp(self.get(b)));
        spans.dedup_by(|b, a| self.entry(*a).0 == self.entry(*b).0);
        spans
    }
}

/// SST files per column family, and the point updates that SSTs cannot express.
struct Tables {
    ssts: Vec<(&'static str, Vec<PathBuf>)>,
    label_updates: Vec<(EntityId, String)>,
    new_names: u64,
}

impl Loading<'_> {
    fn progress(&mut self, p: &Progress) {
        if let Some(f) = self.loader.progress.as_mut() {
            f(p);
        }
    }

    fn read_input(&mut self, index: usize, count: usize, spec: &InputSpec) -> Result<(), IngestError> {
        let file = spec.display();
        let opened = open_input(spec)?;
        let format = opened.format;
        let total_bytes = opened.size;
        let consumed = opened.consumed.clone();
        let cfg = ParseConfig { format, reverse_prefix: self.loader.reverse_prefix.clone(), lang: self.loader.lang.clone() };
        let threads = self.loader.threads;
        // A pool of our own, so `--threads` holds for the parsers whatever the host does
        // with rayon's global pool.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("trellis-parse-{i}"))
            .build()
            .map_err(|e| IngestError::io("parser threads", std::io::Error::other(e)))?;
        let cancel = self.loader.cancel.clone();
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
                if cancel.load(Ordering::Relaxed) {
                    return Err(IngestError::Cancelled);
                }
                for chunk in batch? {
                    record.lines += chunk.lines;
                    self.take_chunk(&file, chunk, &mut record)?;
                }
                let p = Progress::Reading {
                    index,
                    count,
                    file: file.clone(),
                    bytes: consumed.load(Ordering::Relaxed),
                    total_bytes,
                    facts: self.report.facts_read,
                };
                self.progress(&p);
            }
            Ok(())
        });
        result?;
        record.facts_read = self.report.facts_read - facts_before;
        self.report.inputs.push(record);
        Ok(())
    }

    fn take_chunk(&mut self, file: &str, chunk: ParsedChunk, record: &mut InputRecord) -> Result<(), IngestError> {
        if let Some(first) = chunk.errors.first() {
            if self.loader.on_error == OnError::Stop {
                return Err(IngestError::bad_line(file, first));
            }
            for e in &chunk.errors {
                self.reject(file, e)?;
            }
            record.rejected += chunk.errors.len() as u64;
        }
        let arena = &chunk.arena;
        // Entity lookups miss the CPU caches once the dictionary is large: hash the keys
        // first, then prefetch each key's table slot a few records ahead of its lookup.
        const AHEAD: usize = 8;
        let hashes: Vec<[u64; 2]> = chunk
            .records
            .iter()
            .map(|rec| match rec {
                Record::Fact { s, o, .. } => [self.entities.hash(s.key.get(arena)), self.entities.hash(o.key.get(arena))],
                _ => [0, 0],
            })
            .collect();
        for (i, rec) in chunk.records.iter().enumerate() {
            if let Some(ahead) = hashes.get(i + AHEAD) {
                self.entities.prefetch(ahead[0]);
                self.entities.prefetch(ahead[1]);
            }
            match *rec {
                Record::Fact { s, r, o } => {
                    let s = self.intern_entity(arena, s, hashes[i][0])?;
                    let r = self.intern_relation(r.get(arena), chunk.relation_kind)?;
                    let o = self.intern_entity(arena, o, hashes[i][1])?;
                    let dictionaries = self.entities.heap_bytes() + self.relations.heap_bytes();
                    self.sorter.push([s, r, o], dictionaries)?;
                    self.report.facts_read += 1;
                }
                Record::Label { subject, text } => {
                    let key = String::from_utf8_lossy(subject.get(arena)).into_owned();
                    self.labels.entry(key).or_insert_with(|| String::from_utf8_lossy(text.get(arena)).into_owned());
                }
                Record::Alias { subject, text } => {
                    let key = String::from_utf8_lossy(subject.get(arena)).into_owned();
                    self.aliases.push((key, String::from_utf8_lossy(text.get(arena)).into_owned()));
                }
            }
        }
        Ok(())
    }

    fn reject(&mut self, file: &str, e: &LineError) -> Result<(), IngestError> {
        *self.report.rejected.entry(e.kind).or_default() += 1;
        if self.rejects.is_none() {
            let f = std::fs::File::create(&self.rejects_path).map_err(|err| IngestError::io(self.rejects_path.display(), err))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "file\tline\tkind\tdetail\ttext").map_err(|err| IngestError::io(self.rejects_path.display(), err))?;
            self.rejects = Some(w);
        }
        let w = self.rejects.as_mut().expect("opened above");
        let detail = e.detail.replace(['\t', '\n'], " ");
        (|| -> std::io::Result<()> {
            write!(w, "{file}\t{}\t{}\t{detail}\t", e.line, e.kind)?;
            w.write_all(&e.text)?;
            w.write_all(b"\n")
        })()
        .map_err(|err| IngestError::io(self.rejects_path.display(), err))
    }

    fn intern_entity(&mut self, arena: &[u8], t: TermRef, hash: u64) -> Result<u32, IngestError> {
        let old = self.old;
        let mut lookup = |k: &[u8]| lookup_id(old, CF_ENTITY_KEYS, k);
        self.entities
            .intern_hashed(t.key.get(arena), hash, t.kind, t.name.map(|n| n.get(arena)), &mut lookup)?
            .ok_or(IngestError::TooManyIds { what: "entities", limit: u64::from(u32::MAX) })
    }

    fn intern_relation(&mut self, key: &[u8], kind: TermKind) -> Result<u32, IngestError> {
        let old = self.old;
        let mut lookup = |k: &[u8]| lookup_id(old, CF_RELATION_KEYS, k);
        self.relations
            .intern(key, kind, None, &mut lookup)?
            .ok_or(IngestError::TooManyIds { what: "relations", limit: u64::from(u32::MAX) })
    }

    /// Builds every SST file of the load and counts what is new.
    fn write_tables(&mut self, set: &SstOptions) -> Result<Tables, IngestError> {
        // Adjacency (from the sorter) and dictionaries (from the interners) are independent:
        // write them on two threads. The adjacency thread owns the progress callback.
        let mut sorter = std::mem::replace(&mut self.sorter, TripleSorter::new(0, PathBuf::new()));
        let mut progress = self.loader.progress.take();
        let old = self.old;
        let (adjacency, dictionaries) = std::thread::scope(|scope| {
            let adjacency = scope.spawn(|| write_adjacency_both(&mut sorter, old, set, &mut progress));
            let dictionaries = self.write_dictionaries(set);
            (adjacency.join().expect("adjacency writer does not panic"), dictionaries)
        });
        self.loader.progress = progress;
        self.sorter = sorter;
        let (adj_files, new_facts) = adjacency?;
        let mut tables = dictionaries?;
        self.report.new_facts = new_facts;
        tables.ssts.extend(adj_files);
        Ok(tables)
    }

    /// Steps 1 and 2: entity and relation dictionaries, names, aliases, late labels.
    fn write_dictionaries(&mut self, set: &SstOptions) -> Result<Tables, IngestError> {
        let mut ssts = Vec::new();
        let mut names = NameEntries::default();
        let t = Instant::now();
        let (ents, keys) = self.write_dictionary(set, true, &mut names)?;
        ssts.push((CF_ENTITIES, ents));
        ssts.push((CF_ENTITY_KEYS, keys));
        let (rels, keys) = self.write_dictionary(set, false, &mut names)?;
        ssts.push((CF_RELATIONS, rels));
        ssts.push((CF_RELATION_KEYS, keys));
        self.report.new_entities = u64::from(self.entities.new_count());
        self.report.new_relations = u64::from(self.relations.new_count());

        let mut alias_keys: Vec<Vec<u8>> = Vec::new();
        let mut names_overwritten = 0u64;
        for (key, alias) in std::mem::take(&mut self.aliases) {
            let Some(e) = self.resolve_entity(&key)? else {
                self.report.unused_labels += 1;
                continue;
            };
            let k = codec::alias_key(EntityId(e), &alias);
            let is_old = e < self.entities.base();
            if is_old && lookup_exists(self.old, CF_ALIASES, &k)? {
                continue;
            }
            let norm = normalize_name(&alias);
            let folded = crate::normalize::fold_name(&norm).map(|f| (f, codec::NAME_FOLDED));
            for (key, flag) in std::iter::once((norm, codec::NAME_ALIAS)).chain(folded) {
                let name_key = codec::name_key(&key, NameTarget::Entity(EntityId(e)));
                let stored = if is_old { lookup_value(self.old, CF_NAMES, &name_key)? } else { None };
                match stored.and_then(|v| v.first().copied()) {
                    // Stored with the same or a stronger flag: nothing to do.
                    Some(old_flag) if old_flag <= flag => {}
                    Some(_) => {
                        names.push(&name_key, flag);
                        names_overwritten += 1;
                    }
                    None => names.push(&name_key, flag),
                }
            }
            alias_keys.push(k);
        }
        alias_keys.sort_unstable();
        alias_keys.dedup();
        self.report.new_aliases = alias_keys.len() as u64;
        ssts.push((CF_ALIASES, write_sorted(set, CF_ALIASES, alias_keys.iter().map(|k| (k.as_slice(), &[][..])))?));
        let mut label_updates = Vec::new();
        for (key, label) in std::mem::take(&mut self.labels) {
            match self.resolve_entity(&key)? {
                Some(e) if e < self.entities.base() => label_updates.push((EntityId(e), label)),
                Some(_) => {}
                None => self.report.unused_labels += 1,
            }
        }
        label_updates.sort();
        let sorted = names.sorted_unique();
        let new_names = sorted.len() as u64 - names_overwritten;
        ssts.push((CF_NAMES, write_sorted(set, CF_NAMES, sorted.iter().map(|&e| names.entry(e)))?));
        tracing::info!(elapsed_ms = t.elapsed().as_millis() as u64, "wrote dictionaries");
        Ok(Tables { ssts, label_updates, new_names })
    }

    fn resolve_entity(&mut self, key: &str) -> Result<Option<u32>, IngestError> {
        if let Some(id) = self.entities.get(key.as_bytes()) {
            return Ok(Some(id));
        }
        Ok(lookup_id(self.old, CF_ENTITY_KEYS, key.as_bytes())?)
    }

    /// Writes the new terms of one dictionary, returns (records SSTs, key SSTs).
    fn write_dictionary(
        &mut self,
        set: &SstOptions,
        entities: bool,
        names: &mut NameEntries,
    ) -> Result<(Vec<PathBuf>, Vec<PathBuf>), IngestError> {
        let (dict, cf, keys_cf) = if entities {
            (&self.entities, CF_ENTITIES, CF_ENTITY_KEYS)
        } else {
            (&self.relations, CF_RELATIONS, CF_RELATION_KEYS)
        };
        // Keys first, so their sort buffer is freed before the names are collected.
        let mut key_sink = SstSink::new(set, keys_cf)?;
        for i in indexes_by_key(dict) {
            key_sink.put(dict.key(i), &(dict.base() + i).to_be_bytes())?;
        }
        let key_files = key_sink.finish()?;
        let mut records = SstSink::new(set, cf)?;
        let mut buf = Vec::new();
        let no_labels = self.labels.is_empty();
        for term in dict.new_terms() {
            let label = if no_labels {
                None
            } else if entities {
                self.labels.get(term.key)
            } else {
                self.labels.get(term.key).or_else(|| wikidata_property_entity(term.key).and_then(|k| self.labels.get(&k)))
            };
            let name = match label {
                Some(l) => l.clone(),
                None => default_name(term.key, term.kind, term.name),
            };
            let rec = TermRecord { kind: term.kind, key: term.key.to_owned(), name };
            codec::encode_term(&rec, &mut buf);
            records.put(&codec::id_key(term.id), &buf)?;
            let target = if entities { NameTarget::Entity(EntityId(term.id)) } else { NameTarget::Relation(RelationId(term.id)) };
            for (key, flag) in codec::name_entries(&rec.name, &[]) {
                names.push(&codec::name_key(&key, target), flag);
            }
        }
        if !no_labels {
            // Labels used by new terms are done; the rest may name stored entities.
            for term in dict.new_terms() {
                self.labels.remove(term.key);
                if !entities {
                    if let Some(k) = wikidata_property_entity(term.key) {
                        self.labels.remove(&k);
                    }
                }
            }
        }
        Ok((records.finish()?, key_files))
    }

    /// Returns how many `names` entries the updates add (negative: remove).
    fn apply_label_updates(&mut self, db: &DB, updates: Vec<(EntityId, String)>) -> Result<i64, IngestError> {
        // A label for an entity of an earlier load names it only when it has no label yet
        // (its name is still the default derived from its key): first label wins, as within
        // one load.
        let mut batch = WriteBatch::default();
        let ents = db.cf_handle(CF_ENTITIES).expect("cf");
        let names = db.cf_handle(CF_NAMES).expect("cf");
        let mut buf = Vec::new();
        let mut delta = 0i64;
        for (e, label) in updates {
            let key = codec::id_key(e.0);
            let Some(v) = db.get_pinned_cf(ents, key)? else { continue };
            let rec = codec::decode_term(&v).ok_or_else(|| StoreError::corrupt(CF_ENTITIES, &key, "undecodable record"))?;
            if rec.name != default_name(&rec.key, rec.kind, None) || rec.kind == TermKind::Literal {
                continue;
            }
            let new = TermRecord { name: label, ..rec.clone() };
            codec::encode_term(&new, &mut buf);
            batch.put_cf(ents, key, &buf);
            let aliases = crate::store::read_aliases(db, e)?;
            let before = codec::name_entries(&rec.name, &aliases);
            let after = codec::name_entries(&new.name, &aliases);
            for k in before.keys().filter(|k| !after.contains_key(*k)) {
                batch.delete_cf(names, codec::name_key(k, NameTarget::Entity(e)));
            }
            for (k, flag) in &after {
                batch.put_cf(names, codec::name_key(k, NameTarget::Entity(e)), [*flag]);
            }
            delta += after.len() as i64 - before.len() as i64;
        }
        db.write(batch)?;
        Ok(delta)
    }
}


/// Steps 3 and 4: outgoing then incoming adjacency and degrees. Returns the SST files and
/// the number of facts the load adds (checked equal from both directions).
fn write_adjacency_both(
    sorter: &mut TripleSorter,
    old: Option<&DB>,
    set: &SstOptions,
    progress: &mut Option<ProgressFn>,
) -> Result<(Vec<(&'static str, Vec<PathBuf>)>, u64), IngestError> {
    let mut files = Vec::new();
    let mut added_out = 0;
    for (order, dir) in [(Order::Spo, Direction::Out), (Order::Ops, Direction::In)] {
        let t = Instant::now();
        let (adj, deg, added) = write_adjacency(sorter, old, set, order, dir, progress)?;
        tracing::info!(?dir, elapsed_ms = t.elapsed().as_millis() as u64, "wrote adjacency");
        files.push((CF_ADJACENCY, adj));
        files.push((CF_DEGREES, deg));
        if dir == Direction::Out {
            added_out = added;
        } else if added != added_out {
            return Err(StoreError::corrupt(
                CF_ADJACENCY,
                b"",
                format!("the load adds {added_out} outgoing but {added} incoming facts"),
            )
            .into());
        }
    }
    Ok((files, added_out))
}


fn write_adjacency(
sorter: &mut TripleSorter,
old: Option<&DB>,
set: &SstOptions,
order: Order,
dir: Direction,
progress: &mut Option<ProgressFn>,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>, u64), IngestError> {
    let (step, steps) = (if dir == Direction::Out { 1 } else { 2 }, 2);
    let total = sorter.pushed();
    let mut adj = SstSink::new(set, CF_ADJACENCY)?;
    let mut deg = SstSink::new(set, CF_DEGREES)?;
    let mut group: Option<(u32, u32)> = None;
    let mut others: Vec<u32> = Vec::new();
    let mut entity_added: u64 = 0;
    let mut added: u64 = 0;
    let mut seen: u64 = 0;
    let mut buf = Vec::new();
    let mut flush_group = |group: Option<(u32, u32)>, others: &mut Vec<u32>, entity_added: &mut u64, adj: &mut SstSink<'_>| -> Result<(), IngestError> {
        let Some((e, r)) = group else { return Ok(()) };
        let key = codec::adj_key(dir, EntityId(e), RelationId(r));
        let stored = match old {
            Some(db) => match db.get_pinned_cf(db.cf_handle(CF_ADJACENCY).expect("cf"), key)? {
                Some(v) => Some(idlist::decode_ids(&v).ok_or_else(|| StoreError::corrupt(CF_ADJACENCY, &key, "malformed id list"))?),
                None => None,
            },
            None => None,
        };
        let (list, new) = match stored {
            Some(stored) => {
                let union = idlist::union_sorted(&stored, others);
                let new = (union.len() - stored.len()) as u64;
                (union, new)
            }
            None => {
                let n = others.len() as u64;
                (std::mem::take(others), n)
            }
        };
        if new > 0 {
            idlist::encode_ids(&list, &mut buf);
            adj.put(&key, &buf)?;
        }
        *entity_added += new;
        others.clear();
        Ok(())
    };
    let flush_entity = |e: u32, entity_added: u64, deg: &mut SstSink<'_>| -> Result<(), IngestError> {
        if entity_added == 0 {
            return Ok(());
        }
        let key = codec::degree_key(dir, EntityId(e));
        let before = match old {
            Some(db) => match db.get_pinned_cf(db.cf_handle(CF_DEGREES).expect("cf"), key)? {
                Some(v) => u64::from(codec::be_u32(&v).ok_or_else(|| StoreError::corrupt(CF_DEGREES, &key, "degree is not 4 bytes"))?),
                None => 0,
            },
            None => 0,
        };
        let value = u32::try_from(before + entity_added).unwrap_or(u32::MAX);
        deg.put(&key, &value.to_be_bytes())
    };
    let result = sorter.for_each(order, |t| {
        let (e, r, other) = (t[0], t[1], t[2]);
        if group != Some((e, r)) {
            flush_group(group, &mut others, &mut entity_added, &mut adj)?;
            if let Some((prev_e, _)) = group {
                if prev_e != e {
                    flush_entity(prev_e, entity_added, &mut deg)?;
                    added += entity_added;
                    entity_added = 0;
                }
            }
            group = Some((e, r));
        }
        others.push(other);
        seen += 1;
        if seen % (1 << 20) == 0 {
            if let Some(f) = progress.as_mut() {
                f(&Progress::Writing { step, steps, what: if dir == Direction::Out { "outgoing adjacency" } else { "incoming adjacency" }, done: seen, total });
            }
        }
        Ok(())
    });
    result?;
    flush_group(group, &mut others, &mut entity_added, &mut adj)?;
    if let Some((e, _)) = group {
        flush_entity(e, entity_added, &mut deg)?;
        added += entity_added;
    }
    Ok((adj.finish()?, deg.finish()?, added))
}

/// Indexes of the new terms of `dict` in key order. The keys lie scattered in the arena, so
/// the sort runs over 12-byte key prefixes packed with the index in one array (no pointer
/// chasing), then orders runs of equal prefixes by whole keys. Zero padding keeps prefix
/// order consistent with key order: a tie is only possible between keys that need the
/// whole-key comparison anyway.
fn indexes_by_key(dict: &Interner) -> Vec<u32> {
    let mut packed: Vec<u128> = (0..dict.new_count())
        .into_par_iter()
        .map(|i| {
            let key = dict.key(i);
            let mut bytes = [0u8; 16];
            let n = key.len().min(12);
            bytes[..n].copy_from_slice(&key[..n]);
            u128::from_be_bytes(bytes) | u128::from(i)
        })
        .collect();
    packed.par_sort_unstable();
    let mut order: Vec<u32> = packed.iter().map(|&v| v as u32).collect();
    let mut start = 0;
    for end in 1..=packed.len() {
        if end == packed.len() || packed[end] >> 32 != packed[start] >> 32 {
            if end - start > 1 {
                order[start..end].sort_unstable_by(|&a, &b| dict.key(a).cmp(dict.key(b)));
            }
            start = end;
        }
    }
    order
}

fn lookup_id(old: Option<&DB>, cf: &'static str, key: &[u8]) -> Result<Option<u32>, StoreError> {
    let Some(db) = old else { return Ok(None) };
    match db.get_pinned_cf(db.cf_handle(cf).expect("cf"), key)? {
        None => Ok(None),
        Some(v) => codec::be_u32(&v).map(Some).ok_or_else(|| StoreError::corrupt(cf, key, "id is not 4 bytes")),
    }
}

fn lookup_value(old: Option<&DB>, cf: &'static str, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(db) = old else { return Ok(None) };
    Ok(db.get_pinned_cf(db.cf_handle(cf).expect("cf"), key)?.map(|v| v.to_vec()))
}

fn lookup_exists(old: Option<&DB>, cf: &'static str, key: &[u8]) -> Result<bool, StoreError> {
    let Some(db) = old else { return Ok(false) };
    Ok(db.get_pinned_cf(db.cf_handle(cf).expect("cf"), key)?.is_some())
}

/// The name of a term without a label: a plain name is itself, an IRI its local name, a
/// literal its lexical form.
pub(crate) fn default_name(key: &str, kind: TermKind, carried: Option<&str>) -> String {
    match kind {
        TermKind::Name | TermKind::Blank => key.to_owned(),
        TermKind::Literal => carried.map_or_else(|| key.to_owned(), str::to_owned),
        TermKind::Iri => local_name(key).to_owned(),
    }
}

/// `http://rdf.freebase.com/ns/m.027rn` -> `m.027rn`; `http://x/y#z` -> `z`.
pub(crate) fn local_name(iri: &str) -> &str {
    let trimmed = iri.trim_end_matches(['/', '#']);
    match trimmed.rfind(['/', '#', ':']) {
        Some(i) if i + 1 < trimmed.len() => &trimmed[i + 1..],
        _ => iri,
    }
}

/// Wikidata labels properties on their entity IRI (`.../entity/P161`) while facts use the
/// direct-claim IRI (`.../prop/direct/P161`): the label of the one names the other.
fn wikidata_property_entity(iri: &str) -> Option<String> {
    let (base, local) = iri.rsplit_once("/prop/direct/")?;
    Some(format!("{base}/entity/{local}"))
}

/// The options of every column family, for SST writers (which borrow them), so ingested
/// files carry the same filters and prefix extractors as files RocksDB writes itself.
pub(super) struct SstOptions {
    by_cf: Vec<(&'static str, rocksdb::Options)>,
    dir: PathBuf,
    files: std::sync::atomic::AtomicU64,
}

impl SstOptions {
    fn new(cache: &Cache, dir: &Path) -> SstOptions {
        SstOptions {
            by_cf: COLUMN_FAMILIES
                .iter()
                .map(|spec| {
                    let mut opts = schema::cf_options(spec, cache);
                    // Ingested files land in the bottom level: compress them as such.
                    opts.set_compression_type(rocksdb::DBCompressionType::Zstd);
                    if !matches!(spec.name, CF_ADJACENCY | CF_DEGREES) {
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
struct SstSink<'o> {
    writer: Option<SstFileWriter<'o>>,
    set: &'o SstOptions,
    cf: &'static str,
    opts: &'o rocksdb::Options,
    in_file: u64,
    files: Vec<PathBuf>,
}

impl<'o> SstSink<'o> {
    fn new(set: &'o SstOptions, cf: &'static str) -> Result<SstSink<'o>, IngestError> {
        let opts = &set.by_cf.iter().find(|(name, _)| *name == cf).expect("known column family").1;
        Ok(SstSink { writer: None, set, cf, opts, in_file: 0, files: Vec::new() })
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), IngestError> {
        if self.in_file >= MAX_SST_ENTRIES {
            self.finish_file()?;
        }
        if self.writer.is_none() {
            let n = self.set.files.fetch_add(1, Ordering::Relaxed);
            let path = self.set.dir.join(format!("{}-{n:05}.sst", self.cf));
            let w = SstFileWriter::create(self.opts);
            w.open(&path)?;
            self.writer = Some(w);
            self.files.push(path);
        }
        self.writer.as_mut().expect("opened above").put(key, value)?;
        self.in_file += 1;
        Ok(())
    }

    fn finish_file(&mut self) -> Result<(), IngestError> {
        if let Some(mut w) = self.writer.take() {
            w.finish()?;
        }
        self.in_file = 0;
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<PathBuf>, IngestError> {
        self.finish_file()?;
        Ok(self.files)
    }
}

fn write_sorted<'a>(set: &SstOptions, cf: &'static str, entries: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Result<Vec<PathBuf>, IngestError> {
    let mut sink = SstSink::new(set, cf)?;
    for (k, v) in entries {
        sink.put(k, v)?;
    }
    sink.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_names() {
        assert_eq!(local_name("http://rdf.freebase.com/ns/m.027rn"), "m.027rn");
        assert_eq!(local_name("http://www.wikidata.org/entity/Q42"), "Q42");
        assert_eq!(local_name("http://x.org/onto#Person"), "Person");
        assert_eq!(local_name("http://x.org/dir/"), "dir");
        assert_eq!(local_name("urn:isbn:123"), "123");
    }

    proptest::proptest! {
        #[test]
        fn indexes_by_key_sorts_like_the_keys(keys in proptest::collection::btree_set(proptest::collection::vec(proptest::prelude::prop_oneof![proptest::prelude::Just(0u8), proptest::prelude::Just(b'a'), proptest::prelude::Just(b'b')], 0..16), 0..300)) {
            let mut dict = Interner::new(0);
            let mut none = |_: &[u8]| Ok(None);
            // Insert in a scrambled order so index order is not key order.
            let mut shuffled: Vec<Vec<u8>> = keys.iter().cloned().collect();
            shuffled.reverse();
            let third = shuffled.len() / 3;
            shuffled.rotate_left(third);
            for k in &shuffled {
                dict.intern(k, TermKind::Name, None, &mut none).unwrap();
            }
            let sorted: Vec<Vec<u8>> = indexes_by_key(&dict).into_iter().map(|i| dict.key(i).to_vec()).collect();
            let expected: Vec<Vec<u8>> = keys.into_iter().collect();
            proptest::prop_assert_eq!(sorted, expected);
        }
    }

    #[test]
    fn wikidata_property_labels() {
        assert_eq!(
            wikidata_property_entity("http://www.wikidata.org/prop/direct/P161").as_deref(),
            Some("http://www.wikidata.org/entity/P161")
        );
        assert_eq!(wikidata_property_entity("http://x/p"), None);
    }
}
