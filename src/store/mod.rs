//! The on-disk knowledge-graph store: dictionaries, name index and adjacency in RocksDB.
//!
//! Reads go straight to RocksDB: nothing of the graph is held in memory beyond the block
//! cache. A `Store` is `Send + Sync`; share it (`Arc<Store>`) across reader threads.

pub(crate) mod codec;
pub(crate) mod error;
pub(crate) mod generation;
pub(crate) mod idlist;
pub(crate) mod layout;
pub(crate) mod meta;
mod migrate;
pub(crate) mod schema;
pub mod tokens;
mod validate;

pub use codec::{NameTarget, TermKind, TermRecord};
pub use error::{Corruption, Key, LayoutProblem, MigrateError, OpenError, ReadError, WriteError};
pub use layout::{ReaderPin, Registration};
pub use meta::Meta;
pub use migrate::{migrate, MigrationReport};
pub use schema::FORMAT_VERSION;
pub use validate::ValidationReport;

use crate::backend::RocksResult;
use crate::ids::{Direction, EntityId, RelationId};
use crate::normalize::normalize_name;
use rocksdb::{Cache, ColumnFamily, Options, ReadOptions, DB};
use schema::*;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// `trellis <version>`, recorded in the meta record of the stores this build writes.
pub fn build_name() -> String {
    format!("trellis {}", env!("CARGO_PKG_VERSION"))
}

/// Block cache shared by all column families of one open store.
const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// An open store: one generation of a store directory, read through RocksDB. `Send + Sync`.
pub struct Store {
    // Declared (so dropped) before `pin`: the generation's files stay until RocksDB closed them.
    db: DB,
    dir: PathBuf,
    generation: PathBuf,
    number: u64,
    meta: Meta,
    pin: layout::ReaderPin,
}

/// One edge seen from an entity: `relation(entity, other)` when `direction` is `Out`,
/// `relation(other, entity)` when `In`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Edge {
    /// Whether the entity is the subject (`Out`) or the object (`In`).
    pub direction: Direction,
    /// The relation.
    pub relation: RelationId,
    /// The entity at the other end.
    pub other: EntityId,
}

/// Summary numbers of a store (`trellis stats`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Stats {
    /// Entities in the dictionary.
    pub entities: u64,
    /// Relations in the dictionary.
    pub relations: u64,
    /// Facts (distinct subject, relation, object triples).
    pub facts: u64,
    /// Entries in the `names` index (primary names and aliases of entities and relations).
    pub names: u64,
    /// Aliases of entities (names beyond their primary one).
    pub aliases: u64,
    /// The store's on-disk format version.
    pub format_version: u32,
    /// `trellis <version>` of the build that created the store.
    pub created_by: String,
    /// `trellis <version>` of the build that last wrote it.
    pub updated_by: String,
    /// Loads and updates committed into the store.
    pub loads: usize,
    /// Entities deleted by updates (their ids stay taken).
    pub retired: u64,
    /// The generation read (`gen-NNNNNN`).
    pub generation: u64,
    /// Bytes of the generation directory on disk.
    pub size_on_disk_bytes: u64,
    /// SST bytes per column family, in schema order.
    pub column_family_bytes: Vec<(String, u64)>,
}

/// Everything known about one entity.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EntityInfo {
    /// The entity's id.
    pub id: u32,
    /// What the entity is: a plain name, an IRI, a literal or a blank node.
    pub kind: TermKind,
    /// Identity: the exact name (TSV, pipe), the IRI, or the literal in N-Triples form.
    pub key: String,
    /// Display name.
    pub name: String,
    /// Its other names.
    pub aliases: Vec<String>,
    /// Facts with it as subject.
    pub out_degree: u64,
    /// Facts with it as object.
    pub in_degree: u64,
}

/// Prefixes a user may type before an IRI's local name (`fb:m.027rn`, `wd:Q42`), with the
/// namespaces they stand for. A bare local name (`m.027rn`) is looked up under each.
pub const WELL_KNOWN_PREFIXES: &[(&str, &[&str])] = &[
    ("fb", &["http://rdf.freebase.com/ns/"]),
    ("wd", &["http://www.wikidata.org/entity/"]),
    ("wdt", &["http://www.wikidata.org/prop/direct/"]),
    ("rdf", &["http://www.w3.org/1999/02/22-rdf-syntax-ns#"]),
    ("rdfs", &["http://www.w3.org/2000/01/rdf-schema#"]),
    // Both schemes are in use for schema.org terms.
    ("schema", &["http://schema.org/", "https://schema.org/"]),
];

/// How a user-typed reference matched an entity (`Store::resolve_entity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityMatch {
    /// The text is the entity's key (an IRI also when written in angle brackets).
    Key,
    /// A prefixed form (`wd:Q42`) that expands to the key.
    Prefixed,
    /// A local name (`Q42`) that is the key under a well-known namespace.
    LocalName,
    /// The entity's name, after normalization.
    Name,
    /// An alias of the entity or a folded (accent-free) form of a name.
    Alias,
}

/// One entity a user-typed reference may mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityCandidate {
    /// The entity.
    pub id: EntityId,
    /// How the reference matched it.
    pub matched: EntityMatch,
}

/// Neighbour scans through one reused iterator (`Store::neighbor_cursor`), for walks that
/// visit many entities (candidate subgraphs): a seek each, not an iterator each.
pub struct NeighborCursor<'s> {
    it: rocksdb::DBRawIteratorWithThreadMode<'s, DB>,
    store: &'s Store,
}

impl NeighborCursor<'_> {
    /// Calls `f` for every edge at `e`, both directions, in (direction, relation, other)
    /// order, as `Store::for_each_neighbor(e, None, None, f)`.
    pub fn for_each(&mut self, e: EntityId, f: impl FnMut(Edge) -> ControlFlow<()>) -> Result<(), ReadError> {
        self.for_each_first(e, usize::MAX, f)
    }

    /// As [`for_each`](Self::for_each), but only the first `per_relation` edges of each
    /// (direction, relation): the rest of a list is never decoded, so a hub's relation of a
    /// million objects costs what ten do (a capped candidate set takes ten of each).
    pub(crate) fn for_each_first(&mut self, e: EntityId, per_relation: usize, mut f: impl FnMut(Edge) -> ControlFlow<()>) -> Result<(), ReadError> {
        for dir in Direction::BOTH {
            let prefix = codec::adj_prefix(dir, e);
            self.it.seek(prefix);
            while let Some((k, v)) = self.it.item() {
                if !k.starts_with(&prefix) {
                    break;
                }
                let (_, _, r) = codec::decode_adj_key(k).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, k, "malformed adjacency key"))?;
                if visit_list(dir, r, v, k, per_relation, &mut f)?.is_break() {
                    return Ok(());
                }
                self.it.next();
            }
            self.it.status().map_err(|e| self.store.read_error(e))?;
        }
        Ok(())
    }
}

/// Lookups in the `names` index through one reused iterator (`Store::name_cursor`).
pub struct NameCursor<'s> {
    it: rocksdb::DBRawIteratorWithThreadMode<'s, DB>,
    store: &'s Store,
}

impl NameCursor<'_> {
    /// One seek answering two questions about an already normalized name: which targets
    /// carry exactly this name (unsorted; true when not the primary name), and whether some
    /// longer name continues it with a space. Keys `name\0…` sort right before `name …`:
    /// normalization leaves no control character that could sort between them.
    pub fn probe(&mut self, normalized: &str) -> Result<(Vec<(NameTarget, bool)>, bool), ReadError> {
        let prefix = codec::name_prefix(normalized);
        let mut hits = Vec::new();
        self.it.seek(&prefix);
        while let Some((k, v)) = self.it.item() {
            if !k.starts_with(&prefix) {
                break;
            }
            let (_, target) = codec::decode_name_key(k).ok_or_else(|| ReadError::corrupt(CF_NAMES, k, "malformed name key"))?;
            hits.push((target, v.first() != Some(&codec::NAME_PRIMARY)));
            self.it.next();
        }
        let continues = self.it.key().is_some_and(|k| k.len() > normalized.len() && k.starts_with(normalized.as_bytes()) && k[normalized.len()] == b' ');
        self.it.status().map_err(|e| self.store.read_error(e))?;
        Ok((hits, continues))
    }

    /// Whether some entry starts with `normalized_prefix`.
    pub fn has_prefix(&mut self, normalized_prefix: &str) -> Result<bool, ReadError> {
        self.it.seek(normalized_prefix.as_bytes());
        let found = self.it.key().is_some_and(|k| k.starts_with(normalized_prefix.as_bytes()));
        self.it.status().map_err(|e| self.store.read_error(e))?;
        Ok(found)
    }

    /// Entities named `normalized (qualifier)`, at most `limit`.
    pub fn qualified(&mut self, normalized: &str, limit: usize) -> Result<Vec<EntityId>, ReadError> {
        let mut prefix = normalized.to_owned();
        prefix.push_str(" (");
        let mut out = Vec::new();
        self.it.seek(prefix.as_bytes());
        while let Some(k) = self.it.key() {
            if !k.starts_with(prefix.as_bytes()) || out.len() >= limit {
                break;
            }
            let (_, target) = codec::decode_name_key(k).ok_or_else(|| ReadError::corrupt(CF_NAMES, k, "malformed name key"))?;
            if let NameTarget::Entity(e) = target {
                out.push(e);
            }
            self.it.next();
        }
        self.it.status().map_err(|e| self.store.read_error(e))?;
        Ok(out)
    }
}

/// Table files RocksDB keeps open: a quarter of the process's open-file limit, from 512 to
/// 8192. A store of a billion facts has thousands of SST files, and a read in a file not open
/// first opens it (its index and filter partitions, about a megabyte read and parsed): with
/// 512, an update whose keys spread over a 1.62B-fact store's 2,900 files reopened a file on
/// nearly every read.
fn max_open_files() -> i32 {
    static LIMIT: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        // No limits file (not Linux): assume a common default of 2048.
        let soft = std::fs::read_to_string("/proc/self/limits").map_or(Some(2048), |limits| open_files_soft_limit(&limits)).unwrap_or(2048);
        i32::try_from(soft / 4).unwrap_or(i32::MAX).clamp(512, 8192)
    })
}

/// The soft limit of "Max open files" in a `/proc/self/limits` text (`u64::MAX` when
/// unlimited; `None` when absent or unreadable).
fn open_files_soft_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    match line["Max open files".len()..].split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

pub(crate) fn open_options() -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_max_background_jobs(2);
    opts.set_keep_log_file_num(2);
    opts.set_max_open_files(max_open_files());
    // RocksDB's info log would otherwise rewrite its whole options dump on every open.
    opts.set_log_level(rocksdb::LogLevel::Warn);
    opts
}

impl Store {
    /// Opens a store for reading and writing, migrating an older format first (which takes
    /// the writer lock for the duration of the migration).
    pub fn open(dir: impl AsRef<Path>) -> Result<Store, OpenError> {
        let dir = dir.as_ref();
        let lock = layout::lock_existing_writer(dir)?;
        let version = Self::peek_version(dir)?;
        if version < FORMAT_VERSION {
            migrate::migrate_locked(dir, &lock)?;
        }
        let (number, gen) = layout::current_generation(dir)?.ok_or_else(|| OpenError::NotAStore { path: dir.into() })?;
        Self::open_generation(dir, number, gen, layout::ReaderPin::Writer(lock))
    }

    /// Opens a store for reading only. Any number of processes and threads may do this at
    /// once, also while a loader writes a new generation. The store keeps the generation
    /// it opened until dropped: it registers under `DIR/readers/`, and writers remove no
    /// generation a live reader holds. Where the registry cannot be written (a read-only
    /// filesystem), the store opens anyway; `reader_pin` says so.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Store, OpenError> {
        let dir = dir.as_ref();
        let (number, gen, pin) = layout::register_reader(dir)?;
        Self::open_generation(dir, number, gen, pin)
    }

    /// The number of the generation this store reads (`gen-NNNNNN`): every load, update,
    /// token index and migration commits the next one.
    pub fn generation(&self) -> u64 {
        self.number
    }

    /// Whether this store reads the newest committed generation (one small file read).
    /// A store opened for writing holds the writer lock, so it always does.
    pub fn is_current(&self) -> Result<bool, OpenError> {
        if matches!(self.pin, layout::ReaderPin::Writer(_)) {
            return Ok(true);
        }
        Ok(layout::current_generation(&self.dir)?.is_none_or(|(n, _)| n == self.number))
    }

    /// The newest generation, opened for reading, when one was committed after this store's
    /// (`None`: this one is the newest). This store keeps reading its own generation (what
    /// it answers stays consistent: one request, one generation); handles move over by
    /// being rebuilt on the new one (`Retriever::refreshed`, `Pipeline::refresh`), and the
    /// old generation is retired once no reader holds it.
    pub fn refresh(&self) -> Result<Option<Store>, OpenError> {
        if self.is_current()? {
            return Ok(None);
        }
        let newer = Store::open_read_only(&self.dir)?;
        Ok((newer.number != self.number).then_some(newer))
    }

    /// The format version of the store in `dir`, read without checking it.
    pub fn peek_version(dir: &Path) -> Result<u32, OpenError> {
        let (_, gen) = layout::current_generation(dir)?.ok_or_else(|| OpenError::NotAStore { path: dir.into() })?;
        let cache = Cache::new_lru_cache(1 << 20);
        let db = DB::open_cf_descriptors_read_only(&open_options(), &gen, existing_descriptors(&gen, &cache).map_err(OpenError::rocks(&gen))?, false)
            .map_err(OpenError::rocks(&gen))?;
        Ok(read_version(&db)?)
    }

    fn open_generation(dir: &Path, number: u64, gen: PathBuf, pin: layout::ReaderPin) -> Result<Store, OpenError> {
        let cache = Cache::new_lru_cache(DEFAULT_CACHE_BYTES);
        let opts = open_options();
        // Check the version before asking for this build's column families: a store of
        // another format may lack them.
        let version = {
            let db = DB::open_cf_descriptors_read_only(&opts, &gen, existing_descriptors(&gen, &cache).map_err(OpenError::rocks(&gen))?, false)
                .map_err(OpenError::rocks(&gen))?;
            read_version(&db)?
        };
        if version > FORMAT_VERSION {
            return Err(OpenError::TooNew { path: dir.into(), found: version, supported: FORMAT_VERSION });
        }
        if version < FORMAT_VERSION {
            return Err(OpenError::NeedsMigration { path: dir.into(), found: version, current: FORMAT_VERSION });
        }
        // Read-only even for a writer's handle: a committed generation is never opened for
        // writing (readers may be opening it; `store/generation.rs`), and every write goes
        // through a new generation.
        let db = DB::open_cf_descriptors_read_only(&opts, &gen, descriptors(&cache), false).map_err(OpenError::rocks(&gen))?;
        let meta = read_meta(&db)?;
        Ok(Store { db, dir: dir.to_path_buf(), generation: gen, number, meta, pin })
    }

    /// The store directory (the one holding `CURRENT`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The generation directory this store reads (`DIR/gen-NNNNNN`).
    pub fn generation_dir(&self) -> &Path {
        &self.generation
    }

    /// How this store keeps its generation on disk: registered as a reader, held by the
    /// writer lock, or unregistered (the registry could not be written) and so unprotected
    /// from a commit by another process.
    pub fn reader_pin(&self) -> &layout::ReaderPin {
        &self.pin
    }

    /// The error for a failed RocksDB read: `GenerationRemoved` when it failed because
    /// files of this generation are gone (removed by an older Trellis or by hand while it
    /// was open), which reopening fixes; otherwise the RocksDB error itself.
    pub(crate) fn read_error(&self, e: rocksdb::Error) -> ReadError {
        read_error(&self.dir, &self.generation, e)
    }

    /// The entities deleted by updates (format 4): their ids stay taken and keep their
    /// records, but they have no key, name, alias or fact.
    pub(crate) fn retired_entities(&self) -> Result<roaring::RoaringBitmap, ReadError> {
        let mut out = roaring::RoaringBitmap::new();
        let mut it = self.db().raw_iterator_cf(self.cf(schema::CF_RETIRED));
        it.seek_to_first();
        while let Some(k) = it.key() {
            out.insert(codec::be_u32(k).ok_or_else(|| ReadError::corrupt(schema::CF_RETIRED, k, "id is not 4 bytes"))?);
            it.next();
        }
        it.status().map_err(|e| self.read_error(e))?;
        Ok(out)
    }

    /// The loads and updates that assert fact `r(s, o)` (format 4 provenance): their numbers
    /// in `meta().loads`, counted from 1 (0: stored before format 4, by a load not recorded),
    /// ascending; empty when the fact is not stored.
    pub fn fact_sources(&self, s: EntityId, r: RelationId, o: EntityId) -> Result<Vec<u32>, ReadError> {
        let mut prefix = s.0.to_be_bytes().to_vec();
        prefix.extend_from_slice(&r.0.to_be_bytes());
        let mut out = Vec::new();
        let mut it = self.db().raw_iterator_cf(self.cf(schema::CF_FACT_SOURCES));
        it.seek(&prefix);
        while let Some((k, v)) = it.item() {
            if !k.starts_with(&prefix) {
                break;
            }
            let (_, _, load) = codec::decode_triple_key(k).ok_or_else(|| ReadError::corrupt(schema::CF_FACT_SOURCES, k, "malformed key"))?;
            let ids = idlist::decode_ids(v).ok_or_else(|| ReadError::corrupt(schema::CF_FACT_SOURCES, k, "malformed id list"))?;
            if ids.binary_search(&o.0).is_ok() {
                out.push(load);
            }
            it.next();
        }
        it.status().map_err(|e| self.read_error(e))?;
        Ok(out)
    }

    /// How load or update `n` (from 1) is named for people: its `--source`, else `load N` or
    /// `update N`; 0 is `before format 4`.
    pub fn source_name(&self, n: u32) -> String {
        match n.checked_sub(1).and_then(|i| self.meta.loads.get(i as usize)) {
            None => "before format 4".into(),
            Some(l) => match &l.source {
                Some(s) => s.clone(),
                None if l.update.is_some() => format!("update {n}"),
                None => format!("load {n}"),
            },
        }
    }

    /// Whether an update deleted entity `e`.
    pub fn is_retired(&self, e: EntityId) -> Result<bool, ReadError> {
        Ok(self.db().get_pinned_cf(self.cf(schema::CF_RETIRED), codec::id_key(e.0)).map_err(|err| self.read_error(err))?.is_some())
    }

    /// The store's meta record (counts, versions, loads).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    pub(crate) fn db(&self) -> &DB {
        &self.db
    }

    pub(crate) fn cf(&self, name: &'static str) -> &ColumnFamily {
        self.db.cf_handle(name).expect("every column family is opened with the store")
    }

    /// Summary numbers (`trellis stats`).
    pub fn stats(&self) -> Stats {
        let m = &self.meta;
        Stats {
            entities: m.entities,
            relations: m.relations,
            facts: m.facts,
            names: m.names,
            aliases: m.aliases,
            format_version: m.format_version,
            created_by: m.created_by.clone(),
            updated_by: m.updated_by.clone(),
            loads: m.loads.len(),
            retired: m.retired,
            generation: self.number,
            size_on_disk_bytes: layout::dir_size(&self.generation),
            column_family_bytes: COLUMN_FAMILIES
                .iter()
                .map(|spec| {
                    let bytes = self.db.property_int_value_cf(self.cf(spec.name), "rocksdb.total-sst-files-size").ok().flatten().unwrap_or(0);
                    (spec.name.to_owned(), bytes)
                })
                .collect(),
        }
    }

    /// Entities in the dictionary.
    pub fn entity_count(&self) -> u64 {
        self.meta.entities
    }

    /// Relations in the dictionary.
    pub fn relation_count(&self) -> u64 {
        self.meta.relations
    }

    /// The dictionary record of an entity, or `None` for an id past the end.
    pub fn entity(&self, id: EntityId) -> Result<Option<TermRecord>, ReadError> {
        self.term(CF_ENTITIES, id.0)
    }

    /// The dictionary record of a relation, or `None` for an id past the end.
    pub fn relation(&self, id: RelationId) -> Result<Option<TermRecord>, ReadError> {
        self.term(CF_RELATIONS, id.0)
    }

    /// The display names of many entities in one batched read, in the order of `ids`
    /// (`None` for an id past the end).
    pub fn entity_names(&self, ids: &[EntityId]) -> Result<Vec<Option<String>>, ReadError> {
        self.term_names(CF_ENTITIES, ids.iter().map(|e| e.0))
    }

    /// The display names of many relations in one batched read, in the order of `ids` (`None` for an id past the end).
    pub fn relation_names(&self, ids: &[RelationId]) -> Result<Vec<Option<String>>, ReadError> {
        self.term_names(CF_RELATIONS, ids.iter().map(|r| r.0))
    }

    fn term_names(&self, cf: &'static str, ids: impl Iterator<Item = u32>) -> Result<Vec<Option<String>>, ReadError> {
        let keys: Vec<[u8; 4]> = ids.map(codec::id_key).collect();
        // Sorted keys share index and data blocks; answers come back in key order.
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by_key(|&i| keys[i]);
        let sorted: Vec<[u8; 4]> = order.iter().map(|&i| keys[i]).collect();
        let values = self.db.batched_multi_get_cf(self.cf(cf), &sorted, true);
        let mut out = vec![None; keys.len()];
        for ((&i, key), value) in order.iter().zip(&sorted).zip(values) {
            if let Some(v) = value.map_err(|e| self.read_error(e))? {
                let record = codec::decode_term(&v).ok_or_else(|| ReadError::corrupt(cf, key, "undecodable dictionary record"))?;
                out[i] = Some(record.name);
            }
        }
        Ok(out)
    }

    fn term(&self, cf: &'static str, id: u32) -> Result<Option<TermRecord>, ReadError> {
        let key = codec::id_key(id);
        match self.db.get_pinned_cf(self.cf(cf), key).map_err(|e| self.read_error(e))? {
            None => Ok(None),
            Some(v) => codec::decode_term(&v).map(Some).ok_or_else(|| ReadError::corrupt(cf, &key, "undecodable dictionary record")),
        }
    }

    /// The entity whose identity key (exact name, IRI or literal) is `key`.
    pub fn entity_by_key(&self, key: &str) -> Result<Option<EntityId>, ReadError> {
        self.id_by_key(CF_ENTITY_KEYS, key).map(|o| o.map(EntityId))
    }

    /// The relation whose identity key is `key`.
    pub fn relation_by_key(&self, key: &str) -> Result<Option<RelationId>, ReadError> {
        self.id_by_key(CF_RELATION_KEYS, key).map(|o| o.map(RelationId))
    }

    fn id_by_key(&self, cf: &'static str, key: &str) -> Result<Option<u32>, ReadError> {
        match self.db.get_pinned_cf(self.cf(cf), key.as_bytes()).map_err(|e| self.read_error(e))? {
            None => Ok(None),
            Some(v) => codec::be_u32(&v).map(Some).ok_or_else(|| ReadError::corrupt(cf, key.as_bytes(), "id is not 4 bytes")),
        }
    }

    /// Every entity and relation whose name, alias or folded form normalizes like `name`,
    /// primary names first, then by id. The boolean is true for a match that is not the
    /// primary name (an alias, or a folded form).
    pub fn lookup_name(&self, name: &str) -> Result<Vec<(NameTarget, bool)>, ReadError> {
        let mut out = self.name_cursor().probe(&normalize_name(name))?.0;
        out.sort_by_key(|&(t, alias)| (alias, t));
        Ok(out)
    }

    /// A cursor over the name index for many lookups in a row: creating a RocksDB iterator
    /// costs about as much as the seek itself, so a linker keeps one per message.
    pub fn name_cursor(&self) -> NameCursor<'_> {
        NameCursor { it: self.db.raw_iterator_cf(self.cf(CF_NAMES)), store: self }
    }

    /// Entities named (or aliased) `name` after normalization, primary names first.
    pub fn entities_named(&self, name: &str) -> Result<Vec<EntityId>, ReadError> {
        Ok(self
            .lookup_name(name)?
            .into_iter()
            .filter_map(|(t, _)| match t {
                NameTarget::Entity(e) => Some(e),
                NameTarget::Relation(_) => None,
            })
            .collect())
    }

    /// Resolves what a user typed: an exact key, else a normalized name (relations too).
    pub fn resolve_relation(&self, text: &str) -> Result<Vec<RelationId>, ReadError> {
        if let Some(r) = self.relation_by_key(text)? {
            return Ok(vec![r]);
        }
        Ok(self
            .lookup_name(text)?
            .into_iter()
            .filter_map(|(t, _)| match t {
                NameTarget::Relation(r) => Some(r),
                NameTarget::Entity(_) => None,
            })
            .collect())
    }

    /// The entities a user may mean by `text`, best match first; several when it is
    /// ambiguous (the caller lists them). In order, the first step that finds something
    /// answers: the exact key (also `<IRI>`); a prefixed form of a well-known namespace
    /// (`fb:m.027rn`, `wd:Q42`, see `WELL_KNOWN_PREFIXES`); then together the local name
    /// under each well-known namespace (`m.027rn`) and the name index (names, aliases,
    /// and the local names that unlabelled IRIs are named by). Point reads and one name
    /// seek: the dictionary is never scanned.
    pub fn resolve_entity(&self, text: &str) -> Result<Vec<EntityCandidate>, ReadError> {
        let only = |id, matched| Ok(vec![EntityCandidate { id, matched }]);
        if let Some(e) = self.entity_by_key(text)? {
            return only(e, EntityMatch::Key);
        }
        if let Some(e) = text.strip_prefix('<').and_then(|t| t.strip_suffix('>')).map(|iri| self.entity_by_key(iri)).transpose()?.flatten() {
            return only(e, EntityMatch::Key);
        }
        if let Some((prefix, local)) = text.split_once(':') {
            if let Some((_, namespaces)) = WELL_KNOWN_PREFIXES.iter().find(|(p, _)| *p == prefix) {
                for ns in *namespaces {
                    if let Some(e) = self.entity_by_key(&format!("{ns}{local}"))? {
                        return only(e, EntityMatch::Prefixed);
                    }
                }
            }
        }
        let mut out: Vec<EntityCandidate> = Vec::new();
        let mut add = |id, matched| {
            if !out.iter().any(|c: &EntityCandidate| c.id == id) {
                out.push(EntityCandidate { id, matched });
            }
        };
        // What `local_name` of an IRI can be: no separator, no space.
        let local = !text.is_empty() && !text.contains(|c: char| c.is_whitespace() || matches!(c, '/' | '#' | ':' | '<' | '>'));
        if local {
            for (_, namespaces) in WELL_KNOWN_PREFIXES {
                for ns in *namespaces {
                    if let Some(e) = self.entity_by_key(&format!("{ns}{text}"))? {
                        add(e, EntityMatch::LocalName);
                    }
                }
            }
        }
        for (target, alias) in self.lookup_name(text)? {
            if let NameTarget::Entity(e) = target {
                add(e, if alias { EntityMatch::Alias } else { EntityMatch::Name });
            }
        }
        Ok(out)
    }

    /// The aliases recorded for an entity.
    pub fn aliases(&self, e: EntityId) -> Result<Vec<String>, ReadError> {
        read_aliases(&self.db, e).map_err(|e| match e {
            ReadError::Rocks(e) => match e.as_rocksdb() {
                Some(r) => self.read_error(r.clone()),
                None => ReadError::Rocks(e),
            },
            other => other,
        })
    }

    /// Number of facts with `e` as subject (`Out`) or object (`In`).
    pub fn degree(&self, e: EntityId, dir: Direction) -> Result<u64, ReadError> {
        let key = codec::degree_key(dir, e);
        match self.db.get_pinned_cf(self.cf(CF_DEGREES), key).map_err(|e| self.read_error(e))? {
            None => Ok(0),
            Some(v) => codec::be_u32(&v).map(u64::from).ok_or_else(|| ReadError::corrupt(CF_DEGREES, &key, "degree is not 4 bytes")),
        }
    }

    /// Everything known about one entity, or `None` for an id past the end.
    pub fn entity_info(&self, id: EntityId) -> Result<Option<EntityInfo>, ReadError> {
        let Some(rec) = self.entity(id)? else { return Ok(None) };
        Ok(Some(EntityInfo {
            id: id.0,
            kind: rec.kind,
            key: rec.key,
            name: rec.name,
            aliases: self.aliases(id)?,
            out_degree: self.degree(id, Direction::Out)?,
            in_degree: self.degree(id, Direction::In)?,
        }))
    }

    /// The other ends of `relation` at `e` in direction `dir`, sorted by id: one point read.
    pub fn neighbors_via(&self, e: EntityId, dir: Direction, relation: RelationId) -> Result<Vec<EntityId>, ReadError> {
        let key = codec::adj_key(dir, e, relation);
        match self.db.get_pinned_cf(self.cf(CF_ADJACENCY), key).map_err(|e| self.read_error(e))? {
            None => Ok(Vec::new()),
            Some(v) => idlist::decode_ids(&v)
                .map(|ids| ids.into_iter().map(EntityId).collect())
                .ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, &key, "malformed id list")),
        }
    }

    /// The relations present at `e` in direction `dir`, with the number of facts of each.
    pub fn relations_at(&self, e: EntityId, dir: Direction) -> Result<Vec<(RelationId, u64)>, ReadError> {
        let mut out = Vec::new();
        self.scan_adjacency(e, dir, |r, value, key| {
            let n = idlist::count_ids(value).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, key, "malformed id list"))?;
            out.push((r, n));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// Calls `f` for every edge at `e` in the given direction (both when `None`), optionally
    /// only through `relation`, in (direction, relation, other) order, without building a
    /// list. `f` returns `ControlFlow::Break` to stop early.
    pub fn for_each_neighbor(
        &self,
        e: EntityId,
        direction: Option<Direction>,
        relation: Option<RelationId>,
        mut f: impl FnMut(Edge) -> ControlFlow<()>,
    ) -> Result<(), ReadError> {
        let dirs: &[Direction] = match direction {
            Some(Direction::Out) => &[Direction::Out],
            Some(Direction::In) => &[Direction::In],
            None => &Direction::BOTH,
        };
        for &dir in dirs {
            if let Some(r) = relation {
                let key = codec::adj_key(dir, e, r);
                if let Some(v) = self.db.get_pinned_cf(self.cf(CF_ADJACENCY), key).map_err(|e| self.read_error(e))? {
                    if visit_list(dir, r, &v, &key, usize::MAX, &mut f)?.is_break() {
                        return Ok(());
                    }
                }
                continue;
            }
            let mut stopped = false;
            self.scan_adjacency(e, dir, |r, v, key| {
                let flow = visit_list(dir, r, v, key, usize::MAX, &mut f)?;
                stopped = flow.is_break();
                Ok(flow)
            })?;
            if stopped {
                return Ok(());
            }
        }
        Ok(())
    }

    /// A cursor for many neighbour scans with one iterator.
    pub fn neighbor_cursor(&self) -> NeighborCursor<'_> {
        let mut ro = ReadOptions::default();
        ro.set_prefix_same_as_start(true);
        NeighborCursor { it: self.db.raw_iterator_cf_opt(self.cf(CF_ADJACENCY), ro), store: self }
    }

    fn scan_adjacency(
        &self,
        e: EntityId,
        dir: Direction,
        mut f: impl FnMut(RelationId, &[u8], &[u8]) -> Result<ControlFlow<()>, ReadError>,
    ) -> Result<(), ReadError> {
        let prefix = codec::adj_prefix(dir, e);
        let mut ro = ReadOptions::default();
        ro.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_cf_opt(self.cf(CF_ADJACENCY), ro);
        it.seek(prefix);
        while let Some((k, v)) = it.item() {
            if !k.starts_with(&prefix) {
                break;
            }
            let (_, _, r) = codec::decode_adj_key(k).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, k, "malformed adjacency key"))?;
            if f(r, v, k)?.is_break() {
                return Ok(());
            }
            it.next();
        }
        it.status().map_err(|e| self.read_error(e))?;
        Ok(())
    }

    /// Checks that every index agrees with every other (see `validate.rs`).
    /// Migrates the store at `dir` to this build's format (`trellis migrate`); see
    /// [`migrate`].
    pub fn migrate(dir: &Path) -> Result<MigrationReport, MigrateError> {
        migrate(dir)
    }

    /// Checks every column family's records against each other (`trellis validate`).
    pub fn validate(&self) -> Result<ValidationReport, ReadError> {
        validate::validate(self)
    }
}

fn visit_list(
    dir: Direction,
    relation: RelationId,
    value: &[u8],
    key: &[u8],
    first: usize,
    f: &mut impl FnMut(Edge) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, ReadError> {
    let ids = idlist::IdIter::new(value).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, key, "malformed id list"))?;
    for id in ids.take(first) {
        let id = id.ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, key, "malformed id list"))?;
        if f(Edge { direction: dir, relation, other: EntityId(id) }).is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// See `Store::read_error`.
fn read_error(dir: &Path, generation: &Path, e: rocksdb::Error) -> ReadError {
    if generation_files_missing(generation, &e) {
        ReadError::GenerationRemoved { store: dir.to_path_buf(), generation: generation.to_path_buf(), source: e.into() }
    } else {
        ReadError::Rocks(e.into())
    }
}

/// Whether `e` is RocksDB failing to find a file of `generation`: the generation directory
/// is gone, or the error names a path inside it that no longer exists.
fn generation_files_missing(generation: &Path, e: &rocksdb::Error) -> bool {
    use rocksdb::ErrorKind;
    if !matches!(e.kind(), ErrorKind::IOError | ErrorKind::Corruption) {
        return false;
    }
    if !generation.is_dir() {
        return true;
    }
    // Messages read like "IO error: No such file or directory: While open a file for
    // random read: DIR/gen-000003/000012.sst: No such file or directory".
    e.as_ref().split(": ").any(|part| {
        let p = Path::new(part.trim());
        p.starts_with(generation) && p != generation && !p.exists()
    })
}

/// The aliases of `e`, in alias order (also used on databases being written).
pub(crate) fn read_aliases(db: &DB, e: EntityId) -> Result<Vec<String>, ReadError> {
    let prefix = codec::id_key(e.0);
    let mut out = Vec::new();
    let mut it = db.raw_iterator_cf(db.cf_handle(CF_ALIASES).expect("column family exists"));
    it.seek(prefix);
    while let Some(k) = it.key() {
        if !k.starts_with(&prefix) {
            break;
        }
        let (_, alias) = codec::decode_alias_key(k).ok_or_else(|| ReadError::corrupt(CF_ALIASES, k, "alias is not UTF-8"))?;
        out.push(alias.to_owned());
        it.next();
    }
    it.status().map_err(|e| ReadError::Rocks(e.into()))?;
    Ok(out)
}

/// A writer's check of the generation it starts from (at `gen`, of the store at `dir`): this
/// build's format, read without touching it (read-only, with the column families it has),
/// so a store of another format stays exactly as it is.
pub(crate) fn expect_current_format(dir: &Path, gen: &Path, cache: &Cache) -> Result<(), OpenError> {
    let db = DB::open_cf_descriptors_read_only(&open_options(), gen, existing_descriptors(gen, cache).map_err(OpenError::rocks(gen))?, false)
        .map_err(OpenError::rocks(gen))?;
    let version = read_version(&db)?;
    if version > FORMAT_VERSION {
        return Err(OpenError::TooNew { path: dir.into(), found: version, supported: FORMAT_VERSION });
    }
    if version < FORMAT_VERSION {
        return Err(OpenError::NeedsMigration { path: dir.into(), found: version, current: FORMAT_VERSION });
    }
    Ok(())
}

pub(crate) fn read_version(db: &DB) -> Result<u32, ReadError> {
    let cf = db.cf_handle(CF_META).expect("meta column family");
    let v = db
        .get_pinned_cf(cf, meta::KEY_FORMAT_VERSION)
        .map_err(|e| ReadError::Rocks(e.into()))?
        .ok_or_else(|| ReadError::corrupt(CF_META, meta::KEY_FORMAT_VERSION, "no format version"))?;
    codec::be_u32(&v).ok_or_else(|| ReadError::corrupt(CF_META, meta::KEY_FORMAT_VERSION, "format version is not 4 bytes"))
}

pub(crate) fn read_meta(db: &DB) -> Result<Meta, ReadError> {
    let cf = db.cf_handle(CF_META).expect("meta column family");
    let v = db
        .get_pinned_cf(cf, meta::KEY_META)
        .map_err(|e| ReadError::Rocks(e.into()))?
        .ok_or_else(|| ReadError::corrupt(CF_META, meta::KEY_META, "no meta record"))?;
    serde_json::from_slice(&v).map_err(|e| ReadError::json(CF_META, meta::KEY_META, "meta", e))
}

pub(crate) fn write_meta(db: &DB, meta: &Meta) -> Result<(), WriteError> {
    let cf = db.cf_handle(CF_META).expect("meta column family");
    let mut batch = rocksdb::WriteBatch::default();
    batch.put_cf(cf, meta::KEY_FORMAT_VERSION, meta.format_version.to_be_bytes());
    batch.put_cf(cf, meta::KEY_META, serde_json::to_vec(meta).expect("meta serializes"));
    let mut wo = rocksdb::WriteOptions::default();
    wo.set_sync(true);
    db.write_opt(batch, &wo).rocks()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::open_files_soft_limit;

    #[test]
    fn the_open_file_limit_is_read_from_proc_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             94542                94542                processes \n\
                      Max open files            20000                40000                files     \n";
        assert_eq!(open_files_soft_limit(limits), Some(20000));
        assert_eq!(open_files_soft_limit("Max open files            unlimited            unlimited            files\n"), Some(u64::MAX));
        assert_eq!(open_files_soft_limit(""), None);
    }
}
