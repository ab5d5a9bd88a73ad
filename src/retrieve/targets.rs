//! Training targets of the generative retriever (`trellis targets`): for each dialog turn
//! with a gold path, exactly what the decoder will see and do at retrieval time. The
//! encoder input ids (the same function the retriever calls), the gold path as the token
//! ids the decoder writes (boundaries and names from the store's token index, EOS last),
//! and along it the constraint's allowed set at every step, from the same automaton that
//! constrains decoding. A trainer can then normalize its loss over the tokens the decoder
//! really chooses among.
//!
//! A gold path outside the candidates (its start entity not linked, or cut by the caps)
//! still has its target ids; its allowed sets stop at the first gold token the automaton
//! does not offer, and `admitted` is false.

use super::gsr::{encoder_input_ids, GsrError};
use super::RetrievalInput;
use crate::dataset::opendialkg::{Dialog, Sample, Triple};
use crate::decode::automaton::{Allowed, Boundaries, CandidateMode, PathGraph};
use crate::decode::prior::{PriorConfig, PriorMode, PriorNorm};
use crate::graph::candidates::Hop;
use crate::ids::{Direction, EntityId};
use crate::linearize::Side;
use crate::link::{LinkConfig, Linker};
use crate::model::dir::{ModelDir, TOKENIZER_FILE};
use crate::store::error::ReadError;
use crate::store::tokens::TokenIndex;
use crate::store::{Edge, Store};
use std::sync::Arc;

/// One turn's training example.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TrainingTarget {
    /// The dialog's index in the file (0-based).
    pub dialog: usize,
    /// The number of messages before the turn.
    pub upto: usize,
    /// Who took the action (`assistant` or `user`).
    pub speaker: String,
    /// The encoder input, as `trellis retrieve` builds it.
    pub input_ids: Vec<u32>,
    /// The gold path's tokens, EOS included; empty when `skipped` says why not.
    pub target_ids: Vec<u32>,
    /// `allowed[j]`: the tokens the constraint allows before `target_ids[j]` (ascending),
    /// for every j up to the first gold token it does not allow.
    pub allowed: Vec<Vec<u32>>,
    /// Whether the whole gold path is a candidate (the constraint allows every token).
    pub admitted: bool,
    /// Why there is no target: `unknown_name` (a name the store lacks), `not_a_fact` (a
    /// triple the store does not hold), `not_a_path` (hops that do not connect, or more than
    /// two), `not_indexed` (a name without a token list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
}

/// Writes the targets of one store, one model directory's input and output conventions,
/// and one candidate scope.
pub struct TargetMaker<'d> {
    store: Arc<Store>,
    dir: &'d ModelDir,
    index: TokenIndex,
    boundaries: Boundaries,
    linker: Linker,
    mode: CandidateMode,
}

impl<'d> TargetMaker<'d> {
    /// `dir` may be a spec-only directory ([`ModelDir::open_spec`]); the store must hold the
    /// token index of its tokenizer.
    pub fn open(store: Arc<Store>, dir: &'d ModelDir, link: LinkConfig, mode: CandidateMode) -> Result<TargetMaker<'d>, GsrError> {
        let lin = dir.linearization().clone();
        let index = TokenIndex::open(store.clone(), dir.names().fingerprint(), &lin)
            .map_err(|e| GsrError::TokenIndex { model: dir.path().to_path_buf(), source: e.with_tokenizer(&dir.path().join(TOKENIZER_FILE)) })?;
        let boundaries = Boundaries::new(&lin, dir.tokenizer(), dir.config().eos_token_id)?;
        Ok(TargetMaker { linker: Linker::new(store.clone(), link)?, store, dir, index, boundaries, mode })
    }

    /// The target of one sample of `dialog` (the dialog's `index` in its file).
    pub fn target(&self, index: usize, dialog: &Dialog, sample: &Sample) -> Result<TrainingTarget, GsrError> {
        let history = &dialog.messages[..sample.upto];
        let mentions = self.linker.link_dialog(history)?;
        let mentioned: Vec<EntityId> = self.linker.turn_entities(&mentions, history.len()).into_iter().map(|(e, _)| e).collect();
        let ages = self.linker.entity_ages(&mentions, history.len(), &mentioned);
        let input = RetrievalInput { history, mentioned, ages, rewritten: None };
        let input_ids = encoder_input_ids(&self.store, self.dir, &input, &[])?;
        let mut out = TrainingTarget {
            dialog: index,
            upto: sample.upto,
            speaker: sample.speaker.clone(),
            input_ids,
            target_ids: Vec::new(),
            allowed: Vec::new(),
            admitted: false,
            skipped: None,
        };
        let gold = match sample.paths.first() {
            Some(p) => resolve_gold(&self.store, p)?,
            None => Err("not_a_path"),
        };
        let hops = match gold {
            Ok(h) => h,
            Err(why) => {
                out.skipped = Some(why);
                return Ok(out);
            }
        };
        let Some(target) = self.path_tokens(&hops)? else {
            out.skipped = Some("not_indexed");
            return Ok(out);
        };
        // Along the gold path, the automaton the decoder uses (`hard`: the prior plays no
        // part in which tokens are allowed).
        let prior = PriorConfig::new(PriorMode::Hard, PriorNorm::Proportional, 0.0);
        let mut graph = PathGraph::new(self.store.clone(), &self.index, &self.boundaries, &input.mentioned, self.mode.clone(), prior)?;
        let mut state = graph.start();
        let mut buf: Allowed = Vec::new();
        out.admitted = true;
        for &t in &target {
            graph.allowed(&state, &mut buf)?;
            let ids: Vec<u32> = buf.iter().map(|&(id, _)| id).collect();
            if ids.binary_search(&t).is_err() {
                out.admitted = false;
                break;
            }
            out.allowed.push(ids);
            match graph.advance(&state, t)? {
                Some(next) => state = next,
                None => {
                    out.admitted = false;
                    break;
                }
            }
        }
        out.target_ids = target;
        Ok(out)
    }

    /// The decoder's tokens for a path, `None` when a name has no token list.
    fn path_tokens(&self, hops: &[Hop]) -> Result<Option<Vec<u32>>, ReadError> {
        let mut names: Vec<Vec<u32>> = Vec::with_capacity(5);
        let Some(first) = self.index.tokens(Side::Entity, hops[0].from.0)? else { return Ok(None) };
        names.push(first);
        for h in hops {
            let Some(r) = self.index.tokens(Side::Relation, h.edge.relation.0)? else { return Ok(None) };
            let Some(e) = self.index.tokens(Side::Entity, h.edge.other.0)? else { return Ok(None) };
            names.push(r);
            names.push(e);
        }
        let refs: Vec<&[u32]> = names.iter().map(Vec::as_slice).collect();
        let reversed: Vec<bool> = hops.iter().map(|h| h.edge.direction == Direction::In).collect();
        Ok(self.boundaries.path_tokens(&refs, &reversed))
    }
}

/// A gold path (triples in walking order, `~r` walked backwards) as hops of the store.
pub(crate) fn resolve_gold(store: &Store, triples: &[Triple]) -> Result<Result<Vec<Hop>, &'static str>, ReadError> {
    if triples.is_empty() || triples.len() > 2 {
        return Ok(Err("not_a_path"));
    }
    let prefix = store.meta().reverse_prefix.clone();
    let mut hops: Vec<Hop> = Vec::with_capacity(triples.len());
    for (s, r, o) in triples {
        let (base, reversed) = match r.strip_prefix(prefix.as_str()).filter(|_| !prefix.is_empty()) {
            Some(base) => (base, true),
            None => (r.as_str(), false),
        };
        let (Some(from), Some(relation), Some(other)) = (store.entity_by_key(s)?, store.relation_by_key(base)?, store.entity_by_key(o)?) else {
            return Ok(Err("unknown_name"));
        };
        let direction = if reversed { Direction::In } else { Direction::Out };
        if !store.neighbors_via(from, direction, relation)?.contains(&other) {
            return Ok(Err("not_a_fact"));
        }
        if let Some(prev) = hops.last() {
            if prev.edge.other != from {
                return Ok(Err("not_a_path"));
            }
        }
        hops.push(Hop { from, edge: Edge { direction, relation, other } });
    }
    Ok(Ok(hops))
}
