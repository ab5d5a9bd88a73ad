//! Live updates (`trellis update`, `Store::update`): facts added and retracted, entities
//! deleted, renamed and aliased, in one new generation committed atomically like a load.
//!
//! An update starts the next generation from a hard-link checkpoint of the current one (no
//! data copied), reads and changes only the keys its changes touch (through an overlay, so
//! later changes of the same update see earlier ones, and a refused change leaves nothing
//! behind), writes them as one batch, brings the token indexes up to date for the names it
//! changed, and commits. Its cost follows the change, not the store: see ARCHITECTURE.md
//! (Live updates) for the measurement behind this choice.

use super::change::{Change, FactKeys, SourcedChange};
use super::error::IngestError;
use super::input::{open_input, LineChunker};
use super::naming::{blank_prefix, default_name};
use super::overlay::{without_log, Overlay};
use super::parse::{parse_chunk, ParseConfig, Record};
use super::tokens::{follow_write, ChangedTerms, TokenUpkeep};
use super::{InputSpec, OnError};
use crate::backend::RocksResult;
use crate::ids::{Direction, EntityId, RelationId};
use crate::normalize::normalize_name;
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::store::codec::{self, NameTarget, TermKind, TermRecord};
use crate::store::error::{OpenError, ReadError};
use crate::store::generation::NextGeneration;
use crate::store::meta::{InputRecord, LoadRecord, Meta, UpdateCounts};
use crate::store::schema::{self, *};
use crate::store::{layout, open_options, read_meta, write_meta};
use crate::text::{self, TextUpkeep, TouchedEntities};
use rocksdb::{Cache, DB};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a change came from: a line of a change file or of a fact file, or an argument.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChangeOrigin {
    /// The file (`None`: given directly, e.g. a command-line flag or a library call).
    pub file: Option<PathBuf>,
    /// Its 1-based line (0 when given directly).
    pub line: u64,
    /// The change's place in the update, from 1.
    pub index: usize,
}

impl std::fmt::Display for ChangeOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}:{}", file.display(), self.line),
            None => write!(f, "change {}", self.index),
        }
    }
}

/// Why one change cannot be applied.
#[derive(Clone, Debug, thiserror::Error, serde::Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpdateProblem {
    /// A retraction of a fact the store does not hold.
    #[error("the store holds no fact {subject:?} {relation:?} {object:?}")]
    NotStored {
        /// The subject's key.
        subject: String,
        /// The relation's key.
        relation: String,
        /// The object's key.
        object: String,
    },
    /// No entity has this key (or, for a deletion, this name).
    #[error("no entity has the key {key:?}")]
    UnknownEntity {
        /// The key (or name) given.
        key: String,
    },
    /// A deletion by name that several entities answer to.
    #[error("{count} entities are named {name:?} (keys {keys:?}{more}); give the key", more = if *count > keys.len() as u64 { ", ..." } else { "" })]
    AmbiguousName {
        /// The name given.
        name: String,
        /// How many entities answer to it.
        count: u64,
        /// The first of their keys.
        keys: Vec<String>,
    },
    /// A rename to the name another entity has.
    #[error("entity {other:?} is already named {name:?}")]
    NameTaken {
        /// The name asked for.
        name: String,
        /// The key of the entity that has it.
        other: String,
    },
    /// An alias the entity already has.
    #[error("{key:?} already has the alias {alias:?}")]
    AliasExists {
        /// The entity's key.
        key: String,
        /// The alias.
        alias: String,
    },
    /// The removal of an alias the entity does not have.
    #[error("{key:?} has no alias {alias:?}")]
    AliasAbsent {
        /// The entity's key.
        key: String,
        /// The alias.
        alias: String,
    },
    /// A source no load or update was named after.
    #[error("no load or update has the source {name:?}")]
    UnknownSource {
        /// The name given.
        name: String,
    },
    /// A name, alias or key that is empty or only white space.
    #[error("empty {what}")]
    Empty {
        /// "name", "alias", "subject", "relation" or "object".
        what: &'static str,
    },
    /// A name, alias or key holding a control character (Unicode Cc).
    #[error("the {what} {text:?} holds a control character")]
    ControlCharacter {
        /// "name", "alias", "subject", "relation" or "object".
        what: &'static str,
        /// The text, as given.
        text: String,
    },
    /// A malformed line of a fact file.
    #[error("{kind}: {detail}")]
    BadLine {
        /// The coarse class.
        kind: super::error::LineErrorKind,
        /// What exactly is wrong.
        #[serde(skip)]
        detail: super::error::LineProblem,
    },
}

/// A change that was not applied, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ChangeProblem {
    /// Where it came from.
    pub origin: ChangeOrigin,
    /// The change, as the command line writes it.
    pub change: String,
    /// Why.
    pub problem: UpdateProblem,
}

impl std::fmt::Display for ChangeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.origin, self.change, self.problem)
    }
}

/// What an update did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct UpdateReport {
    /// The generation it committed (`None`: nothing to change, nothing committed).
    pub generation: Option<u64>,
    /// Its place in the store's `loads` records, from 1.
    pub load_number: usize,
    /// What it changed.
    pub counts: UpdateCounts,
    /// Changes refused (`OnError::Skip`; with `Stop` any refusal fails the update whole).
    pub skipped: Vec<ChangeProblem>,
    /// The token indexes it brought up to date, and those left stale.
    pub token_indexes: TokenUpkeep,
    /// What it did to the text index.
    pub text_index: TextUpkeep,
    /// Store totals after it.
    pub entities: u64,
    /// Relations after it.
    pub relations: u64,
    /// Facts after it.
    pub facts: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Applies changes to the store at `dir` as one atomic commit (`trellis update`).
pub struct Updater {
    dir: PathBuf,
    on_error: OnError,
    lang: String,
    source: Option<String>,
    monitor: Monitor,
    overlay_flush_bytes: usize,
}

impl Updater {
    /// An updater of the store at `dir` (which must exist): strict (any refused change fails
    /// the whole update), English labels.
    pub fn new(dir: impl AsRef<Path>) -> Updater {
        Updater {
            dir: dir.as_ref().to_path_buf(),
            on_error: OnError::Stop,
            lang: "en".into(),
            source: None,
            monitor: Monitor::new(),
            overlay_flush_bytes: OVERLAY_FLUSH_BYTES,
        }
    }

    /// Names the source of the facts this update adds (provenance, as
    /// `BulkLoader::with_source`); `Change::RetractSource` removes a source's facts.
    pub fn with_source(mut self, name: impl Into<String>) -> Self {
        self.source = Some(name.into());
        self
    }

    /// `Stop` (default): a change that cannot be applied (or a malformed line of a fact
    /// file) fails the update with every such change listed, nothing committed. `Skip`:
    /// the rest is committed and the refused changes are listed in the report.
    pub fn on_error(mut self, policy: OnError) -> Self {
        self.on_error = policy;
        self
    }

    /// Language of the RDF labels of added files (as for loads; default `en`).
    pub fn with_lang(mut self, lang: impl Into<String>) -> Self {
        self.lang = lang.into();
        self
    }

    /// Reports progress (changes applied, names encoded) and stops the update with
    /// `IngestError::Cancelled`, the store unchanged, when cancelled before its commit.
    pub fn with_monitor(mut self, monitor: Monitor) -> Self {
        self.monitor = monitor;
        self
    }

    /// Bounds the memory of the changes the update holds before writing them to the
    /// generation it is making (default 1 GiB; at least 1 byte: a write after every change
    /// that reads or writes the store), so tests and measurements can exercise writes
    /// mid-update on small inputs. What is written early stays invisible until the update
    /// commits; an update expected to write early runs without automatic compaction.
    pub fn with_overlay_flush_bytes(mut self, bytes: usize) -> Self {
        self.overlay_flush_bytes = bytes.max(1);
        self
    }

    /// Applies `changes` in order as one new generation. Each comes with where it came from
    /// (`None`: given directly; its place in the list names it in reports).
    pub fn apply(self, changes: Vec<SourcedChange>) -> Result<UpdateReport, IngestError> {
        run(self, changes)
    }
}

/// A refused change, before it is known whether the update stops or skips it.
type Refusal = UpdateProblem;

fn run(updater: Updater, changes: Vec<SourcedChange>) -> Result<UpdateReport, IngestError> {
    let started = Instant::now();
    let dir = updater.dir.clone();
    layout::expect_store_dir(&dir)?;
    let _lock = layout::lock_existing_writer(&dir)?;
    let (number, gen) = layout::current_generation(&dir)?.ok_or_else(|| OpenError::NotAStore { path: dir.clone() })?;
    layout::remove_stale(&dir, Some(&gen))?;
    let cache = Cache::new_lru_cache(32 << 20);
    crate::store::expect_current_format(&dir, &gen, &cache)?;
    let before = {
        let db = DB::open_cf_descriptors_read_only(&open_options(), &gen, schema::descriptors(&cache), false).rocks()?;
        read_meta(&db)?
    };
    let load_number = before.loads.len() + 1;
    // Read the fact files first: a malformed line refuses the update before any work.
    let mut items: Vec<(ChangeOrigin, Item)> = Vec::new();
    let mut refused: Vec<ChangeProblem> = Vec::new();
    let mut inputs = Vec::new();
    for (index, (from, change)) in changes.into_iter().enumerate() {
        let origin = ChangeOrigin { file: from.as_ref().map(|(f, _)| f.clone()), line: from.as_ref().map_or(0, |(_, l)| *l), index: index + 1 };
        match change {
            Change::AddFile(spec) => {
                updater.monitor.check().map_err(|_| IngestError::Cancelled)?;
                let input = inputs.len() + 1;
                inputs.push(read_fact_file(&updater, &spec, true, &before, (load_number, input), index + 1, &mut items, &mut refused)?);
            }
            Change::RetractFile(spec) => {
                updater.monitor.check().map_err(|_| IngestError::Cancelled)?;
                let input = inputs.len() + 1;
                inputs.push(read_fact_file(&updater, &spec, false, &before, (load_number, input), index + 1, &mut items, &mut refused)?);
            }
            Change::Add(f) => items.push((origin, Item::fact(true, &f, &before.reverse_prefix))),
            Change::Retract(f) => items.push((origin, Item::fact(false, &f, &before.reverse_prefix))),
            other => items.push((origin, Item::Change(other))),
        }
    }
    if !refused.is_empty() && updater.on_error == OnError::Stop {
        let more = refused.len().saturating_sub(MAX_LISTED) as u64;
        refused.truncate(MAX_LISTED);
        return Err(IngestError::UpdateRefused { problems: refused, more });
    }
    updater.monitor.check().map_err(|_| IngestError::Cancelled)?;
    // An update expected to write its overlay early (to hold its memory) runs without
    // automatic compaction: its early writes land in level-0 files, and compacting those
    // into a bulk-loaded store's bottom level rewrites every file their keys span (an update
    // of 1.77M facts spread over a 1.62B-fact store wrote 83 GB in 20 minutes). Its level-0
    // files are compacted by later generations, as small updates' are.
    let writes_early = items.len().saturating_mul(ESTIMATED_ITEM_BYTES) >= updater.overlay_flush_bytes;
    let next = NextGeneration::begin_with(&dir, Some(&gen), number + 1, &cache, !writes_early)?;
    let db = &next.db;
    let mut state = Applier::new(db, before.clone(), u32::try_from(load_number).unwrap_or(u32::MAX), updater.overlay_flush_bytes);
    for (_, item) in &items {
        if let Item::Label { key, text } = item {
            state.labels.entry(key.clone()).or_insert_with(|| text.clone());
        }
    }
    let total = items.len() as u64;
    for (done, (origin, item)) in items.into_iter().enumerate() {
        if done % 1024 == 0 {
            updater.monitor.check().map_err(|_| IngestError::Cancelled)?;
            updater.monitor.report(&Progress::new(Work::Update, (1, 2), "apply changes", done as u64, Some(total), Unit::Changes));
        }
        let description = item.describe();
        match state.apply(&item)? {
            Ok(()) => state.counts.applied += 1,
            Err(problem) => refused.push(ChangeProblem { origin, change: description, problem }),
        }
        state.maybe_flush()?;
    }
    if !refused.is_empty() && updater.on_error == OnError::Stop {
        let more = refused.len().saturating_sub(MAX_LISTED) as u64;
        refused.truncate(MAX_LISTED);
        return Err(IngestError::UpdateRefused { problems: refused, more });
    }
    state.counts.skipped = refused.len() as u64;
    let Applier { overlay, mut meta, mut counts, changed_entities, changed_relations, retired, mut touched, renamed, .. } = state;
    if overlay.is_empty() {
        // Nothing to write (every change refused, or each one already in effect): no generation.
        drop(next);
        counts.skipped = refused.len() as u64;
        return Ok(UpdateReport {
            generation: None,
            load_number,
            counts,
            skipped: refused,
            token_indexes: TokenUpkeep::default(),
            text_index: TextUpkeep::default(),
            entities: before.entities,
            relations: before.relations,
            facts: before.facts,
            elapsed: started.elapsed(),
        });
    }
    let mut overlay = overlay;
    db.write_opt(overlay.take_batch(), &without_log()).rocks()?;
    let dictionaries_changed = !changed_entities.is_empty() || !changed_relations.is_empty() || !retired.is_empty();
    meta.dictionary_epoch += u64::from(dictionaries_changed);
    meta.updated_by = crate::store::build_name();
    let rejected_lines = inputs.iter().map(|i| i.rejected).sum();
    meta.loads.push(LoadRecord {
        committed_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        inputs,
        new_facts: counts.facts_added,
        new_entities: counts.entities_added,
        new_relations: counts.relations_added,
        rejected_lines,
        source: updater.source.clone(),
        update: Some(counts.clone()),
    });
    let changed = ChangedTerms {
        entities: changed_entities.iter().map(|&e| e..e + 1).collect(),
        relations: changed_relations.iter().map(|&r| r..r + 1).collect(),
        retired: retired.iter().copied().collect(),
    };
    updater.monitor.report(&Progress::new(Work::Update, (2, 2), "token indexes", 0, Some(changed.names()), Unit::Names));
    let token_indexes = follow_write(db, &before, &meta, &changed, &updater.monitor)?;
    touched.extend(changed_entities.iter().copied());
    let touched = TouchedEntities { documents: touched, renamed, retired };
    let text_index = text::follow_write(next.staging_dir(), db, &before, &meta, number + 1, &touched, &updater.monitor)?;
    write_meta(db, &meta)?;
    let committing = updater.monitor.commit_point().map_err(|_| IngestError::Cancelled)?;
    next.commit()?;
    drop(committing);
    Ok(UpdateReport {
        generation: Some(number + 1),
        load_number,
        counts,
        skipped: refused,
        token_indexes,
        text_index,
        entities: meta.entities,
        relations: meta.relations,
        facts: meta.facts,
        elapsed: started.elapsed(),
    })
}

/// About what one change holds in the overlay (its lists, degrees, provenance), to tell
/// before the update starts whether it will write early.
const ESTIMATED_ITEM_BYTES: usize = 1024;

/// What an update's overlay holds before it writes to the staging generation: an update of
/// any size holds about this much beside its changes.
const OVERLAY_FLUSH_BYTES: usize = 1 << 30;

/// Problems listed in a refusal; the rest are counted.
const MAX_LISTED: usize = 100;

/// A term of a fact to add or retract: its key, kind and (literals) carried name.
#[derive(Clone, Debug)]
struct Term {
    key: String,
    kind: TermKind,
    name: Option<String>,
}

impl Term {
    fn plain(key: &str) -> Term {
        Term { key: key.to_owned(), kind: TermKind::Name, name: None }
    }
}

/// A change as the applier takes it (fact files read into their facts, labels and aliases).
#[derive(Debug)]
enum Item {
    Fact {
        add: bool,
        s: Term,
        r: Term,
        o: Term,
    },
    /// A label of an added file for an entity that may be stored already (named by it only
    /// while it still has its default name, as a load does).
    Label {
        key: String,
        text: String,
    },
    /// An alias of an added file (already present: nothing to do, as a load does).
    FileAlias {
        key: String,
        alias: String,
    },
    Change(Change),
}

impl Item {
    /// A fact given by keys; a relation with the store's reverse prefix is turned around.
    fn fact(add: bool, f: &FactKeys, reverse_prefix: &str) -> Item {
        match f.relation.strip_prefix(reverse_prefix).filter(|rest| !reverse_prefix.is_empty() && !rest.is_empty()) {
            Some(rest) => Item::Fact { add, s: Term::plain(&f.object), r: Term::plain(rest), o: Term::plain(&f.subject) },
            None => Item::Fact { add, s: Term::plain(&f.subject), r: Term::plain(&f.relation), o: Term::plain(&f.object) },
        }
    }

    fn describe(&self) -> String {
        match self {
            Item::Fact { add, s, r, o } => format!("{} {}\t{}\t{}", if *add { "add" } else { "retract" }, s.key, r.key, o.key),
            Item::Label { key, text } => format!("label {key:?} {text:?}"),
            Item::FileAlias { key, alias } => format!("alias {key:?} as {alias:?}"),
            Item::Change(c) => c.describe(),
        }
    }
}

/// Reads a fact file (any ingest format) into items; malformed lines become refusals.
#[allow(clippy::too_many_arguments)]
fn read_fact_file(
    updater: &Updater,
    spec: &InputSpec,
    add: bool,
    meta: &Meta,
    (load, input): (usize, usize),
    index: usize,
    items: &mut Vec<(ChangeOrigin, Item)>,
    refused: &mut Vec<ChangeProblem>,
) -> Result<InputRecord, IngestError> {
    let file = spec.display();
    let opened = open_input(spec)?;
    let format = opened.format;
    let cfg = ParseConfig { format, reverse_prefix: meta.reverse_prefix.clone(), lang: updater.lang.clone(), blank_prefix: blank_prefix(load, input) };
    let mut record = InputRecord { path: file.clone(), format: format.name().into(), ..Default::default() };
    let mut chunker = LineChunker::new(opened, file.clone());
    let path = PathBuf::from(&file);
    let origin = |line: u64| ChangeOrigin { file: Some(path.clone()), line, index };
    // Labels and aliases after the file's facts, as a load applies them: they name the
    // entities the file adds, whatever the order of its lines.
    let mut names: Vec<(ChangeOrigin, Item)> = Vec::new();
    let bad_line = |e: &super::error::LineError| ChangeProblem {
        origin: origin(e.line),
        change: format!("{} {}", if add { "add" } else { "retract" }, super::error::snippet(&e.text)),
        problem: UpdateProblem::BadLine { kind: e.kind, detail: e.detail.clone() },
    };
    while let Some(chunk) = chunker.next_chunk()? {
        updater.monitor.check().map_err(|_| IngestError::Cancelled)?;
        // Lines the reader refused (over the length limit).
        for e in &chunk.errors {
            record.rejected += 1;
            refused.push(bad_line(e));
        }
        // One line at a time, so every record knows its line (a blank line, a comment or a
        // label in another language gives none): update files are small.
        let mut line_no = chunk.first_line;
        for text in chunk.data.split_inclusive(|&b| b == b'\n') {
            while chunk.errors.iter().any(|e| e.line == line_no) {
                line_no += 1;
            }
            let parsed = parse_chunk(super::input::Chunk { data: text.to_vec(), first_line: line_no, errors: Vec::new() }, &cfg);
            record.lines += 1;
            for e in &parsed.errors {
                record.rejected += 1;
                refused.push(bad_line(e));
            }
            let text_of = |span: super::parse::Span| String::from_utf8_lossy(span.get(&parsed.arena)).into_owned();
            for rec in &parsed.records {
                match *rec {
                    Record::Fact { s, r, o } => {
                        let term = |t: super::parse::TermRef| Term { key: text_of(t.key), kind: t.kind, name: t.name.map(text_of) };
                        let r = Term { key: text_of(r), kind: parsed.relation_kind, name: None };
                        items.push((origin(line_no), Item::Fact { add, s: term(s), r, o: term(o) }));
                        record.facts_read += 1;
                    }
                    Record::Label { subject, text: t } if add => names.push((origin(line_no), Item::Label { key: text_of(subject), text: text_of(t) })),
                    Record::Alias { subject, text: t } if add => names.push((origin(line_no), Item::FileAlias { key: text_of(subject), alias: text_of(t) })),
                    Record::Label { .. } | Record::Alias { .. } => {}
                }
            }
            line_no += 1;
        }
    }
    items.extend(names);
    Ok(record)
}

/// Applies items one at a time; a refused item changes nothing.
struct Applier<'a> {
    overlay: Overlay<'a>,
    meta: Meta,
    /// This update's number among the store's loads (its facts' provenance).
    load: u32,
    counts: UpdateCounts,
    changed_entities: BTreeSet<u32>,
    changed_relations: BTreeSet<u32>,
    retired: BTreeSet<u32>,
    /// Entities whose text documents may have changed (facts, aliases), and those renamed.
    touched: BTreeSet<u32>,
    renamed: BTreeSet<u32>,
    /// Labels of added files by subject key: they name the entities the update adds.
    labels: HashMap<String, String>,
    /// The overlay's memory bound (`Updater::with_overlay_flush_bytes`).
    flush_bytes: usize,
}

fn check_text(what: &'static str, text: &str) -> Result<(), Refusal> {
    if text.trim().is_empty() {
        return Err(UpdateProblem::Empty { what });
    }
    if text.chars().any(char::is_control) {
        return Err(UpdateProblem::ControlCharacter { what, text: text.to_owned() });
    }
    Ok(())
}

fn corrupt(cf: &'static str, key: &[u8], what: &'static str) -> IngestError {
    ReadError::corrupt(cf, key, what).into()
}

impl<'a> Applier<'a> {
    fn new(db: &'a DB, meta: Meta, load: u32, flush_bytes: usize) -> Applier<'a> {
        Applier {
            overlay: Overlay::new(db),
            meta,
            load,
            counts: UpdateCounts::default(),
            changed_entities: BTreeSet::new(),
            changed_relations: BTreeSet::new(),
            retired: BTreeSet::new(),
            touched: BTreeSet::new(),
            renamed: BTreeSet::new(),
            labels: HashMap::new(),
            flush_bytes,
        }
    }

    /// Writes the overlay to the staging generation once it holds its bound. The generation
    /// is the update's own until it commits (a refused or cancelled update drops it), and a
    /// change is refused before it writes anything, so this may run between changes and
    /// inside one change that touches many facts (a source retracted, an entity deleted).
    fn maybe_flush(&mut self) -> Result<(), IngestError> {
        if self.overlay.pending_bytes() >= self.flush_bytes {
            // The largest lists, up to half the bound, stay held for the changes to come.
            self.overlay.flush(self.flush_bytes / 2).rocks()?;
        }
        Ok(())
    }

    /// `Ok(Err(problem))`: refused, nothing changed; `Err`: the store cannot be read.
    fn apply(&mut self, item: &Item) -> Result<Result<(), Refusal>, IngestError> {
        match item {
            Item::Fact { add: true, s, r, o } => {
                for (what, t) in [("subject", s), ("relation", r), ("object", o)] {
                    if let Err(p) = check_text(what, &t.key) {
                        return Ok(Err(p));
                    }
                }
                if !self.meta.reverse_prefix.is_empty() && r.key == self.meta.reverse_prefix {
                    return Ok(Err(UpdateProblem::Empty { what: "relation after the reverse prefix" }));
                }
                let s = self.intern_entity(s)?;
                let r = self.intern_relation(r)?;
                let o = self.intern_entity(o)?;
                self.add_fact(s, r, o)?;
                Ok(Ok(()))
            }
            Item::Fact { add: false, s, r, o } => {
                let not_stored = || UpdateProblem::NotStored { subject: s.key.clone(), relation: r.key.clone(), object: o.key.clone() };
                let (Some(si), Some(ri), Some(oi)) = (self.entity_id(&s.key)?, self.relation_id(&r.key)?, self.entity_id(&o.key)?) else {
                    return Ok(Err(not_stored()));
                };
                if !self.retract_fact(si, ri, oi)? {
                    return Ok(Err(not_stored()));
                }
                Ok(Ok(()))
            }
            Item::Label { key, text } => {
                let Some(e) = self.entity_id(key)? else { return Ok(Ok(())) };
                let rec = self.record(e)?;
                if rec.name == *text || rec.name != default_name(&rec.key, rec.kind, None) || rec.kind == TermKind::Literal {
                    return Ok(Ok(()));
                }
                self.set_name(e, &rec, text)?;
                Ok(Ok(()))
            }
            Item::FileAlias { key, alias } => {
                let Some(e) = self.entity_id(key)? else { return Ok(Ok(())) };
                if self.overlay.get(CF_ALIASES, &codec::alias_key(EntityId(e), alias))?.is_none() && check_text("alias", alias).is_ok() {
                    self.set_alias(e, alias, true)?;
                }
                Ok(Ok(()))
            }
            Item::Change(change) => self.apply_change(change),
        }
    }

    fn apply_change(&mut self, change: &Change) -> Result<Result<(), Refusal>, IngestError> {
        match change {
            Change::DeleteEntity(which) => {
                let e = match self.find_entity(which)? {
                    Ok(e) => e,
                    Err(p) => return Ok(Err(p)),
                };
                self.delete_entity(e)?;
                Ok(Ok(()))
            }
            Change::Rename { key, name } => {
                if let Err(p) = check_text("name", name) {
                    return Ok(Err(p));
                }
                let Some(e) = self.entity_id(key)? else { return Ok(Err(UpdateProblem::UnknownEntity { key: key.clone() })) };
                let rec = self.record(e)?;
                if rec.name == *name {
                    return Ok(Ok(()));
                }
                // Another entity with this name would make the name ambiguous: refused.
                let norm = normalize_name(name);
                for (other, flag) in self.entities_named(&norm)? {
                    if other != e && flag == codec::NAME_PRIMARY {
                        return Ok(Err(UpdateProblem::NameTaken { name: name.clone(), other: self.record(other)?.key }));
                    }
                }
                self.set_name(e, &rec, name)?;
                Ok(Ok(()))
            }
            Change::Alias { key, alias } => {
                if let Err(p) = check_text("alias", alias) {
                    return Ok(Err(p));
                }
                let Some(e) = self.entity_id(key)? else { return Ok(Err(UpdateProblem::UnknownEntity { key: key.clone() })) };
                if self.overlay.get(CF_ALIASES, &codec::alias_key(EntityId(e), alias))?.is_some() {
                    return Ok(Err(UpdateProblem::AliasExists { key: key.clone(), alias: alias.clone() }));
                }
                self.set_alias(e, alias, true)?;
                Ok(Ok(()))
            }
            Change::Unalias { key, alias } => {
                let Some(e) = self.entity_id(key)? else { return Ok(Err(UpdateProblem::UnknownEntity { key: key.clone() })) };
                if self.overlay.get(CF_ALIASES, &codec::alias_key(EntityId(e), alias))?.is_none() {
                    return Ok(Err(UpdateProblem::AliasAbsent { key: key.clone(), alias: alias.clone() }));
                }
                self.set_alias(e, alias, false)?;
                Ok(Ok(()))
            }
            Change::RetractSource(name) => {
                let loads: Vec<u32> =
                    self.meta.loads.iter().enumerate().filter(|(_, l)| l.source.as_deref() == Some(name.as_str())).map(|(i, _)| i as u32 + 1).collect();
                if loads.is_empty() {
                    return Ok(Err(UpdateProblem::UnknownSource { name: name.clone() }));
                }
                for load in loads {
                    self.retract_load(load)?;
                }
                Ok(Ok(()))
            }
            // Files were read into items before; these never reach the applier.
            Change::Add(_) | Change::Retract(_) | Change::AddFile(_) | Change::RetractFile(_) => Ok(Ok(())),
        }
    }

    fn entity_id(&self, key: &str) -> Result<Option<u32>, IngestError> {
        let Some(v) = self.overlay.get(CF_ENTITY_KEYS, key.as_bytes())? else { return Ok(None) };
        Ok(Some(codec::be_u32(&v).ok_or_else(|| corrupt(CF_ENTITY_KEYS, key.as_bytes(), "id is not 4 bytes"))?))
    }

    fn relation_id(&self, key: &str) -> Result<Option<u32>, IngestError> {
        let Some(v) = self.overlay.get(CF_RELATION_KEYS, key.as_bytes())? else { return Ok(None) };
        Ok(Some(codec::be_u32(&v).ok_or_else(|| corrupt(CF_RELATION_KEYS, key.as_bytes(), "id is not 4 bytes"))?))
    }

    fn record(&self, e: u32) -> Result<TermRecord, IngestError> {
        let key = codec::id_key(e);
        let v = self.overlay.get(CF_ENTITIES, &key)?.ok_or_else(|| corrupt(CF_ENTITIES, &key, "dense id without a record"))?;
        codec::decode_term(&v).ok_or_else(|| corrupt(CF_ENTITIES, &key, "undecodable record"))
    }

    fn aliases(&self, e: u32) -> Result<Vec<String>, IngestError> {
        let mut out = Vec::new();
        for (k, _) in self.overlay.scan(CF_ALIASES, &e.to_be_bytes())? {
            let (_, alias) = codec::decode_alias_key(&k).ok_or_else(|| corrupt(CF_ALIASES, &k, "malformed alias key"))?;
            out.push(alias.to_owned());
        }
        Ok(out)
    }

    /// Entities whose `names` entry is exactly `normalized`, with the entry's flag.
    fn entities_named(&self, normalized: &str) -> Result<Vec<(u32, u8)>, IngestError> {
        let mut prefix = normalized.as_bytes().to_vec();
        prefix.push(0);
        let mut out = Vec::new();
        for (k, v) in self.overlay.scan(CF_NAMES, &prefix)? {
            if let Some((_, NameTarget::Entity(e))) = codec::decode_name_key(&k) {
                out.push((e.0, v.first().copied().unwrap_or(codec::NAME_FOLDED)));
            }
        }
        Ok(out)
    }

    /// An entity by key, else by its one name (primary, then alias, then folded).
    fn find_entity(&self, which: &str) -> Result<Result<u32, Refusal>, IngestError> {
        if let Some(e) = self.entity_id(which)? {
            return Ok(Ok(e));
        }
        let named = self.entities_named(&normalize_name(which))?;
        for flag in [codec::NAME_PRIMARY, codec::NAME_ALIAS, codec::NAME_FOLDED] {
            let ids: Vec<u32> = named.iter().filter(|(_, f)| *f == flag).map(|(e, _)| *e).collect();
            match ids.len() {
                0 => continue,
                1 => return Ok(Ok(ids[0])),
                n => {
                    let keys = ids.iter().take(5).map(|&e| self.record(e).map(|r| r.key)).collect::<Result<Vec<_>, _>>()?;
                    return Ok(Err(UpdateProblem::AmbiguousName { name: which.to_owned(), count: n as u64, keys }));
                }
            }
        }
        Ok(Err(UpdateProblem::UnknownEntity { key: which.to_owned() }))
    }

    /// Replaces the `names` entries of `target` for a change of its name or aliases.
    fn rewrite_names(&mut self, target: NameTarget, before: &BTreeMap<String, u8>, after: &BTreeMap<String, u8>) {
        for k in before.keys().filter(|k| !after.contains_key(*k)) {
            self.overlay.delete(CF_NAMES, codec::name_key(k, target));
        }
        for (k, flag) in after {
            if before.get(k) != Some(flag) {
                self.overlay.put(CF_NAMES, codec::name_key(k, target), vec![*flag]);
            }
        }
        self.meta.names = (self.meta.names + after.len() as u64).saturating_sub(before.len() as u64);
    }

    fn intern_entity(&mut self, t: &Term) -> Result<u32, IngestError> {
        if let Some(e) = self.entity_id(&t.key)? {
            return Ok(e);
        }
        let id = u32::try_from(self.meta.entities).map_err(|_| IngestError::TooManyIds { what: "entities", limit: u64::from(u32::MAX) })?;
        let name = match self.labels.get(&t.key) {
            Some(label) => label.clone(),
            None => default_name(&t.key, t.kind, t.name.as_deref()),
        };
        let rec = TermRecord { kind: t.kind, key: t.key.clone(), name };
        let mut buf = Vec::new();
        codec::encode_term(&rec, &mut buf);
        self.overlay.put(CF_ENTITIES, codec::id_key(id).to_vec(), buf);
        self.overlay.put(CF_ENTITY_KEYS, t.key.as_bytes().to_vec(), id.to_be_bytes().to_vec());
        self.rewrite_names(NameTarget::Entity(EntityId(id)), &BTreeMap::new(), &codec::name_entries(&rec.name, &[]));
        self.meta.entities += 1;
        self.counts.entities_added += 1;
        self.changed_entities.insert(id);
        Ok(id)
    }

    fn intern_relation(&mut self, t: &Term) -> Result<u32, IngestError> {
        if let Some(r) = self.relation_id(&t.key)? {
            return Ok(r);
        }
        let id = u32::try_from(self.meta.relations).map_err(|_| IngestError::TooManyIds { what: "relations", limit: u64::from(u32::MAX) })?;
        let rec = TermRecord { kind: t.kind, key: t.key.clone(), name: default_name(&t.key, t.kind, None) };
        let mut buf = Vec::new();
        codec::encode_term(&rec, &mut buf);
        self.overlay.put(CF_RELATIONS, codec::id_key(id).to_vec(), buf);
        self.overlay.put(CF_RELATION_KEYS, t.key.as_bytes().to_vec(), id.to_be_bytes().to_vec());
        self.rewrite_names(NameTarget::Relation(RelationId(id)), &BTreeMap::new(), &codec::name_entries(&rec.name, &[]));
        self.meta.relations += 1;
        self.counts.relations_added += 1;
        self.changed_relations.insert(id);
        Ok(id)
    }

    fn set_name(&mut self, e: u32, rec: &TermRecord, name: &str) -> Result<(), IngestError> {
        let aliases = self.aliases(e)?;
        let new = TermRecord { name: name.to_owned(), ..rec.clone() };
        let mut buf = Vec::new();
        codec::encode_term(&new, &mut buf);
        self.overlay.put(CF_ENTITIES, codec::id_key(e).to_vec(), buf);
        self.rewrite_names(NameTarget::Entity(EntityId(e)), &codec::name_entries(&rec.name, &aliases), &codec::name_entries(name, &aliases));
        self.counts.renamed += 1;
        self.changed_entities.insert(e);
        self.renamed.insert(e);
        Ok(())
    }

    fn set_alias(&mut self, e: u32, alias: &str, add: bool) -> Result<(), IngestError> {
        let rec = self.record(e)?;
        let before = self.aliases(e)?;
        let key = codec::alias_key(EntityId(e), alias);
        self.touched.insert(e);
        let after: Vec<String> = if add {
            self.overlay.put(CF_ALIASES, key, Vec::new());
            self.meta.aliases += 1;
            self.counts.aliases_added += 1;
            before.iter().cloned().chain(std::iter::once(alias.to_owned())).collect()
        } else {
            self.overlay.delete(CF_ALIASES, key);
            self.meta.aliases = self.meta.aliases.saturating_sub(1);
            self.counts.aliases_removed += 1;
            before.iter().filter(|a| *a != alias).cloned().collect()
        };
        self.rewrite_names(NameTarget::Entity(EntityId(e)), &codec::name_entries(&rec.name, &before), &codec::name_entries(&rec.name, &after));
        Ok(())
    }

    fn add_degree(&mut self, dir: Direction, e: u32, delta: i64) -> Result<(), IngestError> {
        let key = codec::degree_key(dir, EntityId(e));
        let before = match self.overlay.get(CF_DEGREES, &key)? {
            None => 0,
            Some(v) => i64::from(codec::be_u32(&v).ok_or_else(|| corrupt(CF_DEGREES, &key, "degree is not 4 bytes"))?),
        };
        let after = (before + delta).max(0);
        if after == 0 {
            self.overlay.delete(CF_DEGREES, key.to_vec());
        } else {
            self.overlay.put(CF_DEGREES, key.to_vec(), u32::try_from(after).unwrap_or(u32::MAX).to_be_bytes().to_vec());
        }
        Ok(())
    }

    /// Records that this update asserts the fact (its provenance).
    fn assert_source(&mut self, s: u32, r: u32, o: u32) -> Result<(), IngestError> {
        let key = codec::fact_source_key(EntityId(s), RelationId(r), self.load);
        // Read before written: a list only read is not rewritten, and an update that changes
        // nothing commits no generation.
        if !self.overlay.ids(CF_FACT_SOURCES, &key)?.contains(o) {
            self.overlay.ids_mut(CF_FACT_SOURCES, &key)?.insert(o);
            self.overlay.put(CF_SOURCE_FACTS, codec::source_fact_key(self.load, EntityId(s), RelationId(r)).to_vec(), Vec::new());
        }
        Ok(())
    }

    /// The loads that assert facts `r(s, _)`, each with its `fact_sources` key.
    fn sources_of(&self, s: u32, r: u32) -> Result<Vec<(u32, Vec<u8>)>, IngestError> {
        let mut prefix = s.to_be_bytes().to_vec();
        prefix.extend_from_slice(&r.to_be_bytes());
        let mut out = Vec::new();
        for k in self.overlay.scan_keys(CF_FACT_SOURCES, &prefix)? {
            let (_, _, load) = codec::decode_triple_key(&k).ok_or_else(|| corrupt(CF_FACT_SOURCES, &k, "malformed key"))?;
            out.push((load, k));
        }
        Ok(out)
    }

    /// Removes `o` from one load's list of `(s, r)` (and the list's `source_facts` key once
    /// it is empty).
    fn drop_source(&mut self, load: u32, key: &[u8], s: u32, r: u32, o: u32) -> Result<(), IngestError> {
        let list = self.overlay.ids_mut(CF_FACT_SOURCES, key)?;
        if list.remove(o) && list.is_empty() {
            self.overlay.delete(CF_SOURCE_FACTS, codec::source_fact_key(load, EntityId(s), RelationId(r)).to_vec());
        }
        Ok(())
    }

    /// Removes `o` from every load's list of `(s, r)`: the fact is no longer asserted.
    fn drop_sources(&mut self, s: u32, r: u32, o: u32) -> Result<(), IngestError> {
        for (load, key) in self.sources_of(s, r)? {
            if self.overlay.ids(CF_FACT_SOURCES, &key)?.contains(o) {
                self.drop_source(load, &key, s, r, o)?;
            }
        }
        Ok(())
    }

    /// Removes what load `load` asserted: its provenance, and the facts no other load asserts.
    fn retract_load(&mut self, load: u32) -> Result<(), IngestError> {
        for (k, _) in self.overlay.scan(CF_SOURCE_FACTS, &load.to_be_bytes())? {
            let (_, s, r) = codec::decode_triple_key(&k).ok_or_else(|| corrupt(CF_SOURCE_FACTS, &k, "malformed key"))?;
            let sources = self.sources_of(s, r)?;
            let Some((_, mine_key)) = sources.iter().find(|(l, _)| *l == load) else { continue };
            let mine = std::mem::take(self.overlay.ids_mut(CF_FACT_SOURCES, mine_key)?);
            self.overlay.delete(CF_SOURCE_FACTS, codec::source_fact_key(load, EntityId(s), RelationId(r)).to_vec());
            let mut others = roaring::RoaringBitmap::new();
            for (_, key) in sources.iter().filter(|(l, _)| *l != load) {
                others |= self.overlay.ids(CF_FACT_SOURCES, key)?;
            }
            for o in mine - others {
                self.retract_fact(s, r, o)?;
                self.maybe_flush()?;
            }
        }
        Ok(())
    }

    fn add_fact(&mut self, s: u32, r: u32, o: u32) -> Result<(), IngestError> {
        self.assert_source(s, r, o)?;
        let out_key = codec::adj_key(Direction::Out, EntityId(s), RelationId(r));
        if self.overlay.ids(CF_ADJACENCY, &out_key)?.contains(o) {
            return Ok(());
        }
        self.overlay.ids_mut(CF_ADJACENCY, &out_key)?.insert(o);
        self.overlay.ids_mut(CF_ADJACENCY, &codec::adj_key(Direction::In, EntityId(o), RelationId(r)))?.insert(s);
        self.add_degree(Direction::Out, s, 1)?;
        self.add_degree(Direction::In, o, 1)?;
        self.meta.facts += 1;
        self.counts.facts_added += 1;
        self.touched.extend([s, o]);
        Ok(())
    }

    /// Whether the fact was stored (and is now retracted).
    fn retract_fact(&mut self, s: u32, r: u32, o: u32) -> Result<bool, IngestError> {
        let out_key = codec::adj_key(Direction::Out, EntityId(s), RelationId(r));
        if !self.overlay.ids(CF_ADJACENCY, &out_key)?.contains(o) {
            return Ok(false);
        }
        self.overlay.ids_mut(CF_ADJACENCY, &out_key)?.remove(o);
        self.overlay.ids_mut(CF_ADJACENCY, &codec::adj_key(Direction::In, EntityId(o), RelationId(r)))?.remove(s);
        self.add_degree(Direction::Out, s, -1)?;
        self.add_degree(Direction::In, o, -1)?;
        self.meta.facts = self.meta.facts.saturating_sub(1);
        self.counts.facts_retracted += 1;
        self.touched.extend([s, o]);
        self.drop_sources(s, r, o)?;
        Ok(true)
    }

    fn delete_entity(&mut self, e: u32) -> Result<(), IngestError> {
        // Its facts, both directions (a self-loop goes with the first).
        for dir in [Direction::Out, Direction::In] {
            for k in self.overlay.scan_keys(CF_ADJACENCY, &codec::adj_prefix(dir, EntityId(e)))? {
                let (_, _, r) = codec::decode_adj_key(&k).ok_or_else(|| corrupt(CF_ADJACENCY, &k, "malformed key"))?;
                let others = self.overlay.ids(CF_ADJACENCY, &k)?.clone();
                for other in others {
                    let (s, o) = if dir == Direction::Out { (e, other) } else { (other, e) };
                    self.retract_fact(s, r.0, o)?;
                    self.maybe_flush()?;
                }
            }
        }
        let rec = self.record(e)?;
        let aliases = self.aliases(e)?;
        self.rewrite_names(NameTarget::Entity(EntityId(e)), &codec::name_entries(&rec.name, &aliases), &BTreeMap::new());
        for alias in &aliases {
            self.overlay.delete(CF_ALIASES, codec::alias_key(EntityId(e), alias));
        }
        self.meta.aliases = self.meta.aliases.saturating_sub(aliases.len() as u64);
        self.counts.aliases_removed += aliases.len() as u64;
        self.overlay.delete(CF_ENTITY_KEYS, rec.key.into_bytes());
        self.overlay.put(CF_RETIRED, codec::id_key(e).to_vec(), Vec::new());
        self.meta.retired += 1;
        self.counts.entities_deleted += 1;
        self.changed_entities.remove(&e);
        self.retired.insert(e);
        Ok(())
    }
}
