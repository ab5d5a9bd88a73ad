//! The dialog rewrite (seed 004's step before linking, at engine size): pronouns ("he",
//! "her", "it", "they", ...) and references ("the movie", "that book", "the author") in a
//! message resolved to entities the dialog mentioned before, with the graph deciding who
//! agrees. Rule-based, no model:
//!
//! 1. **Words.** A pronoun of one of four kinds: masculine (he, him, his, himself),
//!    feminine (she, her, hers, herself), neuter (it, its, itself) and plural (they, them,
//!    their, theirs, themselves); or a reference: `the`, `that`, `this` or `these`/`those`
//!    followed by a noun of [`REFERENCE_NOUNS`] ("the movie", "that director"). Words inside
//!    a mention the linker found are left alone.
//! 2. **Candidates.** The first entity of every mention in the `window` messages before the
//!    message and of the mentions before the word in the message itself (resolved words
//!    included: "he ... his" chains).
//! 3. **Agreement, from the graph.** Masculine and feminine words need the entity's gender
//!    fact (a relation named `Gender`, or `sex or gender` as Wikidata calls it) with the
//!    object `Male`/`Female` (`male`, `man`; `female`, `woman`); neuter and plural words
//!    need an entity that is not a person (no gender fact, no type whose last word is a
//!    person's, [`PERSON_TYPES`]) and whose name has a letter (not a year); a reference
//!    needs a type fact (`is-a`, `instance of`, `type`) whose last word is the noun or a
//!    synonym ("the director" and `Film director`, but not "the film" and `Film producer`).
//!    "it" after got, get, about, here, make is an idiom and left alone. The facts that
//!    agreed are kept as the explanation.
//! 4. **Choice.** Of the agreeing candidates the most recent (fewest messages back; in the
//!    same message, the nearest before the word), then the most mentioned, then the lowest
//!    id. No agreeing candidate: the word stays unresolved. At most
//!    [`MAX_RESOLVED_PER_MESSAGE`] words of a message are resolved. A store without gender
//!    relations resolves no masculine or feminine word: the rewrite never guesses.
//!
//! A resolved word becomes a mention of its entity ([`super::MatchKind::Resolved`], with a
//! [`Resolution`]), so the turn's entities, retrieval and the rewritten text
//! ([`rewritten_text`]) all see it. It weighs like a name in the turn's entity set, but once
//! per message and entity and not beside the entity's own name, and it leaves the entity's
//! age (messages since it was named) as it was ([`super::Linker::turn_entities`],
//! [`super::Linker::entity_ages`]): the retrievers' models were trained on names alone.

use super::{LinkedEntity, Mention};
use crate::ids::{Direction, EntityId, RelationId};
use crate::store::error::ReadError;
use crate::store::Store;
use std::collections::HashMap;

/// The nouns a reference may use, each with the words a type's name may hold for it.
pub const REFERENCE_NOUNS: &[(&str, &[&str])] = &[
    ("movie", &["film", "movie"]),
    ("film", &["film", "movie"]),
    ("book", &["book", "novel"]),
    ("novel", &["novel", "book"]),
    ("author", &["author", "writer", "novelist"]),
    ("writer", &["writer", "author", "novelist", "screenwriter"]),
    ("actor", &["actor"]),
    ("actress", &["actor", "actress"]),
    ("director", &["director"]),
    ("singer", &["singer", "musician", "vocalist"]),
    ("musician", &["musician", "singer", "guitarist"]),
    ("band", &["band", "group"]),
    ("show", &["tv", "television", "show", "series"]),
    ("series", &["series", "tv", "television"]),
    ("song", &["song", "single", "composition"]),
    ("album", &["album"]),
    ("player", &["player", "athlete"]),
    ("team", &["team", "club"]),
    ("game", &["game"]),
    ("city", &["city", "town"]),
    ("country", &["country"]),
];

/// Words after which "it" is part of an idiom, not a reference.
const IDIOM_BEFORE_IT: &[&str] = &["got", "get", "gets", "getting", "about", "here", "make", "made"];

/// Words resolved per message at most (the rest stay as written): a message is short, and
/// a pasted text full of pronouns must not cost its square.
pub const MAX_RESOLVED_PER_MESSAGE: usize = 64;

/// Other agreeing candidates an explanation lists at most.
const ALSO_AGREED: usize = 4;

const DETERMINERS: &[&str] = &["the", "that", "this", "these", "those"];

/// Words that follow "her" as an object ("gave her a book", "about her and him", "saw her
/// yesterday", "told her she was", "know her personally", "her to"); before any other word of
/// the same sentence "her" is taken as possessive ("her books", "her latest novel", "her
/// family") and rewritten as "X's". A word holding a digit follows an object too ("her 5
/// stars"); a degree word ([`DEGREE`]) looks one word further ("her best album" against "her
/// more than him"). A heuristic: a verb after an object ("heard her sing") and an adjective
/// that can stand after one ("saw her live") read as possessive.
#[rustfmt::skip]
const AFTER_OBJECT_HER: &[&str] = &[
    "a", "an", "the", "this", "that", "these", "those", "some", "any", "all", "both", "each", "every", "no", "my",
    "your", "his", "its", "our", "their", "me", "you", "him", "it", "us", "them", "what", "who", "to", "in", "on",
    "at", "for", "with", "about", "from", "by", "as", "of", "into", "onto", "over", "under", "after", "before",
    "since", "than", "like", "through", "during", "without", "and", "or", "but", "so", "because", "if", "when",
    "while", "though", "although", "until", "too", "also", "again", "now", "then", "there", "here", "yesterday",
    "today", "tonight", "tomorrow", "very", "much", "back", "up", "down", "out", "off", "away", "anymore", "well",
    "lately", "recently", "already", "yet", "still", "either", "not", "is", "was", "be", "been", "are", "were", "do",
    "does", "did", "has", "have", "had", "will", "would", "can", "could", "should", "might", "must", "just", "ever",
    "once", "enough", "i", "we", "they", "he", "she", "i'm", "i've", "i'd", "i'll", "we're", "they're", "he's",
    "she's", "it's", "that's", "you're", "twice", "often", "always", "never", "sometimes", "even", "together",
    "anyway", "instead", "such", "personally", "really", "actually", "especially", "honestly", "finally", "usually",
    "probably", "definitely", "certainly", "totally", "completely", "absolutely", "directly", "immediately", "truly",
    "exactly", "simply", "mostly", "mainly", "nearly", "greatly", "highly", "quickly", "slowly", "dearly",
];

/// Words after which "her" is possessive only when a word that does not follow an object
/// comes next ("her best album", not "her best" or "her more than him").
const DEGREE: &[&str] = &["more", "most", "better", "best", "less", "least"];

/// Whether "her" (word `i`) is possessive: a next word in the same sentence, with nothing
/// but spaces between, that does not follow an object.
fn her_is_possessive(text: &str, ws: &[super::words::Word<'_>], i: usize) -> bool {
    let follows_object = |j: usize| -> bool {
        let Some(next) = ws.get(j) else { return true };
        let between = text.get(ws[j - 1].end..next.start).unwrap_or(",");
        let w = next.text.to_lowercase().replace('\u{2019}', "'");
        !between.chars().all(char::is_whitespace) || AFTER_OBJECT_HER.contains(&w.as_str()) || w.chars().any(|c| c.is_ascii_digit())
    };
    if follows_object(i + 1) {
        return false;
    }
    let next = ws[i + 1].text.to_lowercase();
    !DEGREE.contains(&next.as_str()) || !follows_object(i + 2)
}

/// What a word must agree with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    /// he, him, his, himself.
    Masculine,
    /// she, her, hers, herself.
    Feminine,
    /// it, its, itself.
    Neuter,
    /// they, them, their, theirs, themselves.
    Plural,
    /// "the movie": a type fact holding the noun.
    Reference,
}

/// Why a word was resolved to its entity.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Resolution {
    /// What the word had to agree with.
    pub agreement: Agreement,
    /// The facts of the entity that agreed (`[entity, relation, object]`), empty for a
    /// neuter or plural word (agreement there is the absence of a gender fact).
    pub agreed: Vec<[String; 3]>,
    /// Messages back from the word's message to the mention it was resolved to (0: the
    /// same message).
    pub messages_back: usize,
    /// Whether the word is possessive (his, its, their, hers; "her" before a word that does
    /// not follow an object, as in "her books"): the rewritten text adds `'s`.
    pub possessive: bool,
    /// The other candidates that agreed, in order of preference (ids; at most four).
    pub also_agreed: Vec<u32>,
}

fn pronoun(word: &str) -> Option<(Agreement, bool)> {
    Some(match word {
        "he" | "him" | "himself" => (Agreement::Masculine, false),
        "his" => (Agreement::Masculine, true),
        "she" | "her" | "herself" => (Agreement::Feminine, false),
        "hers" => (Agreement::Feminine, true),
        "it" | "itself" => (Agreement::Neuter, false),
        "its" => (Agreement::Neuter, true),
        "they" | "them" | "themselves" => (Agreement::Plural, false),
        "their" | "theirs" => (Agreement::Plural, true),
        _ => return None,
    })
}

/// The relations agreement reads, looked up once per linker.
#[derive(Clone, Debug, Default)]
pub(crate) struct AgreementRelations {
    gender: Vec<RelationId>,
    types: Vec<RelationId>,
}

impl AgreementRelations {
    pub(crate) fn of(store: &Store) -> Result<AgreementRelations, ReadError> {
        let mut out = AgreementRelations::default();
        for name in ["Gender", "gender", "sex or gender"] {
            out.gender.extend(store.resolve_relation(name)?);
        }
        for name in ["is-a", "instance of", "type", "Type"] {
            out.types.extend(store.resolve_relation(name)?);
        }
        for v in [&mut out.gender, &mut out.types] {
            v.sort_unstable();
            v.dedup();
        }
        Ok(out)
    }
}

/// An entity's facts that agreement reads: genders and types, as object names.
struct Profile {
    genders: Vec<(RelationId, String)>,
    types: Vec<(RelationId, String)>,
}

fn profile(store: &Store, rel: &AgreementRelations, e: EntityId) -> Result<Profile, ReadError> {
    let read = |rels: &[RelationId]| -> Result<Vec<(RelationId, String)>, ReadError> {
        let mut out = Vec::new();
        for &r in rels {
            let objects = store.neighbors_via(e, Direction::Out, r)?;
            out.extend(store.entity_names(&objects)?.into_iter().flatten().map(|n| (r, n)));
        }
        Ok(out)
    };
    Ok(Profile { genders: read(&rel.gender)?, types: read(&rel.types)? })
}

fn is_masculine(v: &str) -> bool {
    matches!(v.to_lowercase().as_str(), "male" | "man" | "masculine")
}

fn is_feminine(v: &str) -> bool {
    matches!(v.to_lowercase().as_str(), "female" | "woman" | "feminine")
}

/// Type names (their last word, lowercased) that make an entity a person: never "it".
pub const PERSON_TYPES: &[&str] = &[
    "actor",
    "actress",
    "author",
    "writer",
    "novelist",
    "screenwriter",
    "artist",
    "musician",
    "singer",
    "songwriter",
    "composer",
    "guitarist",
    "director",
    "producer",
    "politician",
    "celebrity",
    "presenter",
    "journalist",
    "model",
    "comedian",
    "lawyer",
    "scientist",
    "poet",
    "athlete",
    "player",
    "professor",
    "entrepreneur",
    "designer",
    "businessperson",
    "person",
    "human",
];

/// The last word of a type's name, lowercased.
fn last_word(t: &str) -> Option<String> {
    t.split(|c: char| !c.is_alphanumeric()).rfind(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The facts of `p` that make entity `name` agree with `a` (Some(empty): agrees with no
/// fact to show), or `None`.
fn agrees(store: &Store, p: &Profile, name: &str, a: Agreement, noun: Option<&str>) -> Result<Option<Vec<[String; 3]>>, ReadError> {
    let fact = |r: RelationId, o: &str| -> Result<[String; 3], ReadError> {
        let rname = store.relation_names(&[r])?.pop().flatten().unwrap_or_default();
        Ok([name.to_owned(), rname, o.to_owned()])
    };
    let pick = |test: fn(&str) -> bool| -> Result<Option<Vec<[String; 3]>>, ReadError> {
        match p.genders.iter().find(|(_, g)| test(g)) {
            Some((r, g)) => Ok(Some(vec![fact(*r, g)?])),
            None => Ok(None),
        }
    };
    match a {
        Agreement::Masculine => pick(is_masculine),
        Agreement::Feminine => pick(is_feminine),
        // Not a person: no gender fact and no person's type; and a name with letters (a
        // year is an entity of the graph, not what "it" stands for).
        Agreement::Neuter | Agreement::Plural => {
            let person = !p.genders.is_empty() || p.types.iter().any(|(_, t)| last_word(t).is_some_and(|w| PERSON_TYPES.contains(&w.as_str())));
            Ok(if person || !name.chars().any(char::is_alphabetic) { None } else { Some(Vec::new()) })
        }
        Agreement::Reference => {
            let Some(synonyms) = noun.and_then(|n| REFERENCE_NOUNS.iter().find(|(k, _)| *k == n)).map(|(_, s)| *s) else { return Ok(None) };
            let mut facts = Vec::new();
            for (r, t) in &p.types {
                // The type's head noun: "Film director" is a director, not a film.
                if last_word(t).is_some_and(|w| synonyms.contains(&w.as_str()) || synonyms.iter().any(|s| w.strip_suffix('s') == Some(s))) {
                    facts.push(fact(*r, t)?);
                }
            }
            Ok(if facts.is_empty() { None } else { Some(facts) })
        }
    }
}

/// One word to resolve: its span, what it must agree with, its noun for a reference.
struct Target<'a> {
    start: usize,
    end: usize,
    agreement: Agreement,
    possessive: bool,
    noun: Option<&'a str>,
}

fn targets<'a>(text: &'a str, found: &[Mention]) -> Vec<Target<'a>> {
    let ws = super::words::words(text);
    let inside = |s: usize, e: usize| found.iter().any(|m| s < m.end && m.start < e);
    let mut out = Vec::new();
    let mut i = 0;
    while i < ws.len() {
        let w = ws[i].text.to_lowercase();
        if DETERMINERS.contains(&w.as_str()) && i + 1 < ws.len() {
            let next = ws[i + 1].text.to_lowercase();
            let noun = next.trim_end_matches("'s").trim_end_matches('s');
            let noun = REFERENCE_NOUNS.iter().map(|(k, _)| *k).find(|k| *k == noun || *k == next.as_str());
            if let Some(noun) = noun {
                let (start, end) = (ws[i].start, ws[i + 1].end);
                if !inside(start, end) {
                    out.push(Target { start, end, agreement: Agreement::Reference, possessive: false, noun: Some(noun) });
                }
                i += 2;
                continue;
            }
        }
        // "got it", "about it", "here it is": "it" that stands for nothing.
        let idiom = w == "it" && i > 0 && IDIOM_BEFORE_IT.contains(&ws[i - 1].text.to_lowercase().as_str());
        if let Some((agreement, possessive)) = pronoun(&w).filter(|_| !idiom) {
            let possessive = possessive || (w == "her" && her_is_possessive(text, &ws, i));
            let (start, end) = (ws[i].start, ws[i].end);
            if !inside(start, end) {
                out.push(Target { start, end, agreement, possessive, noun: None });
            }
        }
        i += 1;
    }
    out
}

/// The resolved words of message `index` (`message`, its linker mentions `found`), given
/// every mention of the messages before it (`earlier`); in text order.
pub(crate) fn resolve(
    store: &Store,
    relations: &AgreementRelations,
    window: usize,
    earlier: &[Mention],
    index: usize,
    message: &super::Message,
    found: &[Mention],
) -> Result<Vec<Mention>, ReadError> {
    let (speaker, text) = (message.speaker.as_str(), message.text.as_str());
    let targets = targets(text, found);
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    // Candidates: entity -> (messages back, distance in the message, mentions, entity),
    // most recent first. The window's are counted once; the message's own join as the
    // words are passed (mentions come in message order, and in text order within one).
    let first = index.saturating_sub(window);
    let window_mentions = &earlier[earlier.partition_point(|m| m.message < first)..];
    let mut base: HashMap<u32, (usize, usize, usize, LinkedEntity)> = HashMap::new();
    let count = |seen: &mut HashMap<u32, (usize, usize, usize, LinkedEntity)>, m: &Mention, back: usize, near: usize| {
        let Some(e) = m.entities.first() else { return };
        let entry = seen.entry(e.id).or_insert((back, near, 0, e.clone()));
        if (back, near) < (entry.0, entry.1) {
            (entry.0, entry.1) = (back, near);
        }
        entry.2 += 1;
    };
    for m in window_mentions.iter().filter(|m| m.message < index) {
        count(&mut base, m, index - m.message, usize::MAX - m.start);
    }
    let mut profiles: HashMap<u32, Profile> = HashMap::new();
    let mut out: Vec<Mention> = Vec::new();
    for t in targets.into_iter().take(MAX_RESOLVED_PER_MESSAGE) {
        let mut seen = base.clone();
        for m in found.iter().chain(out.iter()).filter(|m| m.end <= t.start) {
            count(&mut seen, m, 0, t.start - m.end);
        }
        let mut ranked: Vec<(usize, usize, usize, LinkedEntity)> = seen.into_values().collect();
        ranked.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)).then(a.3.id.cmp(&b.3.id)));
        let mut chosen: Option<(usize, LinkedEntity, Vec<[String; 3]>)> = None;
        let mut also = Vec::new();
        for (back, _, _, e) in ranked {
            if chosen.is_some() && also.len() >= ALSO_AGREED {
                break;
            }
            let p = match profiles.entry(e.id) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => v.insert(profile(store, relations, EntityId(e.id))?),
            };
            let Some(facts) = agrees(store, p, &e.name, t.agreement, t.noun)? else { continue };
            match chosen {
                None => chosen = Some((back, e, facts)),
                Some(_) => also.push(e.id),
            }
        }
        let Some((back, entity, agreed)) = chosen else { continue };
        let char_start = text[..t.start].chars().count();
        out.push(Mention {
            message: index,
            speaker: speaker.to_owned(),
            start: t.start,
            end: t.end,
            char_start,
            char_end: char_start + text[t.start..t.end].chars().count(),
            text: text[t.start..t.end].to_owned(),
            kind: super::MatchKind::Resolved,
            entities: vec![entity],
            resolution: Some(Resolution { agreement: t.agreement, agreed, messages_back: back, possessive: t.possessive, also_agreed: also }),
        });
    }
    Ok(out)
}

/// `history` with each message rewritten ([`rewritten_text`]) by `mentions`, the linker's
/// mentions of it.
pub fn rewritten_history(history: &[crate::dialog::Message], mentions: &[Mention]) -> Vec<crate::dialog::Message> {
    history.iter().enumerate().map(|(i, m)| crate::dialog::Message { speaker: m.speaker.clone(), text: rewritten_text(&m.text, i, mentions) }).collect()
}

/// `text` (message `index`) with each resolved word of `mentions` replaced by its
/// entity's name (`'s` added for a possessive): "He wrote The Magician's Land" becomes
/// "Lev Grossman wrote The Magician's Land".
pub fn rewritten_text(text: &str, index: usize, mentions: &[Mention]) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut at = 0;
    for m in mentions.iter().filter(|m| m.message == index && m.end <= text.len()) {
        let (Some(r), Some(e)) = (&m.resolution, m.entities.first()) else { continue };
        if m.start < at || !text.is_char_boundary(m.start) || !text.is_char_boundary(m.end) {
            continue;
        }
        out.push_str(&text[at..m.start]);
        out.push_str(&e.name);
        if r.possessive {
            out.push_str("'s");
        }
        at = m.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pronoun of `text` with whether the rewrite writes it as "X's".
    fn possessives(text: &str) -> Vec<(&str, bool)> {
        targets(text, &[]).iter().filter(|t| t.noun.is_none()).map(|t| (&text[t.start..t.end], t.possessive)).collect()
    }

    #[test]
    fn her_is_possessive_only_before_a_word_that_does_not_follow_an_object() {
        assert_eq!(possessives("No, her books are about immigrants."), [("her", true)]);
        assert_eq!(possessives("Her latest novel? I gave her a copy."), [("Her", true), ("her", false)]);
        assert_eq!(possessives("I met her yesterday and liked her."), [("her", false), ("her", false)]);
        assert_eq!(possessives("Tell me about her, please"), [("her", false)]);
        assert_eq!(possessives("I like her  music and his films"), [("her", true), ("his", true)]);
        assert_eq!(possessives("Was it hers or her sister's?"), [("it", false), ("hers", true), ("her", true)]);
        assert_eq!(possessives("She wrote to her"), [("She", false), ("her", false)]);
        for object in [
            "Tell her I said hi",
            "I told her she was great",
            "I've seen her twice",
            "I listen to her often",
            "I like her even more",
            "I don't know her personally",
            "I gave her 5 stars",
            "I like her more than him",
            "She is the one I like best, I like her best",
        ] {
            assert!(possessives(object).iter().all(|(w, p)| !p || *w != "her"), "{object}: {:?}", possessives(object));
        }
        assert_eq!(possessives("her best album"), [("her", true)]);
        assert_eq!(possessives("I met her family and her first husband"), [("her", true), ("her", true)]);
        assert_eq!(possessives("Her most famous song"), [("Her", true)]);
    }
}
