//! The text index: one document per entity (name, aliases, verbalized facts; see
//! [`mod@document`]) in a full-text engine (tantivy) inside the store's generation directory, so
//! it is copied, committed and removed with the generation it describes. Built by
//! [`index_text`] (`trellis index-text`), kept current by updates, searched by
//! [`TextIndex::search`] (`trellis search`, the query producer's engine, `--retriever
//! search`).
//!
//! The index records what it was built from ([`TextIndexRecord`], the engine's commit
//! payload); a load after it leaves it stale, and opening a stale index fails naming both
//! sides and the command that rebuilds it. [`analyzer::words`] is the one way text becomes
//! words here: the index, queries, matched facts and the query producer's BM25+ labels all
//! use it.

pub mod analyzer;
pub mod bm25;
mod build;
pub mod document;
pub mod documents;
mod follow;

pub use build::{index_text, TextIndexReport};
pub use document::{DocFact, EntityDocument, FACTS_PER_DOCUMENT};
pub use documents::{DocumentLineError, DocumentProblem, DocumentsInput, Unmatched};
pub use follow::TextUpkeep;
pub(crate) use follow::{follow_write, TouchedEntities};

use crate::backend::BackendError;
use crate::ids::EntityId;
use crate::store::error::{OpenError, ReadError, WriteError};
use crate::store::generation::TEXT_INDEX_DIR;
use crate::store::{Meta, Store};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, FuzzyTermQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, Value, STORED};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

/// The text index's own format (its schema and document layout), recorded in its payload.
/// 2: a `text` field (a documents input's text).
pub const TEXT_FORMAT: u32 = 2;

/// Most words of a search's text used (the rest ignored); a long reply pasted as a query
/// costs what its first words cost.
pub const MAX_QUERY_WORDS: usize = 64;

/// Errors of the text index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TextError {
    /// The store has no text index.
    #[error("{dir}: the store has no text index; build it with `trellis index-text --store {dir}`")]
    Missing {
        /// The store directory.
        dir: PathBuf,
    },
    /// The index describes an earlier state of the store (a load since it was built).
    #[error(
        "{dir}: the text index is stale: built after write {index_writes} of the store ({index_facts} facts), the store is at write {store_writes} ({store_facts} facts); rebuild it with `trellis index-text --store {dir}`"
    )]
    Stale {
        /// The store directory.
        dir: PathBuf,
        /// Loads and updates the index has seen.
        index_writes: u64,
        /// Facts then.
        index_facts: u64,
        /// Loads and updates of the store.
        store_writes: u64,
        /// Facts now.
        store_facts: u64,
    },
    /// The index was written by a build with another text index format.
    #[error("{path}: text index format {found}, this build reads format {expected}; rebuild it with `trellis index-text`")]
    Format {
        /// The index directory.
        path: PathBuf,
        /// Its format.
        found: u32,
        /// This build's.
        expected: u32,
    },
    /// The index's files or records do not read as they should.
    #[error("{path}: corrupt text index: {what}; rebuild it with `trellis index-text`")]
    Corrupt {
        /// The index directory.
        path: PathBuf,
        /// What is wrong.
        what: TextCorruption,
    },
    /// A search with no words in it.
    #[error("nothing to search for in {text:?}: it has no letters or digits")]
    NoWords {
        /// The text given.
        text: String,
    },
    /// A setting out of its range.
    #[error("{0}")]
    OutOfRange(#[from] crate::limits::OutOfRange),
    /// The engine failed.
    #[error("text index {path}: {source}")]
    Engine {
        /// The index directory.
        path: PathBuf,
        /// tantivy's error.
        source: BackendError,
    },
    /// Opening the store.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Reading the store.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing the new generation.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A bad line of a documents input (the store is unchanged).
    #[error(transparent)]
    Documents(#[from] DocumentLineError),
    /// A documents input cannot be opened or read.
    #[error("{path}: {source}")]
    DocumentsIo {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Cancelled through the monitor before the commit: the store is unchanged.
    #[error("cancelled: the store is unchanged")]
    Cancelled,
}

/// What is wrong with a text index's files or records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TextCorruption {
    /// Its schema is not the one this build writes.
    #[error("the schema is not the text index's")]
    Schema,
    /// Its last commit has no record of what it was built from.
    #[error("no record of what it was built from")]
    NoRecord,
    /// Its record does not parse.
    #[error("its record does not parse: {0}")]
    Record(serde_json::Error),
    /// A document lacks a field.
    #[error("a document without its {0}")]
    MissingField(&'static str),
    /// A stored document does not parse.
    #[error("a stored document does not parse: {0}")]
    Document(serde_json::Error),
    /// An entity id past the 32-bit range.
    #[error("an entity id past u32")]
    EntityId,
    /// An entity with no document, or more than one.
    #[error("entity {entity} has no document, or more than one")]
    EntityDocuments {
        /// The entity id.
        entity: u32,
    },
    /// More documents than live entities.
    #[error("{documents} documents for {live} live entities")]
    DocumentCount {
        /// Documents in the index.
        documents: usize,
        /// Live entities in the store.
        live: u64,
    },
}

impl TextError {
    pub(crate) fn engine(path: &Path, e: tantivy::TantivyError) -> TextError {
        TextError::Engine { path: path.to_path_buf(), source: crate::backend::tantivy(e) }
    }
}

/// What the index was built from: the engine's commit payload.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TextIndexRecord {
    /// [`TEXT_FORMAT`] of the build that wrote it.
    pub format: u32,
    /// The store's loads and updates it reflects (`meta.loads.len()`).
    pub writes: u64,
    /// The store's facts then.
    pub facts: u64,
    /// The store's entities (ids) then.
    pub entities: u64,
    /// [`FACTS_PER_DOCUMENT`] of the build that wrote it.
    pub facts_per_document: usize,
    /// Documents holding a text from a documents input ([`DocumentsInput`]); updates keep
    /// an entity's text, a rebuild without the input drops them.
    #[serde(default)]
    pub texts: u64,
    /// The generation it was last written in.
    pub generation: u64,
    /// The build that wrote it last.
    pub written_by: String,
}

impl TextIndexRecord {
    /// Whether it describes the store whose meta is `meta`.
    pub fn is_current_with(&self, meta: &Meta) -> bool {
        self.writes == meta.loads.len() as u64 && self.facts == meta.facts && self.entities == meta.entities
    }
}

/// The index's fields.
#[derive(Clone, Copy)]
struct Fields {
    entity: Field,
    name: Field,
    aliases: Field,
    facts: Field,
    /// A documents input's text.
    text: Field,
    /// The document itself (JSON of [`EntityDocument`]), stored only: what a hit returns.
    document: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = || {
        TextOptions::default()
            .set_indexing_options(TextFieldIndexing::default().set_tokenizer(analyzer::NAME).set_index_option(IndexRecordOption::WithFreqsAndPositions))
    };
    let entity = b.add_u64_field("entity", NumericOptions::default().set_indexed().set_stored().set_fast());
    let name = b.add_text_field("name", text());
    let aliases = b.add_text_field("aliases", text());
    let facts = b.add_text_field("facts", text());
    let body = b.add_text_field("text", text());
    let document = b.add_text_field("document", STORED);
    (b.build(), Fields { entity, name, aliases, facts, text: body, document })
}

/// The directory of the text index of the generation at `generation_dir`.
pub fn index_dir(generation_dir: &Path) -> PathBuf {
    generation_dir.join(TEXT_INDEX_DIR)
}

fn open_index(path: &Path) -> Result<(Index, TextIndexRecord), TextError> {
    let index = Index::open_in_dir(path).map_err(|e| TextError::engine(path, e))?;
    analyzer::register(&index);
    let (_, fields) = schema();
    let found = index.schema();
    let schema_ok = found.get_field("document").ok() == Some(fields.document) && found.get_field("entity").ok() == Some(fields.entity);
    let metas = index.load_metas().map_err(|e| TextError::engine(path, e))?;
    let payload = metas.payload.ok_or_else(|| TextError::Corrupt { path: path.into(), what: TextCorruption::NoRecord })?;
    let record: TextIndexRecord = serde_json::from_str(&payload).map_err(|e| TextError::Corrupt { path: path.into(), what: TextCorruption::Record(e) })?;
    if record.format != TEXT_FORMAT {
        return Err(TextError::Format { path: path.into(), found: record.format, expected: TEXT_FORMAT });
    }
    if !schema_ok || found.get_field("text").ok() != Some(fields.text) {
        return Err(TextError::Corrupt { path: path.into(), what: TextCorruption::Schema });
    }
    Ok((index, record))
}

/// Whether a store has a text index and whether it is current.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TextIndexStatus {
    /// No text index.
    Missing,
    /// Current with the store.
    Current {
        /// Its record.
        record: TextIndexRecord,
    },
    /// Built from an earlier state of the store.
    Stale {
        /// Its record.
        record: TextIndexRecord,
    },
}

/// The status of `store`'s text index (reads its record only).
pub fn status(store: &Store) -> Result<TextIndexStatus, TextError> {
    let path = index_dir(store.generation_dir());
    if !path.is_dir() {
        return Ok(TextIndexStatus::Missing);
    }
    let (_, record) = open_index(&path)?;
    Ok(if record.is_current_with(store.meta()) { TextIndexStatus::Current { record } } else { TextIndexStatus::Stale { record } })
}

/// One entity a search found.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SearchHit {
    /// The entity.
    pub entity: EntityId,
    /// The engine's score: BM25 over name (weight 3), aliases (2) and facts (1), plus, for
    /// each query word of 4 letters or more found in the name or an alias within an edit or
    /// two, twice the word's rarity in names (ln((N+1)/(df+1))); and for a text of 2 to 8
    /// words, BM25 of the whole text as a phrase in the name (3), aliases (2) and facts (2).
    pub score: f32,
    /// Its document.
    pub document: EntityDocument,
    /// Indexes into `document.facts` of the facts that share a word with the query.
    pub matched: Vec<usize>,
}

/// The text index of one generation, open for searching. `Send + Sync`; searches see the
/// generation it was opened on, whatever updates commit meanwhile.
pub struct TextIndex {
    path: PathBuf,
    reader: IndexReader,
    fields: Fields,
    record: TextIndexRecord,
}

/// Longest text also matched as a phrase.
const MAX_PHRASE_WORDS: usize = 8;

/// A fuzzy name match's weight per unit of the word's rarity in names.
const FUZZY_WEIGHT: f32 = 2.0;

/// How a search matches words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchOptions {
    /// Also match name and alias words within one edit (two for words of 8 letters or
    /// more), for misspelt names. Words under 4 letters match exactly only.
    pub fuzzy: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { fuzzy: true }
    }
}

impl TextIndex {
    /// Opens `store`'s text index; fails if it has none or it is stale.
    pub fn open(store: &Store) -> Result<TextIndex, TextError> {
        let path = index_dir(store.generation_dir());
        if !path.is_dir() {
            return Err(TextError::Missing { dir: store.dir().to_path_buf() });
        }
        let (index, record) = open_index(&path)?;
        let meta = store.meta();
        if !record.is_current_with(meta) {
            return Err(TextError::Stale {
                dir: store.dir().to_path_buf(),
                index_writes: record.writes,
                index_facts: record.facts,
                store_writes: meta.loads.len() as u64,
                store_facts: meta.facts,
            });
        }
        // Manual: a reader never watches the directory; a generation's index does not change.
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(|e| TextError::engine(&path, e))?;
        Ok(TextIndex { path, reader, fields: schema().1, record })
    }

    /// What the index was built from.
    pub fn record(&self) -> &TextIndexRecord {
        &self.record
    }

    /// Documents in the index.
    pub fn documents(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The `top` entities whose documents best match `text`, best first (ties by entity
    /// id). Fails on a text without words.
    pub fn search(&self, text: &str, top: usize, options: SearchOptions) -> Result<Vec<SearchHit>, TextError> {
        crate::limits::TOP.check_usize(top)?;
        let mut words = analyzer::words(text);
        let mut seen = HashSet::new();
        words.retain(|w| seen.insert(w.clone()));
        words.truncate(MAX_QUERY_WORDS);
        if words.is_empty() {
            return Err(TextError::NoWords { text: text.chars().take(200).collect() });
        }
        let f = self.fields;
        let searcher = self.reader.searcher();
        let documents = searcher.num_docs() as f32;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for w in &words {
            for (field, boost) in [(f.name, 3.0), (f.aliases, 2.0), (f.facts, 1.0), (f.text, 1.0)] {
                let q = TermQuery::new(Term::from_field_text(field, w), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
            }
            let letters = w.chars().count();
            if options.fuzzy && letters >= 4 {
                // The engine scores a fuzzy match as a constant: weigh it as a name word as
                // rare as this one is in names (a misspelling, in no name, counts as rare).
                let exact = searcher.doc_freq(&Term::from_field_text(f.name, w)).map_err(|e| TextError::engine(&self.path, e))? as f32;
                let boost = FUZZY_WEIGHT * ((documents + 1.0) / (exact + 1.0)).ln();
                let distance = if letters >= 8 { 2 } else { 1 };
                for field in [f.name, f.aliases] {
                    let q = FuzzyTermQuery::new(Term::from_field_text(field, w), distance, true);
                    clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
                }
            }
        }
        // The whole text as a phrase: a document naming "Jordan Spieth" in its facts ranks
        // above one whose name merely shares "Jordan".
        if (2..=MAX_PHRASE_WORDS).contains(&words.len()) {
            for (field, boost) in [(f.name, 3.0), (f.aliases, 2.0), (f.facts, 2.0), (f.text, 2.0)] {
                let terms = words.iter().map(|w| Term::from_field_text(field, w)).collect();
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(PhraseQuery::new(terms)), boost))));
            }
        }
        let query = BooleanQuery::new(clauses);
        // A margin past `top`, then (score, id) order: the engine breaks ties by where a
        // document sits, which depends on how the index was written.
        let found = searcher.search(&query, &TopDocs::with_limit(top + 16).order_by_score()).map_err(|e| TextError::engine(&self.path, e))?;
        let mut hits = Vec::with_capacity(found.len());
        let query_words: HashSet<&str> = words.iter().map(String::as_str).collect();
        for (score, address) in found {
            let doc: TantivyDocument = searcher.doc(address).map_err(|e| TextError::engine(&self.path, e))?;
            let json = doc.get_first(f.document).and_then(|v| v.as_str()).ok_or_else(|| self.corrupt(TextCorruption::MissingField("text")))?;
            let document: EntityDocument = serde_json::from_str(json).map_err(|e| self.corrupt(TextCorruption::Document(e)))?;
            let matched = document
                .facts
                .iter()
                .enumerate()
                .filter(|(_, fact)| analyzer::words(&fact.text()).iter().any(|w| query_words.contains(w.as_str())))
                .map(|(i, _)| i)
                .collect();
            hits.push(SearchHit { entity: document.entity, score, document, matched });
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.entity.cmp(&b.entity)));
        hits.truncate(top);
        Ok(hits)
    }

    /// The document the index holds for `entity` (`None`: none).
    pub fn document(&self, entity: EntityId) -> Result<Option<EntityDocument>, TextError> {
        stored_document(&self.reader, self.fields, &self.path, entity.0)
    }

    /// The number of documents holding `word` (a word as [`analyzer::words`] gives it) in
    /// any field, and the number of documents: a word's rarity in the index.
    pub fn document_frequency(&self, word: &str) -> Result<(u64, u64), TextError> {
        let searcher = self.reader.searcher();
        let mut best = 0u64;
        for field in [self.fields.name, self.fields.aliases, self.fields.facts, self.fields.text] {
            best = best.max(searcher.doc_freq(&Term::from_field_text(field, word)).map_err(|e| TextError::engine(&self.path, e))?);
        }
        Ok((best, searcher.num_docs()))
    }

    /// Every document's entity, for validation: (entity ids, documents counted).
    pub fn entities(&self) -> Result<Vec<EntityId>, TextError> {
        let searcher = self.reader.searcher();
        let mut out = Vec::new();
        for segment in searcher.segment_readers() {
            let column = segment.fast_fields().u64("entity").map_err(|e| TextError::engine(&self.path, e))?;
            for doc in segment.doc_ids_alive() {
                let id = column.first(doc).ok_or_else(|| self.corrupt(TextCorruption::MissingField("entity")))?;
                out.push(EntityId(u32::try_from(id).map_err(|_| self.corrupt(TextCorruption::EntityId))?));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn corrupt(&self, what: TextCorruption) -> TextError {
        TextError::Corrupt { path: self.path.clone(), what }
    }
}

/// The document `reader`'s index holds for entity `e` (`None`: none).
fn stored_document(reader: &IndexReader, fields: Fields, path: &Path, e: u32) -> Result<Option<EntityDocument>, TextError> {
    let corrupt = |what| TextError::Corrupt { path: path.to_path_buf(), what };
    let searcher = reader.searcher();
    let query = TermQuery::new(Term::from_field_u64(fields.entity, u64::from(e)), IndexRecordOption::Basic);
    let found = searcher.search(&query, &TopDocs::with_limit(2).order_by_score()).map_err(|err| TextError::engine(path, err))?;
    if found.len() > 1 {
        return Err(corrupt(TextCorruption::EntityDocuments { entity: e }));
    }
    let Some((_, address)) = found.first() else { return Ok(None) };
    let doc: TantivyDocument = searcher.doc(*address).map_err(|err| TextError::engine(path, err))?;
    let json = doc.get_first(fields.document).and_then(|v| v.as_str()).ok_or_else(|| corrupt(TextCorruption::MissingField("document")))?;
    serde_json::from_str(json).map(Some).map_err(|err| corrupt(TextCorruption::Document(err)))
}

/// The document of entity `e` as the store holds it now (what the index should hold for
/// it); `None` for a retired entity or an id past the end.
pub fn document(store: &Store, e: EntityId) -> Result<Option<EntityDocument>, ReadError> {
    document::DocumentReader::new(store.db()).document(e.0)
}

/// Checks the text index of `store` against the store: every live entity has exactly one
/// document and no other document exists. `Ok(None)`: the store has no text index (or a
/// stale one, which [`status`] names).
pub fn validate(store: &Store) -> Result<Option<u64>, TextError> {
    match status(store)? {
        TextIndexStatus::Current { .. } => {}
        _ => return Ok(None),
    }
    let index = TextIndex::open(store)?;
    let entities = index.entities()?;
    let retired = store.retired_entities()?;
    let mut expected = 0u64;
    let mut at = 0usize;
    for e in 0..u32::try_from(store.entity_count()).unwrap_or(u32::MAX) {
        if retired.contains(e) {
            continue;
        }
        expected += 1;
        if entities.get(at) != Some(&EntityId(e)) {
            return Err(index.corrupt(TextCorruption::EntityDocuments { entity: e }));
        }
        at += 1;
    }
    if at != entities.len() {
        return Err(index.corrupt(TextCorruption::DocumentCount { documents: entities.len(), live: expected }));
    }
    Ok(Some(expected))
}
