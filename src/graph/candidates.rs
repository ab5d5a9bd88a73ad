//! The candidate subgraph of a dialog: facts around its mentioned entities, streamed from
//! the store, capped as in the DialogGSR authors' code (method-notes.md) but chosen
//! deterministically: the same store and input always give the same candidates.
//!
//! Per mentioned entity: its 1-hop facts in both directions, at most `tails_per_relation`
//! per (direction, relation) and `facts_per_entity` in all, in store order (direction,
//! relation id, neighbour id); then 2-hop paths through those neighbours, with the same
//! per-relation cap at the second hop, never back to the entity itself (by any fact: an
//! A-B-A loop tells nothing the 1-hop fact does not), at most `paths_per_entity`.

use crate::ids::{Direction, EntityId, RelationId};
use crate::store::error::ReadError;
use crate::store::{Edge, NeighborCursor, Store};
use std::ops::ControlFlow;

/// Which paths a retriever chooses among.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CandidateScope {
    /// The capped candidate subgraph (`candidate_subgraph`), as the DialogGSR authors.
    #[default]
    Capped,
    /// The whole 1- and 2-hop neighbourhood, hubs not expanded (`in_neighbourhood`); only
    /// a retriever that walks it lazily (the generative one) can use it.
    Uncapped,
}

/// How big a mentioned entity's capped candidate subgraph may grow (defaults 100 / 10 /
/// 100 / 2 hops).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CandidateConfig {
    /// 1-hop facts kept per mentioned entity.
    pub facts_per_entity: usize,
    /// Tails kept per (entity, relation): a relation with many objects does not crowd out the others.
    pub tails_per_relation: usize,
    /// 2-hop paths kept per mentioned entity.
    pub paths_per_entity: usize,
    /// 1: facts only; 2: also 2-hop paths.
    pub hops: u8,
}

impl Default for CandidateConfig {
    fn default() -> Self {
        CandidateConfig { facts_per_entity: 100, tails_per_relation: 10, paths_per_entity: 100, hops: 2 }
    }
}

/// A fact as stored: relation(subject, object).
pub type Fact = (EntityId, RelationId, EntityId);

/// One step of a path, walked from `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    /// The entity the step starts at.
    pub from: EntityId,
    /// The edge walked: relation, direction and the entity reached.
    pub edge: Edge,
}

impl Hop {
    /// The stored fact the step walks, whichever way it walks it.
    pub fn fact(&self) -> Fact {
        match self.edge.direction {
            Direction::Out => (self.from, self.edge.relation, self.edge.other),
            Direction::In => (self.edge.other, self.edge.relation, self.from),
        }
    }
}

/// The capped candidate subgraph of some mentioned entities, as paths.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidates {
    /// 1-hop paths, per mentioned entity in input order.
    pub one_hop: Vec<Hop>,
    /// 2-hop paths.
    pub two_hop: Vec<[Hop; 2]>,
}

impl Candidates {
    /// Every candidate fact, 1-hop ones first, then those of the 2-hop paths in order
    /// (repeats included).
    pub fn facts(&self) -> impl Iterator<Item = Fact> + '_ {
        self.one_hop.iter().map(|h| h.fact()).chain(self.two_hop.iter().flat_map(|p| [p[0].fact(), p[1].fact()]))
    }
}

/// The distinct entities and relations of some facts, each sorted (the order batched
/// reads want).
pub fn distinct_terms(facts: impl Iterator<Item = Fact>) -> (Vec<EntityId>, Vec<RelationId>) {
    let (mut es, mut rs) = (Vec::new(), Vec::new());
    for (s, r, o) in facts {
        es.extend([s, o]);
        rs.push(r);
    }
    es.sort_unstable();
    es.dedup();
    rs.sort_unstable();
    rs.dedup();
    (es, rs)
}

/// The first hops out of `e`: capped per (direction, relation) and in total. Edges to
/// `avoid` are passed over without counting.
fn capped_edges(cursor: &mut NeighborCursor<'_>, e: EntityId, per_relation: usize, total: usize, avoid: Option<EntityId>) -> Result<Vec<Edge>, ReadError> {
    let mut out = Vec::new();
    let mut group: Option<(Direction, RelationId)> = None;
    let mut in_group = 0;
    // A list's ids are distinct, so `avoid` is at most one of them: one more than the cap
    // decoded is enough to keep the cap of the others.
    let decoded = per_relation.saturating_add(usize::from(avoid.is_some()));
    cursor.for_each_first(e, decoded, |edge| {
        if out.len() >= total {
            return ControlFlow::Break(());
        }
        if Some(edge.other) == avoid {
            return ControlFlow::Continue(());
        }
        if group != Some((edge.direction, edge.relation)) {
            group = Some((edge.direction, edge.relation));
            in_group = 0;
        }
        if in_group < per_relation {
            out.push(edge);
            in_group += 1;
        }
        ControlFlow::Continue(())
    })?;
    Ok(out)
}

/// The capped candidate subgraph of `mentioned`: each entity's facts and 2-hop paths within
/// the caps of `cfg`, in store order.
pub fn candidate_subgraph(store: &Store, mentioned: &[EntityId], cfg: &CandidateConfig) -> Result<Candidates, ReadError> {
    let mut cursor = store.neighbor_cursor();
    candidate_subgraph_with(mentioned, |m| entity_candidates(&mut cursor, m, cfg))
}

/// The candidate subgraph as the concatenation of each distinct mentioned entity's own
/// candidates (`of`), in input order: the caps are per entity, so an entity's candidates do
/// not depend on the others' and may come from a cache.
pub(crate) fn candidate_subgraph_with<C: std::borrow::Borrow<Candidates>>(
    mentioned: &[EntityId],
    mut of: impl FnMut(EntityId) -> Result<C, ReadError>,
) -> Result<Candidates, ReadError> {
    let mut out = Candidates::default();
    let mut seen = std::collections::HashSet::new();
    for &m in mentioned {
        if !seen.insert(m) {
            continue;
        }
        let c = of(m)?;
        out.one_hop.extend_from_slice(&c.borrow().one_hop);
        out.two_hop.extend_from_slice(&c.borrow().two_hop);
    }
    Ok(out)
}

/// One mentioned entity's capped candidates: its facts, then its 2-hop paths.
pub(crate) fn entity_candidates(cursor: &mut NeighborCursor<'_>, m: EntityId, cfg: &CandidateConfig) -> Result<Candidates, ReadError> {
    let mut out = Candidates::default();
    let first = capped_edges(cursor, m, cfg.tails_per_relation, cfg.facts_per_entity, None)?;
    out.one_hop.extend(first.iter().map(|&edge| Hop { from: m, edge }));
    if cfg.hops < 2 {
        return Ok(out);
    }
    let mut paths = 0;
    for &edge in &first {
        if paths >= cfg.paths_per_entity {
            break;
        }
        let room = cfg.paths_per_entity - paths;
        for second in capped_edges(cursor, edge.other, cfg.tails_per_relation, room, Some(m))? {
            out.two_hop.push([Hop { from: m, edge }, Hop { from: edge.other, edge: second }]);
            paths += 1;
        }
    }
    Ok(out)
}

/// Whether `path` (facts in walking order, 1 or 2 of them) is in the whole 1- and 2-hop
/// neighbourhood of the mentioned entities, the candidate set of the uncapped mode: it
/// starts at a mentioned entity, its facts are in the store and join end to start, a second
/// hop does not come back to the start, and its middle entity has at most `hub_degree` facts
/// (hubs are not expanded). Reads only the few lists the path names.
pub fn in_neighbourhood(store: &Store, mentioned: &[EntityId], path: &[Fact], hub_degree: usize) -> Result<bool, ReadError> {
    if path.is_empty() || path.len() > 2 {
        return Ok(false);
    }
    for &(s, r, o) in path {
        if !store.neighbors_via(s, Direction::Out, r)?.contains(&o) {
            return Ok(false);
        }
    }
    // Every way to walk the path: its start, then each fact's far end.
    for &start in mentioned {
        let mut at = start;
        let mut ok = true;
        for (i, &(s, _, o)) in path.iter().enumerate() {
            let next = if s == at {
                o
            } else if o == at {
                s
            } else {
                ok = false;
                break;
            };
            if i == 1 && next == start {
                ok = false;
                break;
            }
            if i == 0 && path.len() == 2 && store.degree(next, Direction::Out)? + store.degree(next, Direction::In)? > hub_degree as u64 {
                ok = false;
                break;
            }
            at = next;
        }
        if ok {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The paths of a candidate subgraph as facts in walking order (1-hop ones first).
pub fn candidate_fact_paths(c: &Candidates) -> Vec<Vec<Fact>> {
    c.one_hop.iter().map(|h| vec![h.fact()]).chain(c.two_hop.iter().map(|p| vec![p[0].fact(), p[1].fact()])).collect()
}

crate::limits::named_choices!(CandidateScope, "candidate scope", { Capped => "capped", Uncapped => "uncapped" });
