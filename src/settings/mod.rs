//! Settings by name: the one place where what a user asks for becomes the library's typed
//! configuration. The command line's flags, Python's keyword arguments and a host's own
//! key-value configuration are all converted, by syntax alone, into [`Settings`] (names and
//! their values as text); the functions here check every value *and every combination*
//! (a setting that the chosen retriever or strategy does not read is refused, never ignored)
//! with one policy and one sentence per problem, and fill in the defaults. So every front
//! end accepts and refuses the same things with the same words.
//!
//! The names are the library's (`rerank_top`, `beams`); the command line writes them as
//! flags (`--rerank-top`), Python as keyword arguments (`rerank_top=`). [`LINK`],
//! [`RETRIEVER`], [`RUNTIME`] and [`GENERATOR`] list them with their help, so the command
//! line's flags are made from the same table (and docs/cli.md is checked against it).
//!
//! - [`link`]: a linker's settings ([`LINK`]).
//! - [`retriever`]: a retriever's ([`RETRIEVER`], [`LINK`], [`RUNTIME`]).
//! - [`GeneratorSpec`]: a generator's ([`GENERATOR`], [`RUNTIME`], `batch`), applied to the
//!   model's own defaults once it is open.
//! - [`PipelineSpec`]: a pipeline's: the retriever's and the generator's settings (the
//!   latter prefixed `gen_`), one runtime for both models, one batch size.

mod spec;

pub use spec::{Spec, GENERATOR, LINK, PIPELINE, RETRIEVER, RUNTIME, VECTORS};

use crate::generate::{BeamSettings, GenerateSettings, InputEncoding, Sampling, Strategy, StrategyKind};
use crate::graph::candidates::CandidateScope;
use crate::limits::{self, FloatRange, IntRange, OutOfRange, UnknownName};
use crate::link::LinkConfig;
use crate::model::session::{Device, RuntimeOptions};
use crate::retrieve::dense::DenseOptions;
use crate::retrieve::gsr::GsrOptions;
use crate::retrieve::pcst::{PcstConfig, PcstScores, PcstVariant};
use crate::retrieve::rerank::RerankOptions;
use crate::retrieve::surge::SurgeOptions;
use crate::retrieve::{RetrieverConfig, RetrieverKind};
use std::cell::RefCell;
use std::path::PathBuf;

/// Settings as a front end was given them: names and values as text, in order. A list
/// setting (`rerank_pool`, `stop`) takes several values; the others one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    given: Vec<(String, Vec<String>)>,
}

impl Settings {
    /// No settings: every default.
    pub fn new() -> Settings {
        Settings::default()
    }

    /// Sets `name` to one value (replacing an earlier one).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Settings {
        self.set_list(name, [value.into()])
    }

    /// Sets `name` to a list of values (replacing an earlier one).
    pub fn set_list(&mut self, name: impl Into<String>, values: impl IntoIterator<Item = impl Into<String>>) -> &mut Settings {
        let name = name.into();
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        match self.given.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = values,
            None => self.given.push((name, values)),
        }
        self
    }

    /// Whether `name` was given.
    pub fn contains(&self, name: &str) -> bool {
        self.given.iter().any(|(n, _)| n == name)
    }

    /// The names given, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.given.iter().map(|(n, _)| n.as_str())
    }

    /// Whether nothing was given.
    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// These settings and `other`'s (`other` wins on a name given in both).
    pub fn merged(&self, other: &Settings) -> Settings {
        let mut out = self.clone();
        for (n, v) in &other.given {
            out.set_list(n.clone(), v.clone());
        }
        out
    }
}

/// Why settings were refused. One sentence each, the same whichever front end gave them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingError {
    /// A name no setting of this component has.
    #[error("unknown setting `{name}` for {component}{}", suggestion_text(.suggestion))]
    Unknown {
        /// The name given.
        name: String,
        /// What was being set up (`a retriever`, `a generator`, ...).
        component: &'static str,
        /// The known name closest to it, when one is close.
        suggestion: Option<String>,
    },
    /// A value outside its range (or not a number).
    #[error(transparent)]
    Range(#[from] OutOfRange),
    /// A name that is none of a setting's choices.
    #[error(transparent)]
    Choice(#[from] UnknownName),
    /// A setting that only means something with another one.
    #[error("`{name}` needs `{needs}` ({what})")]
    Needs {
        /// The setting given.
        name: String,
        /// The setting it needs.
        needs: String,
        /// What that one is.
        what: &'static str,
    },
    /// A component that cannot be built without a setting.
    #[error("the {component} needs `{needs}` ({what})")]
    Missing {
        /// The component (`gsr retriever`, ...).
        component: String,
        /// The setting.
        needs: String,
        /// What it is.
        what: &'static str,
    },
    /// A setting the chosen configuration never reads: refused rather than ignored.
    #[error("`{name}` does not apply to {to}: {belongs}")]
    NotApplicable {
        /// The setting given.
        name: String,
        /// What was chosen (`the bm25 retriever`, `this generator's greedy decoding`).
        to: String,
        /// Whose setting it is.
        belongs: Owner,
    },
    /// A setting given several values that takes one.
    #[error("`{name}` takes one value, not {count}")]
    NotAList {
        /// The setting.
        name: String,
        /// How many values were given.
        count: usize,
    },
    /// A value that is not valid text for its setting (an input encoding's template).
    #[error("`{name}`: {problem}")]
    Invalid {
        /// The setting.
        name: String,
        /// What is wrong with it.
        problem: crate::generate::encoding::EncodingNameError,
    },
}

/// Whose setting a refused one is ([`SettingError::NotApplicable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Owner {
    /// The gsr retriever's model directory.
    GsrModel,
    /// A setting of the gsr retriever.
    Gsr,
    /// The bi-encoder of the dense retriever (or of pcst's dense scores).
    DenseModel,
    /// A setting of the dense retriever.
    Dense,
    /// The surge retriever's model directory.
    SurgeModel,
    /// A setting of the search retriever.
    Search,
    /// A setting of the pcst retriever.
    Pcst,
    /// A setting of the bm25 and pcst retrievers.
    Bm25,
    /// The random retriever's seed.
    RandomSeed,
    /// A setting of retrievers with a model.
    Models,
    /// The uncapped scope: the gsr retriever alone.
    UncappedScope,
    /// The batch of the dense retriever's and the reranker's encoders.
    EncoderBatch,
    /// The parts `rewrite_input` can name: the retriever, its rerank pool, the reranker.
    RewriteInput,
    /// A setting of beam search; the strategy setting's name is the prefix + `strategy`.
    BeamSearch {
        /// The prefix of the names read (`gen_` in a pipeline).
        prefix: &'static str,
    },
    /// A setting of sampling, likewise.
    Sampling {
        /// The prefix of the names read.
        prefix: &'static str,
    },
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::GsrModel => f.write_str("it is the gsr retriever's model"),
            Owner::Gsr => f.write_str("it is a setting of the gsr retriever"),
            Owner::DenseModel => f.write_str("it is the dense retriever's model (or pcst's, with pcst_scores dense)"),
            Owner::Dense => f.write_str("it is a setting of the dense retriever"),
            Owner::SurgeModel => f.write_str("it is the surge retriever's model"),
            Owner::Search => f.write_str("it is a setting of the search retriever"),
            Owner::Pcst => f.write_str("it is a setting of the pcst retriever"),
            Owner::Bm25 => f.write_str("it is a setting of the bm25 and pcst retrievers"),
            Owner::RandomSeed => f.write_str("it is the random retriever's seed"),
            Owner::Models => f.write_str("it is for retrievers with a model (gsr, dense, surge, a reranker, pcst with dense scores)"),
            Owner::UncappedScope => f.write_str("uncapped is for the gsr retriever alone (the others enumerate their candidates)"),
            Owner::EncoderBatch => f.write_str("it is for the dense retriever's and the reranker's encoders"),
            Owner::RewriteInput => f.write_str("it names the retriever, its rerank_pool, or rerank when there is a reranker"),
            Owner::BeamSearch { prefix } => write!(f, "it is a setting of beam search (set `{prefix}strategy` to choose it)"),
            Owner::Sampling { prefix } => write!(f, "it is a setting of sampling (set `{prefix}strategy` to choose it)"),
        }
    }
}

fn suggestion_text(s: &Option<String>) -> String {
    s.as_ref().map_or_else(String::new, |s| format!(" (did you mean `{s}`?)"))
}

/// What reads a [`Settings`]: each read marks its name, and [`Reader::finish`] refuses the
/// names nothing read. `prefix` is put before every name (`gen_` in a pipeline).
struct Reader<'a> {
    settings: &'a Settings,
    prefix: &'static str,
    read: RefCell<Vec<bool>>,
}

impl<'a> Reader<'a> {
    fn new(settings: &'a Settings, prefix: &'static str) -> Reader<'a> {
        Reader { settings, prefix, read: RefCell::new(vec![false; settings.given.len()]) }
    }

    fn full(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The values of `name`, marked read.
    fn values(&self, name: &str) -> Option<&'a [String]> {
        let full = self.full(name);
        let i = self.settings.given.iter().position(|(n, _)| *n == full)?;
        self.read.borrow_mut()[i] = true;
        Some(&self.settings.given[i].1)
    }

    /// Whether `name` was given (not marking it read).
    fn given(&self, name: &str) -> bool {
        self.settings.contains(&self.full(name))
    }

    fn one(&self, name: &str) -> Result<Option<&'a str>, SettingError> {
        match self.values(name) {
            None => Ok(None),
            Some([v]) => Ok(Some(v.as_str())),
            Some(vs) => Err(SettingError::NotAList { name: self.full(name), count: vs.len() }),
        }
    }

    fn uint(&self, name: &str, range: &IntRange) -> Result<Option<u64>, SettingError> {
        let full = self.full(name);
        Ok(self.one(name)?.map(|t| range.parse(t).map_err(|e| e.renamed(&full))).transpose()?)
    }

    fn usize(&self, name: &str, range: &IntRange) -> Result<Option<usize>, SettingError> {
        let full = self.full(name);
        self.uint(name, range)?.map(|v| usize::try_from(v).map_err(|_| SettingError::Range(range.refuse(v).renamed(&full)))).transpose()
    }

    fn float(&self, name: &str, range: &FloatRange) -> Result<Option<f64>, SettingError> {
        let full = self.full(name);
        Ok(self.one(name)?.map(|t| range.parse(t).map_err(|e| e.renamed(&full))).transpose()?)
    }

    fn choice<T: std::str::FromStr<Err = UnknownName>>(&self, name: &str) -> Result<Option<T>, SettingError> {
        Ok(self.one(name)?.map(str::parse).transpose()?)
    }

    /// A switch: `true`/`false` in any case (Python's `True`), also `on`/`off`, `yes`/`no`, `1`/`0`.
    fn switch(&self, name: &'static str) -> Result<Option<bool>, SettingError> {
        let Some(t) = self.one(name)? else { return Ok(None) };
        match t.trim().to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" | "1" => Ok(Some(true)),
            "false" | "off" | "no" | "0" => Ok(Some(false)),
            _ => Err(UnknownName { what: name, value: t.to_owned(), allowed: &["true", "false"] }.into()),
        }
    }

    fn path(&self, name: &str) -> Result<Option<PathBuf>, SettingError> {
        Ok(self.one(name)?.map(PathBuf::from))
    }

    fn list(&self, name: &str) -> Option<Vec<String>> {
        self.values(name).map(|vs| vs.iter().flat_map(|v| v.split(',')).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect())
    }

    /// Refuses `name` when given: the configuration does not read it.
    fn refuse(&self, name: &str, to: impl Into<String>, belongs: Owner) -> Result<(), SettingError> {
        if self.given(name) {
            return Err(SettingError::NotApplicable { name: self.full(name), to: to.into(), belongs });
        }
        Ok(())
    }

    /// Refuses the names nothing read: unknown ones, with the closest of `known` (the
    /// names as written here).
    fn finish(&self, component: &'static str, known: &[String]) -> Result<(), SettingError> {
        let read = self.read.borrow();
        for (i, (name, _)) in self.settings.given.iter().enumerate() {
            if !read[i] {
                let suggestion = closest(name, known.iter().map(String::as_str)).map(str::to_owned);
                return Err(SettingError::Unknown { name: name.clone(), component, suggestion });
            }
        }
        Ok(())
    }
}

/// The names of tables, each with `prefix`.
fn names_of(tables: &[&[Spec]], prefix: &str) -> Vec<String> {
    tables.iter().flat_map(|t| t.iter().map(|s| format!("{prefix}{}", s.name))).collect()
}

/// The known name within two edits of `name` (the closest, the first on a tie).
fn closest<'n>(name: &str, known: impl Iterator<Item = &'n str>) -> Option<&'n str> {
    let mut best: Option<(usize, &str)> = None;
    for k in known {
        let d = edit_distance(name, k);
        if d <= 2 && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == cb { prev } else { 1 + prev.min(row[j]).min(cur) };
            prev = cur;
        }
    }
    row[b.len()]
}

/// A linker's settings ([`LINK`]).
pub fn link(s: &Settings) -> Result<LinkConfig, SettingError> {
    let r = Reader::new(s, "");
    let cfg = read_link(&r)?;
    r.finish("a linker", &names_of(&[LINK], ""))?;
    Ok(cfg)
}

fn read_link(r: &Reader<'_>) -> Result<LinkConfig, SettingError> {
    let mut c = LinkConfig::default();
    c.window = r.usize("window", &limits::WINDOW)?.unwrap_or(c.window);
    c.max_ngram = r.usize("max_ngram", &limits::MAX_NGRAM)?.unwrap_or(c.max_ngram);
    c.max_entities_per_mention = r.usize("max_entities", &limits::MAX_ENTITIES)?.unwrap_or(c.max_entities_per_mention);
    c.min_single_word_chars = r.usize("min_word_chars", &limits::MIN_WORD_CHARS)?.unwrap_or(c.min_single_word_chars);
    c.decay = r.float("decay", &limits::LINK_DECAY)?.map_or(c.decay, |d| d as f32);
    c.rewrite = r.switch("rewrite")?.unwrap_or(c.rewrite);
    Ok(c)
}

/// ONNX Runtime's settings ([`RUNTIME`]): the library's defaults (the CPU, one session per
/// core) for what is not given.
fn read_runtime(r: &Reader<'_>) -> Result<RuntimeOptions, SettingError> {
    let mut o = RuntimeOptions::default();
    o.device = r.choice::<Device>("device")?.unwrap_or(o.device);
    o.threads = r.usize("model_threads", &limits::MODEL_THREADS)?.unwrap_or(o.threads);
    o.sessions = r.usize("sessions", &limits::SESSIONS)?.unwrap_or(o.sessions);
    Ok(o)
}

/// The bi-encoder of a store's vector index ([`VECTORS`], [`RUNTIME`]): `dense_model` is
/// required.
pub fn vector_encoder(s: &Settings) -> Result<crate::vectors::VectorOptions, SettingError> {
    let r = Reader::new(s, "");
    let runtime = read_runtime(&r)?;
    let model = r.path("dense_model")?.ok_or_else(|| SettingError::Missing {
        component: "vector index".into(),
        needs: "dense_model".into(),
        what: "an exported bi-encoder's directory: see schema/model.md",
    })?;
    let mut d = crate::vectors::VectorOptions::new(model);
    d.runtime = runtime;
    d.batch = r.usize("encoder_batch", &limits::BATCH)?.unwrap_or(d.batch);
    r.finish("a vector index", &names_of(&[VECTORS, RUNTIME], ""))?;
    Ok(d)
}

/// The retriever names a setting `kind` or `rerank_pool` gives.
fn retriever_name(name: &str) -> Result<&'static str, SettingError> {
    RetrieverKind::NAMES
        .iter()
        .copied()
        .find(|n| *n == name)
        .ok_or_else(|| SettingError::Choice(UnknownName { what: "retriever", value: name.to_owned(), allowed: RetrieverKind::NAMES }))
}

/// Where the retriever's settings are read: alone, or as a pipeline's retriever (whose
/// models share the pipeline's runtime, and whose `batch` is the pipeline's).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Alone,
    InPipeline,
}

/// A retriever's configuration from its name (`all`, `random`, `bm25`, `katz`, `pcst`,
/// `gsr`, `dense`, `surge`, `search`) and settings ([`RETRIEVER`], [`LINK`], [`RUNTIME`]).
pub fn retriever(kind: &str, s: &Settings) -> Result<RetrieverConfig, SettingError> {
    let r = Reader::new(s, "");
    let runtime = read_runtime(&r)?;
    let cfg = read_retriever(kind, &r, Role::Alone, &runtime)?;
    r.finish("a retriever", &names_of(&[RETRIEVER, LINK, RUNTIME], ""))?;
    Ok(cfg)
}

fn describe(kind: &str, pool: &[&str]) -> String {
    if pool.is_empty() {
        format!("the {kind} retriever")
    } else {
        format!("the {kind} retriever and its rerank pool ({})", pool.join(", "))
    }
}

fn read_retriever(kind: &str, r: &Reader<'_>, role: Role, runtime: &RuntimeOptions) -> Result<RetrieverConfig, SettingError> {
    let kind = retriever_name(kind)?;
    let rerank = r.path("rerank")?;
    let pool_names = r.list("rerank_pool").unwrap_or_default();
    if rerank.is_none() {
        for name in ["rerank_top", "rerank_pool", "rerank_fusion"] {
            if r.given(name) {
                return Err(SettingError::Needs { name: name.into(), needs: "rerank".into(), what: "a cross-encoder's directory: see schema/model.md" });
            }
        }
    }
    let mut pool: Vec<&'static str> = Vec::new();
    for name in &pool_names {
        let n = retriever_name(name)?;
        if n != kind && !pool.contains(&n) {
            pool.push(n);
        }
    }
    let in_play = |n: &str| kind == n || pool.contains(&n);
    let chosen = describe(kind, &pool);

    // Which models are in play: each model setting is read only when one is, and refused
    // otherwise.
    let pcst_scores = if in_play("pcst") { r.one("pcst_scores")? } else { None };
    let pcst_dense = match pcst_scores {
        None | Some("bm25") => false,
        Some("dense") => true,
        Some(other) => return Err(UnknownName { what: "PCST scores", value: other.to_owned(), allowed: &["bm25", "dense"] }.into()),
    };
    let dense_wanted = in_play("dense") || pcst_dense;
    let any_model = in_play("gsr") || dense_wanted || in_play("surge") || rerank.is_some();

    let mut gsr = None;
    if in_play("gsr") {
        // The values first, then whether the model is there: a bad value is named even
        // when the model is missing too.
        let model = r.path("model")?;
        let v = crate::retrieve::gsr::GsrOverrides {
            prior: r.choice("prior")?,
            prior_norm: r.choice("prior_norm")?,
            alpha: r.float("alpha", &limits::ALPHA)?,
            start_recency: r.float("start_recency", &limits::START_RECENCY)?,
            model_norm: r.choice("model_norm")?,
            beams: r.usize("beams", &limits::BEAMS)?,
            return_sequences: r.usize("return_sequences", &limits::RETURN_SEQUENCES)?,
            length_penalty: r.float("length_penalty", &limits::LENGTH_PENALTY)?,
            max_new_tokens: r.usize("max_new_tokens", &limits::MAX_NEW_TOKENS)?,
            ..Default::default()
        };
        let steps = r.usize("steps", &limits::STEPS)?;
        let batch = if role == Role::Alone { r.usize("batch", &limits::BATCH)? } else { None };
        let model = model.ok_or_else(|| SettingError::Missing {
            component: "gsr retriever".into(),
            needs: "model".into(),
            what: "an exported retriever's directory: see schema/model.md",
        })?;
        let mut g = GsrOptions::new(model);
        g.runtime = runtime.clone();
        g.overrides = v;
        g.steps = steps.unwrap_or(g.steps);
        g.batch = batch.unwrap_or(g.batch);
        gsr = Some(g);
    } else {
        r.refuse("model", chosen.clone(), Owner::GsrModel)?;
        for name in spec::GSR_ONLY {
            if *name == "batch" && role == Role::InPipeline {
                continue;
            }
            r.refuse(name, chosen.clone(), Owner::Gsr)?;
        }
    }

    let encoder_batch = if dense_wanted || rerank.is_some() {
        r.usize("encoder_batch", &limits::BATCH)?
    } else {
        r.refuse("encoder_batch", chosen.clone(), Owner::EncoderBatch)?;
        None
    };
    let dense = if dense_wanted {
        let model = r.path("dense_model")?.ok_or_else(|| SettingError::Missing {
            component: if in_play("dense") { "dense retriever".into() } else { "pcst retriever with dense scores".into() },
            needs: "dense_model".into(),
            what: "an exported bi-encoder's directory: see schema/model.md",
        })?;
        let mut d = DenseOptions::new(model);
        d.runtime = runtime.clone();
        d.batch = encoder_batch.unwrap_or(d.batch);
        if in_play("dense") {
            d.paths = r.choice("dense_paths")?.unwrap_or(d.paths);
        } else {
            r.refuse("dense_paths", chosen.clone(), Owner::Dense)?;
        }
        Some(d)
    } else {
        r.refuse("dense_model", chosen.clone(), Owner::DenseModel)?;
        r.refuse("dense_paths", chosen.clone(), Owner::Dense)?;
        None
    };
    let surge = if in_play("surge") {
        let model = r.path("surge_model")?.ok_or_else(|| SettingError::Missing {
            component: "surge retriever".into(),
            needs: "surge_model".into(),
            what: "an exported subgraph model's directory: see schema/model.md",
        })?;
        let mut o = SurgeOptions::new(model);
        o.runtime = runtime.clone();
        Some(o)
    } else {
        r.refuse("surge_model", chosen.clone(), Owner::SurgeModel)?;
        None
    };

    let search = if in_play("search") {
        let producer = match r.one("search_producer")? {
            None => {
                return Err(SettingError::Missing {
                    component: "search retriever".into(),
                    needs: "search_producer".into(),
                    what: "tfidf, random, or a query producer's directory (models/query-producer-opendialkg)",
                })
            }
            Some("tfidf") => crate::retrieve::search::SearchProducer::TfIdf,
            Some("random") => crate::retrieve::search::SearchProducer::Random,
            Some(_) => crate::retrieve::search::SearchProducer::Model(r.path("search_producer")?.expect("given: read above")),
        };
        let mut o = crate::retrieve::search::SearchOptions::new(producer);
        o.queries = r.usize("search_queries", &limits::SEARCH_QUERIES)?.unwrap_or(o.queries);
        o.paths = r.choice("search_paths")?.unwrap_or(o.paths);
        Some(o)
    } else {
        for name in ["search_producer", "search_queries", "search_paths"] {
            r.refuse(name, chosen.clone(), Owner::Search)?;
        }
        None
    };

    let kind_of = |name: &str| -> RetrieverKind {
        match name {
            "all" => RetrieverKind::All,
            "random" => RetrieverKind::Random,
            "bm25" => RetrieverKind::Bm25,
            "katz" => RetrieverKind::Katz,
            "pcst" => RetrieverKind::Pcst,
            "gsr" => RetrieverKind::Gsr(gsr.clone().expect("read above: gsr is in play")),
            "dense" => RetrieverKind::Dense(dense.clone().expect("read above: dense is in play")),
            "search" => RetrieverKind::Search(search.clone().expect("read above: search is in play")),
            _ => RetrieverKind::Surge(surge.clone().expect("read above: surge is in play")),
        }
    };
    let mut cfg = RetrieverConfig::new(kind_of(kind));

    if in_play("pcst") {
        if let Some(v) = r.choice::<PcstVariant>("pcst_variant")? {
            cfg.pcst = PcstConfig::new(v);
        }
        cfg.pcst.pruning = r.choice("pruning")?.unwrap_or(cfg.pcst.pruning);
        if pcst_dense {
            cfg.pcst.scores = PcstScores::Dense(dense.clone().expect("read above: pcst's dense scores need the bi-encoder"));
        }
    } else {
        for name in ["pcst_variant", "pruning", "pcst_scores"] {
            r.refuse(name, chosen.clone(), Owner::Pcst)?;
        }
    }
    if in_play("bm25") || in_play("pcst") {
        cfg.bm25_turns = r.usize("bm25_turns", &limits::BM25_TURNS)?.unwrap_or(cfg.bm25_turns);
    } else {
        r.refuse("bm25_turns", chosen.clone(), Owner::Bm25)?;
    }
    if in_play("random") {
        cfg.seed = r.uint("seed", &limits::SEED)?.unwrap_or(cfg.seed);
    } else {
        r.refuse("seed", chosen.clone(), Owner::RandomSeed)?;
    }
    if let Some(scope) = r.choice::<CandidateScope>("scope")? {
        if scope == CandidateScope::Uncapped && (kind != "gsr" || !pool.is_empty()) {
            return Err(SettingError::NotApplicable { name: "scope".into(), to: chosen.clone(), belongs: Owner::UncappedScope });
        }
        cfg.scope = scope;
    }
    if let Some(model) = rerank {
        let mut o = RerankOptions::new(model);
        o.runtime = runtime.clone();
        o.batch = encoder_batch.unwrap_or(o.batch);
        o.top = r.usize("rerank_top", &limits::RERANK_TOP)?.unwrap_or(o.top);
        o.fusion = r.float("rerank_fusion", &limits::RERANK_FUSION)?.unwrap_or(o.fusion);
        o.pool = pool.iter().map(|n| kind_of(n)).collect();
        cfg.rerank = Some(o);
    }
    if role == Role::Alone && !any_model {
        for name in ["device", "model_threads", "sessions"] {
            r.refuse(name, chosen.clone(), Owner::Models)?;
        }
    }
    cfg.link = read_link(r)?;
    for part in r.list("rewrite_input").unwrap_or_default() {
        if !crate::retrieve::REWRITE_PARTS.contains(&part.as_str()) {
            return Err(UnknownName { what: "rewrite_input part", value: part, allowed: crate::retrieve::REWRITE_PARTS }.into());
        }
        let in_this = if part == "rerank" { cfg.rerank.is_some() } else { in_play(&part) };
        if !in_this {
            return Err(SettingError::NotApplicable { name: format!("rewrite_input {part}"), to: chosen.clone(), belongs: Owner::RewriteInput });
        }
        if !cfg.rewrite_input.contains(&part) {
            cfg.rewrite_input.push(part);
        }
    }
    if !cfg.rewrite_input.is_empty() && !cfg.link.rewrite {
        return Err(SettingError::Needs { name: "rewrite_input".into(), needs: "rewrite".into(), what: "the dialog rewrite the ranking would read" });
    }
    cfg.validate()?;
    Ok(cfg)
}

/// A generator's settings ([`GENERATOR`], [`RUNTIME`] and `batch`), read before the model is
/// opened (the runtime opens it) and applied to the model's own defaults after
/// ([`GeneratorSpec::apply`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct GeneratorSpec {
    /// How the model runs.
    pub runtime: RuntimeOptions,
    /// Requests generated together (the model's batch when `None`).
    pub batch: Option<usize>,
    /// The name prefix its settings were read with (`gen_` in a pipeline).
    prefix: &'static str,
    encoding: Option<InputEncoding>,
    strategy: Option<StrategyKind>,
    beams: Option<usize>,
    return_sequences: Option<usize>,
    length_penalty: Option<f64>,
    max_new_tokens: Option<usize>,
    temperature: Option<f64>,
    top_k: Option<usize>,
    top_p: Option<f64>,
    seed: Option<u64>,
    stop: Vec<String>,
    no_repeat_ngram_size: Option<usize>,
    min_new_tokens: Option<usize>,
    repetition_penalty: Option<f64>,
    /// Sequences a pipeline checks (`gen_check`): beam search returning at least as many.
    check: usize,
}

impl GeneratorSpec {
    /// A generator's settings, names without prefix (`beams`, `strategy`).
    pub fn read(s: &Settings) -> Result<GeneratorSpec, SettingError> {
        let r = Reader::new(s, "");
        let mut g = Self::read_with(&r, "")?;
        g.runtime = read_runtime(&r)?;
        g.batch = r.usize("batch", &limits::BATCH)?;
        let mut known = names_of(&[GENERATOR, RUNTIME], "");
        known.push("batch".into());
        r.finish("a generator", &known)?;
        Ok(g)
    }

    fn read_with(r: &Reader<'_>, prefix: &'static str) -> Result<GeneratorSpec, SettingError> {
        let encoding = match r.one("encoding")? {
            None => None,
            Some(t) => Some(t.parse::<InputEncoding>().map_err(|problem| SettingError::Invalid { name: r.full("encoding"), problem })?),
        };
        Ok(GeneratorSpec {
            runtime: RuntimeOptions::default(),
            batch: None,
            prefix,
            encoding,
            strategy: r.choice("strategy")?,
            beams: r.usize("beams", &limits::BEAMS)?,
            return_sequences: r.usize("return_sequences", &limits::RETURN_SEQUENCES)?,
            length_penalty: r.float("length_penalty", &limits::LENGTH_PENALTY)?,
            max_new_tokens: r.usize("max_new_tokens", &limits::MAX_NEW_TOKENS)?,
            temperature: r.float("temperature", &limits::TEMPERATURE)?,
            top_k: r.usize("top_k", &limits::TOP_K)?,
            top_p: r.float("top_p", &limits::TOP_P)?,
            seed: r.uint("seed", &limits::SEED)?,
            stop: r.values("stop").map(<[String]>::to_vec).unwrap_or_default(),
            no_repeat_ngram_size: r.usize("no_repeat_ngram_size", &limits::NO_REPEAT_NGRAM_SIZE)?,
            min_new_tokens: r.usize("min_new_tokens", &limits::MIN_NEW_TOKENS)?,
            repetition_penalty: r.float("repetition_penalty", &limits::REPETITION_PENALTY)?,
            check: 0,
        })
    }

    /// The model's settings (`defaults`, from its `trellis.json`) with these applied. A
    /// beam setting for a model that decodes otherwise (and no `strategy` given to change
    /// it), or a sampling setting likewise, is refused.
    pub fn apply(&self, defaults: &GenerateSettings) -> Result<GenerateSettings, SettingError> {
        let mut s = defaults.clone();
        if let Some(e) = &self.encoding {
            s.encoding = e.clone();
        }
        match self.strategy {
            Some(StrategyKind::Greedy) => s.strategy = Strategy::Greedy,
            Some(StrategyKind::Beam) if !matches!(s.strategy, Strategy::Beam(_)) => s.strategy = Strategy::Beam(BeamSettings::default()),
            Some(StrategyKind::Sample) if !matches!(s.strategy, Strategy::Sample(_)) => s.strategy = Strategy::Sample(Sampling::default()),
            _ => {}
        }
        let p = self.prefix;
        let decoding = match &s.strategy {
            Strategy::Greedy => "greedy decoding",
            Strategy::Beam(_) => "beam search",
            _ => "sampling",
        };
        let refuse = |name: &str, given: bool, belongs: Owner| -> Result<(), SettingError> {
            if given {
                return Err(SettingError::NotApplicable { name: format!("{p}{name}"), to: format!("this generator's {decoding}"), belongs });
            }
            Ok(())
        };
        let beam_given = [self.beams.is_some(), self.return_sequences.is_some(), self.length_penalty.is_some()];
        let sample_given = [self.temperature.is_some(), self.top_k.is_some(), self.top_p.is_some(), self.seed.is_some()];
        match &mut s.strategy {
            Strategy::Beam(b) => {
                b.beams = self.beams.unwrap_or(b.beams);
                b.return_sequences = self.return_sequences.unwrap_or(b.return_sequences.min(b.beams));
                b.length_penalty = self.length_penalty.unwrap_or(b.length_penalty);
            }
            Strategy::Sample(x) => {
                x.temperature = self.temperature.unwrap_or(x.temperature);
                x.top_k = self.top_k.unwrap_or(x.top_k);
                x.top_p = self.top_p.unwrap_or(x.top_p);
                x.seed = self.seed.unwrap_or(x.seed);
            }
            _ => {}
        }
        if !matches!(s.strategy, Strategy::Beam(_)) {
            for (name, given) in ["beams", "return_sequences", "length_penalty"].into_iter().zip(beam_given) {
                refuse(name, given, Owner::BeamSearch { prefix: p })?;
            }
        }
        if !matches!(s.strategy, Strategy::Sample(_)) {
            for (name, given) in ["temperature", "top_k", "top_p", "seed"].into_iter().zip(sample_given) {
                refuse(name, given, Owner::Sampling { prefix: p })?;
            }
        }
        if self.check > 0 {
            match &mut s.strategy {
                Strategy::Beam(b) if b.beams < self.check => {
                    return Err(SettingError::Needs {
                        name: format!("{p}check"),
                        needs: format!("{p}beams"),
                        what: "at least as many beams as sequences checked",
                    })
                }
                Strategy::Beam(b) => b.return_sequences = self.return_sequences.unwrap_or(self.check),
                _ => {
                    return Err(SettingError::NotApplicable {
                        name: format!("{p}check"),
                        to: format!("this generator's {decoding}"),
                        belongs: Owner::BeamSearch { prefix: p },
                    })
                }
            }
        }
        s.max_new_tokens = self.max_new_tokens.unwrap_or(s.max_new_tokens);
        s.stop.extend(self.stop.iter().cloned());
        s.no_repeat_ngram_size = self.no_repeat_ngram_size.unwrap_or(s.no_repeat_ngram_size);
        s.min_new_tokens = self.min_new_tokens.unwrap_or(s.min_new_tokens);
        s.repetition_penalty = self.repetition_penalty.unwrap_or(s.repetition_penalty);
        s.batch = self.batch.unwrap_or(s.batch);
        s.validate()?;
        Ok(s)
    }
}

/// A pipeline's settings: the retriever's ([`RETRIEVER`], [`LINK`]), the generator's
/// ([`GENERATOR`] prefixed `gen_`), one runtime for both models ([`RUNTIME`]) and one batch
/// (requests retrieved and generated together, whatever the retriever).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PipelineSpec {
    /// The retriever, its models on [`runtime`](Self::runtime).
    pub retriever: RetrieverConfig,
    /// The generator's settings, applied once it is open.
    pub generator: GeneratorSpec,
    /// Both models' runtime.
    pub runtime: RuntimeOptions,
    /// Requests retrieved and generated together.
    pub batch: usize,
    /// The fact checker's file or directory ([`PIPELINE`]'s `checker`).
    pub checker: Option<PathBuf>,
    /// Generated sequences checked, the best supported replying (0: none reordered).
    pub gen_check: usize,
    /// Whether the generator reads the rewritten dialog.
    pub gen_rewrite: bool,
}

/// The batch of a pipeline when none is given (the generative retriever's default).
pub const PIPELINE_BATCH: usize = 8;

impl PipelineSpec {
    /// The pipeline's fact check: the checker file read, with how many sequences it
    /// reorders (`None` without `checker`).
    pub fn check(&self) -> Result<Option<crate::pipeline::CheckSettings>, crate::check::CheckerError> {
        let Some(path) = &self.checker else { return Ok(None) };
        Ok(Some(crate::pipeline::CheckSettings { model: crate::check::CheckerModel::from_path(path)?, candidates: self.gen_check }))
    }

    /// The pipeline's settings for a generator that decodes as `generate` says: `top`
    /// paths, the fact check read ([`check`](Self::check)), the rewrite for the generator.
    pub fn settings(&self, top: usize, generate: GenerateSettings) -> Result<crate::pipeline::PipelineSettings, crate::check::CheckerError> {
        let mut s = crate::pipeline::PipelineSettings::new(top, generate).with_check(self.check()?);
        s.rewrite_history = self.gen_rewrite;
        Ok(s)
    }
}

impl PipelineSpec {
    /// A pipeline's settings for the retriever `kind`.
    pub fn read(kind: &str, s: &Settings) -> Result<PipelineSpec, SettingError> {
        let r = Reader::new(s, "");
        let runtime = read_runtime(&r)?;
        let batch = r.usize("batch", &limits::BATCH)?.unwrap_or(PIPELINE_BATCH);
        let mut retriever = read_retriever(kind, &r, Role::InPipeline, &runtime)?;
        // Every generative retriever of the pipeline, pooled ones too, decodes `batch` at a time.
        let pooled = retriever.rerank.iter_mut().flat_map(|o| o.pool.iter_mut());
        for k in std::iter::once(&mut retriever.kind).chain(pooled) {
            if let RetrieverKind::Gsr(g) = k {
                g.batch = batch;
            }
        }
        let checker = r.path("checker")?;
        let gen_check = r.usize("gen_check", &limits::GEN_CHECK)?.unwrap_or(0);
        if gen_check > 0 && checker.is_none() {
            return Err(SettingError::Needs { name: "gen_check".into(), needs: "checker".into(), what: "a fact checker's directory: models/check-opendialkg" });
        }
        let gen_rewrite = r.switch("gen_rewrite")?.unwrap_or(false);
        if gen_rewrite && !retriever.link.rewrite {
            return Err(SettingError::Needs { name: "gen_rewrite".into(), needs: "rewrite".into(), what: "the dialog rewrite the generator would read" });
        }
        let g = Reader::new(s, "gen_");
        let mut generator = GeneratorSpec::read_with(&g, "gen_")?;
        // The sequences checked are the ones the generator returns (`apply` sets them).
        if generator.return_sequences.is_some_and(|n| n < gen_check) {
            return Err(SettingError::Needs {
                name: "gen_check".into(),
                needs: "gen_return_sequences".into(),
                what: "at least as many sequences returned as checked",
            });
        }
        generator.check = gen_check;
        generator.runtime = runtime.clone();
        generator.batch = Some(batch);
        // A name is known when either reader read it.
        let read: Vec<bool> = r.read.borrow().iter().zip(g.read.borrow().iter()).map(|(a, b)| *a || *b).collect();
        *r.read.borrow_mut() = read;
        let mut known = names_of(&[RETRIEVER, LINK, RUNTIME, PIPELINE], "");
        known.extend(names_of(&[GENERATOR], "gen_"));
        r.finish("a pipeline", &known)?;
        Ok(PipelineSpec { retriever, generator, runtime, batch, checker, gen_check, gen_rewrite })
    }
}

#[cfg(test)]
mod tests;
