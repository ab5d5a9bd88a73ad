//! Entity linking from dialog text alone: word n-grams looked up in the store's normalized
//! name index, longest match first, across the whole dialog history.
//!
//! Per message: split into words (`words.rs`); at each position try the longest n-gram
//! first (up to `max_ngram` words), each as a few candidate strings (as written, without a
//! possessive, with or without a leading "the"); the first candidate the `names` index
//! knows is a mention, and the scan continues after it. Mentions made only of stop words,
//! or of one short word, are dropped. A single word that is part of a multi-word name
//! linked earlier in the dialog ("Spieth" after "Jordan Spieth") links to that entity.
//! Several entities sharing a name are all returned, primary names before aliases, then by
//! degree. Nothing is loaded into memory: every lookup is a prefix scan of the index.
//! With `rewrite`, pronouns and references resolved to earlier entities are mentions too
//! (`rewrite.rs`).

pub mod rewrite;
pub(crate) mod stopwords;
pub mod words;

use crate::ids::{Direction, EntityId};
use crate::limits::{self, OutOfRange};
use crate::normalize::{fold_name, normalize_name};
use crate::store::error::ReadError;
use crate::store::{NameCursor, NameTarget, Store};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use crate::dialog::{check_dialog_size, DialogTooLong, Message, MessageProblem};
pub use stopwords::{is_stop_word, STOP_WORDS};

/// Linking parameters; the defaults are the ones measured in docs/results-2026-11-25.md
/// ("Entity linking"; why: docs/linking.md).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LinkConfig {
    /// Longest mention tried, in words.
    pub max_ngram: usize,
    /// A one-word mention needs at least this many characters.
    pub min_single_word_chars: usize,
    /// At most this many entities per mention (ranked).
    pub max_entities_per_mention: usize,
    /// Messages of history, counted back from the turn, whose mentions form the turn's
    /// entity set.
    pub window: usize,
    /// Weight of a mention one message further back (recency decay).
    pub decay: f32,
    /// Resolve pronouns and references to entities of the history ([`rewrite`]): each
    /// resolved word becomes a mention of its entity.
    pub rewrite: bool,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig { max_ngram: 32, min_single_word_chars: 3, max_entities_per_mention: 3, window: 8, decay: 0.5, rewrite: false }
    }
}

impl LinkConfig {
    /// Every field within its range of `crate::limits` (a window or n-gram of 0 would link
    /// nothing, and no entity per mention is no mention).
    pub fn validate(&self) -> Result<(), OutOfRange> {
        limits::WINDOW.check_usize(self.window)?;
        limits::MAX_NGRAM.check_usize(self.max_ngram)?;
        limits::MAX_ENTITIES.check_usize(self.max_entities_per_mention)?;
        limits::MIN_WORD_CHARS.check_usize(self.min_single_word_chars)?;
        limits::LINK_DECAY.check(f64::from(self.decay))?;
        Ok(())
    }
}

/// How a mention was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// The entity's name or alias.
    Name,
    /// One word of a multi-word name linked earlier in the dialog.
    PartialName,
    /// A pronoun or reference the rewrite resolved to an entity of the history.
    Resolved,
}

/// A candidate entity of a mention.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LinkedEntity {
    /// The entity's id.
    pub id: u32,
    /// Its display name.
    pub name: String,
    /// Facts touching it, as subject or object (0 for a partial-name mention, not looked up).
    pub degree: u64,
}

/// One mention in one message.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Mention {
    /// Index of the message in the dialog.
    pub message: usize,
    /// The message's speaker (empty when none).
    pub speaker: String,
    /// Byte span of the mention in the message (UTF-8).
    pub start: usize,
    /// End of the byte span (exclusive).
    pub end: usize,
    /// The same span in characters (Unicode scalar values), as Python indexes strings.
    pub char_start: usize,
    /// End of the character span (exclusive).
    pub char_end: usize,
    /// The mention as written.
    pub text: String,
    /// How it was found.
    pub kind: MatchKind,
    /// Candidate entities, best first.
    pub entities: Vec<LinkedEntity>,
    /// For a resolved pronoun or reference: why its entity ([`rewrite`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<rewrite::Resolution>,
}

/// Links dialog text against one store. Owns its handle (`Arc<Store>`), so it is
/// `Send + Sync` and can be shared by threads or kept in a host application.
pub struct Linker {
    store: Arc<Store>,
    cfg: LinkConfig,
    /// The relations the rewrite reads, looked up at its first use.
    agreement: std::sync::OnceLock<rewrite::AgreementRelations>,
}

/// Words of multi-word names linked so far in a dialog -> the entity.
#[derive(Clone, Default)]
struct PartialNames(HashMap<String, EntityId>);

/// A dialog being linked message by message (`Linker::push`), as a live system would;
/// cloned, one history goes on with several next messages (a fact check of N replies).
#[derive(Clone, Default)]
pub struct DialogState {
    partial: PartialNames,
    mentions: Vec<Mention>,
    messages: usize,
}

impl DialogState {
    /// Every mention so far.
    pub fn mentions(&self) -> &[Mention] {
        &self.mentions
    }

    /// Messages pushed so far.
    pub fn len(&self) -> usize {
        self.messages
    }

    /// Whether no message was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.messages == 0
    }
}

impl Linker {
    /// A linker with `cfg`, refused outside the ranges of [`LinkConfig::validate`].
    pub fn new(store: Arc<Store>, cfg: LinkConfig) -> Result<Linker, OutOfRange> {
        cfg.validate()?;
        Ok(Linker { store, cfg, agreement: std::sync::OnceLock::new() })
    }

    /// The store it links against.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The linker's settings.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Mentions of every message of a dialog, in order.
    pub fn link_dialog(&self, messages: &[Message]) -> Result<Vec<Mention>, ReadError> {
        let mut state = DialogState::default();
        for m in messages {
            self.push(&mut state, m)?;
        }
        Ok(state.mentions)
    }

    /// Links the next message of a dialog; returns its mentions.
    pub fn push<'d>(&self, state: &'d mut DialogState, message: &Message) -> Result<&'d [Mention], ReadError> {
        let mut found = self.link_message(state.messages, message, &mut state.partial)?;
        if self.cfg.rewrite {
            let relations = match self.agreement.get() {
                Some(r) => r,
                None => {
                    let r = rewrite::AgreementRelations::of(&self.store)?;
                    self.agreement.get_or_init(|| r)
                }
            };
            let resolved = rewrite::resolve(&self.store, relations, self.cfg.window, &state.mentions, state.messages, message, &found)?;
            if !resolved.is_empty() {
                found.extend(resolved);
                found.sort_by_key(|m| m.start);
            }
        }
        state.messages += 1;
        let from = state.mentions.len();
        state.mentions.extend(found);
        Ok(&state.mentions[from..])
    }

    /// Mentions of one text on its own.
    pub fn link_text(&self, text: &str) -> Result<Vec<Mention>, ReadError> {
        self.link_message(0, &Message { speaker: String::new(), text: text.to_owned() }, &mut PartialNames::default())
    }

    /// The entity set for the turn that follows `messages[..upto]`: every entity mentioned in
    /// the last `window` messages, weighted by `decay` per message back (a mention's first
    /// candidate counts fully, the others half), best first. A pronoun or reference the
    /// rewrite resolved counts once per message for its entity, and not in a message that
    /// names the entity too (as any candidate of a mention): "They're good. Aren't they owned by Tom Benson?" must not make
    /// the team outweigh the name (on dev, counting every resolved word lost gsr more pronoun
    /// turns than it won).
    pub fn turn_entities(&self, mentions: &[Mention], upto: usize) -> Vec<(EntityId, f32)> {
        let first = upto.saturating_sub(self.cfg.window);
        let in_window = || mentions.iter().filter(|m| m.message >= first && m.message < upto);
        let named: HashSet<(usize, u32)> =
            in_window().filter(|m| m.kind != MatchKind::Resolved).flat_map(|m| m.entities.iter().map(|e| (m.message, e.id))).collect();
        let mut resolved: HashSet<(usize, u32)> = HashSet::new();
        let mut weights: HashMap<EntityId, f32> = HashMap::new();
        for m in in_window() {
            let w = self.cfg.decay.powi((upto - 1 - m.message) as i32);
            if m.kind == MatchKind::Resolved {
                if let Some(e) = m.entities.first() {
                    let at = (m.message, e.id);
                    if !named.contains(&at) && resolved.insert(at) {
                        *weights.entry(EntityId(e.id)).or_default() += w;
                    }
                }
                continue;
            }
            for (rank, e) in m.entities.iter().enumerate() {
                *weights.entry(EntityId(e.id)).or_default() += if rank == 0 { w } else { w / 2.0 };
            }
        }
        let mut ranked: Vec<(EntityId, f32)> = weights.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }

    /// For each of `entities`, how many messages before the turn that follows
    /// `messages[..upto]` it was last named (0: in the last message); `u32::MAX` when no
    /// mention in `mentions` names it. A pronoun the rewrite resolved does not make its entity
    /// younger (the models read an entity's age as when it was named, and on dev resolved
    /// ages lost gsr pronoun turns). A resolution's entity was always named before it in a
    /// linked dialog; given mentions where it was not, its nearest resolution counts.
    pub fn entity_ages(&self, mentions: &[Mention], upto: usize, entities: &[EntityId]) -> Vec<u32> {
        entities
            .iter()
            .map(|e| {
                let age = |resolved: bool| {
                    mentions
                        .iter()
                        .filter(|m| m.message < upto && (m.kind == MatchKind::Resolved) == resolved && m.entities.iter().any(|x| x.id == e.0))
                        .map(|m| (upto - 1 - m.message) as u32)
                        .min()
                };
                age(false).or_else(|| age(true)).unwrap_or(u32::MAX)
            })
            .collect()
    }

    fn link_message(&self, index: usize, message: &Message, partial: &mut PartialNames) -> Result<Vec<Mention>, ReadError> {
        let text = message.text.as_str();
        let ws = words::words(text);
        let mut names = self.store.name_cursor();
        let mut out = Vec::new();
        // Character offsets counted on from the last mention (mentions come in text order),
        // not from the start of the text each time: linear in the text's length.
        let (mut counted_to, mut chars_before) = (0usize, 0usize);
        let mut i = 0;
        while i < ws.len() {
            let mut found = self.longest_at(&mut names, text, &ws, i)?;
            // "the Colombia national football team": a leading article may belong to a short
            // name ("The Colombia"?) while the name after it runs longer: take whichever ends
            // further.
            if ws[i].text.eq_ignore_ascii_case("the") && i + 1 < ws.len() {
                if let Some(after) = self.longest_at(&mut names, text, &ws, i + 1)? {
                    if found.as_ref().is_none_or(|f| i + f.0 < i + 1 + after.0) {
                        i += 1;
                        found = Some(after);
                    }
                }
            }
            if found.is_none() && self.worth_looking_up(&ws[i..i + 1]) {
                let key = normalize_name(&words::straighten_quotes(ws[i].text.trim_end_matches("'s")));
                if let Some(&e) = partial.0.get(&key) {
                    found = Some((1, MatchKind::PartialName, vec![self.linked(e)?]));
                }
            }
            match found {
                Some((n, kind, entities)) => {
                    let (start, end) = (ws[i].start, ws[i + n - 1].end);
                    if let (true, Some(first)) = (n > 1, entities.first()) {
                        // Later single words of this name ("Spieth") link back to it.
                        for w in &ws[i..i + n] {
                            let key = normalize_name(&words::straighten_quotes(w.text.trim_end_matches("'s")));
                            if key.chars().count() >= self.cfg.min_single_word_chars && !is_stop_word(&key) {
                                partial.0.insert(key, EntityId(first.id));
                            }
                        }
                    }
                    let char_start = chars_before + text[counted_to..start].chars().count();
                    let char_end = char_start + text[start..end].chars().count();
                    (counted_to, chars_before) = (end, char_end);
                    out.push(Mention {
                        message: index,
                        speaker: message.speaker.clone(),
                        start,
                        end,
                        char_start,
                        char_end,
                        text: text[start..end].to_owned(),
                        kind,
                        entities,
                        resolution: None,
                    });
                    i += n;
                }
                None => i += 1,
            }
        }
        Ok(out)
    }

    /// The longest span starting at word `i` that is a name: walks the name index as a
    /// trie, growing the span while some name continues it.
    fn longest_at(
        &self,
        names: &mut NameCursor<'_>,
        text: &str,
        ws: &[words::Word<'_>],
        i: usize,
    ) -> Result<Option<(usize, MatchKind, Vec<LinkedEntity>)>, ReadError> {
        let mut found = None;
        let mut n = 1;
        while i + n <= ws.len() && n <= self.cfg.max_ngram {
            let span = &ws[i..i + n];
            // The span as written: one seek says whether it is a name and whether a longer
            // name continues it.
            let (exact, continued) = names.probe(&normalize_name(&words::span_text(text, span)))?;
            if self.worth_looking_up(span) {
                if let Some(entities) = self.lookup(names, text, span, exact)? {
                    found = Some((n, MatchKind::Name, entities));
                }
            }
            if i + n == ws.len() {
                break;
            }
            // Plain spaces to the next word: the probe answered; else ask with the separator.
            let plain = text[span[n - 1].end..ws[i + n].start].chars().all(char::is_whitespace);
            if !((plain && continued) || self.continues(names, text, ws[i].start, ws[i + n].start)?) {
                break;
            }
            n += 1;
        }
        Ok(found)
    }

    /// Whether some name starts with `text[start..next]` (the span and what separates it
    /// from the next word), as written or after "the ": whether a longer span can match.
    fn continues(&self, names: &mut NameCursor<'_>, text: &str, start: usize, next: usize) -> Result<bool, ReadError> {
        let normalized = normalize_name(&words::straighten_quotes(&text[start..next]));
        let folded = fold_name(&normalized);
        let mut prefix = normalized;
        prefix.push(' ');
        if names.has_prefix(&prefix)? {
            return Ok(true);
        }
        if let Some(mut folded) = folded {
            folded.push(' ');
            if names.has_prefix(&folded)? {
                return Ok(true);
            }
        }
        if !prefix.starts_with("the ") {
            return names.has_prefix(&format!("the {prefix}"));
        }
        Ok(false)
    }

    /// Stop-word-only spans and short single words are never mentions; a stop word with
    /// "'s" is a contraction ("it's", "that's"), not a possessive of the novel "It".
    fn worth_looking_up(&self, span: &[words::Word<'_>]) -> bool {
        let stop = |w: &words::Word<'_>| {
            let n = normalize_name(w.text);
            is_stop_word(&n) || n.strip_suffix("'s").or_else(|| n.strip_suffix("’s")).is_some_and(is_stop_word)
        };
        if span.iter().all(stop) {
            return false;
        }
        if span.len() == 1 && span[0].text.chars().count() < self.cfg.min_single_word_chars {
            return false;
        }
        true
    }

    /// The ranked entities named by a span (first candidate string that names any).
    /// `exact`: what the index holds for the span as written (already probed).
    fn lookup(
        &self,
        names: &mut NameCursor<'_>,
        text: &str,
        span: &[words::Word<'_>],
        exact: Vec<(NameTarget, bool)>,
    ) -> Result<Option<Vec<LinkedEntity>>, ReadError> {
        // Each distinct normalized candidate once, then the distinct folded forms ("Alexis
        // Sanchez" finds "Alexis Sánchez": the index holds the folded form of every name).
        let mut candidates: Vec<String> = Vec::with_capacity(8);
        for c in words::candidates(text, span) {
            let n = normalize_name(&c);
            if !candidates.contains(&n) {
                candidates.push(n);
            }
        }
        for i in 0..candidates.len() {
            if let Some(f) = fold_name(&candidates[i]) {
                if !candidates.contains(&f) {
                    candidates.push(f);
                }
            }
        }
        let mut exact = Some(exact);
        for candidate in candidates {
            // The first candidate is the span as written, probed by the caller.
            let hits = match exact.take() {
                Some(hits) => hits,
                None => names.probe(&candidate)?.0,
            };
            let mut entities: Vec<(bool, LinkedEntity)> = Vec::new();
            for (target, alias) in hits {
                if let NameTarget::Entity(e) = target {
                    let mut linked = self.linked(e)?;
                    linked.degree = self.store.degree(e, Direction::Out)? + self.store.degree(e, Direction::In)?;
                    entities.push((alias, linked));
                }
            }
            // Names with a parenthesized qualifier rank after exact names and aliases.
            for e in names.qualified(&candidate, self.cfg.max_entities_per_mention)? {
                if entities.iter().all(|(_, l)| l.id != e.0) {
                    let mut linked = self.linked(e)?;
                    linked.degree = self.store.degree(e, Direction::Out)? + self.store.degree(e, Direction::In)?;
                    entities.push((true, linked));
                }
            }
            if entities.is_empty() {
                continue;
            }
            entities.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.degree.cmp(&a.1.degree)).then(a.1.id.cmp(&b.1.id)));
            entities.truncate(self.cfg.max_entities_per_mention);
            return Ok(Some(entities.into_iter().map(|(_, e)| e).collect()));
        }
        Ok(None)
    }

    fn linked(&self, e: EntityId) -> Result<LinkedEntity, ReadError> {
        let name = self.store.entity(e)?.map_or_else(|| format!("#{}", e.0), |r| r.name);
        Ok(LinkedEntity { id: e.0, name, degree: 0 })
    }
}
