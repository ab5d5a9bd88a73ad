//! `trellis eval linking`: does the linked entity set of a turn's history hold the gold
//! path's first entity? Reported for Trellis's linker and for a case-insensitive substring
//! matcher over every entity name, on the same turns and the same history window.

use crate::dataset::opendialkg::Dialog;
use crate::ids::EntityId;
use crate::link::Linker;
use crate::store::error::ReadError;
use crate::store::Store;
use aho_corasick::AhoCorasick;
use std::collections::HashSet;

/// One linker's figures.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Scores {
    /// Turns whose gold start entity is in the linked set, over all turns with a gold path.
    pub recall_all: f64,
    /// The same over the turns whose history contains the start entity's name.
    pub recall_named: f64,
    /// Mean size of the linked entity set per turn.
    pub mean_entities_per_turn: f64,
}

/// What [`evaluate`] measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LinkingReport {
    /// Turns with a gold path.
    pub turns: u64,
    /// Turns whose whole history contains the gold start entity's name, ignoring case.
    pub turns_named: u64,
    /// Turns whose gold start entity is not in the store at all (counted as misses).
    pub gold_not_in_store: u64,
    /// Trellis's linker.
    pub trellis: Scores,
    /// The substring baseline (zeros when it was not run).
    pub substring: Scores,
    /// Messages linked (every chat message of every dialog).
    pub messages: u64,
    /// Time to link one message (`Linker::push`), microseconds.
    pub latency_us_p50: f64,
    /// The same, 99th percentile.
    pub latency_us_p99: f64,
    /// Turns Trellis missed: (gold start entity, whether named in the history, the last
    /// message of the history, the linked names).
    #[serde(skip)]
    pub misses: Vec<(String, bool, String, Vec<String>)>,
}

/// Building the substring baseline: reading the names, or the automaton refusing them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatcherError {
    /// Reading the names failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The Aho-Corasick automaton refused the names.
    #[error("substring matcher: {0}")]
    Build(#[source] aho_corasick::BuildError),
}

/// A case-insensitive substring matcher over every entity name (the baseline): holds all
/// names in memory as one Aho-Corasick automaton.
pub struct SubstringMatcher {
    automaton: AhoCorasick,
    ids: Vec<EntityId>,
}

impl SubstringMatcher {
    /// Reads every entity name of the store into the automaton.
    pub fn new(store: &Store) -> Result<SubstringMatcher, MatcherError> {
        let mut names = Vec::new();
        let mut ids = Vec::new();
        for id in 0..store.entity_count() as u32 {
            if let Some(rec) = store.entity(EntityId(id))? {
                names.push(rec.name);
                ids.push(EntityId(id));
            }
        }
        let automaton = AhoCorasick::builder().ascii_case_insensitive(true).build(&names).map_err(MatcherError::Build)?;
        Ok(SubstringMatcher { automaton, ids })
    }

    /// The entities whose names occur in `text`, ignoring ASCII case (overlaps included).
    pub fn entities(&self, text: &str) -> HashSet<EntityId> {
        self.automaton.find_overlapping_iter(text).map(|m| self.ids[m.pattern().as_usize()]).collect()
    }
}

/// Links every dialog of `dialogs` and scores each turn with a gold path; the substring
/// baseline too when given.
pub fn evaluate(store: &Store, linker: &Linker, dialogs: &[Dialog], substring: Option<&SubstringMatcher>) -> Result<LinkingReport, ReadError> {
    let mut r = LinkingReport::default();
    let (mut hits, mut hits_named, mut size) = (0u64, 0u64, 0u64);
    let (mut sub_hits, mut sub_hits_named, mut sub_size) = (0u64, 0u64, 0u64);
    let window = linker.config().window;
    let mut latencies: Vec<u32> = Vec::new();
    for dialog in dialogs {
        let mut state = crate::link::DialogState::default();
        for m in &dialog.messages {
            let t = std::time::Instant::now();
            linker.push(&mut state, m)?;
            latencies.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        }
        let mentions = state.mentions();
        for sample in &dialog.samples {
            r.turns += 1;
            let first = sample.upto.saturating_sub(window);
            let join = |ms: &[crate::link::Message]| ms.iter().map(|m| m.text.as_str()).collect::<Vec<_>>().join("\n");
            let history = join(&dialog.messages[first..sample.upto]);
            let start_name = &sample.gold[0].0;
            // "Named" is judged on the whole history, whatever the window.
            let named = join(&dialog.messages[..sample.upto]).to_lowercase().contains(&start_name.to_lowercase());
            if named {
                r.turns_named += 1;
            }
            let gold = store.entity_by_key(start_name)?;
            if gold.is_none() {
                r.gold_not_in_store += 1;
            }
            let linked = linker.turn_entities(mentions, sample.upto);
            size += linked.len() as u64;
            let hit = gold.is_some_and(|g| linked.iter().any(|&(e, _)| e == g));
            hits += u64::from(hit);
            hits_named += u64::from(hit && named);
            if !hit {
                let names = linked.iter().filter_map(|&(e, _)| store.entity(e).ok().flatten().map(|r| r.name)).collect();
                let last = dialog.messages[..sample.upto].last().map_or(String::new(), |m| m.text.clone());
                r.misses.push((start_name.clone(), named, last, names));
            }
            if let Some(sub) = substring {
                let found = sub.entities(&history);
                sub_size += found.len() as u64;
                let hit = gold.is_some_and(|g| found.contains(&g));
                sub_hits += u64::from(hit);
                sub_hits_named += u64::from(hit && named);
            }
        }
    }
    latencies.sort_unstable();
    let pct = |p: f64| latencies.get(((latencies.len() as f64 - 1.0) * p).round() as usize).map_or(0.0, |&v| f64::from(v));
    r.messages = latencies.len() as u64;
    r.latency_us_p50 = pct(0.5);
    r.latency_us_p99 = pct(0.99);
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    r.trellis = Scores { recall_all: ratio(hits, r.turns), recall_named: ratio(hits_named, r.turns_named), mean_entities_per_turn: ratio(size, r.turns) };
    if substring.is_some() {
        r.substring = Scores {
            recall_all: ratio(sub_hits, r.turns),
            recall_named: ratio(sub_hits_named, r.turns_named),
            mean_entities_per_turn: ratio(sub_size, r.turns),
        };
    }
    Ok(r)
}
