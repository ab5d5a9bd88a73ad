//! Entity informativeness S(e, M) (DialogGSR eq. 5-6): how strongly an entity is tied to the
//! entities a dialog mentions, on the undirected view of the stored graph.
//!
//! S(e, M) = mean over m in M of  sum_{k=1..K} beta^k (A^k)[e, m]
//!
//! where A is the 0/1 adjacency of the undirected view (A[x, y] = 1 when some fact links x
//! and y in either direction, whatever the relation; a fact from x to itself makes A[x, x] =
//! 1). K = 1 is the connection count. (A^2)[e, m] = |N(e) ∩ N(m)| and (A^3)[e, m] = sum over
//! x in N(e) of |N(x) ∩ N(m)|, computed by intersecting sorted neighbour lists read from the
//! store: the graph is never loaded.
//!
//! Hub guard: an entity with more than `hub_degree` facts never has its neighbour list read
//! (millions of ids in a Wikidata-sized graph). Scored, its connection term A[e, m] comes
//! from m's list; its K >= 2 terms are skipped. As an intermediate of a K = 3 path it is
//! skipped. A mentioned hub is guarded the same way: its list is never read, its
//! connection term A[e, m] comes from e's list (skipped when e is a hub too) and its
//! K >= 2 terms are skipped. Either way the result says so (`truncated`). The mentioned
//! entities' lists are read once per mentioned set.

use crate::ids::EntityId;
use crate::store::error::ReadError;
use crate::store::Store;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

/// The longest path length K summed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Depth {
    /// K = 1: the connection count.
    One = 1,
    /// K = 2: the paper's setting.
    Two = 2,
    /// K = 3.
    Three = 3,
}

/// The settings of S(e, M).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KatzConfig {
    /// The longest path length K summed over (default 2).
    pub k: Depth,
    /// The decay beta of a path of length k, beta^k (default 0.5).
    pub beta: f64,
    /// Entities with more facts than this are hubs (see the module documentation).
    pub hub_degree: usize,
}

impl Default for KatzConfig {
    fn default() -> Self {
        KatzConfig { k: Depth::Two, beta: 0.5, hub_degree: 10_000 }
    }
}

/// S(e, M) of one entity.
#[derive(Clone, Debug, PartialEq)]
pub struct Score {
    /// The score.
    pub value: f64,
    /// The hub guard skipped at least one intermediate entity.
    pub truncated: bool,
}

/// The sorted, distinct neighbours of `e` in the undirected view.
pub fn neighbour_set(store: &Store, e: EntityId) -> Result<Vec<u32>, ReadError> {
    let mut out = Vec::new();
    store.for_each_neighbor(e, None, None, |edge| {
        out.push(edge.other.0);
        ControlFlow::Continue(())
    })?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// |a ∩ b| of two sorted lists.
pub fn intersection_count(a: &[u32], b: &[u32]) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Neighbour ids an `Informativeness` keeps cached (4 bytes each: 16 MB).
const DEFAULT_CACHE_IDS: usize = 4 << 20;

/// Scores entities against one mentioned set, caching neighbour lists across calls.
pub struct Informativeness {
    store: Arc<Store>,
    cfg: KatzConfig,
    /// Each mentioned entity with its neighbour list, `None` for a hub (never read).
    mentioned: Vec<(EntityId, Option<Vec<u32>>)>,
    /// Neighbour lists of intermediates (K = 3), bounded by `cache_budget` ids in all.
    cache: HashMap<u32, Vec<u32>>,
    cached_ids: usize,
    cache_budget: usize,
    scores: HashMap<EntityId, Score>,
}

impl Informativeness {
    /// The scorer of the mentioned entities `mentioned` (their neighbour lists are read here).
    pub fn new(store: Arc<Store>, mentioned: &[EntityId], cfg: KatzConfig) -> Result<Informativeness, ReadError> {
        let mut m = Vec::with_capacity(mentioned.len());
        for &e in mentioned {
            let hub = facts(&store, e)? > cfg.hub_degree as u64;
            m.push((e, if hub { None } else { Some(neighbour_set(&store, e)?) }));
        }
        Ok(Informativeness { store, cfg, mentioned: m, cache: HashMap::new(), cached_ids: 0, cache_budget: DEFAULT_CACHE_IDS, scores: HashMap::new() })
    }

    /// At most this many neighbour ids stay cached (default 4M, 16 MB); past it the cache
    /// starts over. Scores do not depend on it, only how often lists are re-read.
    pub fn with_cache_budget(mut self, ids: usize) -> Informativeness {
        self.cache_budget = ids;
        self
    }

    fn neighbours(&mut self, e: u32) -> Result<&Vec<u32>, ReadError> {
        if !self.cache.contains_key(&e) {
            let n = neighbour_set(&self.store, EntityId(e))?;
            // A long-lived scorer (a whole decode) must not grow without bound: past the
            // budget the cache starts over (lists are re-read, scores stay exact).
            if self.cached_ids + n.len() > self.cache_budget {
                self.cache.clear();
                self.cached_ids = 0;
            }
            self.cached_ids += n.len();
            self.cache.insert(e, n);
        }
        Ok(&self.cache[&e])
    }

    /// S(e, M); 0 for an empty M. Scores are remembered: candidate paths share entities.
    pub fn score(&mut self, e: EntityId) -> Result<Score, ReadError> {
        if let Some(s) = self.scores.get(&e) {
            return Ok(s.clone());
        }
        let s = self.compute(e)?;
        self.scores.insert(e, s.clone());
        Ok(s)
    }

    fn compute(&mut self, e: EntityId) -> Result<Score, ReadError> {
        if self.mentioned.is_empty() {
            return Ok(Score { value: 0.0, truncated: false });
        }
        let beta = self.cfg.beta;
        // A hub's neighbour list is never read: A[e, m] comes from m's list (the view is
        // undirected), the longer paths through it are skipped and the score says so.
        let hub = self.facts(e)? > self.cfg.hub_degree as u64;
        let ne = if hub { Vec::new() } else { neighbour_set(&self.store, e)? };
        let mut total = 0.0;
        let mut truncated = hub && self.cfg.k >= Depth::Two;
        let mentioned = std::mem::take(&mut self.mentioned);
        for (m, nm) in &mentioned {
            // A[e, m] from whichever list was read; both hubs: unknown, skipped.
            let a1 = match (nm, hub) {
                (Some(nm), _) => nm.binary_search(&e.0).is_ok(),
                (None, false) => ne.binary_search(&m.0).is_ok(),
                (None, true) => {
                    truncated = true;
                    false
                }
            };
            let mut s = beta * u64::from(a1) as f64;
            let Some(nm) = nm else {
                // A mentioned hub: its K >= 2 terms need its list.
                truncated |= self.cfg.k >= Depth::Two;
                total += s;
                continue;
            };
            if self.cfg.k >= Depth::Two && !hub {
                s += beta.powi(2) * intersection_count(&ne, nm) as f64;
            }
            if self.cfg.k >= Depth::Three && !hub {
                let mut a3 = 0u64;
                for &x in &ne {
                    if self.facts(EntityId(x))? > self.cfg.hub_degree as u64 {
                        truncated = true;
                        continue;
                    }
                    a3 += intersection_count(self.neighbours(x)?, nm);
                }
                s += beta.powi(3) * a3 as f64;
            }
            total += s;
        }
        self.mentioned = mentioned;
        Ok(Score { value: total / self.mentioned.len() as f64, truncated })
    }

    /// Facts of `e` in both directions (two point reads): the hub test, before any list.
    fn facts(&self, e: EntityId) -> Result<u64, ReadError> {
        facts(&self.store, e)
    }
}

/// Facts of `e` in both directions: two point reads of the degree records.
fn facts(store: &Store, e: EntityId) -> Result<u64, ReadError> {
    Ok(store.degree(e, crate::ids::Direction::Out)? + store.degree(e, crate::ids::Direction::In)?)
}
