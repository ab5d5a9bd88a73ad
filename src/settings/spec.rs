//! The table of settings: every name a front end may give, what it takes and what it does.
//! The command line makes its flags from it; docs/cli.md is checked against it.

use crate::generate::StrategyKind;
use crate::graph::candidates::CandidateScope;
use crate::graph::pcst::Pruning;
use crate::link::LinkConfig;
use crate::retrieve::pcst::PcstVariant;
use crate::retrieve::RetrieverKind;

/// One setting: its name (a flag is `--` and the name with `-` for `_`), what its value is,
/// its help and, where the library has one, its default.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Spec {
    /// The name (`rerank_top`).
    pub name: &'static str,
    /// What the value is, for help (`N`, `DIR`, `X`, `NAME`).
    pub value: &'static str,
    /// The names it takes, when it is a choice.
    pub choices: &'static [&'static str],
    /// Whether it takes several values (comma-separated, or the setting repeated).
    pub list: bool,
    /// Whether it is a switch: `true` or `false` (a flag without a value on the command line).
    pub switch: bool,
    /// What it does.
    pub help: &'static str,
    /// The library's default, as text (`None`: none, or the model's `trellis.json`).
    pub default: Option<fn() -> String>,
}

const fn spec(name: &'static str, value: &'static str, help: &'static str) -> Spec {
    Spec { name, value, choices: &[], list: false, switch: false, help, default: None }
}

const fn choice(name: &'static str, choices: &'static [&'static str], help: &'static str) -> Spec {
    Spec { name, value: "NAME", choices, list: false, switch: false, help, default: None }
}

const fn with_default(s: Spec, default: fn() -> String) -> Spec {
    Spec { default: Some(default), ..s }
}

const fn switch(s: Spec) -> Spec {
    Spec { switch: true, ..s }
}

const fn listed(s: Spec) -> Spec {
    Spec { list: true, ..s }
}

impl Spec {
    /// The command-line flag (`--rerank-top`), with `prefix` before the name.
    pub fn flag(&self, prefix: &str) -> String {
        format!("--{}", format!("{prefix}{}", self.name).replace('_', "-"))
    }
}

/// How a dialog is linked: every component that links (a linker, every retriever).
pub const LINK: &[Spec] = &[
    with_default(spec("window", "N", "Messages back whose mentions make a turn's entities."), || LinkConfig::default().window.to_string()),
    with_default(spec("max_ngram", "N", "Longest mention tried, in words."), || LinkConfig::default().max_ngram.to_string()),
    with_default(spec("max_entities", "N", "Entities kept per mention (ranked)."), || LinkConfig::default().max_entities_per_mention.to_string()),
    with_default(spec("min_word_chars", "N", "A one-word mention needs at least this many characters."), || {
        LinkConfig::default().min_single_word_chars.to_string()
    }),
    with_default(spec("decay", "X", "Weight of a mention one message further back."), || LinkConfig::default().decay.to_string()),
    with_default(
        switch(spec(
            "rewrite",
            "",
            "Resolve pronouns and references (he, the movie) to entities of the history, agreeing by the graph's gender and type facts.",
        )),
        || LinkConfig::default().rewrite.to_string(),
    ),
];

/// Where and how models run: every component with a model.
pub const RUNTIME: &[Spec] = &[
    with_default(spec("device", "DEVICE", "cpu, cuda or cuda:N (CUDA never falls back to the CPU silently)."), || "cpu".into()),
    with_default(spec("model_threads", "N", "Threads ONNX Runtime uses inside each model call (0: its default)."), || "0".into()),
    with_default(spec("sessions", "N", "Sessions per model: how many threads can run each model at once (0: one per core)."), || "0".into()),
];

/// The settings of the generative retriever alone (refused for the others).
pub(super) const GSR_ONLY: &[&str] =
    &["prior", "prior_norm", "alpha", "start_recency", "model_norm", "beams", "return_sequences", "length_penalty", "max_new_tokens", "steps", "batch"];

/// A retriever's settings (its kind is given apart).
pub const RETRIEVER: &[Spec] = &[
    choice(
        "pcst_variant",
        PcstVariant::NAMES,
        "pcst: whose prizes and costs (seed003: rank prizes, facts as virtual nodes; g-retriever: decayed fact prizes).",
    ),
    choice("pruning", Pruning::NAMES, "pcst: pruning after the Goemans-Williamson growth."),
    choice("pcst_scores", &["bm25", "dense"], "pcst: what ranks entities and facts for the prizes (dense: the bi-encoder of dense_model)."),
    with_default(spec("bm25_turns", "N", "bm25, pcst: relevance is the mean over the last 1..N messages."), || {
        crate::retrieve::RetrieverConfig::new(RetrieverKind::All).bm25_turns.to_string()
    }),
    with_default(spec("seed", "N", "random: the seed of the order."), || crate::retrieve::RetrieverConfig::new(RetrieverKind::All).seed.to_string()),
    choice("scope", CandidateScope::NAMES, "Candidates: the capped candidate subgraph, or the whole 1- and 2-hop neighbourhood (gsr alone)."),
    spec("model", "DIR", "gsr: the exported retriever's directory (schema/model.md)."),
    choice("prior", crate::decode::PriorMode::NAMES, "gsr: none (unconstrained), hard (constraint only), connection or katz (constraint and graph prior)."),
    choice("prior_norm", crate::decode::PriorNorm::NAMES, "gsr: proportional (the paper) or softmax (the authors' code)."),
    spec("alpha", "X", "gsr: weight of the model against the prior."),
    spec("start_recency", "X", "gsr: an entity mentioned k messages ago has its prior mass at the path's start scaled by exp(-X k)."),
    choice("model_norm", crate::decode::ModelNorm::NAMES, "gsr: the model's log-softmax over the vocabulary or over the allowed tokens."),
    spec("beams", "N", "gsr: beams per dialog."),
    spec("return_sequences", "N", "gsr: paths returned per step (at most beams)."),
    spec("length_penalty", "X", "gsr: the beam score is the sum of log-probabilities / length^X."),
    spec("max_new_tokens", "N", "gsr: tokens a path may take."),
    with_default(spec("steps", "N", "gsr: retrieval steps; step k > 0 re-encodes the dialog with the paths found so far."), || "1".into()),
    with_default(spec("batch", "N", "gsr: dialogs decoded together; a pipeline: requests retrieved and generated together."), || {
        super::PIPELINE_BATCH.to_string()
    }),
    spec("dense_model", "DIR", "dense, pcst_scores dense: the bi-encoder's directory (schema/model.md)."),
    choice(
        "dense_paths",
        crate::retrieve::dense::DensePaths::NAMES,
        "dense: a path's score is the query's inner product with its whole text's vector, or the mean over its facts' vectors (facts: read from `trellis index-vectors` when built; default text).",
    ),
    spec("surge_model", "DIR", "surge: the subgraph model's directory (schema/model.md)."),
    spec(
        "search_producer",
        "tfidf|random|DIR",
        "search: how the query candidates are ranked: tfidf, random, or a learned scorer's directory (models/query-producer-opendialkg).",
    ),
    with_default(spec("search_queries", "N", "search: the top queries searched per turn (5 entity documents each)."), || "3".into()),
    choice(
        "search_paths",
        crate::retrieve::search::SearchPaths::NAMES,
        "search: the found entities' facts as one-hop paths, or the candidate paths that reach them (default facts).",
    ),
    spec("rerank", "DIR", "Rerank with this cross-encoder: the union of the pooled retrievers' top rerank_top paths, in its order."),
    with_default(spec("rerank_top", "N", "rerank: paths taken from each pooled retriever."), || crate::retrieve::rerank::DEFAULT_TOP.to_string()),
    listed(spec("rerank_pool", "NAMES", "rerank: retrievers whose top paths join the retriever's (comma-separated: gsr,pcst).")),
    with_default(
        spec(
            "rerank_fusion",
            "X",
            "rerank: a path's score is the cross-encoder's plus X times the sum of 1/rank over the pooled retrievers (0: the cross-encoder alone).",
        ),
        || crate::retrieve::rerank::DEFAULT_FUSION.to_string(),
    ),
    with_default(spec("encoder_batch", "N", "dense, rerank: texts embedded or pairs scored together."), || crate::model::encoder::DEFAULT_BATCH.to_string()),
    listed(spec(
        "rewrite_input",
        "PARTS",
        "Parts that rank with the dialog as the rewrite resolved it, he -> Lev Grossman (needs rewrite; comma-separated: the retriever's and its pool's names among bm25, pcst, gsr, dense, surge, and rerank for the cross-encoder).",
    )),
];

/// The settings of a store's vector index (`trellis index-vectors`): the bi-encoder whose
/// vectors are written, with [`RUNTIME`].
pub const VECTORS: &[Spec] = &[
    spec("dense_model", "DIR", "The bi-encoder whose vectors of every fact and entity name are written (the dense retriever's or pcst's dense_model)."),
    with_default(spec("encoder_batch", "N", "Texts embedded together."), || crate::model::encoder::DEFAULT_BATCH.to_string()),
];

/// A pipeline's own settings: the fact check of its replies (`crate::check`) and the
/// generator's reading of the rewritten dialog.
pub const PIPELINE: &[Spec] = &[
    spec(
        "checker",
        "DIR",
        "Check replies against the store with this fact checker (models/check-opendialkg): each reply's claims supported, refuted or not enough information.",
    ),
    with_default(
        spec(
            "gen_check",
            "N",
            "Check the generator's N best sequences and reply with the best supported (fact score first, then the model's score; needs checker and beam search; 0: off).",
        ),
        || "0".into(),
    ),
    with_default(
        switch(spec(
            "gen_rewrite",
            "",
            "The generator reads the dialog as the rewrite resolved it (he -> Lev Grossman; needs rewrite).",
        )),
        || "false".into(),
    ),
];

/// A generator's settings (in a pipeline, each prefixed `gen_`); the model's `trellis.json`
/// `generation` gives their defaults.
pub const GENERATOR: &[Spec] = &[
    spec("encoding", "NAME", "The input encoding: dialoggsr, surge, invariant, efficient or template:TEXT."),
    choice("strategy", StrategyKind::NAMES, "How replies are decoded."),
    spec("beams", "N", "Beam search: beams."),
    spec("return_sequences", "N", "Beam search: sequences returned (at most beams)."),
    spec("length_penalty", "X", "Beam search: the score is the sum of log-probabilities / length^X."),
    spec("max_new_tokens", "N", "Tokens a reply may take."),
    spec("temperature", "X", "Sampling: the temperature."),
    spec("top_k", "N", "Sampling: keep the k most likely tokens (0: off)."),
    spec("top_p", "X", "Sampling: keep the most likely tokens up to this mass (1: off)."),
    spec("seed", "N", "Sampling: the seed of requests that bring none."),
    listed(spec("stop", "TEXT", "A text that ends a reply (repeatable).")),
    spec("no_repeat_ngram_size", "N", "No n-gram of this size twice (0: off)."),
    spec("min_new_tokens", "N", "At least this many tokens before the end (0: off)."),
    spec("repetition_penalty", "X", "The penalty of tokens already written (1: off)."),
];
