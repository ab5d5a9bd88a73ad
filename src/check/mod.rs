//! The fact check of a reply against the store (seed 004's fact score at engine size): the
//! reply is split into atomic claims (`claims.rs`: two linked mentions and the words between
//! them, or a mention and an entity of the dialog), and each claim is judged against the
//! graph:
//!
//! - **supported**: a stored fact connects the two entities with a relation the phrase
//!   expresses, or any stored fact does when the phrase names no relation ("Adam Sandler is a
//!   Writer"); or a two-fact path does whose two relations the phrase expresses (two films
//!   of one genre);
//! - **refuted**: the phrase names a relation that is functional in the graph, the store
//!   holds it for one of the two entities with other ends, and none is the other entity
//!   ("Mystic River was directed by Sean Penn", the store saying Clint Eastwood), when both
//!   mentions name their entities in full, written as names (not "a great drama" for the
//!   entity Drama), and no stored end's name holds the other's words (or the other way
//!   round);
//! - **not enough information** otherwise.
//!
//! Words between two mentions that deny the relation ("was not directed by") turn a
//! supported claim into a refuted one (and a refuted one into not enough information); a
//! hedged one ("maybe directed by") is no claim. Which way round the words put the two ends
//! is not read: "Larry Charles was directed by The Dictator" is supported like its reverse.
//!
//! A phrase expresses a relation when it contains one of the relation's cues: the words of
//! its name, stemmed ("directed_by": direct), and the cues a checker file learned from
//! training dialogs (`model.rs`). The fact score is the supported share of judged
//! (supported or refuted) claims; NEIP the share of claims with not enough information.
//! Each verdict carries the facts it rests on.

pub mod claims;
pub mod function_words;
pub mod model;

use crate::ids::{Direction, EntityId, RelationId};
use crate::limits::OutOfRange;
use crate::link::{DialogState, LinkConfig, Linker, Mention, Message};
use crate::porter::stem;
use crate::store::error::ReadError;
use crate::store::{Edge, Store};
use claims::{Pairing, Slot};
pub use model::{CheckerError, CheckerModel, CheckerProblem, RelationCounts};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

/// The most claims one reply makes (the rest are not judged).
pub const MAX_CLAIMS: usize = 64;
/// Edges read per entity when looking for the facts between two (a hub's are cut here).
pub const MAX_EDGES_READ: usize = 20_000;
/// Dialog entities tried as the other end of a one-mention sentence's claim.
pub const DIALOG_ENTITIES: usize = 5;
/// A word of more relation names than this is not a cue of any of them.
pub const GENERIC_NAME_WORD: usize = 4;
/// Paths kept as one verdict's evidence.
const MAX_EVIDENCE: usize = 3;
/// Relations listed as what a phrase expresses.
const MAX_LISTED_RELATIONS: usize = 8;

/// How a claim is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The graph holds it.
    Supported,
    /// The graph holds something else where only one can be true.
    Refuted,
    /// The graph can tell neither.
    NotEnoughInfo,
}

impl Verdict {
    /// Its name as the JSON and the results write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::Refuted => "refuted",
            Verdict::NotEnoughInfo => "not_enough_info",
        }
    }
}

/// One end of a claim.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClaimEntity {
    /// The words of the reply that name it (for an entity of the dialog, its name).
    pub text: String,
    /// The entity judged.
    pub id: u32,
    /// Its name in the store.
    pub name: String,
    /// Whether it comes from the dialog before the reply rather than from the reply.
    pub from_dialog: bool,
}

/// One atomic claim of a reply and its verdict.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Claim {
    /// The sentence of the reply it is in (0-based).
    pub sentence: usize,
    /// The entity first in the text (for a dialog pairing, the dialog's entity).
    pub subject: ClaimEntity,
    /// The other.
    pub object: ClaimEntity,
    /// The words that relate them.
    pub phrase: String,
    /// The relations the phrase expresses (empty: it names none, so any fact between the two
    /// supports it).
    pub relations: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// What it rests on: for a supported claim the paths (one or two facts) that connect the
    /// two; for a refuted one the stored facts that contradict it. Facts as [subject,
    /// relation, object] names.
    pub evidence: Vec<Vec<[String; 3]>>,
}

/// A reply's claims and scores.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReplyCheck {
    /// Its claims, in text order.
    pub claims: Vec<Claim>,
    /// Claims supported.
    pub supported: usize,
    /// Claims refuted.
    pub refuted: usize,
    /// Claims the graph can tell nothing of.
    pub not_enough_info: usize,
    /// Supported share of the judged claims; none when no claim was judged.
    pub fact_score: Option<f64>,
    /// Share of claims with not enough information; none when there is no claim.
    pub neip: Option<f64>,
}

impl ReplyCheck {
    fn from_claims(claims: Vec<Claim>) -> ReplyCheck {
        let count = |v| claims.iter().filter(|c| c.verdict == v).count();
        let (supported, refuted, not_enough_info) = (count(Verdict::Supported), count(Verdict::Refuted), count(Verdict::NotEnoughInfo));
        let judged = supported + refuted;
        ReplyCheck {
            fact_score: (judged > 0).then(|| supported as f64 / judged as f64),
            neip: (!claims.is_empty()).then(|| not_enough_info as f64 / claims.len() as f64),
            claims,
            supported,
            refuted,
            not_enough_info,
        }
    }
}

/// A run's scores: per-reply means (as FActScore averages) and claim totals.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CheckTotals {
    /// Replies checked.
    pub replies: usize,
    /// Replies with at least one claim.
    pub replies_with_claims: usize,
    /// Replies with at least one judged claim.
    pub replies_judged: usize,
    /// Claims, all replies.
    pub claims: usize,
    /// Supported claims.
    pub supported: usize,
    /// Refuted claims.
    pub refuted: usize,
    /// Claims with not enough information.
    pub not_enough_info: usize,
    /// Mean fact score over the replies with a judged claim.
    pub fact_score: Option<f64>,
    /// Mean NEIP over the replies with a claim.
    pub neip: Option<f64>,
    #[serde(skip)]
    fact_score_sum: f64,
    #[serde(skip)]
    neip_sum: f64,
}

impl CheckTotals {
    /// Counts one reply in.
    pub fn add(&mut self, r: &ReplyCheck) {
        self.replies += 1;
        self.claims += r.claims.len();
        self.supported += r.supported;
        self.refuted += r.refuted;
        self.not_enough_info += r.not_enough_info;
        if let Some(f) = r.fact_score {
            self.replies_judged += 1;
            self.fact_score_sum += f;
            self.fact_score = Some(self.fact_score_sum / self.replies_judged as f64);
        }
        if let Some(n) = r.neip {
            self.replies_with_claims += 1;
            self.neip_sum += n;
            self.neip = Some(self.neip_sum / self.replies_with_claims as f64);
        }
    }
}

/// Why a checker cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FactCheckError {
    /// A linking setting out of its range.
    #[error(transparent)]
    Link(#[from] OutOfRange),
    /// The store could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// A relation's cues and how functional it is.
#[derive(Clone, Debug, Default)]
struct RelationInfo {
    name: String,
    functional: bool,
    inverse_functional: bool,
}

/// Judges replies against one store. `Send + Sync`; owns its store handle.
pub struct FactChecker {
    linker: Linker,
    relations: HashMap<RelationId, RelationInfo>,
    /// A cue's first stem -> (the rest of the cue's stems, its relation).
    cues: HashMap<String, Vec<(Vec<String>, RelationId)>>,
}

/// The cue stems of a relation name's words ("Place of birth" -> place, birth).
fn name_cues(name: &str) -> Vec<Vec<String>> {
    claims::phrase_words(name)
        .into_iter()
        .filter(|w| w.len() >= 3 && !function_words::is_function_word(w) && w.chars().any(|c| c.is_alphabetic()))
        .map(|w| vec![stem(&w)])
        .collect()
}

impl FactChecker {
    /// A checker over `store`, linking as `link` says (its `rewrite` resolves the reply's
    /// pronouns before claims are made), with the learned cues and relation counts of
    /// `model` (without one: the relations' names as cues, and nothing refuted, since no
    /// relation is known to be functional). Reads every relation's name once.
    pub fn new(store: Arc<Store>, model: Option<&CheckerModel>, link: LinkConfig) -> Result<FactChecker, FactCheckError> {
        let count = store.relation_count().min(u64::from(u32::MAX)) as u32;
        let mut relations = HashMap::new();
        let mut cues: HashMap<String, Vec<(Vec<String>, RelationId)>> = HashMap::new();
        let mut seen: std::collections::HashSet<(Vec<String>, RelationId)> = std::collections::HashSet::new();
        let mut add = |stems: Vec<String>, r: RelationId| {
            if let Some((first, rest)) = stems.split_first() {
                if seen.insert((stems.clone(), r)) {
                    cues.entry(first.clone()).or_default().push((rest.to_vec(), r));
                }
            }
        };
        // Every relation's name, read once; a word in the names of more than
        // GENERIC_NAME_WORD relations ("film", "music") tells none of them apart.
        let mut names = Vec::new();
        let mut start = 0u32;
        while start < count {
            let ids: Vec<RelationId> = (start..count.min(start.saturating_add(1024))).map(RelationId).collect();
            for (id, name) in ids.iter().zip(store.relation_names(&ids)?) {
                if let Some(name) = name {
                    names.push((*id, name));
                }
            }
            start = start.saturating_add(1024);
        }
        let mut spread: HashMap<Vec<String>, usize> = HashMap::new();
        for (_, name) in &names {
            let mut own = name_cues(name);
            own.sort();
            own.dedup();
            for c in own {
                *spread.entry(c).or_default() += 1;
            }
        }
        for (id, name) in names {
            for c in name_cues(&name) {
                if spread.get(&c).is_some_and(|&n| n <= GENERIC_NAME_WORD) {
                    add(c, id);
                }
            }
            let mut info = RelationInfo { name: name.clone(), ..RelationInfo::default() };
            if let Some(m) = model {
                for cue in m.cues.get(&name).into_iter().flatten() {
                    add(claims::phrase_words(cue).iter().map(|w| stem(w)).collect(), id);
                }
                if let Some(c) = m.counts(&name) {
                    info.functional = c.functional();
                    info.inverse_functional = c.inverse_functional();
                }
            }
            relations.insert(id, info);
        }
        Ok(FactChecker { linker: Linker::new(store, link)?, relations, cues })
    }

    /// The store it checks against.
    pub fn store(&self) -> &Arc<Store> {
        self.linker.store()
    }

    /// The relations `words` express, by id.
    fn expressed(&self, words: &[String]) -> Vec<RelationId> {
        let stems: Vec<String> = words.iter().map(|w| stem(w)).collect();
        let mut out = Vec::new();
        for (i, s) in stems.iter().enumerate() {
            for (rest, r) in self.cues.get(s).into_iter().flatten() {
                if stems[i + 1..].starts_with(rest) && !out.contains(r) {
                    out.push(*r);
                }
            }
        }
        out.sort();
        out
    }

    /// The claims of `reply`, written after `dialog`, and their verdicts.
    pub fn check(&self, dialog: &[Message], reply: &str) -> Result<ReplyCheck, ReadError> {
        Ok(self.check_each(dialog, &[reply])?.pop().unwrap_or_default())
    }

    /// Each of `replies` checked as written after `dialog` (one after another is not read:
    /// each is the next message alone), the dialog linked once.
    pub fn check_each(&self, dialog: &[Message], replies: &[&str]) -> Result<Vec<ReplyCheck>, ReadError> {
        let mut history = DialogState::default();
        for m in dialog {
            self.linker.push(&mut history, m)?;
        }
        let at = dialog.len();
        let dialog_entities: Vec<EntityId> = self.linker.turn_entities(history.mentions(), at).into_iter().map(|(e, _)| e).take(DIALOG_ENTITIES * 2).collect();
        let mut reads = Reads::new(self.store());
        let mut out = Vec::with_capacity(replies.len());
        for reply in replies {
            let mut state = history.clone();
            let ours: Vec<&Mention> = self
                .linker
                .push(&mut state, &Message { speaker: String::new(), text: (*reply).to_owned() })?
                .iter()
                .filter(|m| !m.entities.is_empty())
                .collect();
            let spans: Vec<(usize, usize)> = ours.iter().map(|m| (m.start, m.end)).collect();
            let mut claims = Vec::new();
            for slot in &claims::slots(reply, &spans, MAX_CLAIMS) {
                if let Some(c) = self.judge(slot, &ours, &dialog_entities, &mut reads)? {
                    claims.push(c);
                }
            }
            out.push(ReplyCheck::from_claims(claims));
        }
        Ok(out)
    }

    fn judge(&self, slot: &Slot, mentions: &[&Mention], dialog: &[EntityId], reads: &mut Reads<'_>) -> Result<Option<Claim>, ReadError> {
        let expressed = self.expressed(&slot.words);
        let relations: Vec<String> = expressed.iter().take(MAX_LISTED_RELATIONS).filter_map(|r| self.relations.get(r).map(|i| i.name.clone())).collect();
        let claim = |subject: ClaimEntity, object: ClaimEntity, verdict, evidence| Claim {
            sentence: slot.sentence,
            subject,
            object,
            phrase: slot.phrase.clone(),
            relations: relations.clone(),
            verdict,
            evidence,
        };
        match slot.pairing {
            Pairing::Mentions { a, b } => {
                let (ma, mb) = (mentions[a], mentions[b]);
                let mut outcomes = Vec::new();
                for ea in &ma.entities {
                    for eb in &mb.entities {
                        if ea.id == eb.id {
                            continue;
                        }
                        let j = self.judge_pair(EntityId(ea.id), EntityId(eb.id), &expressed, JudgeMode::Reply, reads)?;
                        let done = j.0 == Verdict::Supported;
                        outcomes.push((ea, eb, j));
                        if done {
                            break;
                        }
                    }
                    if outcomes.last().is_some_and(|o| o.2 .0 == Verdict::Supported) {
                        break;
                    }
                }
                // Supported if any reading is; refuted only if every reading is.
                let pick = outcomes
                    .iter()
                    .position(|o| o.2 .0 == Verdict::Supported)
                    .or_else(|| outcomes.iter().position(|o| o.2 .0 == Verdict::NotEnoughInfo))
                    .unwrap_or(0);
                let Some((ea, eb, (verdict, evidence))) = outcomes.into_iter().nth(pick) else { return Ok(None) };
                // A denied relation ("was not directed by") is refuted by the facts that hold
                // it; denying one the store contradicts tells nothing certain.
                let (verdict, evidence) = match (slot.negated, verdict) {
                    // A refutation rests on both mentions naming their entities in full, as
                    // names: "a box set" is no claim about the film The Box.
                    (false, Verdict::Refuted) if !(names_in_full(&ma.text, &ea.name) && names_in_full(&mb.text, &eb.name)) => {
                        (Verdict::NotEnoughInfo, Vec::new())
                    }
                    (false, v) => (v, evidence),
                    (true, Verdict::Supported) => (Verdict::Refuted, evidence),
                    (true, _) => (Verdict::NotEnoughInfo, Vec::new()),
                };
                let end = |m: &Mention, e: &crate::link::LinkedEntity| ClaimEntity { text: m.text.clone(), id: e.id, name: e.name.clone(), from_dialog: false };
                Ok(Some(claim(end(ma, ea), end(mb, eb), verdict, reads.named(&evidence)?)))
            }
            Pairing::Dialog { mention } => {
                // Only a sentence whose words name a relation claims something of the dialog.
                if expressed.is_empty() {
                    return Ok(None);
                }
                let m = mentions[mention];
                let Some(e) = m.entities.first() else { return Ok(None) };
                let others: Vec<EntityId> = dialog.iter().copied().filter(|d| !m.entities.iter().any(|x| x.id == d.0)).take(DIALOG_ENTITIES).collect();
                let Some(&first) = others.first() else { return Ok(None) };
                let mut chosen = (first, Verdict::NotEnoughInfo, Vec::new());
                for &d in &others {
                    let (v, ev) = self.judge_pair(d, EntityId(e.id), &expressed, JudgeMode::Dialog, reads)?;
                    if v == Verdict::Supported {
                        chosen = (d, v, ev);
                        break;
                    }
                }
                let name = reads.name(chosen.0)?;
                let subject = ClaimEntity { text: name.clone(), id: chosen.0 .0, name, from_dialog: true };
                let object = ClaimEntity { text: m.text.clone(), id: e.id, name: e.name.clone(), from_dialog: false };
                Ok(Some(claim(subject, object, chosen.1, reads.named(&chosen.2)?)))
            }
        }
    }

    /// The verdict on "x <phrase> y" with the phrase expressing `expressed` (empty: no
    /// relation named), and its evidence as facts of ids. A pairing with a guessed dialog
    /// entity ([`JudgeMode::Dialog`]) is supported by a direct fact only and never refuted.
    fn judge_pair(
        &self,
        x: EntityId,
        y: EntityId,
        expressed: &[RelationId],
        mode: JudgeMode,
        reads: &mut Reads<'_>,
    ) -> Result<(Verdict, Vec<Vec<Fact>>), ReadError> {
        let named = |r: RelationId| expressed.is_empty() || expressed.binary_search(&r).is_ok();
        let (nx, ny) = (reads.edges(x)?, reads.edges(y)?);
        let direct: Vec<Vec<Fact>> = nx.get(&y).into_iter().flatten().filter(|e| named(e.relation)).map(|e| vec![Fact::of(x, *e)]).take(MAX_EVIDENCE).collect();
        if !direct.is_empty() {
            return Ok((Verdict::Supported, direct));
        }
        if !expressed.is_empty() && mode == JudgeMode::Reply {
            let mut paths = Vec::new();
            let (small, large, small_is_x) = if nx.len() <= ny.len() { (&nx, &ny, true) } else { (&ny, &nx, false) };
            let mut middles: Vec<&EntityId> = small.keys().filter(|z| large.contains_key(z) && **z != x && **z != y).collect();
            middles.sort();
            'outer: for z in middles {
                for e1 in &small[z] {
                    for e2 in &large[z] {
                        // Both facts of the relation named: two things sharing a genre, an
                        // author ("Happy Gilmore shares a genre with Big Daddy"). One alone
                        // would let any neighbour's fact support the claim.
                        if named(e1.relation) && named(e2.relation) {
                            let (from_x, from_y) = if small_is_x { (e1, e2) } else { (e2, e1) };
                            // The fact at x, then the one at y: a path x - z - y.
                            paths.push(vec![Fact::of(x, *from_x), Fact::of(y, *from_y)]);
                            if paths.len() >= MAX_EVIDENCE {
                                break 'outer;
                            }
                        }
                    }
                }
            }
            if !paths.is_empty() {
                return Ok((Verdict::Supported, paths));
            }
        }
        if mode == JudgeMode::Reply {
            let mut against = Vec::new();
            for &r in expressed {
                let Some(info) = self.relations.get(&r) else { continue };
                // (subject, other) orientations a functional relation rules on.
                let mut tries = Vec::new();
                if info.functional {
                    tries.extend([(x, y, Direction::Out), (y, x, Direction::Out)]);
                }
                if info.inverse_functional {
                    tries.extend([(x, y, Direction::In), (y, x, Direction::In)]);
                }
                for (at, other, dir) in tries {
                    let ends = reads.store.neighbors_via(at, dir, r)?;
                    // Only an entity that is some fact's other end of r can be what the
                    // claim puts there ("released in 2012", 2012 also a film's name).
                    if !ends.is_empty() && !ends.contains(&other) && reads.takes_part(other, dir.reverse(), r)? && !reads.any_name_overlaps(&ends, other)? {
                        for o in ends.into_iter().take(MAX_EVIDENCE) {
                            against.push(vec![Fact::of(at, Edge { direction: dir, relation: r, other: o })]);
                        }
                    }
                }
            }
            if !against.is_empty() {
                against.truncate(MAX_EVIDENCE);
                return Ok((Verdict::Refuted, against));
            }
        }
        Ok((Verdict::NotEnoughInfo, Vec::new()))
    }
}

/// Whose pair is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JudgeMode {
    /// Two entities the reply names.
    Reply,
    /// An entity of the reply and one of the dialog, guessed as its other end.
    Dialog,
}

/// A fact by ids, subject first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fact {
    subject: EntityId,
    relation: RelationId,
    object: EntityId,
}

impl Fact {
    /// The fact of edge `e` seen from `at`.
    fn of(at: EntityId, e: Edge) -> Fact {
        match e.direction {
            Direction::Out => Fact { subject: at, relation: e.relation, object: e.other },
            Direction::In => Fact { subject: e.other, relation: e.relation, object: at },
        }
    }
}

/// One reply's reads: each entity's edges grouped by the other end (read once, at most
/// [`MAX_EDGES_READ`]), and names.
struct Reads<'s> {
    store: &'s Store,
    edges: HashMap<EntityId, Arc<HashMap<EntityId, Vec<Edge>>>>,
}

impl<'s> Reads<'s> {
    fn new(store: &'s Arc<Store>) -> Reads<'s> {
        Reads { store, edges: HashMap::new() }
    }

    fn edges(&mut self, e: EntityId) -> Result<Arc<HashMap<EntityId, Vec<Edge>>>, ReadError> {
        if let Some(m) = self.edges.get(&e) {
            return Ok(m.clone());
        }
        let mut map: HashMap<EntityId, Vec<Edge>> = HashMap::new();
        let mut n = 0;
        self.store.for_each_neighbor(e, None, None, |edge| {
            map.entry(edge.other).or_default().push(edge);
            n += 1;
            if n >= MAX_EDGES_READ {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        let map = Arc::new(map);
        self.edges.insert(e, map.clone());
        Ok(map)
    }

    /// Whether `e` has a fact of `r` in direction `dir` (one point read, the first id).
    fn takes_part(&self, e: EntityId, dir: Direction, r: RelationId) -> Result<bool, ReadError> {
        let mut found = false;
        self.store.for_each_neighbor(e, Some(dir), Some(r), |_| {
            found = true;
            ControlFlow::Break(())
        })?;
        Ok(found)
    }

    /// Whether the name of one of `ends` holds the name of `other` as whole words, or the
    /// other way round: "Jon Favreau filmography" and the stored director "Jon Favreau" are
    /// no contradiction, whatever the graph calls them.
    fn any_name_overlaps(&self, ends: &[EntityId], other: EntityId) -> Result<bool, ReadError> {
        let other = comparable_words(&self.name(other)?);
        for &e in ends.iter().take(MAX_EVIDENCE) {
            let end = comparable_words(&self.name(e)?);
            if !other.trim().is_empty() && !end.trim().is_empty() && (end.contains(&other) || other.contains(&end)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn name(&self, e: EntityId) -> Result<String, ReadError> {
        Ok(self.store.entity_names(&[e])?.pop().flatten().unwrap_or_default())
    }

    fn named(&self, paths: &[Vec<Fact>]) -> Result<Vec<Vec<[String; 3]>>, ReadError> {
        let mut out = Vec::with_capacity(paths.len());
        for p in paths {
            let ents: Vec<EntityId> = p.iter().flat_map(|f| [f.subject, f.object]).collect();
            let rels: Vec<RelationId> = p.iter().map(|f| f.relation).collect();
            let en = self.store.entity_names(&ents)?;
            let rn = self.store.relation_names(&rels)?;
            out.push(
                p.iter()
                    .enumerate()
                    .map(|(i, _)| [en[2 * i].clone().unwrap_or_default(), rn[i].clone().unwrap_or_default(), en[2 * i + 1].clone().unwrap_or_default()])
                    .collect(),
            );
        }
        Ok(out)
    }
}

/// A name as words to compare: normalized, accents and punctuation folded, with a space at
/// each end so that `contains` matches whole words only.
fn comparable_words(name: &str) -> String {
    let normalized = crate::normalize::normalize_name(name);
    format!(" {} ", crate::normalize::fold_name(&normalized).unwrap_or(normalized))
}

/// Whether a mention's text is its entity's whole name (up to case, accents and
/// punctuation), not a part of it, and written as a name: a mention in lower case names an
/// entity whose name has capitals only as a common word ("a great drama" is no claim
/// about the entity Drama).
fn names_in_full(mention: &str, name: &str) -> bool {
    comparable_words(mention) == comparable_words(name) && (mention.chars().any(char::is_uppercase) || !name.chars().any(char::is_uppercase))
}
