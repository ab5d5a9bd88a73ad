//! Delexicalized generation (`trellis.json` `generation.delexicalize`): the entity names of
//! the knowledge become placeholder tokens before the model reads them, and the model's
//! placeholders become the stored names, with their case, in the reply. A small generator
//! trained from nothing learns to copy a fact far more easily as `[E2]` (one of a dozen
//! tokens it sees in every example) than as the name's pieces (thousands of rare names); a
//! standard data-to-text technique. The same function writes the training targets
//! (`trellis targets`), so what the model learned is what runs.
//!
//! The rules, for one request:
//!
//! 1. The knowledge's entities, in order: each path in turn, its first head, then the tail
//!    of each triple. A name equal to one already listed (compared folded, rule 4) is not
//!    listed again; an empty name is skipped. The k-th entity (0-based) gets
//!    `placeholders[k]`; entities past the last placeholder get none.
//! 2. The knowledge is written with each placeholder in front of its name: the head or tail
//!    `Stephen King` becomes `[E1] Stephen King` (the model sees what the placeholder names).
//! 3. Every message of the history (and, for training, the reply) has each occurrence of a
//!    placeholder's name replaced by the placeholder. Longer names are matched first; matches
//!    never overlap, and among names of one length the one of the smaller placeholder wins;
//!    an occurrence must not have a letter or digit right before or after it. A name whose
//!    folded form is a single stop word of the linker (`It`, `Her`, `Up`: titles that are
//!    also common words) is matched only with its exact case, so that the pronoun "it" is
//!    not taken for the novel; a name with fewer than two letters or digits is never matched.
//! 4. Folding compares character by character, each character replaced by the first
//!    character of its lowercase form (so a text and its folded form have the same
//!    characters at the same positions).
//! 5. In the generated text each placeholder is replaced by its entity's name as given (the
//!    store's name, with its case). Decoding never writes a placeholder the request has no
//!    entity for (`decode::beam::BannedTokens`); should one come (from text decoded
//!    elsewhere), it is removed,
//!    with the space before it (at the start, the one after it).
//! 6. The article "a"/"an" right before a replaced placeholder is made to agree with the
//!    name's first letter (`agree_article`).

use super::encoding::{KnowledgePath, Triple};
use crate::dialog::Message;
use serde::{Deserialize, Serialize};

/// `trellis.json` `generation.delexicalize`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DelexConfig {
    /// The placeholders, in order; each must be one token of the tokenizer (checked when the
    /// model directory is opened) and none may contain another.
    pub placeholders: Vec<String>,
}

/// A request with its entity names replaced (rules 1-3).
#[derive(Clone, Debug)]
pub struct Delexed {
    /// The history with the names replaced.
    pub history: Vec<Message>,
    /// The knowledge with the names replaced.
    pub knowledge: Vec<KnowledgePath>,
    /// `names[k]` is what `placeholders[k]` stands for.
    pub names: Vec<String>,
}

fn fold_char(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

fn fold(s: &str) -> String {
    s.chars().map(fold_char).collect()
}

/// One name to look for in texts.
struct Pattern {
    placeholder: usize,
    /// The name's characters, folded unless `exact`.
    chars: Vec<char>,
    exact: bool,
}

/// What replaces names in texts and placeholders in replies, for one request.
pub struct Delexicalizer<'a> {
    placeholders: &'a [String],
    names: Vec<String>,
    /// Longest first, then by placeholder.
    patterns: Vec<Pattern>,
}

impl<'a> Delexicalizer<'a> {
    /// The entities of `knowledge` (rule 1) and the patterns that find them (rule 3).
    pub fn new(cfg: &'a DelexConfig, knowledge: &[KnowledgePath]) -> Delexicalizer<'a> {
        let mut names = knowledge_entities(knowledge);
        names.truncate(cfg.placeholders.len());
        let patterns = patterns(&names);
        Delexicalizer { placeholders: &cfg.placeholders, names, patterns }
    }

    /// The names the placeholders stand for.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Rule 2: the knowledge with each placeholder in front of its name.
    pub fn knowledge(&self, knowledge: &[KnowledgePath]) -> Vec<KnowledgePath> {
        let tag = |name: &str| -> String {
            let folded = fold(name);
            match self.names.iter().position(|n| fold(n) == folded) {
                Some(k) => format!("{} {}", self.placeholders[k], name),
                None => name.to_owned(),
            }
        };
        knowledge.iter().map(|p| p.iter().map(|t| Triple { head: tag(&t.head), relation: t.relation.clone(), tail: tag(&t.tail) }).collect()).collect()
    }

    /// Rule 3 on one text.
    pub fn text(&self, text: &str) -> String {
        if self.patterns.is_empty() {
            return text.to_owned();
        }
        let chars: Vec<char> = text.chars().collect();
        let starts = find_matches(&self.patterns, &chars);
        let n = chars.len();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < n {
            match starts[i] {
                Some((k, len)) => {
                    out.push_str(&self.placeholders[k]);
                    i += len;
                }
                None => {
                    out.push(chars[i]);
                    i += 1;
                }
            }
        }
        out
    }

    /// Rules 1-3 on a request.
    pub fn request(&self, history: &[Message], knowledge: &[KnowledgePath]) -> Delexed {
        Delexed {
            history: history.iter().map(|m| Message { speaker: m.speaker.clone(), text: self.text(&m.text) }).collect(),
            knowledge: self.knowledge(knowledge),
            names: self.names.clone(),
        }
    }
}

/// Rule 1 without the placeholders' limit: the entity names of `knowledge` (each path's
/// first head, then every tail), each once (compared folded), empty names left out. The
/// delexicalizer gives placeholders to the first ones; evaluation asks which of them a reply
/// names ([`mentions`]).
pub fn knowledge_entities(knowledge: &[KnowledgePath]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let candidates = knowledge.iter().flat_map(|p| p.first().map(|t| t.head.as_str()).into_iter().chain(p.iter().map(|t| t.tail.as_str())));
    for name in candidates {
        let folded = fold(name);
        if name.is_empty() || seen.contains(&folded) {
            continue;
        }
        seen.push(folded);
        names.push(name.to_owned());
    }
    names
}

/// Which of `names` `text` names: `mentions(text, names)[k]` is true when rule 3, with
/// `names[k]` standing for placeholder k, would replace an occurrence of it in `text` (the
/// same matching as delexicalization, overlaps and all, so that "names an entity" means one
/// thing in the whole engine). A name equal (folded) to an earlier one never matches: pass
/// names each once, as [`knowledge_entities`] lists them.
pub fn mentions<S: AsRef<str>>(text: &str, names: &[S]) -> Vec<bool> {
    let mut named = vec![false; names.len()];
    let patterns = patterns(names);
    if patterns.is_empty() {
        return named;
    }
    let chars: Vec<char> = text.chars().collect();
    for (k, _) in find_matches(&patterns, &chars).into_iter().flatten() {
        named[k] = true;
    }
    named
}

/// Rule 3's patterns of `names` (`names[k]` for placeholder k): longest first, then by
/// placeholder.
fn patterns<S: AsRef<str>>(names: &[S]) -> Vec<Pattern> {
    let mut patterns: Vec<Pattern> = names
        .iter()
        .map(AsRef::as_ref)
        .enumerate()
        .filter(|(_, n)| n.chars().filter(|c| c.is_alphanumeric()).count() >= 2)
        .map(|(k, n)| {
            let folded = fold(n.trim());
            let exact = !folded.chars().any(char::is_whitespace) && crate::link::stopwords::is_stop_word(&folded);
            Pattern { placeholder: k, chars: if exact { n.trim().chars().collect() } else { folded.chars().collect() }, exact }
        })
        .collect();
    patterns.sort_by(|a, b| b.chars.len().cmp(&a.chars.len()).then(a.placeholder.cmp(&b.placeholder)));
    patterns
}

/// Rule 3's matches in `chars`: `starts[i]` is the placeholder whose match starts at i, and
/// the match's length.
fn find_matches(patterns: &[Pattern], chars: &[char]) -> Vec<Option<(usize, usize)>> {
    let folded: Vec<char> = chars.iter().map(|&c| fold_char(c)).collect();
    let n = chars.len();
    let mut taken = vec![false; n];
    let mut starts: Vec<Option<(usize, usize)>> = vec![None; n];
    for p in patterns {
        let len = p.chars.len();
        if len == 0 || len > n {
            continue;
        }
        let hay = if p.exact { chars } else { &folded[..] };
        let mut i = 0;
        while i + len <= n {
            let fits = hay[i..i + len] == p.chars[..]
                && (i == 0 || !folded[i - 1].is_alphanumeric())
                && (i + len == n || !folded[i + len].is_alphanumeric())
                && !taken[i..i + len].iter().any(|&t| t);
            if fits {
                taken[i..i + len].iter_mut().for_each(|t| *t = true);
                starts[i] = Some((p.placeholder, len));
                i += len;
            } else {
                i += 1;
            }
        }
    }
    starts
}

/// Rule 5: a generated text with its placeholders replaced by `names`.
pub fn relexicalize(text: &str, placeholders: &[String], names: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for (k, p) in placeholders.iter().enumerate() {
            if !p.is_empty() && rest.starts_with(p.as_str()) {
                rest = &rest[p.len()..];
                match names.get(k) {
                    Some(name) => {
                        agree_article(&mut out, name);
                        out.push_str(name);
                    }
                    // Removed with one space beside it, so no double space is left.
                    // "a [E9]." -> "a.", "by [E9] ok" -> "by ok", "[E9] is" -> "is".
                    None if out.ends_with(' ') => {
                        out.pop();
                    }
                    None if out.is_empty() && rest.starts_with(' ') => rest = &rest[1..],
                    None => {}
                }
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The English article right before a name written in place of a placeholder, made to
/// agree with the name (rule 6): the model wrote "a" or "an" before `[E2]` without knowing
/// which name it stands for. "a" (or "A") becomes "an" before a name starting with one of
/// the letters a e i o u (either case), "an" becomes "a" before any other letter. A rule of
/// spelling, not of sound: "University of X" gets "an", as speech would not.
fn agree_article(out: &mut String, name: &str) {
    let Some(first) = name.chars().next().filter(|c| c.is_alphabetic()) else { return };
    let vowel = matches!(first.to_ascii_lowercase(), 'a' | 'e' | 'i' | 'o' | 'u');
    let Some(body) = out.strip_suffix(' ') else { return };
    let word_start = body.rfind(|c: char| !c.is_alphanumeric()).map_or(0, |i| i + body[i..].chars().next().map_or(1, char::len_utf8));
    let word = &body[word_start..];
    let fixed = match (word, vowel) {
        ("a", true) => "an",
        ("A", true) => "An",
        ("an", false) => "a",
        ("An", false) => "A",
        _ => return,
    };
    out.replace_range(word_start..body.len(), fixed);
}

/// Why a `delexicalize` section's placeholders are refused (besides the token check).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlaceholderProblem {
    /// A placeholder that is empty or holds white space.
    #[error("placeholder {index} ({text:?}) is empty or holds white space")]
    Blank {
        /// Its 0-based position in `placeholders`.
        index: usize,
        /// The placeholder.
        text: String,
    },
    /// A placeholder that is part of another.
    #[error("placeholder {index} ({text:?}) is part of placeholder {other} ({other_text:?})")]
    Inside {
        /// Its 0-based position in `placeholders`.
        index: usize,
        /// The placeholder.
        text: String,
        /// The other's position.
        other: usize,
        /// The other placeholder.
        other_text: String,
    },
    /// A placeholder that is not one token decoding writes back.
    #[error("placeholder {index} ({text:?}) is not one token of tokenizer.json that decoding writes back (add it as an added token that is not special)")]
    NotAToken {
        /// Its 0-based position in `placeholders`.
        index: usize,
        /// The placeholder.
        text: String,
    },
}

/// Every placeholder non-empty, without white space, and not inside another.
pub fn check_placeholders(placeholders: &[String]) -> Result<(), PlaceholderProblem> {
    for (i, p) in placeholders.iter().enumerate() {
        if p.is_empty() || p.chars().any(char::is_whitespace) {
            return Err(PlaceholderProblem::Blank { index: i, text: p.clone() });
        }
        if let Some((j, q)) = placeholders.iter().enumerate().find(|&(j, q)| j != i && q.contains(p.as_str())) {
            return Err(PlaceholderProblem::Inside { index: i, text: p.clone(), other: j, other_text: q.clone() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(n: usize) -> DelexConfig {
        DelexConfig { placeholders: (1..=n).map(|k| format!("[E{k}]")).collect() }
    }

    fn path(t: &[(&str, &str, &str)]) -> KnowledgePath {
        t.iter().map(|&(h, r, x)| Triple::new(h, r, x)).collect()
    }

    fn msg(t: &str) -> Message {
        Message { speaker: "user".into(), text: t.into() }
    }

    #[test]
    fn a_hand_worked_request() {
        let c = cfg(3);
        let k = vec![
            path(&[("Stephen King", "written_by", "It"), ("It", "~starred_actors", "Bill Skarsgård")]),
            path(&[("stephen king", "~written_by", "The Shining")]),
        ];
        let d = Delexicalizer::new(&c, &k);
        // "stephen king" folds to a listed name; "The Shining" is past the 3 placeholders.
        assert_eq!(d.names(), ["Stephen King", "It", "Bill Skarsgård"]);
        let r = d.request(&[msg("I loved STEPHEN KING's It, it was scary. Bill Skarsgårds? Kingdom")], &k);
        assert_eq!(r.history[0].text, "I loved [E1]'s [E2], it was scary. Bill Skarsgårds? Kingdom");
        assert_eq!(r.knowledge[0][0], Triple::new("[E1] Stephen King", "written_by", "[E2] It"));
        assert_eq!(r.knowledge[0][1], Triple::new("[E2] It", "~starred_actors", "[E3] Bill Skarsgård"));
        assert_eq!(r.knowledge[1][0], Triple::new("[E1] stephen king", "~written_by", "The Shining"));
        assert_eq!(d.text("bill skarsgård played in it"), "[E3] played in it");
    }

    #[test]
    fn longer_names_win_and_matches_do_not_overlap() {
        let c = cfg(4);
        let k = vec![path(&[("King", "r", "Stephen King")]), path(&[("Stephen", "r", "King Kong")])];
        let d = Delexicalizer::new(&c, &k);
        assert_eq!(d.text("Stephen King met King Kong, king of Stephen"), "[E2] met [E4], [E1] of [E3]");
        assert_eq!(d.text("Kingston kings"), "Kingston kings");
    }

    /// The delexicalizer's matching, without its placeholders' limit.
    #[test]
    fn mentions_follow_rule_3() {
        let k = vec![path(&[("Stephen King", "written_by", "It"), ("It", "r", "King")]), path(&[("stephen king", "r", "X"), ("X", "r", "Kingdom Hearts")])];
        let names = knowledge_entities(&k);
        assert_eq!(names, ["Stephen King", "It", "King", "X", "Kingdom Hearts"]);
        // "it" is the pronoun; "King" inside "Stephen King" is taken by the longer name.
        assert_eq!(mentions("STEPHEN KING's book, it was scary", &names), [true, false, false, false, false]);
        assert_eq!(mentions("It is by King. Kingdom? X", &names), [false, true, true, false, false]);
        assert_eq!(mentions("kingdom hearts", &names), [false, false, false, false, true]);
        assert_eq!(mentions("", &names), [false; 5]);
        assert!(mentions::<String>("anything", &[]).is_empty());
    }

    #[test]
    fn relexicalize_writes_names_and_drops_unknown_placeholders() {
        let p: Vec<String> = cfg(12).placeholders;
        let names = vec!["Stephen King".to_owned(), "It".to_owned()];
        assert_eq!(relexicalize("[E2] was written by [E1].", &p, &names), "It was written by Stephen King.");
        assert_eq!(relexicalize("[E10] and [E1]", &p, &names), "and Stephen King");
        assert_eq!(relexicalize("by [E5] ok", &p, &names), "by ok");
        assert_eq!(relexicalize("by [E5]", &p, &names), "by");
        assert_eq!(relexicalize("he is a [E5].", &p, &names), "he is a.");
        assert_eq!(relexicalize("[E5] is it", &p, &names), "is it");
        assert_eq!(relexicalize("[E1][E2]", &p, &names), "Stephen KingIt");
        assert_eq!(relexicalize("é [E1]", &p, &[]), "é");
    }

    #[test]
    fn articles_agree_with_the_names_written() {
        let p: Vec<String> = cfg(12).placeholders;
        let names = vec!["Athlete".to_owned(), "Golf".to_owned(), "Émile".to_owned(), "8 Mile".to_owned()];
        assert_eq!(relexicalize("he is a [E1].", &p, &names), "he is an Athlete.");
        assert_eq!(relexicalize("A [E1]!", &p, &names), "An Athlete!");
        assert_eq!(relexicalize("it is an [E2] movie", &p, &names), "it is a Golf movie");
        assert_eq!(relexicalize("(an [E2])", &p, &names), "(a Golf)");
        assert_eq!(relexicalize("a [E2] and a [E1]", &p, &names), "a Golf and an Athlete");
        // Not an article: a word ending in "a", no space before the name, a name not
        // starting with a letter, a letter outside a e i o u.
        assert_eq!(relexicalize("samba [E1]", &p, &names), "samba Athlete");
        assert_eq!(relexicalize("a[E1]", &p, &names), "aAthlete");
        assert_eq!(relexicalize("an [E4]", &p, &names), "an 8 Mile");
        assert_eq!(relexicalize("a [E3]", &p, &names), "a Émile");
    }

    #[test]
    fn placeholders_are_checked() {
        assert!(check_placeholders(&cfg(12).placeholders).is_ok());
        assert!(check_placeholders(&["[E1]".into(), "[E1]x".into()]).is_err());
        assert!(check_placeholders(&["a b".into()]).is_err());
        assert!(check_placeholders(&["".into()]).is_err());
    }
}
