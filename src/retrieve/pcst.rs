//! The `pcst` retriever: the relevant connected piece of the candidate subgraph, as a
//! prize-collecting Steiner tree (seed 003; G-Retriever). The instance is built from the
//! candidates alone, so the same candidates always give the same instance:
//!
//! - Nodes are the candidate entities, in order of first appearance in the candidate facts;
//!   facts are the distinct candidate facts in order of first appearance.
//! - Relevance is seed 003's BM25 (the mean over the last 1..L messages), entities scored as
//!   their names against each other, facts as "head relation tail" against each other; or,
//!   with [`PcstScores::Dense`], a bi-encoder's inner product averaged the same way.
//!   Only a positive relevance earns a prize: an element sharing no word with the history
//!   gets none (otherwise ties at zero would hand prizes out in arbitrary order).
//! - `Seed003`: the top `node_k` entities get prizes node_k - i (i = 0-based rank), the top
//!   `edge_k` facts edge_k - i; every fact becomes a virtual node with its prize, joined to
//!   its head and tail by edges of cost `edge_cost / 2`.
//! - `GRetriever`: entity prizes as above; fact prizes over the top `edge_k` distinct
//!   relevance values, the facts sharing the i-th value splitting edge_k - i but never more
//!   than (1 - c) times the previous value (c = 0.01); the edge cost becomes
//!   min(edge_cost, (1 - c/2) * the largest fact prize) so the best fact always pays for
//!   itself. A fact whose prize does not exceed that cost is a plain edge of cost
//!   (cost - prize); a fact whose prize does becomes a virtual node of prize (prize - cost)
//!   joined by two free edges.
//! - Solved unrooted with one tree (`graph::pcst`), `gw` pruning by default.
//!
//! The facts of the tree come back as paths: every candidate path (1 or 2 hops) whose facts
//! all are in the tree, scored by the mean relevance of its facts, best first.

use super::bm25;
use crate::dialog::Message;
use crate::graph::candidates::{Candidates, Fact};
use crate::graph::pcst::{solve, PcstError, Pruning};
use crate::ids::EntityId;
use hashbrown::HashMap;

/// How prizes and costs are set (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum PcstVariant {
    /// Seed 003: rank prizes on nodes and facts, facts as virtual nodes, edges cost C/2.
    Seed003,
    /// G-Retriever: decayed fact prizes over distinct values, costs lowered by prizes.
    GRetriever,
}

/// The `pcst` retriever's settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PcstConfig {
    /// How prizes and costs are set.
    pub variant: PcstVariant,
    /// The pruning after growth (default `gw`).
    pub pruning: Pruning,
    /// Entities with a prize (seed 003: k = 3).
    pub node_k: usize,
    /// Facts with a prize (seed 003: k = 5).
    pub edge_k: usize,
    /// Seed003: C, the cost of an edge (each half C/2). GRetriever: the cost ceiling cost_e.
    pub edge_cost: f64,
    /// GRetriever's decay c.
    pub decay: f64,
    /// What ranks entities and facts for their prizes (default BM25).
    pub scores: PcstScores,
}

/// What ranks the candidates for PCST's prizes.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum PcstScores {
    /// Seed 003's BM25 (the mean over the last 1..L messages).
    #[default]
    Bm25,
    /// A bi-encoder's inner product, averaged the same way (the PCST paper's SBERT rows).
    Dense(super::dense::DenseOptions),
}

impl PcstScores {
    /// The names (`bm25`, `dense`).
    pub const NAMES: &'static [&'static str] = &["bm25", "dense"];

    /// This choice's name.
    pub fn name(&self) -> &'static str {
        match self {
            PcstScores::Bm25 => "bm25",
            PcstScores::Dense(_) => "dense",
        }
    }
}

impl PcstConfig {
    /// The defaults of `variant`: `gw` pruning, node_k 3, edge_k 5, edge cost 1 (seed 003) or 0.5 (G-Retriever), decay 0.01, BM25 relevance.
    pub fn new(variant: PcstVariant) -> PcstConfig {
        let edge_cost = match variant {
            PcstVariant::Seed003 => 1.0,
            PcstVariant::GRetriever => 0.5,
        };
        PcstConfig { variant, pruning: Pruning::Gw, node_k: 3, edge_k: 5, edge_cost, decay: 0.01, scores: PcstScores::Bm25 }
    }
}

/// A PCST instance built from a candidate subgraph, with what its nodes and edges stand for.
#[derive(Clone, Debug, Default)]
pub struct PcstInstance {
    /// The instance's first nodes: the candidate entities, in order of first appearance.
    pub entities: Vec<EntityId>,
    /// The distinct candidate facts, in order of first appearance.
    pub facts: Vec<Fact>,
    /// Per fact, its BM25 relevance to the history.
    pub fact_relevance: Vec<f64>,
    /// Per node (entities, then virtual fact nodes), its prize.
    pub prizes: Vec<f64>,
    /// The edges, as pairs of node indices.
    pub edges: Vec<(u32, u32)>,
    /// Per edge, its cost.
    pub costs: Vec<f64>,
    /// For each instance node beyond the entities: the fact it stands for.
    pub virtual_fact: Vec<usize>,
    /// For each instance edge: the fact it stands for.
    pub edge_fact: Vec<usize>,
}

/// Prizes k - i for the `k` best positive scores (ties keep input order).
pub fn rank_prizes(scores: &[f64], k: usize) -> Vec<f64> {
    let mut order: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] > 0.0).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut prizes = vec![0.0; scores.len()];
    for (rank, &i) in order.iter().take(k).enumerate() {
        prizes[i] = (k - rank) as f64;
    }
    prizes
}

/// G-Retriever's fact prizes over the `k` largest distinct positive scores.
pub fn decayed_prizes(scores: &[f64], k: usize, c: f64) -> Vec<f64> {
    let mut values: Vec<f64> = scores.iter().copied().filter(|&s| s > 0.0).collect();
    values.sort_by(|a, b| b.total_cmp(a));
    values.dedup();
    let k = k.min(values.len());
    let mut prizes = vec![0.0; scores.len()];
    let mut ceiling = k as f64;
    for (rank, &value) in values.iter().take(k).enumerate() {
        let holders: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] == value).collect();
        let prize = ((k - rank) as f64 / holders.len() as f64).min(ceiling);
        for i in holders {
            prizes[i] = prize;
        }
        ceiling = prize * (1.0 - c);
    }
    prizes
}

/// Builds the instance with BM25 relevance. `entity_tokens` feeds the BM25 tokens of an
/// entity's name, `fact_tokens` those of a fact's "head relation tail".
pub fn build_instance(
    cand: &Candidates,
    history: &[Message],
    turns: usize,
    cfg: &PcstConfig,
    mut entity_tokens: impl FnMut(EntityId, &mut dyn FnMut(&str)),
    mut fact_tokens: impl FnMut(Fact, &mut dyn FnMut(&str)),
) -> PcstInstance {
    let bm25 = |entities: &[EntityId], facts: &[Fact]| -> Result<(Vec<f64>, Vec<f64>), std::convert::Infallible> {
        Ok((
            bm25::mean_over_last_turns_with(entities.len(), |i, add| entity_tokens(entities[i], add), history, turns),
            bm25::mean_over_last_turns_with(facts.len(), |i, add| fact_tokens(facts[i], add), history, turns),
        ))
    };
    match build_instance_with(cand, cfg, bm25) {
        Ok(inst) => inst,
        Err(never) => match never {},
    }
}

/// Builds the instance with the relevance `relevance(entities, facts)` gives (one score per
/// entity and per fact, in the instance's order): BM25 ([`build_instance`]) or a dense
/// model's (`--pcst-scores dense`), the rest unchanged.
pub fn build_instance_with<E>(
    cand: &Candidates,
    cfg: &PcstConfig,
    relevance: impl FnOnce(&[EntityId], &[Fact]) -> Result<(Vec<f64>, Vec<f64>), E>,
) -> Result<PcstInstance, E> {
    let mut inst = PcstInstance::default();
    let mut entity_index: HashMap<EntityId, u32> = HashMap::new();
    let mut fact_index: HashMap<Fact, usize> = HashMap::new();
    for f in cand.facts() {
        if fact_index.contains_key(&f) {
            continue;
        }
        fact_index.insert(f, inst.facts.len());
        inst.facts.push(f);
        for e in [f.0, f.2] {
            entity_index.entry(e).or_insert_with(|| {
                inst.entities.push(e);
                (inst.entities.len() - 1) as u32
            });
        }
    }
    let (node_relevance, fact_relevance) = relevance(&inst.entities, &inst.facts)?;
    inst.fact_relevance = fact_relevance;
    inst.prizes = rank_prizes(&node_relevance, cfg.node_k);
    let ends = |f: &Fact| (entity_index[&f.0], entity_index[&f.2]);
    match cfg.variant {
        PcstVariant::Seed003 => {
            let fact_prizes = rank_prizes(&inst.fact_relevance, cfg.edge_k);
            for (i, f) in inst.facts.iter().enumerate() {
                let (h, t) = ends(f);
                let v = inst.prizes.len() as u32;
                inst.prizes.push(fact_prizes[i]);
                inst.virtual_fact.push(i);
                inst.edges.extend([(h, v), (v, t)]);
                inst.costs.extend([cfg.edge_cost / 2.0; 2]);
                inst.edge_fact.extend([i, i]);
            }
        }
        PcstVariant::GRetriever => {
            let fact_prizes = decayed_prizes(&inst.fact_relevance, cfg.edge_k, cfg.decay);
            let best = fact_prizes.iter().copied().fold(0.0, f64::max);
            let cost = if best > 0.0 { cfg.edge_cost.min(best * (1.0 - cfg.decay / 2.0)) } else { cfg.edge_cost };
            let mut virtual_edges = Vec::new();
            for (i, f) in inst.facts.iter().enumerate() {
                let (h, t) = ends(f);
                if fact_prizes[i] <= cost {
                    inst.edges.push((h, t));
                    inst.costs.push(cost - fact_prizes[i]);
                    inst.edge_fact.push(i);
                } else {
                    let v = (inst.entities.len() + inst.virtual_fact.len()) as u32;
                    inst.virtual_fact.push(i);
                    inst.prizes.push(fact_prizes[i] - cost);
                    virtual_edges.push((h, v, i));
                    virtual_edges.push((v, t, i));
                }
            }
            // Plain edges first, then the free edges to virtual nodes (as G-Retriever).
            for (a, b, i) in virtual_edges {
                inst.edges.push((a, b));
                inst.costs.push(0.0);
                inst.edge_fact.push(i);
            }
        }
    }
    Ok(inst)
}

/// Solves the instance; returns, for each fact, whether the tree holds it.
pub fn select_facts(inst: &PcstInstance, pruning: Pruning) -> Result<Vec<bool>, PcstError> {
    let solution = solve(&inst.prizes, &inst.edges, &inst.costs, 1, pruning)?;
    let mut chosen = vec![false; inst.facts.len()];
    let entities = inst.entities.len();
    for &v in &solution.nodes {
        if v as usize >= entities {
            chosen[inst.virtual_fact[v as usize - entities]] = true;
        }
    }
    // A plain edge stands for its fact itself (G-Retriever); the free edges to a virtual
    // node only come with it.
    for &e in &solution.edges {
        let (a, b) = inst.edges[e as usize];
        if (a as usize) < entities && (b as usize) < entities {
            chosen[inst.edge_fact[e as usize]] = true;
        }
    }
    Ok(chosen)
}

crate::limits::named_choices!(PcstVariant, "PCST variant", { Seed003 => "seed003", GRetriever => "g-retriever" });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_prizes_go_to_the_best_positive_scores() {
        // Ranks: 0.9 (index 3), 0.7 (1), 0.7 (4; ties keep input order), then no more room.
        assert_eq!(rank_prizes(&[0.0, 0.7, 0.1, 0.9, 0.7], 3), vec![0.0, 2.0, 0.0, 3.0, 1.0]);
        // Fewer positive scores than k: the rest get nothing.
        assert_eq!(rank_prizes(&[0.0, 2.0, 0.0], 3), vec![0.0, 3.0, 0.0]);
        assert_eq!(rank_prizes(&[], 3), Vec::<f64>::new());
    }

    /// G-Retriever's rule worked by hand, k = 3, c = 0.01: distinct values 0.9, 0.5, 0.2.
    /// 0.9 (one fact): min(3 / 1, 3) = 3, ceiling 2.97; 0.5 (two facts): min(2 / 2, 2.97) = 1,
    /// ceiling 0.99; 0.2 (one fact): min(1 / 1, 0.99) = 0.99; 0.1 is below the top 3.
    #[test]
    fn decayed_prizes_split_and_decay() {
        let p = decayed_prizes(&[0.5, 0.9, 0.1, 0.5, 0.2, 0.0], 3, 0.01);
        let want = [1.0, 3.0, 0.0, 1.0, 0.99, 0.0];
        for (g, w) in p.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{p:?}");
        }
        // One distinct value: k shrinks to 1, and its prize 1 is split four ways.
        let p = decayed_prizes(&[0.4, 0.4, 0.4, 0.4], 2, 0.01);
        assert_eq!(p, vec![0.25; 4]);
    }
}
