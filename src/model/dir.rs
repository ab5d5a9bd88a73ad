//! A model directory (`schema/model.md`): the optimum-layout ONNX files, `tokenizer.json`,
//! the Hugging Face `config.json` and Trellis's own `trellis.json`, read and checked before
//! any session is built. Every problem names the file and the field.
//!
//! Also the retriever's encoder input (schema/gsr-decoding.md §2): which messages, how they are joined, how
//! earlier paths are appended, how the ids are cut to `max_tokens`.

use crate::dialog::Message;
use crate::files::{self, FileProblem};
use crate::ingest::tokenizer::{NameTokenizer, TokenizerError};
use crate::limits::OutOfRange;
use crate::linearize::{Linearization, LinearizeError, Position};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// The encoder graph's file name.
pub const ENCODER_FILE: &str = "encoder_model.onnx";
/// The split layout's first-step decoder file name.
pub const DECODER_FILE: &str = "decoder_model.onnx";
/// The split layout's later-step decoder file name (reads the KV cache).
pub const DECODER_WITH_PAST_FILE: &str = "decoder_with_past_model.onnx";
/// The merged decoder's file name (both step kinds in one graph).
pub const MERGED_FILE: &str = "decoder_model_merged.onnx";
/// The optional cached decoder step that computes only listed tokens' logits
/// (`tools/train/listed_logits.py`; used under `model_norm: allowed`).
pub const LISTED_FILE: &str = "decoder_listed_model.onnx";
/// The tokenizer's file name.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The Hugging Face model configuration's file name.
pub const CONFIG_FILE: &str = "config.json";
/// Trellis's own configuration's file name (optional: defaults when absent).
pub const TRELLIS_FILE: &str = "trellis.json";

/// Which decoder files are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Layout {
    /// `decoder_model.onnx` (first step) + `decoder_with_past_model.onnx` (later steps).
    Split,
    /// `decoder_model_merged.onnx` (`use_cache_branch` picks the step kind).
    Merged,
}

crate::limits::named_choices!(Layout, "layout", { Split => "split", Merged => "merged" });

/// What is wrong with one field of a JSON file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FieldProblem {
    /// The field is absent (or null) and has no default.
    #[error("missing")]
    Missing,
    /// The field's JSON type is wrong.
    #[error("not {expected}")]
    Type {
        /// What it should be, e.g. "an integer".
        expected: &'static str,
    },
    /// A number outside the range this file allows.
    #[error("{value} is out of range ({min}..={max})")]
    Range {
        /// The number found.
        value: f64,
        /// The smallest allowed.
        min: f64,
        /// The largest allowed.
        max: f64,
    },
    /// A name that is not one of the allowed ones; `value` is the file's text (data).
    #[error("{value:?} is not one of {allowed}")]
    Unknown {
        /// The name found.
        value: String,
        /// The allowed names, as the message shows them.
        allowed: &'static str,
    },
    /// Outside its range in `crate::limits` (the command line's and the options' own).
    #[error("must be {range}, not {value}")]
    OutOfRange {
        /// The allowed range, e.g. `2..=4096`.
        range: String,
        /// The value found.
        value: String,
    },
    /// A `linearization` object that is not a valid linearization.
    #[error("{0}")]
    Linearization(Box<LinearizeError>),
    /// A task's own check of its section (`TaskSection`).
    #[error("{0}")]
    Invalid(Box<dyn std::error::Error + Send + Sync>),
    /// A section only another task reads.
    #[error("a {task} does not read it ({instead})")]
    OtherTask {
        /// The model's task (`retriever` or `generator`).
        task: &'static str,
        /// What that task reads in its place.
        instead: &'static str,
    },
}

/// Why a model directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelDirError {
    /// The path is not a directory.
    #[error("{}: not a model directory (no such directory)", path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// Neither decoder layout's files are in the directory.
    #[error("{}: no decoder: neither {DECODER_FILE} + {DECODER_WITH_PAST_FILE} nor {MERGED_FILE} is there", dir.display())]
    NoDecoder {
        /// The model directory.
        dir: PathBuf,
    },
    /// A forced layout's decoder files are not all there.
    #[error("{}: the {layout} layout was asked for, but {} is missing", dir.display(), missing.join(" and "))]
    LayoutMissing {
        /// The model directory.
        dir: PathBuf,
        /// The layout asked for.
        layout: Layout,
        /// The file names that are absent.
        missing: Vec<&'static str>,
    },
    /// A file every model directory needs (encoder, config.json, tokenizer.json) is absent.
    #[error("{}: missing (a model directory needs it)", path.display())]
    MissingFile {
        /// The missing file.
        path: PathBuf,
    },
    /// A model file exists but reading it failed.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// In place of a model file: a directory, a FIFO or device, or a file over its limit.
    #[error("{}: {problem}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is in its place.
        problem: FileProblem,
    },
    /// A JSON file does not parse, or does not fit its schema (unknown field, wrong shape).
    #[error("{}: not valid JSON for this file: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// serde_json's error (line and column).
        source: serde_json::Error,
    },
    /// One field of config.json or trellis.json is wrong.
    #[error("{}: field `{field}`: {problem}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The field's dotted name, e.g. `input.max_tokens`.
        field: String,
        /// What is wrong with it.
        problem: FieldProblem,
    },
    /// An `input.entities` marker that the tokenizer does not turn into exactly one token.
    #[error("{}: the entity marker {marker:?} of trellis.json is not one token of tokenizer.json (add it as a special token)", path.display())]
    MarkerNotAToken {
        /// The trellis.json that names it.
        path: PathBuf,
        /// The marker text.
        marker: String,
    },
    /// The tokenizer has more tokens than the model has logits.
    #[error("{}: the tokenizer has {tokens} tokens but config.json's vocab_size is {vocab_size}: the model cannot write them all", path.display())]
    VocabTooSmall {
        /// The config.json.
        path: PathBuf,
        /// The tokenizer's vocabulary size, added tokens included.
        tokens: usize,
        /// config.json's `vocab_size`.
        vocab_size: u32,
    },
    /// tokenizer.json cannot be loaded or used.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

/// The fields of the Hugging Face T5 `config.json` Trellis reads.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct T5Config {
    /// Vocabulary size: the decoder's logits per step (1..=16777216).
    pub vocab_size: u32,
    /// Hidden size of every layer.
    pub d_model: usize,
    /// Size of one attention head's keys and values.
    pub d_kv: usize,
    /// Attention heads per layer.
    pub num_heads: usize,
    /// Encoder layers.
    pub num_layers: usize,
    /// Decoder layers (`num_layers` when absent).
    pub num_decoder_layers: usize,
    /// The first token fed to the decoder.
    pub decoder_start_token_id: u32,
    /// The end-of-sequence token: decoding stops on it.
    pub eos_token_id: u32,
    /// The padding token.
    pub pad_token_id: u32,
}

/// `trellis.json` `input`: how the encoder text is made (schema/gsr-decoding.md §2).
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct InputConfig {
    /// The last `turns` messages (all when 0).
    pub turns: usize,
    /// Whether each message is written `speaker: text` rather than its text alone (default false).
    pub speaker_prefix: bool,
    /// What joins the messages (default one space).
    pub separator: String,
    /// The most encoder ids (2..=4096, default 256); a longer input is cut from the left, its EOS kept.
    pub max_tokens: usize,
    /// The linked entities written after the messages, each behind a marker of its recency;
    /// absent, the input is the messages alone.
    pub entities: Option<EntityMarkers>,
}

impl Default for InputConfig {
    fn default() -> Self {
        InputConfig { turns: 3, speaker_prefix: false, separator: " ".into(), max_tokens: 256, entities: None }
    }
}

/// `trellis.json` `input.entities`: what the linker found, shown to the model. An entity
/// last mentioned `age` messages back (0: in the last message) is written
/// ` markers[min(age, len - 1)] name`, in the linker's order (most weight first), at most `max`.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EntityMarkers {
    /// One token each (checked against `tokenizer.json` when the directory is opened).
    pub markers: Vec<String>,
    /// The most entities written (1..=1024, default 8).
    #[serde(default = "default_max_entities")]
    pub max: usize,
}

fn default_max_entities() -> usize {
    8
}

/// A linked entity as the encoder input shows it: its name and how many messages back it
/// was last mentioned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputEntity {
    /// The entity's name (written through the linearization's entity text).
    pub name: String,
    /// How many messages back it was last mentioned (0: in the last message).
    pub age: u32,
}

fn default_format() -> u32 {
    1
}
fn default_task() -> String {
    "retriever".into()
}
fn default_linearization() -> serde_json::Value {
    serde_json::Value::String("dialoggsr".into())
}

/// `trellis.json` as written (format 1).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrellisFile {
    #[serde(default = "default_format")]
    format: u32,
    #[serde(default = "default_task")]
    task: String,
    /// A preset name or a full [`Linearization`] object.
    #[serde(default = "default_linearization")]
    linearization: serde_json::Value,
    #[serde(default)]
    input: InputConfig,
    /// A retriever's only (read by `retrieve::gsr`).
    #[serde(default)]
    decoding: Option<serde_json::Value>,
    /// A generator's only (read by `generate`).
    #[serde(default)]
    generation: Option<serde_json::Value>,
}

/// A task's own section of `trellis.json`: `decoding` for the retriever (its type lives in
/// `retrieve::gsr`), `generation` for the generator (in `generate`). The model directory
/// checks only that the section belongs to the model's task; the task's module parses and
/// checks it ([`ModelDir::section`]), so this module knows nothing of retrieval or generation.
pub trait TaskSection: serde::de::DeserializeOwned + Default {
    /// The section's field in `trellis.json`.
    const FIELD: &'static str;
    /// The task that reads it.
    const TASK: &'static str;
    /// Every field within its range: else the field's name inside the section and why.
    fn check(&self) -> Result<(), (String, FieldProblem)>;
    /// What needs the directory's other files (the tokenizer, `config.json`).
    fn check_with(&self, _dir: &ModelDir) -> Result<(), (String, FieldProblem)> {
        Ok(())
    }
}

/// `trellis.json`, checked, with the linearization resolved.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TrellisConfig {
    /// The file format version (only 1 is read).
    pub format: u32,
    /// The model's task: `retriever` or `generator`.
    pub task: String,
    /// How paths and entities are written as text (a preset or a full object).
    pub linearization: Linearization,
    /// How the encoder input is made (`input`).
    pub input: InputConfig,
    /// The task's own section as written (absent: its defaults); [`TrellisConfig::section`].
    section: Option<serde_json::Value>,
}

impl Default for TrellisConfig {
    fn default() -> Self {
        TrellisConfig { format: 1, task: "retriever".into(), linearization: Linearization::dialoggsr(), input: InputConfig::default(), section: None }
    }
}

/// The decoder files of the chosen layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecoderFiles {
    /// Two decoders: one for the first step, one for the later steps.
    Split {
        /// `decoder_model.onnx`.
        first: PathBuf,
        /// `decoder_with_past_model.onnx`.
        with_past: PathBuf,
    },
    /// One decoder graph for both step kinds.
    Merged {
        /// `decoder_model_merged.onnx`.
        merged: PathBuf,
    },
}

/// A model directory, read and checked.
pub struct ModelDir {
    path: PathBuf,
    layout: Layout,
    encoder: PathBuf,
    decoder: DecoderFiles,
    /// `decoder_listed_model.onnx` when the directory has it.
    listed: Option<PathBuf>,
    config: T5Config,
    trellis: TrellisConfig,
    /// Whether `trellis.json` was there (defaults otherwise).
    trellis_present: bool,
    names: NameTokenizer,
    /// The same tokenizer with its own truncation and padding turned off: the encoder input
    /// is cut from the left here (recent turns are kept), never by the file's settings.
    tokenizer: Tokenizer,
    /// Whether the post-processor appends EOS (T5's does).
    appends_eos: bool,
}

impl ModelDir {
    /// Whether the encoder input shows the linked entities (`input.entities`).
    pub fn shows_entities(&self) -> bool {
        self.trellis.input.entities.is_some()
    }
}

impl std::fmt::Debug for ModelDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDir").field("path", &self.path).field("layout", &self.layout).field("config", &self.config).finish()
    }
}

impl ModelDirError {
    /// A model file that cannot be read: missing, not a regular file, too large.
    pub(crate) fn of_file(path: &Path, problem: FileProblem) -> ModelDirError {
        match problem {
            p if p.is_missing() => ModelDirError::MissingFile { path: path.into() },
            FileProblem::Io(source) => ModelDirError::Read { path: path.into(), source },
            problem => ModelDirError::File { path: path.into(), problem },
        }
    }
}

/// Whether a model file is there: `Ok(false)` when nothing is at the path, an error for
/// a directory or anything else that is not a regular file (checked without opening it).
pub(crate) fn present(path: &Path) -> Result<bool, ModelDirError> {
    match files::regular_file(path) {
        Ok(_) => Ok(true),
        Err(p) if p.is_missing() => Ok(false),
        Err(p) => Err(ModelDirError::of_file(path, p)),
    }
}

pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value, ModelDirError> {
    let bytes = files::read_limited(path, files::JSON_CONFIG_LIMIT).map_err(|p| ModelDirError::of_file(path, p))?;
    serde_json::from_slice(&bytes).map_err(|source| ModelDirError::Json { path: path.into(), source })
}

// Generous bounds: they only keep a lying config from asking for absurd allocations.
const MAX_DIM: f64 = (1u64 << 20) as f64;
const MAX_LAYERS: f64 = 1024.0;
const MAX_VOCAB: f64 = (1u64 << 24) as f64;

impl T5Config {
    /// Reads `config.json`. Missing or out-of-range fields are errors naming the field.
    pub fn read(path: &Path) -> Result<T5Config, ModelDirError> {
        let v = read_json(path)?;
        Self::from_value(path, &v)
    }

    fn from_value(path: &Path, v: &serde_json::Value) -> Result<T5Config, ModelDirError> {
        let err = |field: &str, problem| ModelDirError::Field { path: path.into(), field: field.into(), problem };
        if !v.is_object() {
            return Err(err("(top level)", FieldProblem::Type { expected: "an object" }));
        }
        let int = |field: &str, min: f64, max: f64, default: Option<u64>| -> Result<u64, ModelDirError> {
            match v.get(field) {
                None | Some(serde_json::Value::Null) => default.ok_or_else(|| err(field, FieldProblem::Missing)),
                Some(x) => {
                    let n = x.as_u64().ok_or_else(|| match x.as_f64() {
                        Some(f) => err(field, FieldProblem::Range { value: f, min, max }),
                        None => err(field, FieldProblem::Type { expected: "an integer" }),
                    })?;
                    if (n as f64) < min || (n as f64) > max {
                        return Err(err(field, FieldProblem::Range { value: n as f64, min, max }));
                    }
                    Ok(n)
                }
            }
        };
        let vocab_size = int("vocab_size", 1.0, MAX_VOCAB, None)? as u32;
        let d_model = int("d_model", 1.0, MAX_DIM, None)? as usize;
        let d_kv = int("d_kv", 1.0, MAX_DIM, None)? as usize;
        let num_heads = int("num_heads", 1.0, MAX_DIM, None)? as usize;
        let num_layers = int("num_layers", 1.0, MAX_LAYERS, None)? as usize;
        let num_decoder_layers = int("num_decoder_layers", 1.0, MAX_LAYERS, Some(num_layers as u64))? as usize;
        let max_id = f64::from(vocab_size - 1);
        let decoder_start_token_id = int("decoder_start_token_id", 0.0, max_id, None)? as u32;
        let eos_token_id = int("eos_token_id", 0.0, max_id, None)? as u32;
        let pad_token_id = int("pad_token_id", 0.0, max_id, None)? as u32;
        Ok(T5Config { vocab_size, d_model, d_kv, num_heads, num_layers, num_decoder_layers, decoder_start_token_id, eos_token_id, pad_token_id })
    }
}

impl TrellisConfig {
    /// Reads `trellis.json`: unknown fields are errors, absent ones take the defaults of
    /// `schema/model.md`.
    pub fn read(path: &Path) -> Result<TrellisConfig, ModelDirError> {
        let v = read_json(path)?;
        Self::from_value(path, v)
    }

    pub(crate) fn from_value(path: &Path, v: serde_json::Value) -> Result<TrellisConfig, ModelDirError> {
        let file: TrellisFile = serde_json::from_value(v).map_err(|source| ModelDirError::Json { path: path.into(), source })?;
        let err = |field: &str, problem| ModelDirError::Field { path: path.into(), field: field.into(), problem };
        if file.format != 1 {
            return Err(err("format", FieldProblem::Range { value: f64::from(file.format), min: 1.0, max: 1.0 }));
        }
        let generator = match file.task.as_str() {
            "retriever" => false,
            "generator" => true,
            _ => return Err(err("task", FieldProblem::Unknown { value: file.task, allowed: "\"retriever\" or \"generator\"" })),
        };
        // Each task's own section only: a section the model's task never reads is a mistake.
        if generator && file.decoding.is_some() {
            return Err(err("decoding", FieldProblem::OtherTask { task: "generator", instead: "its decoding defaults are `generation`" }));
        }
        if !generator && file.generation.is_some() {
            return Err(err("generation", FieldProblem::OtherTask { task: "retriever", instead: "its decoding defaults are `decoding`" }));
        }
        if generator && file.input.entities.is_some() {
            return Err(err("input.entities", FieldProblem::OtherTask { task: "generator", instead: "its knowledge comes with each request" }));
        }
        let linearization = match &file.linearization {
            serde_json::Value::String(name) => match name.as_str() {
                "trellis" => Linearization::trellis(),
                "dialoggsr" => Linearization::dialoggsr(),
                other => {
                    return Err(err(
                        "linearization",
                        FieldProblem::Unknown { value: other.into(), allowed: "\"trellis\", \"dialoggsr\" or a linearization object" },
                    ))
                }
            },
            obj @ serde_json::Value::Object(_) => {
                Linearization::from_json(&obj.to_string()).map_err(|e| err("linearization", FieldProblem::Linearization(Box::new(e))))?
            }
            _ => return Err(err("linearization", FieldProblem::Type { expected: "a preset name or a linearization object" })),
        };
        let section = if generator { file.generation } else { file.decoding };
        let config = TrellisConfig { format: file.format, task: file.task, linearization, input: file.input, section };
        config.check_ranges().map_err(|(field, e)| err(&field, FieldProblem::OutOfRange { range: e.range().into(), value: e.value().into() }))?;
        Ok(config)
    }

    /// The task's section, parsed and checked (`path`: the `trellis.json` errors name).
    /// Refused when the model is of another task.
    pub fn section<T: TaskSection>(&self, path: &Path) -> Result<T, ModelDirError> {
        let err = |field: String, problem| ModelDirError::Field { path: path.into(), field, problem };
        if self.task != T::TASK {
            return Err(err("task".into(), FieldProblem::Unknown { value: self.task.clone(), allowed: T::TASK }));
        }
        let section: T = match &self.section {
            None => T::default(),
            Some(v) => serde_json::from_value(v.clone()).map_err(|source| ModelDirError::Json { path: path.into(), source })?,
        };
        section.check().map_err(|(field, problem)| err(format!("{}.{field}", T::FIELD), problem))?;
        Ok(section)
    }

    /// Every numeric field against `crate::limits` (the ranges the command line and the
    /// option types refuse with): the first field out of range, by its `trellis.json` name.
    fn check_ranges(&self) -> Result<(), (String, OutOfRange)> {
        use crate::limits::*;
        fn at(section: &'static str) -> impl Fn(OutOfRange) -> (String, OutOfRange) {
            move |e| (format!("{section}.{}", e.name()), e)
        }
        let input = &self.input;
        INPUT_TURNS.check_usize(input.turns).map_err(at("input"))?;
        INPUT_MAX_TOKENS.check_usize(input.max_tokens).map_err(at("input"))?;
        if let Some(e) = &input.entities {
            ENTITY_MARKERS.check_usize(e.markers.len()).map_err(at("input.entities"))?;
            ENTITY_MAX.check_usize(e.max).map_err(at("input.entities"))?;
        }
        Ok(())
    }
}

impl ModelDir {
    /// Reads a model directory. `layout` forces one layout; `None` picks the split pair
    /// when both files exist, else the merged file.
    pub fn open(path: &Path, layout: Option<Layout>) -> Result<ModelDir, ModelDirError> {
        if !path.is_dir() {
            return Err(ModelDirError::NotADirectory { path: path.into() });
        }
        let file = |name: &str| path.join(name);
        // Each file's kind once (a directory in place of a decoder is an error, not a
        // reason to pick the other layout).
        let (first, with_past, merged) = (present(&file(DECODER_FILE))?, present(&file(DECODER_WITH_PAST_FILE))?, present(&file(MERGED_FILE))?);
        let has = |name: &str| match name {
            DECODER_FILE => first,
            DECODER_WITH_PAST_FILE => with_past,
            _ => merged,
        };
        let split_ok = has(DECODER_FILE) && has(DECODER_WITH_PAST_FILE);
        let layout = match layout {
            Some(Layout::Split) if !split_ok => {
                let missing = [DECODER_FILE, DECODER_WITH_PAST_FILE].into_iter().filter(|n| !has(n)).collect();
                return Err(ModelDirError::LayoutMissing { dir: path.into(), layout: Layout::Split, missing });
            }
            Some(Layout::Merged) if !has(MERGED_FILE) => {
                return Err(ModelDirError::LayoutMissing { dir: path.into(), layout: Layout::Merged, missing: vec![MERGED_FILE] })
            }
            Some(l) => l,
            None if split_ok => Layout::Split,
            None if has(MERGED_FILE) => Layout::Merged,
            None => return Err(ModelDirError::NoDecoder { dir: path.into() }),
        };
        let encoder = file(ENCODER_FILE);
        if !present(&encoder)? {
            return Err(ModelDirError::MissingFile { path: encoder });
        }
        let decoder = match layout {
            Layout::Split => DecoderFiles::Split { first: file(DECODER_FILE), with_past: file(DECODER_WITH_PAST_FILE) },
            Layout::Merged => DecoderFiles::Merged { merged: file(MERGED_FILE) },
        };
        Self::read_spec(path, layout, encoder, decoder)
    }

    /// Reads what a model directory says about its input and output (`config.json`,
    /// `trellis.json`, `tokenizer.json`) without the ONNX files: what `trellis targets`
    /// needs to write training data for a model that does not exist yet.
    pub fn open_spec(path: &Path) -> Result<ModelDir, ModelDirError> {
        if !path.is_dir() {
            return Err(ModelDirError::NotADirectory { path: path.into() });
        }
        let merged = path.join(MERGED_FILE);
        Self::read_spec(path, Layout::Merged, path.join(ENCODER_FILE), DecoderFiles::Merged { merged })
    }

    fn read_spec(path: &Path, layout: Layout, encoder: PathBuf, decoder: DecoderFiles) -> Result<ModelDir, ModelDirError> {
        let file = |name: &str| path.join(name);
        let config = T5Config::read(&file(CONFIG_FILE))?;
        let trellis_path = file(TRELLIS_FILE);
        let trellis_present = present(&trellis_path)?;
        let trellis = if trellis_present { TrellisConfig::read(&trellis_path)? } else { TrellisConfig::default() };
        let tok_path = file(TOKENIZER_FILE);
        if !present(&tok_path)? {
            return Err(ModelDirError::MissingFile { path: tok_path });
        }
        let names = NameTokenizer::from_file(&tok_path, trellis.linearization.clone())?;
        let mut tokenizer = names.tokenizer().clone();
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(|source| TokenizerError::Load { path: tok_path.clone(), source: crate::backend::tokenizers(source) })?;
        let tokens = tokenizer.get_vocab_size(true);
        if tokens > config.vocab_size as usize {
            // Ids past the logits' width could never be written (and would index out of them).
            return Err(ModelDirError::VocabTooSmall { path: file(CONFIG_FILE), tokens, vocab_size: config.vocab_size });
        }
        let appends_eos = tokenizer.encode("", true).map(|e| e.get_ids().last() == Some(&config.eos_token_id)).unwrap_or(false);
        if let Some(e) = &trellis.input.entities {
            for marker in &e.markers {
                let one =
                    tokenizer.encode(marker.as_str(), false).map(|enc| enc.get_ids().len() == 1 && tokenizer.token_to_id(marker).is_some()).unwrap_or(false);
                if !one {
                    return Err(ModelDirError::MarkerNotAToken { path: trellis_path.clone(), marker: marker.clone() });
                }
            }
        }
        let listed_path = file(LISTED_FILE);
        let listed = if present(&listed_path)? { Some(listed_path) } else { None };
        Ok(ModelDir { path: path.into(), layout, encoder, decoder, listed, config, trellis, trellis_present, names, tokenizer, appends_eos })
    }

    /// The task's own section of `trellis.json`, parsed and checked, with what it needs of
    /// the directory's other files ([`TaskSection`]).
    pub fn section<T: TaskSection>(&self) -> Result<T, ModelDirError> {
        let path = self.path.join(TRELLIS_FILE);
        let section: T = self.trellis.section(&path)?;
        section.check_with(self).map_err(|(field, problem)| ModelDirError::Field { path, field: format!("{}.{field}", T::FIELD), problem })?;
        Ok(section)
    }

    /// The directory's path, as given when it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The decoder layout in use.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// The encoder graph's path.
    pub fn encoder_file(&self) -> &Path {
        &self.encoder
    }
    /// The decoder graph paths of the layout in use.
    pub fn decoder_files(&self) -> &DecoderFiles {
        &self.decoder
    }
    /// The listed-logits decoder step's path, when the directory has one.
    pub fn listed_file(&self) -> Option<&Path> {
        self.listed.as_deref()
    }
    /// The checked `config.json`.
    pub fn config(&self) -> &T5Config {
        &self.config
    }
    /// The checked `trellis.json` (its defaults when the file is absent).
    pub fn trellis(&self) -> &TrellisConfig {
        &self.trellis
    }
    /// False when the directory has no `trellis.json` (the defaults are used).
    pub fn has_trellis_file(&self) -> bool {
        self.trellis_present
    }
    /// How paths and entities are written as text (`trellis.json` `linearization`).
    pub fn linearization(&self) -> &Linearization {
        &self.trellis.linearization
    }
    /// The tokenizer as the token index uses it (names in linearization context; its
    /// fingerprint is what a token index records).
    pub fn names(&self) -> &NameTokenizer {
        &self.names
    }
    /// The tokenizer used for encoder inputs (no truncation or padding of its own).
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// A text's token ids as the tokenizer writes them with its special tokens (no cut).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let enc =
            self.tokenizer.encode(text, true).map_err(|source| TokenizerError::Encode { text: text.to_owned(), source: crate::backend::tokenizers(source) })?;
        Ok(enc.get_ids().to_vec())
    }

    /// The encoder input text (schema/gsr-decoding.md §2): the last `turns` messages, oldest first, each its
    /// text or `speaker: text`, joined by `separator`; with `input.entities`, each linked
    /// entity as `" " + marker + " " + name`; then for each earlier path, `" [SEP] " + path`.
    pub fn encoder_text(&self, history: &[Message], entities: &[InputEntity], previous_paths: &[String]) -> String {
        let input = &self.trellis.input;
        let start = if input.turns == 0 { 0 } else { history.len().saturating_sub(input.turns) };
        let parts: Vec<String> =
            history[start..].iter().map(|m| if input.speaker_prefix { format!("{}: {}", m.speaker, m.text) } else { m.text.clone() }).collect();
        let mut text = parts.join(&input.separator);
        if let Some(marks) = &input.entities {
            for e in entities.iter().take(marks.max) {
                let marker = &marks.markers[(e.age as usize).min(marks.markers.len() - 1)];
                text.push(' ');
                text.push_str(marker);
                text.push(' ');
                text.push_str(&self.trellis.linearization.entity_text(&e.name));
            }
        }
        let sep = self.trellis.linearization.boundary_text(Position::Sep);
        for p in previous_paths {
            text.push(' ');
            text.push_str(&sep);
            text.push(' ');
            text.push_str(p);
        }
        text
    }

    /// The encoder input ids of a dialog (schema/gsr-decoding.md §2), cut to `max_tokens` from the left:
    /// the last `max_tokens - 1` ids before the final EOS, then the EOS.
    pub fn encode_history(&self, history: &[Message], entities: &[InputEntity], previous_paths: &[String]) -> Result<Vec<u32>, ModelDirError> {
        let text = self.encoder_text(history, entities, previous_paths);
        let enc = self
            .tokenizer
            .encode(text.as_str(), true)
            .map_err(|source| TokenizerError::Encode { text: text.clone(), source: crate::backend::tokenizers(source) })?;
        Ok(truncate_left(enc.get_ids(), self.trellis.input.max_tokens, self.appends_eos.then_some(self.config.eos_token_id)))
    }
}

/// Keeps the last `max` ids; when `eos` is given and ends the ids, it stays last.
pub(crate) fn truncate_left(ids: &[u32], max: usize, eos: Option<u32>) -> Vec<u32> {
    if ids.len() <= max {
        return ids.to_vec();
    }
    match eos {
        Some(e) if ids.last() == Some(&e) && max >= 1 => {
            let body = &ids[..ids.len() - 1];
            let mut out = body[body.len() - (max - 1)..].to_vec();
            out.push(e);
            out
        }
        _ => ids[ids.len() - max..].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t5() -> serde_json::Value {
        json!({"vocab_size": 100, "d_model": 64, "d_kv": 16, "num_heads": 4, "num_layers": 2,
               "decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0})
    }

    #[test]
    fn config_fields_are_read_and_checked_by_name() {
        let p = Path::new("m/config.json");
        let c = T5Config::from_value(p, &t5()).unwrap();
        assert_eq!(c.num_decoder_layers, 2, "defaults to num_layers");
        assert_eq!((c.vocab_size, c.d_model, c.d_kv, c.num_heads, c.eos_token_id), (100, 64, 16, 4, 1));
        let mut v = t5();
        v["num_decoder_layers"] = json!(3);
        assert_eq!(T5Config::from_value(p, &v).unwrap().num_decoder_layers, 3);
        for (field, bad, want) in [
            ("d_model", json!(null), "field `d_model`: missing"),
            ("num_heads", json!(0), "field `num_heads`: 0 is out of range (1..=1048576)"),
            ("eos_token_id", json!(100), "field `eos_token_id`: 100 is out of range (0..=99)"),
            ("d_kv", json!("16"), "field `d_kv`: not an integer"),
            ("num_layers", json!(-2), "field `num_layers`: -2 is out of range (1..=1024)"),
        ] {
            let mut v = t5();
            v[field] = bad;
            let e = T5Config::from_value(p, &v).unwrap_err();
            assert_eq!(e.to_string(), format!("m/config.json: {want}"));
            assert!(matches!(&e, ModelDirError::Field { field: f, .. } if f == field), "{e:?}");
        }
    }

    #[test]
    fn trellis_json_defaults_and_refusals() {
        let p = Path::new("m/trellis.json");
        let c = TrellisConfig::from_value(p, json!({})).unwrap();
        assert_eq!(c, TrellisConfig::default());
        assert_eq!(c.linearization, Linearization::dialoggsr());
        assert_eq!((c.input.turns, c.input.max_tokens), (3, 256));
        let c = TrellisConfig::from_value(p, json!({"linearization": "trellis", "decoding": {"beams": 8}})).unwrap();
        assert_eq!(c.linearization, Linearization::trellis());
        let full = serde_json::to_value(Linearization::trellis()).unwrap();
        assert_eq!(TrellisConfig::from_value(p, json!({ "linearization": full })).unwrap().linearization, Linearization::trellis());
        let e = TrellisConfig::from_value(p, json!({"linearization": "t5"})).unwrap_err();
        assert!(e.to_string().starts_with("m/trellis.json: field `linearization`: \"t5\" is not one of"), "{e}");
        let e = TrellisConfig::from_value(p, json!({"format": 2})).unwrap_err();
        assert!(matches!(&e, ModelDirError::Field { field, .. } if field == "format"), "{e:?}");
        let e = TrellisConfig::from_value(p, json!({"input": {"max_tokens": 1}})).unwrap_err();
        assert!(matches!(&e, ModelDirError::Field { field, .. } if field == "input.max_tokens"), "{e:?}");
        assert_eq!(c.input.entities, None, "the messages alone by default");
        let c = TrellisConfig::from_value(p, json!({"input": {"entities": {"markers": ["[E0]", "[E1]"]}}})).unwrap();
        assert_eq!(c.input.entities, Some(EntityMarkers { markers: vec!["[E0]".into(), "[E1]".into()], max: 8 }));
        let e = TrellisConfig::from_value(p, json!({"input": {"entities": {"markers": []}}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `input.entities.markers`: must be within 1..=64, not 0");
        let e = TrellisConfig::from_value(p, json!({"input": {"entities": {"markers": ["[E0]"], "max": 0}}})).unwrap_err();
        assert!(matches!(&e, ModelDirError::Field { field, .. } if field == "input.entities.max"), "{e:?}");
        let e = TrellisConfig::from_value(p, json!({"input": {"entities": {"marker": ["[E0]"]}}})).unwrap_err();
        assert!(e.to_string().contains("unknown field `marker`"), "{e}");
        let e = TrellisConfig::from_value(p, json!({"input": {"max_tokens": 100000}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `input.max_tokens`: must be within 2..=4096, not 100000");
    }

    /// Each task's section belongs to its task alone; the task's module parses it.
    #[test]
    fn sections_belong_to_their_task() {
        let p = Path::new("m/trellis.json");
        let e = TrellisConfig::from_value(p, json!({"task": "responder"})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `task`: \"responder\" is not one of \"retriever\" or \"generator\"");
        let e = TrellisConfig::from_value(p, json!({"task": "generator", "decoding": {"beams": 3}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `decoding`: a generator does not read it (its decoding defaults are `generation`)");
        let e = TrellisConfig::from_value(p, json!({"generation": {}})).unwrap_err();
        assert!(matches!(&e, ModelDirError::Field { field, problem: FieldProblem::OtherTask { .. }, .. } if field == "generation"), "{e:?}");
        let e = TrellisConfig::from_value(p, json!({"task": "generator", "input": {"entities": {"markers": ["[E0]"]}}})).unwrap_err();
        assert!(matches!(&e, ModelDirError::Field { field, .. } if field == "input.entities"), "{e:?}");
    }

    #[test]
    fn truncation_keeps_the_recent_end_and_the_eos() {
        assert_eq!(truncate_left(&[5, 6, 7, 1], 4, Some(1)), vec![5, 6, 7, 1]);
        assert_eq!(truncate_left(&[5, 6, 7, 8, 1], 3, Some(1)), vec![7, 8, 1]);
        assert_eq!(truncate_left(&[5, 6, 7, 8, 9], 3, Some(1)), vec![7, 8, 9], "no EOS at the end: the last ids");
        assert_eq!(truncate_left(&[5, 6, 7, 8, 1], 3, None), vec![7, 8, 1]);
    }

    #[test]
    fn layout_detection_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let e = ModelDir::open(&d.join("none"), None).unwrap_err();
        assert!(matches!(e, ModelDirError::NotADirectory { .. }), "{e:?}");
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(e, ModelDirError::NoDecoder { .. }), "{e:?}");
        assert!(e.to_string().contains("decoder_model_merged.onnx"), "{e}");
        std::fs::write(d.join(DECODER_FILE), b"x").unwrap();
        let e = ModelDir::open(d, Some(Layout::Split)).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: the split layout was asked for, but decoder_with_past_model.onnx is missing", d.display()));
        std::fs::write(d.join(MERGED_FILE), b"x").unwrap();
        // Merged is picked (the split pair is incomplete); the encoder is missing next.
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::MissingFile { path } if path.ends_with(ENCODER_FILE)), "{e:?}");
        std::fs::write(d.join(ENCODER_FILE), b"x").unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::MissingFile { path } if path.ends_with(CONFIG_FILE)), "{e:?}");
        std::fs::write(d.join(CONFIG_FILE), t5().to_string()).unwrap();
        std::fs::write(d.join(TRELLIS_FILE), b"{\"format\": 1,}").unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::Json { path, .. } if path.ends_with(TRELLIS_FILE)), "{e:?}");
        std::fs::remove_file(d.join(TRELLIS_FILE)).unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::MissingFile { path } if path.ends_with(TOKENIZER_FILE)), "{e:?}");
    }

    /// A directory, FIFO or device in place of a model file is named for what it is (not
    /// "missing"), found without opening it (a FIFO would block); the JSON files are read
    /// up to a limit.
    #[test]
    fn what_is_in_place_of_a_model_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join(ENCODER_FILE)).unwrap();
        std::fs::write(d.join(MERGED_FILE), b"x").unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: is a directory, not a file", d.join(ENCODER_FILE).display()));
        std::fs::remove_dir(d.join(ENCODER_FILE)).unwrap();
        std::fs::write(d.join(ENCODER_FILE), b"x").unwrap();
        // A directory in place of one decoder of the split pair: an error, not the merged layout.
        std::fs::create_dir(d.join(DECODER_FILE)).unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::File { path, problem: FileProblem::Directory } if path.ends_with(DECODER_FILE)), "{e:?}");
        std::fs::remove_dir(d.join(DECODER_FILE)).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(d.join(CONFIG_FILE)).status().unwrap().success());
        let e = ModelDir::open(d, None).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: is not a regular file (a FIFO, socket or device)", d.join(CONFIG_FILE).display()));
        std::fs::remove_file(d.join(CONFIG_FILE)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join(CONFIG_FILE)).unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::File { path, problem: FileProblem::NotRegular } if path.ends_with(CONFIG_FILE)), "{e:?}");
        std::fs::remove_file(d.join(CONFIG_FILE)).unwrap();
        std::fs::write(d.join(CONFIG_FILE), t5().to_string()).unwrap();
        // Valid JSON, padded past 1 MiB.
        let mut big = b"{\"format\": 1}".to_vec();
        big.resize((1 << 20) + 1, b' ');
        std::fs::write(d.join(TRELLIS_FILE), &big).unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: is 1048577 bytes, over the limit of 1 MiB (1048576 bytes) for this file", d.join(TRELLIS_FILE).display()));
        std::fs::remove_file(d.join(TRELLIS_FILE)).unwrap();
        std::fs::create_dir(d.join(TOKENIZER_FILE)).unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert!(matches!(&e, ModelDirError::File { path, problem: FileProblem::Directory } if path.ends_with(TOKENIZER_FILE)), "{e:?}");
        std::fs::remove_dir(d.join(TOKENIZER_FILE)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join(TOKENIZER_FILE)).unwrap();
        let e = ModelDir::open(d, None).unwrap_err();
        assert_eq!(e.to_string(), format!("{}: is not a regular file (a FIFO, socket or device)", d.join(TOKENIZER_FILE).display()));
    }
}
