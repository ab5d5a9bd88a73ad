//! One retriever interface and the non-neural retrievers: `all`, `random`, `bm25`, `katz`
//! and `pcst`, over the capped candidate subgraph of the entities linked in the dialog
//! history.

pub mod bm25;
pub mod jsonl;
pub mod pcst;

use crate::error::StoreError;
use crate::graph::candidates::{candidate_subgraph, CandidateConfig, Candidates, Fact, Hop};
use crate::graph::informativeness::{Informativeness, KatzConfig};
use crate::ids::EntityId;
use crate::link::{LinkConfig, Linker, Message};
use crate::model::tokenizer::fnv1a64;
use crate::store::Store;
use pcst::{PcstConfig, PcstVariant};

/// A retrieved path (1 or 2 hops) with its score and a short explanation.
#[derive(Clone, Debug)]
pub struct ScoredPath {
    pub hops: Vec<Hop>,
    pub score: f64,
    pub explanation: String,
}

/// What retrievers see: the dialog history (oldest first) and the entities linked in it.
pub struct RetrievalInput<'a> {
    pub history: &'a [Message],
    pub mentioned: Vec<EntityId>,
}

/// Which retriever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RetrieverKind {
    /// Every candidate path, in candidate order.
    All,
    /// The candidates in a seeded random order.
    Random,
    /// BM25 of verbalized paths against the last 1..L messages, averaged (seed 003).
    Bm25,
    /// The informativeness of the path's entities with respect to the mentioned ones.
    Katz,
    /// The paths inside a prize-collecting Steiner tree of the candidates (seed 003 /
    /// G-Retriever prizes), by the mean BM25 relevance of their facts.
    Pcst,
}

#[derive(Clone, Debug)]
pub struct RetrieverConfig {
    pub kind: RetrieverKind,
    pub candidates: CandidateConfig,
    pub link: LinkConfig,
    pub katz: KatzConfig,
    /// BM25: average over the last 1..=L messages.
    pub bm25_turns: usize,
    pub seed: u64,
    pub pcst: PcstConfig,
}

impl RetrieverConfig {
    pub fn new(kind: RetrieverKind) -> RetrieverConfig {
        RetrieverConfig {
            kind,
            candidates: CandidateConfig::default(),
            link: LinkConfig::default(),
            katz: KatzConfig::default(),
            bm25_turns: 3,
            seed: 42,
            pcst: PcstConfig::new(PcstVariant::Seed003),
        }
    }
}

pub struct Retriever<'s> {
    store: &'s Store,
    linker: Linker<'s>,
    cfg: RetrieverConfig,
}

impl<'s> Retriever<'s> {
    pub fn new(store: &'s Store, cfg: RetrieverConfig) -> Retriever<'s> {
        Retriever { store, linker: Linker::new(store, cfg.link.clone()), cfg }
    }

    pub fn linker(&self) -> &Linker<'s> {
        &self.linker
    }

    /// Links the history, then ranks its candidate paths; best first.
    pub fn retrieve(&self, history: &[Message]) -> Result<Vec<ScoredPath>, StoreError> {
        let mentions = self.linker.link_dialog(history)?;
        let mentioned = self.linker.turn_entities(&mentions, history.len()).into_iter().map(|(e, _)| e).collect();
        self.rank(&RetrievalInput { history, mentioned })
    }

    /// Ranks the candidate paths of already linked entities.
    pub fn rank(&self, input: &RetrievalInput<'_>) -> Result<Vec<ScoredPath>, StoreError> {
        let cand = candidate_subgraph(self.store, &input.mentioned, &self.cfg.candidates)?;
        let mut paths: Vec<Vec<Hop>> = cand.one_hop.iter().map(|h| vec![*h]).collect();
        paths.extend(cand.two_hop.iter().map(|p| p.to_vec()));
        let mut scored: Vec<ScoredPath> = match self.cfg.kind {
            RetrieverKind::All => paths.into_iter().map(|hops| ScoredPath { hops, score: 1.0, explanation: "candidate".into() }).collect(),
            RetrieverKind::Random => {
                let text: String = input.history.iter().map(|m| m.text.as_str()).collect();
                let mut state = self.cfg.seed ^ fnv1a64(text.as_bytes());
                paths
                    .into_iter()
                    .map(|hops| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ScoredPath { hops, score: (state >> 11) as f64 / (1u64 << 53) as f64, explanation: "seeded random".into() }
                    })
                    .collect()
            }
            RetrieverKind::Bm25 => {
                let names = Names::load(self.store, &cand)?;
                let docs: Vec<String> = paths.iter().map(|p| names.path(p)).collect();
                let scores = bm25::mean_over_last_turns(&docs, input.history, self.cfg.bm25_turns);
                paths
                    .into_iter()
                    .zip(docs)
                    .zip(scores)
                    .map(|((hops, doc), score)| ScoredPath { hops, score, explanation: format!("bm25 of {doc:?}") })
                    .collect()
            }
            RetrieverKind::Katz => {
                let mut inf = Informativeness::new(self.store, &input.mentioned, self.cfg.katz.clone())?;
                let mut out = Vec::with_capacity(paths.len());
                for hops in paths {
                    // The entities the path reaches, beyond the mentioned start.
                    let reached: Vec<EntityId> = hops.iter().map(|h| h.edge.other).collect();
                    let mut total = 0.0;
                    for &e in &reached {
                        total += inf.score(e)?.value;
                    }
                    let score = total / reached.len() as f64;
                    out.push(ScoredPath { hops, score, explanation: format!("mean informativeness {score:.4}") });
                }
                out
            }
            RetrieverKind::Pcst => self.pcst_paths(&cand, paths, input.history)?,
        };
        // Stable: ties keep candidate order, so results are deterministic.
        scored.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(scored)
    }

    /// The PCST instance of a candidate subgraph (what `pcst` solves), for inspection and
    /// for checking the solver against other implementations.
    pub fn pcst_instance(&self, cand: &Candidates, history: &[Message]) -> Result<pcst::PcstInstance, StoreError> {
        let names = Names::load(self.store, cand)?;
        pcst::build_instance::<StoreError>(cand, history, self.cfg.bm25_turns, &self.cfg.pcst, |e| Ok(names.entity(e).to_owned()), |f| Ok(names.fact(f)))
    }

    fn pcst_paths(&self, cand: &Candidates, paths: Vec<Vec<Hop>>, history: &[Message]) -> Result<Vec<ScoredPath>, StoreError> {
        let inst = self.pcst_instance(cand, history)?;
        let chosen = pcst::select_facts(&inst, self.cfg.pcst.pruning)?;
        let index: hashbrown::HashMap<Fact, usize> = inst.facts.iter().enumerate().map(|(i, &f)| (f, i)).collect();
        let mut seen: hashbrown::HashSet<Vec<Fact>> = hashbrown::HashSet::new();
        let mut out = Vec::new();
        for hops in paths {
            let facts: Vec<Fact> = hops.iter().map(|h| h.fact()).collect();
            let ids: Vec<usize> = facts.iter().map(|f| index[f]).collect();
            if !ids.iter().all(|&i| chosen[i]) || !seen.insert(facts) {
                continue;
            }
            let score = ids.iter().map(|&i| inst.fact_relevance[i]).sum::<f64>() / ids.len() as f64;
            let variant = match self.cfg.pcst.variant {
                PcstVariant::Seed003 => "seed 003",
                PcstVariant::GRetriever => "G-Retriever",
            };
            out.push(ScoredPath { hops, score, explanation: format!("in the {variant} Steiner tree; mean fact relevance {score:.4}") });
        }
        Ok(out)
    }

    fn entity_name(&self, e: EntityId) -> Result<String, StoreError> {
        Ok(self.store.entity(e)?.map(|r| r.name).unwrap_or_default())
    }

    /// "head relation tail", the relation name lowercased with `_`/`-` as spaces.
    pub fn verbalize_fact(&self, (s, r, o): Fact) -> Result<String, StoreError> {
        let rel = self.store.relation(r)?.map(|r| r.name).unwrap_or_default();
        Ok(format!("{} {} {}", self.entity_name(s)?, relation_phrase(&rel), self.entity_name(o)?))
    }

    /// A path's facts verbalized one after the other.
    pub fn verbalize(&self, hops: &[Hop]) -> Result<String, StoreError> {
        let parts = hops.iter().map(|h| self.verbalize_fact(h.fact())).collect::<Result<Vec<_>, _>>()?;
        Ok(parts.join(" "))
    }
}

/// A relation name as words: lowercased, `_` and `-` as spaces.
fn relation_phrase(name: &str) -> String {
    name.to_lowercase().replace(['_', '-'], " ")
}

/// The names a candidate subgraph needs, read in two batched reads rather than one point
/// read per mention.
struct Names {
    entities: hashbrown::HashMap<EntityId, String>,
    relations: hashbrown::HashMap<crate::ids::RelationId, String>,
}

impl Names {
    fn load(store: &Store, cand: &Candidates) -> Result<Names, StoreError> {
        let facts = cand.one_hop.iter().map(|h| h.fact()).chain(cand.two_hop.iter().flat_map(|p| [p[0].fact(), p[1].fact()]));
        let (mut es, mut rs) = (Vec::new(), Vec::new());
        for (s, r, o) in facts {
            es.extend([s, o]);
            rs.push(r);
        }
        es.sort_unstable();
        es.dedup();
        rs.sort_unstable();
        rs.dedup();
        let entities = es.iter().copied().zip(store.entity_names(&es)?).map(|(e, n)| (e, n.unwrap_or_default())).collect();
        let relations = rs.iter().copied().zip(store.relation_names(&rs)?).map(|(r, n)| (r, relation_phrase(&n.unwrap_or_default()))).collect();
        Ok(Names { entities, relations })
    }

    fn entity(&self, e: EntityId) -> &str {
        self.entities.get(&e).map_or("", String::as_str)
    }

    fn fact(&self, (s, r, o): Fact) -> String {
        format!("{} {} {}", self.entity(s), self.relations.get(&r).map_or("", String::as_str), self.entity(o))
    }

    fn path(&self, hops: &[Hop]) -> String {
        let mut out = String::new();
        for (i, h) in hops.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&self.fact(h.fact()));
        }
        out
    }
}
