//! SURGE's context-relevant subgraph retriever (seed 001, section 3.3) as one ONNX graph
//! (`trellis.json` task `subgraph`): the dialog and a candidate subgraph in, one score per
//! fact out. The graph embeds the dialog, embeds each entity and relation from its name,
//! runs its graph neural network over the subgraph's structure (given as index inputs) and
//! scores each fact against the dialog; this module only tokenizes and fills the inputs
//! (`schema/model.md`, "Subgraph models"). One subgraph per run: a fact's score depends
//! on its subgraph by design, never on other requests.

use super::config::{EncoderDir, EncoderTask};
use super::{Core, EncoderError, InputProblem, OutputProblem, Result};
use crate::model::session::{RuntimeOptions, Seq2SeqError};
use ort::session::SessionInputValue;
use ort::value::Tensor;
use std::borrow::Cow;
use std::path::Path;

/// A candidate subgraph as text: what a subgraph model reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubgraphText<'a> {
    /// The dialog, as one query text.
    pub query: &'a str,
    /// Each entity's name.
    pub entities: Vec<&'a str>,
    /// Whether the dialog mentions each entity.
    pub mentioned: Vec<bool>,
    /// Each relation's name, as words.
    pub relations: Vec<&'a str>,
    /// Each fact: (head entity, relation, tail entity), indices into the lists above.
    pub facts: Vec<[u32; 3]>,
}

/// A subgraph tokenized: exactly the model's inputs, before padding (the training targets
/// of `trellis targets` are these, so a trainer sees what the engine runs).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SubgraphIds {
    /// The query's ids, special tokens included, cut at `max_length`.
    pub input_ids: Vec<u32>,
    /// Each entity name's ids, no special tokens, cut at `name_length`.
    pub entity_ids: Vec<Vec<u32>>,
    /// 1 for the entities the dialog mentions, else 0.
    pub entity_mentioned: Vec<u8>,
    /// Each relation name's ids, as the entities'.
    pub relation_ids: Vec<Vec<u32>>,
    /// Each fact's head (index into the entities).
    pub fact_head: Vec<u32>,
    /// Each fact's relation (index into the relations).
    pub fact_relation: Vec<u32>,
    /// Each fact's tail.
    pub fact_tail: Vec<u32>,
}

/// Tokenizes a subgraph as `dir`'s model reads it. Refused: a text the tokenizer fails on,
/// an id past the model's vocabulary, a fact pointing outside the lists.
pub fn subgraph_ids(dir: &EncoderDir, text: &SubgraphText<'_>) -> Result<SubgraphIds> {
    subgraph_ids_cached(dir, text, None)
}

/// [`subgraph_ids`], the names' ids from `cache` where it has them (a name's ids depend on
/// the name and the model's tokenizer alone, so they stay true).
fn subgraph_ids_cached(dir: &EncoderDir, text: &SubgraphText<'_>, cache: Option<&NameIds>) -> Result<SubgraphIds> {
    let tok = dir.tokenizer();
    let check = |ids: &[u32]| -> Result<()> {
        match (dir.vocab, ids.iter().find(|&&t| Some(t) >= dir.vocab)) {
            (Some(vocab), Some(&token)) => Err(EncoderError::TokenOutOfRange { path: dir.path.clone(), token, vocab }),
            _ => Ok(()),
        }
    };
    let encode = |t: &str, special: bool| -> Result<Vec<u32>> {
        let enc = tok.encode(t, special).map_err(|source| EncoderError::Tokenize { text: t.to_owned(), source: crate::backend::tokenizers(source) })?;
        Ok(enc.get_ids().to_vec())
    };
    let input_ids = encode(text.query, true)?;
    check(&input_ids)?;
    let name = |t: &str| -> Result<Vec<u32>> {
        let mut ids = encode(t, false)?;
        ids.truncate(dir.name_length);
        check(&ids)?;
        Ok(ids)
    };
    let names = |texts: &[&str]| -> Result<Vec<Vec<u32>>> {
        let Some(cache) = cache else { return texts.iter().map(|t| name(t)).collect() };
        let mut out = Vec::with_capacity(texts.len());
        let mut fresh = Vec::new();
        for (hit, t) in cache.get(texts).into_iter().zip(texts) {
            match hit {
                Some(ids) => out.push(ids.to_vec()),
                None => {
                    let ids = name(t)?;
                    fresh.push((*t, std::sync::Arc::from(ids.as_slice())));
                    out.push(ids);
                }
            }
        }
        cache.put(fresh);
        Ok(out)
    };
    let entity_ids = names(&text.entities)?;
    let relation_ids = names(&text.relations)?;
    let (n, r) = (text.entities.len() as u32, text.relations.len() as u32);
    if text.mentioned.len() != text.entities.len() {
        return Err(EncoderError::Input { problem: InputProblem::MentionedFlags { flags: text.mentioned.len(), entities: n as usize } });
    }
    if text.facts.iter().any(|f| f[0] >= n || f[2] >= n || f[1] >= r) {
        return Err(EncoderError::Input { problem: InputProblem::FactOutside { entities: n as usize, relations: r as usize } });
    }
    Ok(SubgraphIds {
        input_ids,
        entity_ids,
        entity_mentioned: text.mentioned.iter().map(|&m| u8::from(m)).collect(),
        relation_ids,
        fact_head: text.facts.iter().map(|f| f[0]).collect(),
        fact_relation: text.facts.iter().map(|f| f[1]).collect(),
        fact_tail: text.facts.iter().map(|f| f[2]).collect(),
    })
}

/// Bytes of names and ids a scorer keeps between calls (a turn's subgraph names a few
/// hundred entities, and a dialog's turns mostly the same ones; some 50-100 bytes a name
/// under the shipped name length, so about 150,000 names); past it, the cache starts over.
const NAME_IDS_BYTES: usize = 16 << 20;

/// A name's ids (cut at the model's name length), as [`subgraph_ids`] tokenizes it.
#[derive(Default)]
struct NameIds(std::sync::Mutex<NameIdsInner>);

#[derive(Default)]
struct NameIdsInner {
    map: hashbrown::HashMap<Box<str>, std::sync::Arc<[u32]>>,
    bytes: usize,
}

impl NameIds {
    /// The ids of each name the cache has.
    fn get(&self, texts: &[&str]) -> Vec<Option<std::sync::Arc<[u32]>>> {
        let inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        texts.iter().map(|t| inner.map.get(*t).cloned()).collect()
    }

    fn put(&self, fresh: Vec<(&str, std::sync::Arc<[u32]>)>) {
        if fresh.is_empty() {
            return;
        }
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (t, ids) in fresh {
            // The key, the ids and a map slot's own bytes.
            let bytes = t.len() + 4 * ids.len() + 48;
            if inner.bytes + bytes > NAME_IDS_BYTES {
                inner.map.clear();
                inner.bytes = 0;
            }
            if inner.map.insert(t.into(), ids).is_none() {
                inner.bytes += bytes;
            }
        }
    }
}

/// The checks [`subgraph_ids`] makes by construction, for ids from elsewhere.
fn check_ids(dir: &EncoderDir, ids: &SubgraphIds) -> Result<()> {
    let (n, r, f) = (ids.entity_ids.len(), ids.relation_ids.len(), ids.fact_head.len());
    let problem = if ids.entity_mentioned.len() != n {
        Some(InputProblem::MentionedFlags { flags: ids.entity_mentioned.len(), entities: n })
    } else if ids.fact_relation.len() != f || ids.fact_tail.len() != f {
        Some(InputProblem::FactColumns { heads: f, relations: ids.fact_relation.len(), tails: ids.fact_tail.len() })
    } else if ids.fact_head.iter().chain(&ids.fact_tail).any(|&e| e as usize >= n) || ids.fact_relation.iter().any(|&x| x as usize >= r) {
        Some(InputProblem::FactOutside { entities: n, relations: r })
    } else if ids.input_ids.is_empty() {
        Some(InputProblem::EmptyQuery)
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(EncoderError::Input { problem });
    }
    let all = ids.input_ids.iter().chain(ids.entity_ids.iter().flatten()).chain(ids.relation_ids.iter().flatten());
    if let (Some(vocab), Some(&token)) = (dir.vocab, all.clone().find(|&&t| Some(t) >= dir.vocab)) {
        return Err(EncoderError::TokenOutOfRange { path: dir.path.clone(), token, vocab });
    }
    Ok(())
}

/// A subgraph retriever's model (`trellis.json` task `subgraph`). `Send + Sync`: build once,
/// call from many threads (one session each, from the pool).
pub struct SubgraphScorer {
    core: Core,
    names: NameIds,
}

super::core_accessors!(SubgraphScorer);

impl SubgraphScorer {
    /// Loads a subgraph model and checks its graph's inputs and outputs.
    pub fn open(dir: &Path, opts: &RuntimeOptions) -> Result<SubgraphScorer> {
        Ok(SubgraphScorer { core: Core::open(dir, EncoderTask::Subgraph, opts, 1)?, names: NameIds::default() })
    }

    /// Each fact's score (higher: more relevant to the dialog), in the order of
    /// `text.facts`; nothing to run for a subgraph without facts.
    pub fn score(&self, text: &SubgraphText<'_>) -> Result<Vec<f32>> {
        let ids = subgraph_ids_cached(&self.core.dir, text, Some(&self.names))?;
        self.score_ids(&ids)
    }

    /// [`score`](Self::score) of an already tokenized subgraph (refused when its parts do
    /// not fit together: lengths, indices, ids past the vocabulary).
    pub fn score_ids(&self, ids: &SubgraphIds) -> Result<Vec<f32>> {
        let facts = ids.fact_head.len();
        if facts == 0 {
            return Ok(Vec::new());
        }
        check_ids(&self.core.dir, ids)?;
        let internal = |source: ort::Error| Seq2SeqError::Internal { what: "input tensor", source: source.into() };
        let int = |shape: Vec<i64>, data: Vec<i64>| Tensor::from_array((shape, data)).map(|t| t.into_dyn()).map_err(internal);
        // The query padded as the bi-encoder pads (a length fixed by its own tokens).
        let s = super::padded_length(ids.input_ids.len(), self.core.dir.max_length.max(ids.input_ids.len()));
        let mut q = vec![i64::from(self.core.dir.pad_id); s];
        let mut qm = vec![0i64; s];
        for (j, &t) in ids.input_ids.iter().enumerate() {
            q[j] = i64::from(t);
            qm[j] = 1;
        }
        // Names padded to the longest of their kind in this subgraph (at least one column:
        // an empty name is all padding, which the graph reads as a zero vector).
        let names = |rows: &[Vec<u32>]| -> Result<(ort::value::DynValue, ort::value::DynValue)> {
            let w = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
            let mut data = vec![i64::from(self.core.dir.pad_id); rows.len() * w];
            let mut mask = vec![0i64; rows.len() * w];
            for (i, r) in rows.iter().enumerate() {
                for (j, &t) in r.iter().enumerate() {
                    data[i * w + j] = i64::from(t);
                    mask[i * w + j] = 1;
                }
            }
            let shape = vec![rows.len() as i64, w as i64];
            Ok((int(shape.clone(), data)?, int(shape, mask)?))
        };
        let index = |v: &[u32]| int(vec![v.len() as i64], v.iter().map(|&x| i64::from(x)).collect());
        let input_ids = int(vec![1, s as i64], q)?;
        let attention_mask = int(vec![1, s as i64], qm)?;
        let (entity_ids, entity_mask) = names(&ids.entity_ids)?;
        let (relation_ids, relation_mask) = names(&ids.relation_ids)?;
        let mentioned: Vec<f32> = ids.entity_mentioned.iter().map(|&m| f32::from(m)).collect();
        let entity_mentioned = Tensor::from_array((vec![mentioned.len() as i64], mentioned)).map(|t| t.into_dyn()).map_err(internal)?;
        let (head, relation, tail) = (index(&ids.fact_head)?, index(&ids.fact_relation)?, index(&ids.fact_tail)?);
        let inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = vec![
            ("input_ids".into(), (&input_ids).into()),
            ("attention_mask".into(), (&attention_mask).into()),
            ("entity_ids".into(), (&entity_ids).into()),
            ("entity_mask".into(), (&entity_mask).into()),
            ("entity_mentioned".into(), (&entity_mentioned).into()),
            ("relation_ids".into(), (&relation_ids).into()),
            ("relation_mask".into(), (&relation_mask).into()),
            ("fact_head".into(), (&head).into()),
            ("fact_relation".into(), (&relation).into()),
            ("fact_tail".into(), (&tail).into()),
        ];
        let mut session = self.core.session();
        let path = self.core.dir.model_file.clone();
        let outputs = session.get().run(inputs).map_err(|source| EncoderError::Run { path: path.clone(), source: source.into() })?;
        let value = outputs.get("fact_scores").ok_or_else(|| EncoderError::Output { path, name: "fact_scores".into(), problem: OutputProblem::Missing })?;
        Ok(self.core.floats(value, &[facts as i64])?.to_vec())
    }
}
