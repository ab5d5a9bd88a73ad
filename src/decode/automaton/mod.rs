//! The constraint automaton (schema/gsr-decoding.md §3): the token strings a decoder may write for one
//! request, read lazily from the store.
//!
//! After the decoder start token a sequence is
//! `H name(e1) B1 name(r1) B2 name(e2) ( T | B3 name(r2) B4 name(e3) T ) EOS`, one candidate
//! path of the request's mentioned entities. A [`PathGraph`] is built per request; each beam
//! holds a small `Copy` [`State`] that [`PathGraph::advance`] moves by one token (never a
//! re-walk from the root).
//!
//! How it works. Every position that names a term (e1, r1, e2, r2, e3) is a *group*: the
//! partial paths consistent with everything written before the name, grouped into
//! *members* by the token list of the term they name there (homonyms: one member, several
//! partial paths) and the members sorted by token list. The members still consistent with
//! the tokens read inside the name are then a contiguous range (binary search per token);
//! the distinct next tokens come from the range by skipping equal runs, at most one member
//! (the one whose list is the tokens read) ends there, and per-group prefix sums of entity
//! masses give p_graph in O(log n). A group is built the first time a beam enters it, and
//! everything read from the store (candidate lists, relation lists, neighbour lists, token
//! lists, liveness, entity scores) is cached for the request and shared by all beams.
//!
//! Dead ends are pruned ahead: a group holds only partial paths that some complete path
//! continues (a relation with no usable neighbour, an entity whose only second hops lead back
//! to the start, a term without a token list are never offered), so a live state's allowed set
//! is never empty.
//!
//! Two sources of paths ([`CandidateMode`]):
//! - `Capped`: exactly the paths of `candidate_subgraph(store, mentioned, cfg)`, computed per
//!   mentioned entity (they are independent) when the root group is first built;
//! - `Uncapped`: every edge of a mentioned entity and every 2-hop path m -> x -> y, y != m,
//!   read with `Store::relations_at` / `Store::neighbors_via` as beams get there; an x with
//!   more than `hub_degree` facts is not expanded for a second hop.
//!
//! Homonyms: the decoded path of a string is its first partial path in candidate order,
//! which for both sources is the order (mentioned entity in input order, first edge, second
//! edge) with edges in store order (direction, relation id, neighbour id);
//! [`DecodedPath::homonyms`] counts the candidate paths the string stands for.
//!
//! Boundary and end-of-sequence ids are reserved: a term whose token list holds one is never
//! offered (it could not be told apart from the boundary), and the boundaries that can follow
//! one another at a choice (`[Int1]`/`[Rev1]`; `[Tail]`/`[Int3]`/`[Rev3]`) must not be
//! prefixes of each other.

pub use super::boundaries::Boundaries;
use super::boundaries::{BWD1, BWD2, FWD1, FWD2, INT2, INT4, NAMES, REV2, REV4, TAIL};
use super::prior::{log_p_from_masses, log_uniform, start_recency, EntityMass, PriorConfig, PriorMode};
use crate::graph::candidates::{candidate_subgraph, CandidateConfig, Hop};
use crate::ids::{Direction, EntityId, RelationId};
use crate::linearize::Side;
use crate::store::error::ReadError;
use crate::store::tokens::TokenIndex;
use crate::store::{Edge, Store};
use std::collections::HashMap;
use std::sync::Arc;

mod reads;

/// What can go wrong building or walking a `PathGraph` (the automaton of a request).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A store read of the candidate paths or their token lists failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The tokenizer lacks a boundary token of the linearization.
    #[error("the tokenizer has no token {token:?}; it is needed for the {boundary} boundary of linearization {linearization:?}")]
    MissingBoundary {
        /// The boundary token's text (data).
        token: String,
        /// Which boundary (`head`, `int1`, ...).
        boundary: String,
        /// The linearization's name (data).
        linearization: String,
    },
    /// A boundary that encodes to no token at all.
    #[error("the {boundary} boundary has no token")]
    EmptyBoundary {
        /// Which boundary.
        boundary: &'static str,
    },
    /// Two boundaries that may follow the same name, one a token prefix of the other.
    #[error("the boundaries {first} and {second} can follow the same name but {first} is a prefix of {second}: a decoder could not tell them apart")]
    AmbiguousBoundaries {
        /// The shorter boundary.
        first: &'static str,
        /// The boundary it is a prefix of.
        second: &'static str,
    },
    /// The end-of-sequence token is one of a boundary's tokens.
    #[error("the end-of-sequence id {eos} is also a token of the {boundary} boundary")]
    EosInBoundary {
        /// The end-of-sequence id.
        eos: u32,
        /// The boundary holding it.
        boundary: &'static str,
    },
    /// A state that no walk of this graph produced (another request's, or made up).
    #[error("a decoding state that does not belong to this request's path graph")]
    ForeignState,
    /// A search advanced by a token `allowed` did not offer (a bug of the caller, reported).
    #[error("token {token} is not allowed after this decoding state")]
    NotAllowed {
        /// The token advanced by.
        token: u32,
    },
    /// Recency ages given to a path graph already walked.
    #[error("the mentioned entities' ages were set after decoding started")]
    AgesAfterStart,
}

/// The unconstrained search's constraint never fails.
impl From<std::convert::Infallible> for DecodeError {
    fn from(never: std::convert::Infallible) -> DecodeError {
        match never {}
    }
}

/// Where the paths come from.
#[derive(Clone, Debug)]
pub enum CandidateMode {
    /// Exactly the paths of `candidate_subgraph` with this configuration.
    Capped(CandidateConfig),
    /// The whole 1- and 2-hop neighbourhood; an entity with more than `hub_degree` facts is
    /// not expanded for a second hop (it can still end a 1-hop path).
    Uncapped {
        /// Facts above which an entity is not expanded for a second hop.
        hub_degree: usize,
    },
}

impl Default for CandidateMode {
    fn default() -> Self {
        CandidateMode::Capped(CandidateConfig::default())
    }
}

/// A finished sequence as a path of the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedPath {
    /// 1 or 2 hops from the first entity.
    pub hops: Vec<Hop>,
    /// How many candidate paths the token string stands for (1: no homonym); `hops` is the
    /// first of them in candidate order.
    pub homonyms: usize,
}

/// One beam's position in the automaton: small and `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State(Phase);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// `off` tokens of the head boundary written.
    Head { off: u32 },
    /// Inside a name: members `lo..hi` of `group` agree with the `depth` tokens read.
    Name { group: u32, lo: u32, hi: u32, depth: u32 },
    /// Inside the boundary after member `member`'s name: the choices in `mask` agree with the
    /// `off` tokens read.
    Boundary { group: u32, member: u32, mask: u16, off: u32 },
    /// After `[Tail]`: only EOS.
    End { group: u32, member: u32 },
    /// After EOS.
    Done { group: u32, member: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    E1,
    R1,
    E2,
    R2,
    E3,
}

impl Slot {
    fn side(self) -> Side {
        match self {
            Slot::R1 | Slot::R2 => Side::Relation,
            _ => Side::Entity,
        }
    }
}

/// A partial path; its order is the candidate order. Fields after the slot being named
/// are placeholders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Item {
    mention: u32,
    m: EntityId,
    hop1: Edge,
    hop2: Edge,
}

const NONE_EDGE: Edge = Edge { direction: Direction::Out, relation: RelationId(u32::MAX), other: EntityId(u32::MAX) };

impl Item {
    /// The term this item names at `slot`.
    fn term(&self, slot: Slot) -> u32 {
        match slot {
            Slot::E1 => self.m.0,
            Slot::R1 => self.hop1.relation.0,
            Slot::E2 => self.hop1.other.0,
            Slot::R2 => self.hop2.relation.0,
            Slot::E3 => self.hop2.other.0,
        }
    }
}

struct Member {
    start: u32,
    len: u32,
    /// Partial paths in candidate order.
    items: Vec<Item>,
    /// The boundaries that may follow this name, once asked for.
    ends: Option<Ends>,
}

struct Ends {
    mask: u16,
    /// (first token of a following boundary, the mass it receives), by token.
    shares: Vec<(u32, f64)>,
}

struct Group {
    slot: Slot,
    tokens: Vec<u32>,
    members: Vec<Member>,
    /// prefix[i]: the summed mass of members 0..i (entity groups under a scoring prior).
    prefix: Vec<f64>,
    /// Each member's own mass, where a difference of prefix sums could lose it: the first
    /// entity's group under a start recency, whose factors make masses many orders of
    /// magnitude apart (a tiny mass after a big one would come out as 0, a ban).
    exact: Option<Vec<f64>>,
}

impl Group {
    /// Token `depth` of member `i`'s name (`None` when the name has ended).
    #[inline]
    fn tok(&self, i: usize, depth: u32) -> Option<u32> {
        let m = &self.members[i];
        (depth < m.len).then(|| self.tokens[(m.start + depth) as usize])
    }
}

/// First and second hops of one mentioned entity's capped candidate paths, in candidate order.
struct CappedPaths {
    one: Vec<Edge>,
    two: Vec<(Edge, Edge)>,
}

enum Source {
    Capped {
        cfg: CandidateConfig,
        paths: HashMap<EntityId, Arc<CappedPaths>>,
    },
    Uncapped {
        /// Facts above which an entity is not expanded for a second hop.
        hub_degree: usize,
    },
}

/// The paths of one request, as a token automaton (see the module documentation).
/// Single-threaded (`&mut self`: it fills caches), `Send`.
pub struct PathGraph<'a> {
    store: Arc<Store>,
    index: &'a TokenIndex,
    b: &'a Boundaries,
    mentioned: Vec<EntityId>,
    /// Per mentioned entity, messages since it was last mentioned (`set_ages`; 0 if unknown).
    ages: Vec<u32>,
    source: Source,
    prior: PriorConfig,
    mass: EntityMass,
    groups: Vec<Group>,
    children: HashMap<(u32, u32, u8), u32>,
    memo: HashMap<State, Box<[(u32, f64)]>>,
    // Store reads, shared by all beams.
    tokens: HashMap<(Side, u32), Option<Box<[u32]>>>,
    relations: HashMap<(EntityId, Direction), Arc<[RelationId]>>,
    neighbours: HashMap<(EntityId, Direction, RelationId), Arc<[EntityId]>>,
    hubs: HashMap<EntityId, bool>,
    /// Liveness of a relation at a position: (start, direction, relation, first hop as (direction, relation, neighbour)).
    live_rel: HashMap<LiveKey, bool>,
    scratch: Vec<f64>,
    scratch2: Vec<f64>,
}

/// What [`PathGraph::allowed`] writes: (token, log p_graph), ascending by token.
pub type Allowed = Vec<(u32, f64)>;

impl<'a> PathGraph<'a> {
    /// A request's automaton. `mentioned` in input order (repeats ignored); nothing is read
    /// but the prior's mentioned neighbour lists until the first step.
    pub fn new(
        store: Arc<Store>,
        index: &'a TokenIndex,
        boundaries: &'a Boundaries,
        mentioned: &[EntityId],
        mode: CandidateMode,
        prior: PriorConfig,
    ) -> Result<PathGraph<'a>, DecodeError> {
        let mut m = Vec::with_capacity(mentioned.len());
        for &e in mentioned {
            if !m.contains(&e) {
                m.push(e);
            }
        }
        let mass = EntityMass::new(store.clone(), &m, prior.clone())?;
        let source = match mode {
            CandidateMode::Capped(cfg) => Source::Capped { cfg, paths: HashMap::new() },
            CandidateMode::Uncapped { hub_degree } => Source::Uncapped { hub_degree },
        };
        Ok(PathGraph {
            store,
            index,
            b: boundaries,
            ages: vec![0; m.len()],
            mentioned: m,
            source,
            prior,
            mass,
            groups: Vec::new(),
            children: HashMap::new(),
            memo: HashMap::new(),
            tokens: HashMap::new(),
            relations: HashMap::new(),
            neighbours: HashMap::new(),
            hubs: HashMap::new(),
            live_rel: HashMap::new(),
            scratch: Vec::new(),
            scratch2: Vec::new(),
        })
    }

    /// The age of each entity given to `new` (messages since it was last mentioned, in the
    /// same order; `RetrievalInput::ages`), for the prior's start recency. Before the first
    /// step only: the first entity's group is built then.
    pub fn set_ages(&mut self, mentioned: &[EntityId], ages: &[u32]) -> Result<(), DecodeError> {
        if !self.groups.is_empty() {
            return Err(DecodeError::AgesAfterStart);
        }
        for (i, e) in self.mentioned.iter().enumerate() {
            // A repeated entity keeps its first position's age, as `new` keeps its first place.
            self.ages[i] = mentioned.iter().position(|x| x == e).and_then(|k| ages.get(k)).copied().unwrap_or(0);
        }
        Ok(())
    }

    /// The state before the first token (after the decoder start token).
    pub fn start(&self) -> State {
        State(Phase::Head { off: 0 })
    }

    /// No candidate path at all: the decoder need not run.
    pub fn is_empty(&mut self) -> Result<bool, DecodeError> {
        Ok(self.root()?.is_none())
    }

    /// The allowed next tokens (ascending) with log p_graph of each (schema/gsr-decoding.md §4; 0 for every
    /// token under `hard`), into `out` (cleared first). Never empty for a live state; after
    /// `[Tail]` only EOS; after EOS, or from the start of an empty graph, nothing.
    pub fn allowed(&mut self, s: &State, out: &mut Allowed) -> Result<(), DecodeError> {
        out.clear();
        if let Some(v) = self.memo.get(s) {
            out.extend_from_slice(v);
            return Ok(());
        }
        self.compute_allowed(s, out)?;
        self.memo.insert(*s, out.as_slice().into());
        Ok(())
    }

    /// Drops the memoized allowed sets (store reads and built groups stay cached): frees
    /// their memory; the benchmark uses it to time the computation itself.
    #[cfg(feature = "internals")]
    pub fn forget_allowed(&mut self) {
        self.memo = HashMap::new();
    }

    /// The state after `token`, `None` when `token` is not allowed.
    pub fn advance(&mut self, s: &State, token: u32) -> Result<Option<State>, DecodeError> {
        match s.0 {
            Phase::Head { off } => {
                let Some(root) = self.root()? else { return Ok(None) };
                if self.b.head.get(off as usize) != Some(&token) {
                    return Ok(None);
                }
                if off as usize + 1 < self.b.head.len() {
                    return Ok(Some(State(Phase::Head { off: off + 1 })));
                }
                let n = self.groups[root as usize].members.len() as u32;
                Ok(Some(State(Phase::Name { group: root, lo: 0, hi: n, depth: 0 })))
            }
            Phase::Name { group, lo, hi, depth } => {
                let g = self.groups.get(group as usize).ok_or(DecodeError::ForeignState)?;
                if lo >= hi || hi as usize > g.members.len() {
                    return Err(DecodeError::ForeignState);
                }
                let ending = g.tok(lo as usize, depth).is_none();
                let first = if ending { lo + 1 } else { lo };
                let (lo2, hi2) = equal_run(g, first as usize, hi as usize, depth, token);
                if lo2 < hi2 {
                    return Ok(Some(State(Phase::Name { group, lo: lo2 as u32, hi: hi2 as u32, depth: depth + 1 })));
                }
                if !ending {
                    return Ok(None);
                }
                let mask = self.ends(group, lo)?.mask;
                let mask = self.narrow(mask, 0, token);
                self.after_boundary_token(group, lo, mask, 1)
            }
            Phase::Boundary { group, member, mask, off } => {
                let mask = self.narrow(mask, off, token);
                self.after_boundary_token(group, member, mask, off + 1)
            }
            Phase::End { group, member } => Ok((token == self.b.eos).then_some(State(Phase::Done { group, member }))),
            Phase::Done { .. } => Ok(None),
        }
    }

    /// The path a finished state (after EOS, or after `[Tail]`) stands for.
    pub fn path(&self, s: &State) -> Option<DecodedPath> {
        let (Phase::End { group, member } | Phase::Done { group, member }) = s.0 else { return None };
        let g = self.groups.get(group as usize)?;
        let mem = g.members.get(member as usize)?;
        let first = mem.items.first()?;
        let hop1 = Hop { from: first.m, edge: first.hop1 };
        let hops = match g.slot {
            Slot::E2 => vec![hop1],
            Slot::E3 => vec![hop1, Hop { from: first.hop1.other, edge: first.hop2 }],
            _ => return None,
        };
        Some(DecodedPath { hops, homonyms: mem.items.len() })
    }

    /// Whether a state is after EOS.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_done(&self, s: &State) -> bool {
        matches!(s.0, Phase::Done { .. })
    }

    /// Walks `tokens` (without the decoder start token, ending with EOS) through this
    /// automaton: the candidate path it writes, or `None`.
    #[cfg(test)]
    pub fn accepts(&mut self, tokens: &[u32]) -> Result<Option<DecodedPath>, DecodeError> {
        let mut s = self.start();
        for &t in tokens {
            match self.advance(&s, t)? {
                Some(n) => s = n,
                None => return Ok(None),
            }
        }
        Ok(if self.is_done(&s) { self.path(&s) } else { None })
    }

    /// For mode `none`: a free sequence (without the decoder start token, ending with EOS)
    /// read back as a path of the store, whatever the candidate set: the first match in
    /// store order (first entity id, then edges in store order), `homonyms` counting every
    /// match. A second hop never returns to the first entity. `None` when the sequence is
    /// not `H name B1 name B2 name (T | B3 name B4 name T) EOS` or names no stored path.
    pub fn parse(&mut self, tokens: &[u32]) -> Result<Option<DecodedPath>, DecodeError> {
        let Some(parsed) = split_path(self.b, tokens) else { return Ok(None) };
        let mut found: Vec<Vec<Hop>> = Vec::new();
        let starts = self.index.complete(Side::Entity, parsed.names[0])?;
        for e1 in starts.into_iter().map(EntityId) {
            for x in self.parse_hop(e1, parsed.dirs[0], parsed.names[1], parsed.names[2], None)? {
                let hop1 = Hop { from: e1, edge: x };
                if parsed.dirs.len() == 1 {
                    found.push(vec![hop1]);
                    continue;
                }
                for y in self.parse_hop(x.other, parsed.dirs[1], parsed.names[3], parsed.names[4], Some(e1))? {
                    found.push(vec![hop1, Hop { from: x.other, edge: y }]);
                }
            }
        }
        let homonyms = found.len();
        Ok(found.into_iter().next().map(|hops| DecodedPath { hops, homonyms }))
    }

    fn parse_hop(&mut self, from: EntityId, dir: Direction, rel: &[u32], to: &[u32], avoid: Option<EntityId>) -> Result<Vec<Edge>, DecodeError> {
        let mut out = Vec::new();
        for r in self.store.relations_at(from, dir)?.into_iter().map(|(r, _)| r) {
            if self.index.tokens(Side::Relation, r.0)?.as_deref() != Some(rel) {
                continue;
            }
            let ns = self.store.neighbors_via(from, dir, r)?;
            let ids: Vec<u32> = ns.iter().map(|e| e.0).collect();
            for (n, t) in ns.iter().zip(self.index.tokens_many(Side::Entity, &ids)?) {
                if Some(*n) != avoid && t.as_deref() == Some(to) {
                    out.push(Edge { direction: dir, relation: r, other: *n });
                }
            }
        }
        Ok(out)
    }

    // ---- allowed sets ----

    fn compute_allowed(&mut self, s: &State, out: &mut Allowed) -> Result<(), DecodeError> {
        match s.0 {
            Phase::Head { off } => {
                if self.root()?.is_some() {
                    let t = *self.b.head.get(off as usize).ok_or(DecodeError::ForeignState)?;
                    out.push((t, 0.0));
                }
            }
            Phase::Name { group, lo, hi, depth } => {
                let g = self.groups.get(group as usize).ok_or(DecodeError::ForeignState)?;
                if lo >= hi || hi as usize > g.members.len() {
                    return Err(DecodeError::ForeignState);
                }
                let scored = self.prior.scores_entities() && g.slot.side() == Side::Entity;
                let mut masses = std::mem::take(&mut self.scratch);
                masses.clear();
                let ending = g.tok(lo as usize, depth).is_none();
                let mut i = if ending { lo as usize + 1 } else { lo as usize };
                while i < hi as usize {
                    let w = g.tok(i, depth).ok_or(DecodeError::ForeignState)?;
                    let j = i + g.members[i..hi as usize].partition_point(|m| m.len > depth && g.tokens[(m.start + depth) as usize] <= w);
                    out.push((w, 0.0));
                    if scored {
                        masses.push(match &g.exact {
                            Some(each) => each[i..j].iter().sum(),
                            None => g.prefix[j] - g.prefix[i],
                        });
                    }
                    i = j;
                }
                if ending {
                    let ends = self.ends(group, lo)?;
                    for &(t, m) in &ends.shares {
                        out.push((t, 0.0));
                        masses.push(m);
                    }
                }
                self.fill_log_p(scored, &masses, out);
                self.scratch = masses;
                // Name tokens come first, ascending; boundary tokens (reserved, never in a
                // name) after: one sort makes the whole list ascending.
                out.sort_unstable_by_key(|&(t, _)| t);
            }
            Phase::Boundary { mask, off, .. } => {
                for c in 0..NAMES.len() as u8 {
                    if mask & (1 << c) != 0 {
                        if let Some(&t) = self.b.seq(c).get(off as usize) {
                            out.push((t, 0.0));
                        }
                    }
                }
                out.sort_unstable_by_key(|&(t, _)| t);
                out.dedup_by_key(|&mut (t, _)| t);
                self.fill_log_p(false, &[], out);
            }
            Phase::End { .. } => out.push((self.b.eos, 0.0)),
            Phase::Done { .. } => {}
        }
        Ok(())
    }

    /// Writes log p_graph into `out` (same order as `masses` when `scored`).
    fn fill_log_p(&mut self, scored: bool, masses: &[f64], out: &mut Allowed) {
        match self.prior.mode {
            PriorMode::None | PriorMode::Hard => out.iter_mut().for_each(|x| x.1 = 0.0),
            _ if scored => {
                let mut lp = std::mem::take(&mut self.scratch2);
                log_p_from_masses(self.prior.norm, masses, &mut lp);
                for (x, l) in out.iter_mut().zip(&lp) {
                    x.1 = *l;
                }
                self.scratch2 = lp;
            }
            _ => {
                let u = log_uniform(out.len());
                out.iter_mut().for_each(|x| x.1 = u);
            }
        }
    }

    // ---- boundaries ----

    /// The choices of `mask` whose token `off` is `token`.
    fn narrow(&self, mask: u16, off: u32, token: u32) -> u16 {
        let mut out = 0;
        for c in 0..NAMES.len() as u8 {
            if mask & (1 << c) != 0 && self.b.seq(c).get(off as usize) == Some(&token) {
                out |= 1 << c;
            }
        }
        out
    }

    /// `off` tokens of a boundary read, `mask` the choices still agreeing: a boundary that is
    /// complete (choices are prefix-free: at most one) leads on; otherwise stay inside.
    fn after_boundary_token(&mut self, group: u32, member: u32, mask: u16, off: u32) -> Result<Option<State>, DecodeError> {
        if mask == 0 {
            return Ok(None);
        }
        let done = (0..NAMES.len() as u8).find(|&c| mask & (1 << c) != 0 && self.b.seq(c).len() == off as usize);
        let Some(c) = done else { return Ok(Some(State(Phase::Boundary { group, member, mask, off }))) };
        if c == TAIL {
            return Ok(Some(State(Phase::End { group, member })));
        }
        let child = self.child(group, member, c)?;
        let n = self.groups[child as usize].members.len() as u32;
        Ok(Some(State(Phase::Name { group: child, lo: 0, hi: n, depth: 0 })))
    }

    /// The boundaries that may follow member `member`'s name, with the entity masses they
    /// receive (computed once).
    fn ends(&mut self, group: u32, member: u32) -> Result<&Ends, DecodeError> {
        let g = self.groups.get(group as usize).ok_or(DecodeError::ForeignState)?;
        let mem = g.members.get(member as usize).ok_or(DecodeError::ForeignState)?;
        if mem.ends.is_none() {
            let slot = g.slot;
            let items = mem.items.clone();
            // Per distinct entity: the choices continuing one of its candidate paths.
            let mut per_entity: Vec<(EntityId, u16)> = Vec::new();
            let mut add = |e: EntityId, bits: u16| match per_entity.iter_mut().find(|(x, _)| *x == e) {
                Some(p) => p.1 |= bits,
                None => per_entity.push((e, bits)),
            };
            for it in &items {
                match slot {
                    Slot::E1 => {
                        let mut bits = 0;
                        if self.live_dir1(it.m, Direction::Out)? {
                            bits |= 1 << FWD1;
                        }
                        if self.live_dir1(it.m, Direction::In)? {
                            bits |= 1 << BWD1;
                        }
                        add(it.m, bits);
                    }
                    Slot::R1 => add(EntityId(u32::MAX), 1 << if it.hop1.direction == Direction::Out { INT2 } else { REV2 }),
                    Slot::E2 => {
                        let mut bits = 1 << TAIL;
                        if self.live_dir2(it, Direction::Out)? {
                            bits |= 1 << FWD2;
                        }
                        if self.live_dir2(it, Direction::In)? {
                            bits |= 1 << BWD2;
                        }
                        add(it.hop1.other, bits);
                    }
                    Slot::R2 => add(EntityId(u32::MAX), 1 << if it.hop2.direction == Direction::Out { INT4 } else { REV4 }),
                    Slot::E3 => add(it.hop2.other, 1 << TAIL),
                }
            }
            let mut mask = 0u16;
            let mut shares: Vec<(u32, f64)> = Vec::new();
            let scored = self.prior.scores_entities() && slot.side() == Side::Entity;
            for (e, bits) in per_entity {
                mask |= bits;
                let mut firsts: Vec<u32> = (0..NAMES.len() as u8).filter(|c| bits & (1 << c) != 0).map(|c| self.b.seq(c)[0]).collect();
                firsts.sort_unstable();
                firsts.dedup();
                let m = if scored { self.slot_mass(slot, e)? } else { 0.0 };
                for t in &firsts {
                    let share = m / firsts.len() as f64;
                    match shares.iter_mut().find(|(x, _)| x == t) {
                        Some(s) => s.1 += share,
                        None => shares.push((*t, share)),
                    }
                }
            }
            shares.sort_unstable_by_key(|&(t, _)| t);
            self.groups[group as usize].members[member as usize].ends = Some(Ends { mask, shares });
        }
        Ok(self.groups[group as usize].members[member as usize].ends.as_ref().expect("filled above"))
    }

    // ---- groups ----

    /// The group of the first entity, built on first use; `None` when there is no path.
    fn root(&mut self) -> Result<Option<u32>, DecodeError> {
        if self.groups.is_empty() {
            let mut items = Vec::new();
            for (i, &m) in self.mentioned.clone().iter().enumerate() {
                if self.valid(Side::Entity, m.0)? && (self.live_dir1(m, Direction::Out)? || self.live_dir1(m, Direction::In)?) {
                    items.push(Item { mention: i as u32, m, hop1: NONE_EDGE, hop2: NONE_EDGE });
                }
            }
            self.build_group(Slot::E1, items)?;
        }
        Ok((!self.groups[0].members.is_empty()).then_some(0))
    }

    /// The group after member `member` of `group` and boundary choice `c` (built once).
    fn child(&mut self, group: u32, member: u32, c: u8) -> Result<u32, DecodeError> {
        if let Some(&g) = self.children.get(&(group, member, c)) {
            return Ok(g);
        }
        let g = self.groups.get(group as usize).ok_or(DecodeError::ForeignState)?;
        let items = g.members.get(member as usize).ok_or(DecodeError::ForeignState)?.items.clone();
        let dir = |fwd: bool| if fwd { Direction::Out } else { Direction::In };
        let mut next = Vec::new();
        let slot = match c {
            FWD1 | BWD1 => {
                let d = dir(c == FWD1);
                for it in &items {
                    for &r in self.rels1(it.m, d)?.iter() {
                        if self.live_r1(it.m, d, r)? {
                            next.push(Item { hop1: Edge { direction: d, relation: r, other: EntityId(u32::MAX) }, ..*it });
                        }
                    }
                }
                Slot::R1
            }
            INT2 | REV2 => {
                for it in &items {
                    let (d, r) = (it.hop1.direction, it.hop1.relation);
                    let ns = self.nbrs1(it.m, d, r)?;
                    self.prefetch(Side::Entity, ns.iter().map(|e| e.0))?;
                    for &x in ns.iter() {
                        if self.valid(Side::Entity, x.0)? {
                            next.push(Item { hop1: Edge { direction: d, relation: r, other: x }, ..*it });
                        }
                    }
                }
                Slot::E2
            }
            FWD2 | BWD2 => {
                let d = dir(c == FWD2);
                for it in &items {
                    for &r in self.rels2(it, d)?.iter() {
                        let it2 = Item { hop2: Edge { direction: d, relation: r, other: EntityId(u32::MAX) }, ..*it };
                        if self.live_r2(&it2)? {
                            next.push(it2);
                        }
                    }
                }
                Slot::R2
            }
            INT4 | REV4 => {
                for it in &items {
                    let ns = self.nbrs2(it, it.hop2.direction, it.hop2.relation)?;
                    self.prefetch(Side::Entity, ns.iter().map(|e| e.0))?;
                    for &y in ns.iter() {
                        if self.valid(Side::Entity, y.0)? {
                            next.push(Item { hop2: Edge { other: y, ..it.hop2 }, ..*it });
                        }
                    }
                }
                Slot::E3
            }
            _ => return Err(DecodeError::ForeignState),
        };
        let id = self.build_group(slot, next)?;
        self.children.insert((group, member, c), id);
        Ok(id)
    }

    /// Groups `items` (every one live, every term with a usable token list) by token list.
    fn build_group(&mut self, slot: Slot, mut items: Vec<Item>) -> Result<u32, DecodeError> {
        items.sort_unstable();
        items.dedup();
        let side = slot.side();
        self.prefetch(side, items.iter().map(|it| it.term(slot)))?;
        let mut keyed: Vec<(&[u32], Item)> = Vec::with_capacity(items.len());
        for it in &items {
            if let Some(Some(t)) = self.tokens.get(&(side, it.term(slot))) {
                keyed.push((t, *it));
            }
        }
        keyed.sort_unstable();
        let mut tokens = Vec::new();
        let mut members: Vec<Member> = Vec::new();
        let mut last: Option<&[u32]> = None;
        for (t, it) in keyed {
            if last != Some(t) {
                members.push(Member { start: tokens.len() as u32, len: t.len() as u32, items: Vec::new(), ends: None });
                tokens.extend_from_slice(t);
                last = Some(t);
            }
            members.last_mut().expect("pushed").items.push(it);
        }
        let mut prefix = vec![0.0; members.len() + 1];
        let mut exact = (slot == Slot::E1 && self.prior.start_recency > 0.0).then(|| vec![0.0; members.len()]);
        if self.prior.scores_entities() && side == Side::Entity {
            for (i, m) in members.iter().enumerate() {
                // Once per distinct entity of the member (a homonym reached twice counts once).
                let mut es: Vec<u32> = m.items.iter().map(|it| it.term(slot)).collect();
                es.sort_unstable();
                es.dedup();
                let mut sum = 0.0;
                for e in es {
                    sum += self.slot_mass(slot, EntityId(e))?;
                }
                prefix[i + 1] = prefix[i] + sum;
                if let Some(each) = exact.as_mut() {
                    each[i] = sum;
                }
            }
        }
        self.groups.push(Group { slot, tokens, members, prefix, exact });
        Ok(self.groups.len() as u32 - 1)
    }

    /// An entity's prior mass at a name position: its mass, and at the path's first entity
    /// the start recency's factor for its age.
    fn slot_mass(&mut self, slot: Slot, e: EntityId) -> Result<f64, DecodeError> {
        let m = self.mass.mass(e)?;
        if slot != Slot::E1 || self.prior.start_recency == 0.0 {
            return Ok(m);
        }
        let age = self.mentioned.iter().position(|&x| x == e).map_or(0, |i| self.ages[i]);
        Ok(start_recency(self.prior.norm, self.prior.start_recency, age, m))
    }
}

/// Liveness cache key: (start, direction, relation, first hop or `NONE_EDGE`).
type LiveKey = (EntityId, Direction, RelationId, (Direction, u32, u32));

fn edge_key(e: Edge) -> (Direction, u32, u32) {
    (e.direction, e.relation.0, e.other.0)
}

/// The capped second hops after `hop1` (the list is sorted by first hop).
fn second_hops(p: &CappedPaths, hop1: Edge) -> &[(Edge, Edge)] {
    let lo = p.two.partition_point(|(a, _)| *a < hop1);
    let hi = lo + p.two[lo..].partition_point(|(a, _)| *a == hop1);
    &p.two[lo..hi]
}

/// Members of `lo..hi` (all with a token at `depth`) whose token at `depth` is `w`.
fn equal_run(g: &Group, lo: usize, hi: usize, depth: u32, w: u32) -> (usize, usize) {
    let key = |m: &Member| if m.len > depth { g.tokens[(m.start + depth) as usize] } else { 0 };
    let members = &g.members[lo.min(hi)..hi];
    let a = members.partition_point(|m| key(m) < w);
    let b = members.partition_point(|m| key(m) <= w);
    (lo + a, lo + b)
}

/// A sequence cut at its boundaries: 3 names and 1 direction (one hop) or 5 and 2.
struct SplitPath<'t> {
    names: Vec<&'t [u32]>,
    dirs: Vec<Direction>,
}

/// `H name B1 name B2 name (T | B3 name B4 name T) EOS`, names free of reserved ids.
fn split_path<'t>(b: &Boundaries, tokens: &'t [u32]) -> Option<SplitPath<'t>> {
    let mut rest = tokens.strip_prefix(&b.head[..])?.strip_suffix(&[b.eos])?;
    let mut names = Vec::new();
    let mut dirs = Vec::new();
    let name = |rest: &mut &'t [u32]| -> &'t [u32] {
        let n = rest.iter().position(|t| b.reserved.binary_search(t).is_ok()).unwrap_or(rest.len());
        let (a, z) = rest.split_at(n);
        *rest = z;
        a
    };
    let take = |rest: &mut &'t [u32], seq: &[u32]| -> bool {
        match rest.strip_prefix(seq) {
            Some(z) => {
                *rest = z;
                true
            }
            None => false,
        }
    };
    names.push(name(&mut rest));
    for hop in 0..2 {
        let (fwd, bwd, fwd2, bwd2) = if hop == 0 { (FWD1, BWD1, INT2, REV2) } else { (FWD2, BWD2, INT4, REV4) };
        let d = if take(&mut rest, b.seq(fwd)) {
            Direction::Out
        } else if take(&mut rest, b.seq(bwd)) {
            Direction::In
        } else {
            return None;
        };
        names.push(name(&mut rest));
        if !take(&mut rest, b.seq(if d == Direction::Out { fwd2 } else { bwd2 })) {
            return None;
        }
        names.push(name(&mut rest));
        dirs.push(d);
        if rest == b.tail.as_slice() {
            return Some(SplitPath { names, dirs });
        }
    }
    None
}
