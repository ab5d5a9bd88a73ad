//! An encoder model directory (`schema/model.md`, "Encoder models"): the optimum export of a
//! BERT-style or T5 encoder (`model.onnx`, `config.json`, `tokenizer.json`), Trellis's
//! `trellis.json` naming the task (`dense`, `rerank` or `subgraph`), and, for a sentence-transformers
//! export, that library's own files, which say the pooling, the normalization and the
//! input length when `trellis.json` leaves them out: a user's export runs unmodified.

use crate::files::{self, FileProblem};
use crate::model::dir::{present, read_json, FieldProblem, ModelDirError, CONFIG_FILE, TOKENIZER_FILE, TRELLIS_FILE};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// The encoder graph's file name (optimum's for an encoder-only export).
pub const MODEL_FILE: &str = "model.onnx";

/// What an encoder model is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EncoderTask {
    /// A bi-encoder: a text in, one vector out (queries and paths embedded apart).
    Dense,
    /// A cross-encoder: a (query, passage) pair in, one relevance logit out.
    Rerank,
    /// SURGE's subgraph retriever: the dialog and a candidate subgraph (names, structure)
    /// in, one relevance score per fact out (`model::encoder::subgraph`).
    Subgraph,
}

crate::limits::named_choices!(EncoderTask, "encoder task", { Dense => "dense", Rerank => "rerank", Subgraph => "subgraph" });

/// How a bi-encoder's token vectors become one vector (sentence-transformers' modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Pooling {
    /// The mean of the unmasked tokens' vectors.
    Mean,
    /// The first token's vector (`[CLS]`).
    Cls,
    /// The elementwise maximum over the unmasked tokens.
    Max,
}

crate::limits::named_choices!(Pooling, "pooling", { Mean => "mean", Cls => "cls", Max => "max" });

/// `trellis.json` of an encoder. Unknown fields are errors.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EncoderFile {
    format: u32,
    task: String,
    #[serde(default)]
    dense: Option<DenseSection>,
    #[serde(default)]
    rerank: Option<RerankSection>,
    #[serde(default)]
    subgraph: Option<SubgraphSection>,
}

/// The `dense` section: every field optional (sentence-transformers' files, then defaults).
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DenseSection {
    pooling: Option<Pooling>,
    normalize: Option<bool>,
    max_length: Option<u64>,
    #[serde(default)]
    query_prefix: String,
    #[serde(default)]
    document_prefix: String,
    turns: Option<u64>,
}

/// The `rerank` section.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RerankSection {
    max_length: Option<u64>,
    turns: Option<u64>,
}

/// The `subgraph` section.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SubgraphSection {
    max_length: Option<u64>,
    turns: Option<u64>,
    name_length: Option<u64>,
}

/// Tokens of an entity or relation name a subgraph model reads, when `trellis.json` does
/// not say.
pub const DEFAULT_NAME_LENGTH: usize = 16;

/// The dialog messages a query is made of, when `trellis.json` does not say.
pub const DEFAULT_TURNS: usize = 3;

/// An encoder model directory, read and checked; what a session needs to run it.
pub struct EncoderDir {
    pub(crate) path: PathBuf,
    pub(crate) task: EncoderTask,
    pub(crate) model_file: PathBuf,
    /// Truncating to `max_length` (longest first for pairs, from the right, as
    /// sentence-transformers does), never padding: batches are padded here.
    pub(crate) tokenizer: Tokenizer,
    pub(crate) max_length: usize,
    pub(crate) pooling: Pooling,
    pub(crate) normalize: bool,
    pub(crate) query_prefix: String,
    pub(crate) document_prefix: String,
    pub(crate) turns: usize,
    pub(crate) pad_id: u32,
    /// The vector width `config.json` states (`hidden_size` or `d_model`), when it does.
    pub(crate) hidden: Option<usize>,
    pub(crate) vocab: Option<u32>,
    /// A subgraph model's tokens per name.
    pub(crate) name_length: usize,
}

impl std::fmt::Debug for EncoderDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncoderDir").field("path", &self.path).field("task", &self.task).field("max_length", &self.max_length).finish()
    }
}

/// The tasks an encoder's `trellis.json` may name.
pub const TASKS: &str = "\"dense\", \"rerank\" or \"subgraph\"";

/// The `task` of a model directory's `trellis.json`, without checking the rest: which kind
/// of model it is (absent file or field: a T5 model's defaults, `None`).
pub fn task_of(dir: &Path) -> Result<Option<String>, ModelDirError> {
    let path = dir.join(TRELLIS_FILE);
    if !present(&path)? {
        return Ok(None);
    }
    Ok(read_json(&path)?.get("task").and_then(|t| t.as_str()).map(str::to_owned))
}

/// Whether `task` is an encoder's (`dense`, `rerank`, `subgraph`).
pub fn is_encoder_task(task: &str) -> bool {
    EncoderTask::NAMES.contains(&task)
}

fn field(path: &Path, name: &str, problem: FieldProblem) -> ModelDirError {
    ModelDirError::Field { path: path.into(), field: name.into(), problem }
}

/// A whole number of a sentence-transformers or Hugging Face JSON file.
fn json_uint(path: &Path, v: &serde_json::Value, name: &str) -> Result<Option<u64>, ModelDirError> {
    match v.get(name) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(x) => x.as_u64().map(Some).ok_or_else(|| field(path, name, FieldProblem::Type { expected: "a whole number" })),
    }
}

/// What a sentence-transformers export says: pooling (`1_Pooling/config.json`, or the
/// folder `modules.json` names), normalization (a `Normalize` module) and the input length
/// ([`finish`]). All absent for a plain transformers export.
#[derive(Default)]
struct SentenceTransformers {
    pooling: Option<Pooling>,
    normalize: Option<bool>,
    max_length: Option<u64>,
}

fn sentence_transformers(dir: &Path) -> Result<SentenceTransformers, ModelDirError> {
    let mut st = SentenceTransformers::default();
    let modules_path = dir.join("modules.json");
    let mut pooling_dir = dir.join("1_Pooling");
    if present(&modules_path)? {
        let modules = read_json(&modules_path)?;
        let list = modules.as_array().ok_or_else(|| field(&modules_path, "(top level)", FieldProblem::Type { expected: "a list of modules" }))?;
        let kind = |m: &serde_json::Value| m.get("type").and_then(|t| t.as_str()).unwrap_or("").to_owned();
        st.normalize = Some(list.iter().any(|m| kind(m).ends_with(".Normalize")));
        if let Some(p) = list.iter().find(|m| kind(m).ends_with(".Pooling")) {
            if let Some(sub) = p.get("path").and_then(|x| x.as_str()) {
                // A module folder inside the model directory only.
                if sub.is_empty() || sub.contains("..") || Path::new(sub).is_absolute() {
                    return Err(field(&modules_path, "path", FieldProblem::Unknown { value: sub.into(), allowed: "a folder inside the model directory" }));
                }
                pooling_dir = dir.join(sub);
            }
        }
    }
    let pooling_path = pooling_dir.join(CONFIG_FILE);
    if present(&pooling_path)? {
        let v = read_json(&pooling_path)?;
        // sentence-transformers 5 writes one `pooling_mode` name; earlier versions one
        // boolean `pooling_mode_*` per mode.
        if let Some(mode) = v.get("pooling_mode") {
            let name = mode.as_str().ok_or_else(|| field(&pooling_path, "pooling_mode", FieldProblem::Type { expected: "a string" }))?;
            st.pooling =
                Some(name.parse::<Pooling>().map_err(|_| {
                    field(&pooling_path, "pooling_mode", FieldProblem::Unknown { value: name.into(), allowed: "\"mean\", \"cls\" or \"max\"" })
                })?);
            return finish(dir, st);
        }
        let on = |name: &str| v.get(name).and_then(|x| x.as_bool()).unwrap_or(false);
        let modes = [("pooling_mode_mean_tokens", Pooling::Mean), ("pooling_mode_cls_token", Pooling::Cls), ("pooling_mode_max_tokens", Pooling::Max)];
        let chosen: Vec<Pooling> = modes.iter().filter(|(n, _)| on(n)).map(|&(_, p)| p).collect();
        let other = ["pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"].into_iter().find(|n| on(n));
        match (chosen.as_slice(), other) {
            ([one], None) => st.pooling = Some(*one),
            _ => {
                let found = modes.iter().map(|(n, _)| *n).chain(other).filter(|n| on(n)).collect::<Vec<_>>().join(" + ");
                return Err(field(
                    &pooling_path,
                    "pooling_mode_*",
                    FieldProblem::Unknown { value: if found.is_empty() { "none".into() } else { found }, allowed: "exactly one of mean, cls, max" },
                ));
            }
        }
    }
    finish(dir, st)
}

/// The input length sentence-transformers uses: `max_seq_length` of
/// `sentence_bert_config.json` (up to version 4), else the tokenizer's `model_max_length`
/// (`tokenizer_config.json`, where version 5 keeps it; transformers' "no limit", 1e30, is
/// no length).
fn finish(dir: &Path, mut st: SentenceTransformers) -> Result<SentenceTransformers, ModelDirError> {
    let sbert = dir.join("sentence_bert_config.json");
    if present(&sbert)? {
        st.max_length = json_uint(&sbert, &read_json(&sbert)?, "max_seq_length")?;
    }
    let tok_config = dir.join("tokenizer_config.json");
    if st.max_length.is_none() && present(&tok_config)? {
        let v = read_json(&tok_config)?;
        st.max_length = v.get("model_max_length").and_then(|x| x.as_u64()).filter(|&n| n <= crate::limits::ENCODER_MAX_LENGTH.max);
    }
    Ok(st)
}

impl EncoderDir {
    /// Reads and checks an encoder model directory. Refused: another task than the ones in
    /// `expected`, a missing `model.onnx`, `tokenizer.json` or `config.json`, a field out of
    /// range, a pooling that neither `trellis.json` nor the sentence-transformers files give
    /// for a bi-encoder.
    pub fn open(dir: &Path, expected: Option<EncoderTask>) -> Result<EncoderDir, ModelDirError> {
        Self::read(dir, expected, true)
    }

    /// Like [`open`](Self::open) without `model.onnx`: the files that say how inputs are
    /// made (`tokenizer.json`, `config.json`, `trellis.json`), for writing the training
    /// targets of a model not trained yet.
    pub fn open_spec(dir: &Path, expected: Option<EncoderTask>) -> Result<EncoderDir, ModelDirError> {
        Self::read(dir, expected, false)
    }

    fn read(dir: &Path, expected: Option<EncoderTask>, with_graph: bool) -> Result<EncoderDir, ModelDirError> {
        if !dir.is_dir() {
            return Err(ModelDirError::NotADirectory { path: dir.into() });
        }
        let trellis_path = dir.join(TRELLIS_FILE);
        if !present(&trellis_path)? {
            return Err(ModelDirError::MissingFile { path: trellis_path });
        }
        let file: EncoderFile =
            serde_json::from_value(read_json(&trellis_path)?).map_err(|source| ModelDirError::Json { path: trellis_path.clone(), source })?;
        if file.format != 1 {
            return Err(field(&trellis_path, "format", FieldProblem::Range { value: f64::from(file.format), min: 1.0, max: 1.0 }));
        }
        let task: EncoderTask =
            file.task.parse().map_err(|_| field(&trellis_path, "task", FieldProblem::Unknown { value: file.task.clone(), allowed: TASKS }))?;
        if let Some(want) = expected {
            if want != task {
                let allowed = match want {
                    EncoderTask::Dense => "\"dense\" (a bi-encoder is needed here)",
                    EncoderTask::Rerank => "\"rerank\" (a cross-encoder is needed here)",
                    EncoderTask::Subgraph => "\"subgraph\" (a subgraph retriever is needed here)",
                };
                return Err(field(&trellis_path, "task", FieldProblem::Unknown { value: file.task, allowed }));
            }
        }
        let sections = [
            ("dense", file.dense.is_some(), EncoderTask::Dense),
            ("rerank", file.rerank.is_some(), EncoderTask::Rerank),
            ("subgraph", file.subgraph.is_some(), EncoderTask::Subgraph),
        ];
        if let Some((name, ..)) = sections.iter().find(|(_, given, t)| *given && *t != task) {
            let (what, instead) = match task {
                EncoderTask::Dense => ("dense encoder", "its settings are `dense`"),
                EncoderTask::Rerank => ("reranker", "its settings are `rerank`"),
                EncoderTask::Subgraph => ("subgraph retriever", "its settings are `subgraph`"),
            };
            return Err(field(&trellis_path, name, FieldProblem::OtherTask { task: what, instead }));
        }
        let model_file = dir.join(MODEL_FILE);
        if with_graph && !present(&model_file)? {
            return Err(ModelDirError::MissingFile { path: model_file });
        }
        let config_path = dir.join(CONFIG_FILE);
        if !present(&config_path)? {
            return Err(ModelDirError::MissingFile { path: config_path });
        }
        let config = read_json(&config_path)?;
        if !config.is_object() {
            return Err(field(&config_path, "(top level)", FieldProblem::Type { expected: "an object" }));
        }
        let hidden = match json_uint(&config_path, &config, "hidden_size")? {
            Some(h) => Some(h),
            None => json_uint(&config_path, &config, "d_model")?,
        };
        let positions = json_uint(&config_path, &config, "max_position_embeddings")?;
        let pad_id = json_uint(&config_path, &config, "pad_token_id")?.unwrap_or(0);
        let vocab = json_uint(&config_path, &config, "vocab_size")?;
        let st = sentence_transformers(dir)?;

        let (dense, rerank, subgraph) = (file.dense.unwrap_or_default(), file.rerank.unwrap_or_default(), file.subgraph.unwrap_or_default());
        let section = match task {
            EncoderTask::Dense => "dense",
            EncoderTask::Rerank => "rerank",
            EncoderTask::Subgraph => "subgraph",
        };
        let tok_path = dir.join(TOKENIZER_FILE);
        if !present(&tok_path)? {
            return Err(ModelDirError::MissingFile { path: tok_path });
        }
        let bytes = files::read_limited(&tok_path, files::TOKENIZER_LIMIT).map_err(|p: FileProblem| ModelDirError::of_file(&tok_path, p))?;
        let load_err = |source| crate::ingest::tokenizer::TokenizerError::Load { path: tok_path.clone(), source: crate::backend::tokenizers(source) };
        let mut tokenizer = Tokenizer::from_bytes(&bytes).map_err(load_err)?;
        let own_truncation = tokenizer.get_truncation().map(|t| t.max_length as u64);

        // The input length: trellis.json, sentence-transformers, the tokenizer's own, the
        // model's positions; never past the positions (the graph would index outside them).
        let given = match task {
            EncoderTask::Dense => dense.max_length.or(st.max_length),
            EncoderTask::Rerank => rerank.max_length.or(st.max_length),
            EncoderTask::Subgraph => subgraph.max_length,
        };
        let max_length = given.or(own_truncation).or(positions).unwrap_or(512);
        let at = format!("{section}.max_length");
        crate::limits::ENCODER_MAX_LENGTH
            .check(max_length)
            .map_err(|e| field(&trellis_path, &at, FieldProblem::OutOfRange { range: e.range().into(), value: e.value().into() }))?;
        if let Some(p) = positions {
            if max_length > p {
                return Err(field(&trellis_path, &at, FieldProblem::Range { value: max_length as f64, min: 1.0, max: p as f64 }));
            }
        }
        let turns = match task {
            EncoderTask::Dense => dense.turns,
            EncoderTask::Rerank => rerank.turns,
            EncoderTask::Subgraph => subgraph.turns,
        }
        .unwrap_or(DEFAULT_TURNS as u64);
        let at = format!("{section}.turns");
        crate::limits::ENCODER_TURNS
            .check(turns)
            .map_err(|e| field(&trellis_path, &at, FieldProblem::OutOfRange { range: e.range().into(), value: e.value().into() }))?;
        let pooling = match task {
            EncoderTask::Dense => dense.pooling.or(st.pooling).ok_or_else(|| field(&trellis_path, "dense.pooling", FieldProblem::Missing))?,
            EncoderTask::Rerank => Pooling::Cls,
            // Its own attention pooling, inside the graph.
            EncoderTask::Subgraph => Pooling::Mean,
        };
        let normalize = match task {
            EncoderTask::Dense => dense.normalize.or(st.normalize).unwrap_or(false),
            EncoderTask::Rerank | EncoderTask::Subgraph => false,
        };
        let name_length = subgraph.name_length.unwrap_or(DEFAULT_NAME_LENGTH as u64);
        crate::limits::NAME_LENGTH
            .check(name_length)
            .map_err(|e| field(&trellis_path, "subgraph.name_length", FieldProblem::OutOfRange { range: e.range().into(), value: e.value().into() }))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_length as usize,
                strategy: tokenizers::TruncationStrategy::LongestFirst,
                stride: 0,
                direction: tokenizers::TruncationDirection::Right,
            }))
            .map_err(load_err)?;
        if let Some(v) = vocab {
            let tokens = tokenizer.get_vocab_size(true) as u64;
            if tokens > v {
                return Err(ModelDirError::VocabTooSmall { path: config_path, tokens: tokens as usize, vocab_size: v as u32 });
            }
        }
        Ok(EncoderDir {
            path: dir.into(),
            task,
            model_file,
            tokenizer,
            max_length: max_length as usize,
            pooling,
            normalize,
            query_prefix: dense.query_prefix,
            document_prefix: dense.document_prefix,
            turns: turns as usize,
            pad_id: pad_id.min(u64::from(u32::MAX)) as u32,
            hidden: hidden.map(|h| h as usize),
            vocab: vocab.map(|v| v.min(u64::from(u32::MAX)) as u32),
            name_length: name_length as usize,
        })
    }

    /// The directory's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The model's task.
    pub fn task(&self) -> EncoderTask {
        self.task
    }
    /// The graph file (`model.onnx`).
    pub fn model_file(&self) -> &Path {
        &self.model_file
    }
    /// Tokens per input (a pair's two texts together), longer ones cut.
    pub fn max_length(&self) -> usize {
        self.max_length
    }
    /// A bi-encoder's pooling (a cross-encoder's logit is its own).
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }
    /// Whether a bi-encoder's vectors are scaled to unit length.
    pub fn normalize(&self) -> bool {
        self.normalize
    }
    /// The dialog messages a query is made of (the last ones).
    pub fn turns(&self) -> usize {
        self.turns
    }
    /// The text put before a query (`dense.query_prefix`, e.g. `"query: "`).
    pub fn query_prefix(&self) -> &str {
        &self.query_prefix
    }
    /// The text put before a document (`dense.document_prefix`).
    pub fn document_prefix(&self) -> &str {
        &self.document_prefix
    }
    /// A subgraph model's tokens per entity or relation name (longer names cut).
    pub fn name_length(&self) -> usize {
        self.name_length
    }
    /// The tokenizer, truncating to [`max_length`](Self::max_length).
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// A text's token ids as the model reads it (special tokens added, cut to
    /// [`max_length`](Self::max_length)).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, super::EncoderError> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|source| super::EncoderError::Tokenize { text: text.to_owned(), source: crate::backend::tokenizers(source) })?;
        Ok(enc.get_ids().to_vec())
    }

    /// A pair's token ids and token type ids as a cross-encoder reads it.
    pub fn pair_ids(&self, first: &str, second: &str) -> Result<(Vec<u32>, Vec<u32>), super::EncoderError> {
        let enc = self
            .tokenizer
            .encode((first, second), true)
            .map_err(|source| super::EncoderError::Tokenize { text: format!("{first} / {second}"), source: crate::backend::tokenizers(source) })?;
        Ok((enc.get_ids().to_vec(), enc.get_type_ids().to_vec()))
    }
}
