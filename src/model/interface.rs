//! What the decoder needs of a model's graphs, checked once when they load: every
//! input filled, every output it reads present, types, ranks and the dimensions
//! `config.json` fixes. Each problem is one sentence naming the file (`trellis doctor`
//! prints them); a model that fails here is refused before any step runs.

use crate::model::dir::T5Config;
use ort::session::Session;
use ort::value::{Outlet, TensorElementType, ValueType};
use std::path::{Path, PathBuf};

/// A model input or output that is not what the decoder needs. `name` and `found` are
/// the model's (data).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InterfaceIssue {
    /// A graph lacks an input the decoder fills.
    #[error("has no input {name:?}, which the decoder needs")]
    MissingInput {
        /// The input's name.
        name: String,
    },
    /// A graph has an input the decoder cannot fill.
    #[error("has an input {name:?} the decoder does not know how to fill")]
    UnknownInput {
        /// The input's name.
        name: String,
    },
    /// A graph lacks an output the decoder reads.
    #[error("has no output {name:?}, which the decoder needs")]
    MissingOutput {
        /// The output's name.
        name: String,
    },
    /// A graph has cache inputs or outputs for more layers than config.json says.
    #[error("has {name:?}, a layer beyond config.json's {layers} decoder layers")]
    ExtraLayer {
        /// The input's or output's name.
        name: String,
        /// config.json's decoder layers.
        layers: usize,
    },
    /// An input or output of the wrong element type.
    #[error("{name:?} is {found}, not {expected}")]
    WrongType {
        /// Its name.
        name: String,
        /// The type the decoder needs, e.g. "an int64 tensor".
        expected: &'static str,
        /// The graph's type.
        found: String,
    },
    /// An input or output with the wrong number of dimensions.
    #[error("{name:?} has {found} dimensions, not {expected}")]
    WrongRank {
        /// Its name.
        name: String,
        /// The dimensions the decoder needs.
        expected: usize,
        /// The graph's.
        found: usize,
    },
    /// A fixed dimension that differs from config.json's.
    #[error("{name:?} has {found} at axis {axis}, but config.json says {expected}")]
    WrongDim {
        /// The input's or output's name.
        name: String,
        /// The axis, 0-based.
        axis: usize,
        /// config.json's size.
        expected: i64,
        /// The graph's size.
        found: i64,
    },
}

/// One problem of one model file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {issue}", file.display())]
#[non_exhaustive]
pub struct InterfaceProblem {
    /// The graph file.
    pub file: PathBuf,
    /// What is wrong.
    pub issue: InterfaceIssue,
}

/// The I/O names of every layer, made once.
pub(crate) struct Names {
    pub(crate) layers: usize,
    /// `past_key_values.{i}.decoder.{key,value}`, key then value per layer.
    pub(crate) past_self: Vec<String>,
    pub(crate) past_cross: Vec<String>,
    pub(crate) present_self: Vec<String>,
    pub(crate) present_cross: Vec<String>,
}

impl Names {
    pub(crate) fn new(layers: usize) -> Names {
        let make = |prefix: &str, kind: &str| (0..layers).flat_map(|i| ["key", "value"].map(|kv| format!("{prefix}.{i}.{kind}.{kv}"))).collect();
        Names {
            layers,
            past_self: make("past_key_values", "decoder"),
            past_cross: make("past_key_values", "encoder"),
            present_self: make("present", "decoder"),
            present_cross: make("present", "encoder"),
        }
    }
}

/// Which decoder graph a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    First,
    WithPast,
    /// A cached step whose logits are those of listed tokens (`decoder_listed_model.onnx`:
    /// input `allowed_ids` [rows, K], logits [rows, 1, K]).
    Listed,
}

/// What a decoder graph takes, found at open.
#[derive(Clone, Debug)]
pub(crate) struct DecoderIo {
    pub(crate) path: PathBuf,
    pub(crate) takes_mask: bool,
    pub(crate) takes_hidden: bool,
    pub(crate) merged: bool,
}

fn tensor_type(t: &ValueType) -> Option<(TensorElementType, usize, Vec<i64>)> {
    match t {
        ValueType::Tensor { ty, shape, .. } => Some((*ty, shape.len(), shape.to_vec())),
        _ => None,
    }
}

pub(crate) fn type_name(t: &ValueType) -> String {
    match t {
        ValueType::Tensor { ty, .. } => format!("a {ty} tensor"),
        other => format!("{other}"),
    }
}

/// Checks one outlet: element type, rank, and every static dimension against `dims`
/// (`None`: any). Problems are pushed.
fn check_outlet(file: &Path, o: &Outlet, ty: TensorElementType, expected: &'static str, dims: &[Option<i64>], out: &mut Vec<InterfaceProblem>) {
    let push = |out: &mut Vec<InterfaceProblem>, issue| out.push(InterfaceProblem { file: file.into(), issue });
    let Some((found_ty, rank, shape)) = tensor_type(o.dtype()) else {
        return push(out, InterfaceIssue::WrongType { name: o.name().into(), expected, found: type_name(o.dtype()) });
    };
    if found_ty != ty {
        return push(out, InterfaceIssue::WrongType { name: o.name().into(), expected, found: type_name(o.dtype()) });
    }
    if rank != dims.len() {
        return push(out, InterfaceIssue::WrongRank { name: o.name().into(), expected: dims.len(), found: rank });
    }
    for (axis, (want, got)) in dims.iter().zip(&shape).enumerate() {
        if let Some(w) = want {
            if *got >= 0 && got != w {
                push(out, InterfaceIssue::WrongDim { name: o.name().into(), axis, expected: *w, found: *got });
            }
        }
    }
}

/// An encoder graph's inputs: `input_ids` and `attention_mask` (int64 `[batch, seq]`),
/// each of `optional` (int64 `[batch, seq]` too) where present, nothing else. Returns the
/// optional ones the graph has.
fn check_id_inputs(file: &Path, session: &Session, optional: &[&'static str], out: &mut Vec<InterfaceProblem>) -> Vec<&'static str> {
    let ins = session.inputs();
    let mut present = Vec::new();
    for name in ["input_ids", "attention_mask"].into_iter().chain(optional.iter().copied()) {
        match ins.iter().find(|o| o.name() == name) {
            Some(o) => {
                check_outlet(file, o, TensorElementType::Int64, "an int64 tensor", &[None, None], out);
                present.push(name);
            }
            None if optional.contains(&name) => {}
            None => out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::MissingInput { name: name.into() } }),
        }
    }
    for o in ins.iter().filter(|o| !["input_ids", "attention_mask"].contains(&o.name()) && !optional.contains(&o.name())) {
        out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::UnknownInput { name: o.name().into() } });
    }
    present
}

/// Checks the encoder's interface.
pub(crate) fn check_encoder(file: &Path, session: &Session, cfg: &T5Config) -> Vec<InterfaceProblem> {
    let mut out = Vec::new();
    check_id_inputs(file, session, &[], &mut out);
    match session.outputs().iter().find(|o| o.name() == "last_hidden_state") {
        Some(o) => check_outlet(file, o, TensorElementType::Float32, "a float32 tensor", &[None, None, Some(cfg.d_model as i64)], &mut out),
        None => out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::MissingOutput { name: "last_hidden_state".into() } }),
    }
    out
}

/// What an encoder-only graph (`model.onnx` of a bi-encoder or cross-encoder) takes and
/// gives, found when it loads.
#[derive(Clone, Debug)]
pub(crate) struct EncoderIo {
    /// Whether it takes `token_type_ids` (BERT-style graphs do, T5 encoders do not).
    pub(crate) token_type_ids: bool,
    /// The output read: `last_hidden_state` (optimum) or `token_embeddings`
    /// (sentence-transformers' own export) for a bi-encoder, `logits` for a cross-encoder.
    pub(crate) output: &'static str,
}

/// Checks an encoder-only graph: `input_ids` and `attention_mask` (int64), optionally
/// `token_type_ids`, nothing else; for a bi-encoder (`pooled`) a float32 `[batch, seq,
/// hidden]` output, for a cross-encoder float32 `logits` of one label.
pub(crate) fn check_encoder_model(file: &Path, session: &Session, pooled: bool, hidden: Option<usize>) -> (EncoderIo, Vec<InterfaceProblem>) {
    let mut out = Vec::new();
    let token_type_ids = check_id_inputs(file, session, &["token_type_ids"], &mut out).contains(&"token_type_ids");
    let outs = session.outputs();
    let wanted: &[&'static str] = if pooled { &["last_hidden_state", "token_embeddings"] } else { &["logits"] };
    let output = match wanted.iter().find_map(|w| outs.iter().find(|o| o.name() == *w).map(|o| (*w, o))) {
        Some((name, o)) => {
            let dims: Vec<Option<i64>> = if pooled { vec![None, None, hidden.map(|h| h as i64)] } else { vec![None, Some(1)] };
            check_outlet(file, o, TensorElementType::Float32, "a float32 tensor", &dims, &mut out);
            name
        }
        None => {
            out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::MissingOutput { name: wanted.join(" or ") } });
            wanted[0]
        }
    };
    (EncoderIo { token_type_ids, output }, out)
}

/// The inputs of a subgraph model's graph (`model::encoder::subgraph`), with their element
/// type and rank: the dialog's ids, each entity's and relation's name ids, which entities
/// the dialog mentions, and each fact as indices into the entities and relations.
pub(crate) const SUBGRAPH_INPUTS: [(&str, TensorElementType, usize); 10] = [
    ("input_ids", TensorElementType::Int64, 2),
    ("attention_mask", TensorElementType::Int64, 2),
    ("entity_ids", TensorElementType::Int64, 2),
    ("entity_mask", TensorElementType::Int64, 2),
    ("entity_mentioned", TensorElementType::Float32, 1),
    ("relation_ids", TensorElementType::Int64, 2),
    ("relation_mask", TensorElementType::Int64, 2),
    ("fact_head", TensorElementType::Int64, 1),
    ("fact_relation", TensorElementType::Int64, 1),
    ("fact_tail", TensorElementType::Int64, 1),
];

/// Checks a subgraph model's graph: exactly [`SUBGRAPH_INPUTS`], and a float32
/// `fact_scores` of one dimension.
pub(crate) fn check_subgraph_model(file: &Path, session: &Session) -> Vec<InterfaceProblem> {
    let mut out = Vec::new();
    let ins = session.inputs();
    for (name, ty, rank) in SUBGRAPH_INPUTS {
        let expected = if ty == TensorElementType::Int64 { "an int64 tensor" } else { "a float32 tensor" };
        match ins.iter().find(|o| o.name() == name) {
            Some(o) => check_outlet(file, o, ty, expected, &vec![None; rank], &mut out),
            None => out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::MissingInput { name: name.into() } }),
        }
    }
    for o in ins.iter().filter(|o| !SUBGRAPH_INPUTS.iter().any(|(n, ..)| *n == o.name())) {
        out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::UnknownInput { name: o.name().into() } });
    }
    match session.outputs().iter().find(|o| o.name() == "fact_scores") {
        Some(o) => check_outlet(file, o, TensorElementType::Float32, "a float32 tensor", &[None], &mut out),
        None => out.push(InterfaceProblem { file: file.into(), issue: InterfaceIssue::MissingOutput { name: "fact_scores".into() } }),
    }
    out
}

/// Checks a decoder graph's interface for a stage (`merged` graphs serve both) and says
/// what it takes.
pub(crate) fn check_decoder(file: &Path, session: &Session, cfg: &T5Config, names: &Names, stage: Stage, merged: bool) -> (DecoderIo, Vec<InterfaceProblem>) {
    let mut out = Vec::new();
    let push = |out: &mut Vec<InterfaceProblem>, issue| out.push(InterfaceProblem { file: file.into(), issue });
    let ins = session.inputs();
    let outs = session.outputs();
    let (h, dkv, d, v) = (cfg.num_heads as i64, cfg.d_kv as i64, cfg.d_model as i64, i64::from(cfg.vocab_size));
    let kv_dims = [None, Some(h), None, Some(dkv)];
    let find = |list: &[Outlet], name: &str| list.iter().position(|o| o.name() == name);
    let takes_past = merged || stage != Stage::First;
    let mut known: Vec<&str> = vec!["input_ids", "encoder_attention_mask", "encoder_hidden_states"];
    if stage == Stage::Listed {
        known.push("allowed_ids");
    }
    if takes_past {
        known.extend(names.past_self.iter().map(String::as_str));
        known.extend(names.past_cross.iter().map(String::as_str));
    }
    if merged {
        known.push("use_cache_branch");
    }
    // Inputs the decoder must give.
    let mut required = vec!["input_ids", "encoder_attention_mask"];
    if stage == Stage::First || merged {
        required.push("encoder_hidden_states");
    }
    if takes_past {
        required.extend(names.past_self.iter().map(String::as_str));
        required.extend(names.past_cross.iter().map(String::as_str));
    }
    if merged {
        required.push("use_cache_branch");
    }
    if stage == Stage::Listed {
        required.push("allowed_ids");
    }
    for name in &required {
        if find(ins, name).is_none() {
            push(&mut out, InterfaceIssue::MissingInput { name: (*name).into() });
        }
    }
    for o in ins {
        let name = o.name();
        if !known.contains(&name) {
            let beyond = name
                .strip_prefix("past_key_values.")
                .and_then(|r| r.split('.').next())
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n >= names.layers);
            push(
                &mut out,
                if beyond {
                    InterfaceIssue::ExtraLayer { name: name.into(), layers: names.layers }
                } else {
                    InterfaceIssue::UnknownInput { name: name.into() }
                },
            );
            continue;
        }
        match name {
            "input_ids" | "encoder_attention_mask" | "allowed_ids" => {
                check_outlet(file, o, TensorElementType::Int64, "an int64 tensor", &[None, None], &mut out)
            }
            "encoder_hidden_states" => check_outlet(file, o, TensorElementType::Float32, "a float32 tensor", &[None, None, Some(d)], &mut out),
            "use_cache_branch" => check_outlet(file, o, TensorElementType::Bool, "a bool tensor", &[Some(1)], &mut out),
            _ => check_outlet(file, o, TensorElementType::Float32, "a float32 tensor", &kv_dims, &mut out),
        }
    }
    match find(outs, "logits") {
        // A listed graph's logits are one per listed token, not per vocabulary entry.
        Some(i) => check_outlet(
            file,
            &outs[i],
            TensorElementType::Float32,
            "a float32 tensor",
            &[None, None, if stage == Stage::Listed { None } else { Some(v) }],
            &mut out,
        ),
        None => push(&mut out, InterfaceIssue::MissingOutput { name: "logits".into() }),
    }
    let mut needed: Vec<&String> = names.present_self.iter().collect();
    if stage == Stage::First {
        needed.extend(&names.present_cross);
    }
    for n in needed {
        match find(outs, n) {
            Some(i) => check_outlet(file, &outs[i], TensorElementType::Float32, "a float32 tensor", &kv_dims, &mut out),
            None => push(&mut out, InterfaceIssue::MissingOutput { name: n.clone() }),
        }
    }
    for o in outs {
        let beyond =
            o.name().strip_prefix("present.").and_then(|r| r.split('.').next()).and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n >= names.layers);
        if beyond {
            push(&mut out, InterfaceIssue::ExtraLayer { name: o.name().into(), layers: names.layers });
        }
    }
    let io = DecoderIo {
        path: file.into(),
        takes_mask: find(ins, "encoder_attention_mask").is_some(),
        takes_hidden: find(ins, "encoder_hidden_states").is_some(),
        merged,
    };
    (io, out)
}
