//! How the generator's encoder input is written: the dialog history and the retrieved
//! knowledge as one text, by one of the encodings users compare.
//!
//! Knowledge is a list of paths, each one or two triples `(head, relation, tail)` in walking
//! order, each triple after the first starting at the tail of the one before (what a
//! retriever returns; a single fact is a path of one triple). A relation written `~r` is
//! `r` walked backwards: `(a, ~r, b)` states the stored fact `r(b, a)` (OpenDialKG's and
//! SURGE's notation). Names are the strings given, except where the linearization writes them.
//!
//! Let `H` be the history text (the last `input.turns` messages, oldest first, each `text` or
//! `speaker: text`, joined by `input.separator`), and `Z` the triples of every path, in
//! order. The knowledge texts:
//!
//! - `paths`: each path as the model's linearization writes it
//!   ([`Linearization::render_path`]: the path starts at its first head; a hop's relation is
//!   the triple's without its `~`, reversed when it had one, and reaches the tail), joined by
//!   `" [SEP] "` (the `Sep` boundary between spaces).
//! - `triples` (SURGE's naive concatenation): each triple of `Z` as `head relation tail`,
//!   all joined by single spaces, duplicates kept, in the order given.
//! - `invariant` (SURGE's SORT(INV(Z))): the set of `Z`'s triples and their inverses (the
//!   inverse of `(h, r, t)` is `(t, ~r, h)`, and of `(h, ~r, t)` is `(t, r, h)`), each once,
//!   sorted by (head, relation, tail) in Unicode code point order, written as `triples`.
//! - `entities` (SURGE's SORT(ENT(Z))): the set of heads and tails of `Z`, sorted by code
//!   point, joined by single spaces.
//!
//! The encodings:
//!
//! - [`InputEncoding::DialogGsr`]: `"knowledge: " + paths + "</s>dialogue: " + H` (the
//!   DialogGSR authors' generator input; `</s>` is the tokenizer's special token).
//! - [`InputEncoding::Surge`], [`Invariant`](InputEncoding::Invariant),
//!   [`Efficient`](InputEncoding::Efficient): the knowledge text (`triples`, `invariant`,
//!   `entities`) in front of the history, `K + " " + H`; when `K` or `H` is empty, the other
//!   alone (no stray space).
//! - [`InputEncoding::Template`]: a user text with the slots `{history}`, `{paths}`,
//!   `{triples}`, `{invariant}` and `{entities}` replaced by the texts above; `{{` and `}}`
//!   write `{` and `}`; any other brace is refused when the template is made.

use crate::linearize::{HopText, Linearization, LinearizeError, Position};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One fact as the knowledge gives it: `relation(head, tail)`, or with `~relation` the
/// fact `relation(tail, head)` walked backwards.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Triple {
    /// The entity the triple starts at.
    pub head: String,
    /// The relation; `~r` walks `r` backwards.
    pub relation: String,
    /// The entity the triple reaches.
    pub tail: String,
}

impl Triple {
    /// A triple from its three names.
    pub fn new(head: impl Into<String>, relation: impl Into<String>, tail: impl Into<String>) -> Triple {
        Triple { head: head.into(), relation: relation.into(), tail: tail.into() }
    }

    /// `(t, ~r, h)` for `(h, r, t)`; `(t, r, h)` for `(h, ~r, t)`.
    pub fn inverse(&self) -> Triple {
        let relation = match self.relation.strip_prefix('~') {
            Some(r) => r.to_owned(),
            None => format!("~{}", self.relation),
        };
        Triple { head: self.tail.clone(), relation, tail: self.head.clone() }
    }

    /// The relation without its `~`, and whether it had one.
    pub fn direction(&self) -> (&str, bool) {
        match self.relation.strip_prefix('~') {
            Some(r) => (r, true),
            None => (&self.relation, false),
        }
    }
}

/// One path of knowledge: 1 or 2 triples, each after the first starting where the one
/// before ended.
pub type KnowledgePath = Vec<Triple>;

/// Why a knowledge path cannot be written. Names are data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KnowledgeProblem {
    /// A path with no triple.
    #[error("a path has no triple")]
    Empty,
    /// A path of more than two triples.
    #[error("a path has 1 or 2 triples, not {0}")]
    TooLong(usize),
    /// A triple that does not start where the one before ended.
    #[error("triple {index} starts at {found:?}, not at {expected:?} where the one before ended")]
    Broken {
        /// The triple's 0-based position in the path.
        index: usize,
        /// The tail of the triple before.
        expected: String,
        /// Its own head.
        found: String,
    },
}

/// Checks one path: 1 or 2 triples, chained.
pub fn check_path(path: &[Triple]) -> Result<(), KnowledgeProblem> {
    match path.len() {
        0 => return Err(KnowledgeProblem::Empty),
        1 | 2 => {}
        n => return Err(KnowledgeProblem::TooLong(n)),
    }
    for (i, w) in path.windows(2).enumerate() {
        if w[1].head != w[0].tail {
            return Err(KnowledgeProblem::Broken { index: i + 1, expected: w[0].tail.clone(), found: w[1].head.clone() });
        }
    }
    Ok(())
}

/// A slot of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// `{history}`: the history text.
    History,
    /// `{paths}`: the paths as the linearization writes them.
    Paths,
    /// `{triples}`: SURGE's naive concatenation of the triples.
    Triples,
    /// `{invariant}`: SORT(INV(Z)).
    Invariant,
    /// `{entities}`: SORT(ENT(Z)).
    Entities,
}

impl Slot {
    const ALL: [(&'static str, Slot); 5] =
        [("history", Slot::History), ("paths", Slot::Paths), ("triples", Slot::Triples), ("invariant", Slot::Invariant), ("entities", Slot::Entities)];
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Slot(Slot),
}

/// Why a template is refused. `name` is the template's text (data); `at` a byte offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A `{name}` that is no slot.
    #[error(
        "unknown slot {{{name}}} at byte {at} (the slots are {{history}}, {{paths}}, {{triples}}, {{invariant}}, {{entities}}; write {{{{ and }}}} for braces)"
    )]
    UnknownSlot {
        /// The name between the braces.
        name: String,
        /// Its byte offset in the template.
        at: usize,
    },
    /// A lone `{` or `}`.
    #[error("unmatched {brace:?} at byte {at} (write {{{{ and }}}} for braces)")]
    Unmatched {
        /// The brace.
        brace: char,
        /// Its byte offset in the template.
        at: usize,
    },
}

/// A user template, checked when made (`Template::new`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

impl Template {
    /// Parses a template; an unknown slot or a lone brace is refused.
    pub fn new(source: impl Into<String>) -> Result<Template, TemplateError> {
        let source = source.into();
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = source.char_indices().peekable();
        while let Some((at, c)) = rest.next() {
            match c {
                '{' if rest.peek().map(|&(_, n)| n) == Some('{') => {
                    rest.next();
                    text.push('{');
                }
                '}' if rest.peek().map(|&(_, n)| n) == Some('}') => {
                    rest.next();
                    text.push('}');
                }
                '{' => {
                    let close = source[at..].find('}').ok_or(TemplateError::Unmatched { brace: '{', at })?;
                    let name = &source[at + 1..at + close];
                    let slot =
                        Slot::ALL.iter().find(|(n, _)| *n == name).map(|&(_, s)| s).ok_or_else(|| TemplateError::UnknownSlot { name: name.into(), at })?;
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Slot(slot));
                    while rest.peek().is_some_and(|&(i, _)| i <= at + close) {
                        rest.next();
                    }
                }
                '}' => return Err(TemplateError::Unmatched { brace: '}', at }),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Template { source, parts })
    }

    /// The template as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the template writes the slot.
    pub fn uses(&self, slot: Slot) -> bool {
        self.parts.contains(&Part::Slot(slot))
    }
}

impl TryFrom<String> for Template {
    type Error = TemplateError;
    fn try_from(s: String) -> Result<Template, TemplateError> {
        Template::new(s)
    }
}

impl From<Template> for String {
    fn from(t: Template) -> String {
        t.source
    }
}

/// How the history and the knowledge become the encoder's text (the module's
/// documentation states each exactly). In `trellis.json`: `"dialoggsr"`, `"surge"`,
/// `"invariant"`, `"efficient"` or `{"template": "..."}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum InputEncoding {
    /// `knowledge: PATHS</s>dialogue: HISTORY`.
    #[default]
    #[serde(rename = "dialoggsr")]
    DialogGsr,
    /// SURGE's naive concatenation of the triples, then the history.
    Surge,
    /// SORT(INV(Z)), then the history.
    Invariant,
    /// SORT(ENT(Z)), then the history.
    Efficient,
    /// A user template with slots.
    Template(Template),
}

/// Why a text names no input encoding.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodingNameError {
    /// Not one of the encoding names.
    #[error(transparent)]
    Unknown(#[from] crate::limits::UnknownName),
    /// A `template:TEXT` whose template is refused.
    #[error(transparent)]
    Template(#[from] TemplateError),
}

impl std::str::FromStr for InputEncoding {
    type Err = EncodingNameError;
    /// A name (`dialoggsr`, `surge`, `invariant`, `efficient`) or `template:TEXT`.
    fn from_str(s: &str) -> Result<InputEncoding, EncodingNameError> {
        match s {
            "dialoggsr" => Ok(InputEncoding::DialogGsr),
            "surge" => Ok(InputEncoding::Surge),
            "invariant" => Ok(InputEncoding::Invariant),
            "efficient" => Ok(InputEncoding::Efficient),
            _ => match s.strip_prefix("template:") {
                Some(t) => Ok(Template::new(t).map(InputEncoding::Template)?),
                None => Err(crate::limits::UnknownName {
                    what: "input encoding",
                    value: s.into(),
                    allowed: &["dialoggsr", "surge", "invariant", "efficient", "template:TEXT"],
                }
                .into()),
            },
        }
    }
}

impl std::fmt::Display for InputEncoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputEncoding::DialogGsr => f.write_str("dialoggsr"),
            InputEncoding::Surge => f.write_str("surge"),
            InputEncoding::Invariant => f.write_str("invariant"),
            InputEncoding::Efficient => f.write_str("efficient"),
            InputEncoding::Template(t) => write!(f, "template:{}", t.source),
        }
    }
}

/// `paths`: every path as the linearization writes it, joined by `" [SEP] "`.
pub fn paths_text(lin: &Linearization, knowledge: &[KnowledgePath]) -> Result<String, LinearizeError> {
    let mut out = Vec::with_capacity(knowledge.len());
    for path in knowledge {
        let Some(first) = path.first() else { return Err(LinearizeError::Hops(0)) };
        let hops: Vec<HopText<'_>> = path
            .iter()
            .map(|t| {
                let (relation, reversed) = t.direction();
                HopText { relation, reversed, to: &t.tail }
            })
            .collect();
        out.push(lin.render_path(&first.head, &hops)?);
    }
    Ok(out.join(&format!(" {} ", lin.boundary_text(Position::Sep))))
}

fn write_triples<'a>(triples: impl Iterator<Item = &'a Triple>) -> String {
    let words: Vec<String> = triples.map(|t| format!("{} {} {}", t.head, t.relation, t.tail)).collect();
    words.join(" ")
}

/// `triples`: SURGE's naive concatenation, `head relation tail` for every triple in order.
pub fn triples_text(knowledge: &[KnowledgePath]) -> String {
    write_triples(knowledge.iter().flatten())
}

/// `invariant`: SORT(INV(Z)), each triple and its inverse once, sorted.
pub fn invariant_text(knowledge: &[KnowledgePath]) -> String {
    let mut set: BTreeSet<Triple> = BTreeSet::new();
    for t in knowledge.iter().flatten() {
        set.insert(t.inverse());
        set.insert(t.clone());
    }
    write_triples(set.iter())
}

/// `entities`: SORT(ENT(Z)), the heads and tails once each, sorted.
pub fn entities_text(knowledge: &[KnowledgePath]) -> String {
    let set: BTreeSet<&str> = knowledge.iter().flatten().flat_map(|t| [t.head.as_str(), t.tail.as_str()]).collect();
    set.into_iter().collect::<Vec<_>>().join(" ")
}

/// `K + " " + H`, or the one that is not empty; `marks` gets where `H` starts.
fn joined(knowledge: String, history: &str, marks: &mut Vec<usize>) -> String {
    match (knowledge.is_empty(), history.is_empty()) {
        (true, _) => {
            marks.push(0);
            history.to_owned()
        }
        (false, true) => {
            marks.push(knowledge.len());
            knowledge
        }
        (false, false) => {
            marks.push(knowledge.len() + 1);
            format!("{knowledge} {history}")
        }
    }
}

impl InputEncoding {
    /// The encoder text of a history text and its knowledge (each path checked first with
    /// [`check_path`] by the caller; here a path the linearization cannot write is an error).
    pub fn text(&self, lin: &Linearization, history: &str, knowledge: &[KnowledgePath]) -> Result<String, LinearizeError> {
        Ok(self.text_marked(lin, history, knowledge)?.0)
    }

    /// [`text`](Self::text), and the byte offset of each place the history was written at,
    /// ascending (none for a template without `{history}`, two for one that writes it twice):
    /// a shorter history (a suffix of this one, not empty) gives the same text with the start
    /// of each place cut: how the generator drops old messages without rewriting the text.
    pub fn text_marked(&self, lin: &Linearization, history: &str, knowledge: &[KnowledgePath]) -> Result<(String, Vec<usize>), LinearizeError> {
        let mut marks = Vec::new();
        let text = match self {
            InputEncoding::DialogGsr => {
                let mut out = format!("knowledge: {}</s>dialogue: ", paths_text(lin, knowledge)?);
                marks.push(out.len());
                out.push_str(history);
                out
            }
            InputEncoding::Surge => joined(triples_text(knowledge), history, &mut marks),
            InputEncoding::Invariant => joined(invariant_text(knowledge), history, &mut marks),
            InputEncoding::Efficient => joined(entities_text(knowledge), history, &mut marks),
            InputEncoding::Template(t) => {
                let mut out = String::new();
                for part in &t.parts {
                    match part {
                        Part::Text(s) => out.push_str(s),
                        Part::Slot(Slot::History) => {
                            marks.push(out.len());
                            out.push_str(history);
                        }
                        Part::Slot(Slot::Paths) => out.push_str(&paths_text(lin, knowledge)?),
                        Part::Slot(Slot::Triples) => out.push_str(&triples_text(knowledge)),
                        Part::Slot(Slot::Invariant) => out.push_str(&invariant_text(knowledge)),
                        Part::Slot(Slot::Entities) => out.push_str(&entities_text(knowledge)),
                    }
                }
                out
            }
        };
        Ok((text, marks))
    }

    /// Whether the text depends on the history (a template may leave it out).
    pub fn shows_history(&self) -> bool {
        match self {
            InputEncoding::Template(t) => t.uses(Slot::History),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: &str, r: &str, tail: &str) -> Triple {
        Triple::new(h, r, tail)
    }

    /// The paper's example graph Z = {(a, d, b), (b, e, a), (a, d, c)} as three paths.
    fn z() -> Vec<KnowledgePath> {
        vec![vec![t("a", "d", "b")], vec![t("b", "e", "a")], vec![t("a", "d", "c")]]
    }

    #[test]
    fn surge_encodings_on_the_papers_example() {
        let lin = Linearization::dialoggsr();
        assert_eq!(InputEncoding::Surge.text(&lin, "x1 x2", &z()).unwrap(), "a d b b e a a d c x1 x2");
        // INV adds (b, ~d, a), (a, ~e, b), (c, ~d, a); sorted by head, relation, tail
        // ('~' sorts after the letters).
        assert_eq!(InputEncoding::Invariant.text(&lin, "x1 x2", &z()).unwrap(), "a d b a d c a ~e b b e a b ~d a c ~d a x1 x2");
        assert_eq!(InputEncoding::Efficient.text(&lin, "x1 x2", &z()).unwrap(), "a b c x1 x2");
        // Order and inversion do not matter to the invariant encodings: Z with (a, d, c)
        // replaced by its inverse (c, ~d, a), in another order.
        let z2 = vec![vec![t("c", "~d", "a")], vec![t("b", "e", "a")], vec![t("a", "d", "b")]];
        for enc in [InputEncoding::Invariant, InputEncoding::Efficient] {
            assert_eq!(enc.text(&lin, "x", &z()).unwrap(), enc.text(&lin, "x", &z2).unwrap(), "{enc}");
        }
        assert_ne!(InputEncoding::Surge.text(&lin, "x", &z()).unwrap(), InputEncoding::Surge.text(&lin, "x", &z2).unwrap());
        // No knowledge, or no history: no stray space.
        assert_eq!(InputEncoding::Invariant.text(&lin, "hi", &[]).unwrap(), "hi");
        assert_eq!(InputEncoding::Efficient.text(&lin, "", &z()).unwrap(), "a b c");
    }

    #[test]
    fn dialoggsr_writes_the_authors_input() {
        let lin = Linearization::dialoggsr();
        let k = vec![
            vec![t("Carly Rae Jepsen", "~Composer", "Call Me Maybe")],
            vec![t("Song", "~Kind_of composition", "We Found Love"), t("We Found Love", "Composer", "Calvin Harris")],
        ];
        assert_eq!(
            InputEncoding::DialogGsr.text(&lin, "I like it. Me too", &k).unwrap(),
            "knowledge: [HEAD] carly rae jepsen [Rev1_1][Rev1_2] composer [Rev2_1][Rev2_2] call me maybe [TAIL] [SEP] \
             [HEAD] song [Rev1_1][Rev1_2] kind of composition [Rev2_1][Rev2_2] we found love \
             [Int3_1][Int3_2] composer [Int4_1][Int4_2] calvin harris [TAIL]</s>dialogue: I like it. Me too"
        );
        assert_eq!(InputEncoding::DialogGsr.text(&lin, "hi", &[]).unwrap(), "knowledge: </s>dialogue: hi");
        let trellis = Linearization::trellis();
        assert_eq!(paths_text(&trellis, &k[..1]).unwrap(), "[Head] carly rae jepsen [Rev1] composer [Rev2] call me maybe [Tail]");
    }

    #[test]
    fn templates_fill_their_slots_and_refuse_stray_braces() {
        let lin = Linearization::trellis();
        let tpl = Template::new("{{kg}} {entities} | {triples}</s>{history}!").unwrap();
        assert!(tpl.uses(Slot::History) && !tpl.uses(Slot::Paths));
        let enc = InputEncoding::Template(tpl);
        assert_eq!(enc.text(&lin, "hello", &z()).unwrap(), "{kg} a b c | a d b b e a a d c</s>hello!");
        let enc: InputEncoding = "template:{paths} / {invariant}".parse().unwrap();
        assert_eq!(enc.text(&lin, "", &z()[..1]).unwrap(), "[Head] a [Int1] d [Int2] b [Tail] / a d b b ~d a");
        assert!(!InputEncoding::Template(Template::new("{paths}").unwrap()).shows_history());
        assert_eq!(Template::new("a {histry} b").unwrap_err(), TemplateError::UnknownSlot { name: "histry".into(), at: 2 });
        assert_eq!(Template::new("a { b").unwrap_err(), TemplateError::Unmatched { brace: '{', at: 2 });
        assert_eq!(Template::new("a } b").unwrap_err(), TemplateError::Unmatched { brace: '}', at: 2 });
        assert_eq!(Template::new("é{x}").unwrap_err(), TemplateError::UnknownSlot { name: "x".into(), at: 2 });
        assert!(Template::new("{}").is_err());
        assert_eq!(Template::new("plain").unwrap().source(), "plain");
    }

    #[test]
    fn encodings_round_trip_through_json_and_names() {
        for (json, enc) in [
            (r#""dialoggsr""#, InputEncoding::DialogGsr),
            (r#""surge""#, InputEncoding::Surge),
            (r#""invariant""#, InputEncoding::Invariant),
            (r#""efficient""#, InputEncoding::Efficient),
            (r#"{"template":"{history}"}"#, InputEncoding::Template(Template::new("{history}").unwrap())),
        ] {
            assert_eq!(serde_json::from_str::<InputEncoding>(json).unwrap(), enc);
            assert_eq!(serde_json::to_string(&enc).unwrap(), json);
            assert_eq!(enc.to_string().parse::<InputEncoding>().unwrap(), enc);
        }
        let e = serde_json::from_str::<InputEncoding>(r#"{"template":"{nope}"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown slot {nope}"), "{e}");
        assert!(serde_json::from_str::<InputEncoding>(r#""naive""#).is_err());
        assert!("naive".parse::<InputEncoding>().is_err());
    }

    #[test]
    fn marks_say_where_the_history_is() {
        let lin = Linearization::trellis();
        let two = InputEncoding::Template(Template::new("{history}|{entities}|{history}!").unwrap());
        let none = InputEncoding::Template(Template::new("{entities}").unwrap());
        for (enc, knowledge, want) in [
            (InputEncoding::DialogGsr, z(), 1),
            (InputEncoding::Surge, z(), 1),
            (InputEncoding::Invariant, vec![], 1),
            (InputEncoding::Efficient, z(), 1),
            (two, z(), 2),
            (none, z(), 0),
        ] {
            let (text, marks) = enc.text_marked(&lin, "x1 | x2", &knowledge).unwrap();
            assert_eq!(text, enc.text(&lin, "x1 | x2", &knowledge).unwrap());
            assert_eq!(marks.len(), want, "{enc}");
            for &m in &marks {
                assert_eq!(&text[m..m + 7], "x1 | x2", "{enc}");
                // The history cut from the left: the same text with the cut bytes gone.
                let (shorter, _) = enc.text_marked(&lin, "x2", &knowledge).unwrap();
                let mut cut = text.clone();
                for &m in marks.iter().rev() {
                    cut.replace_range(m..m + 5, "");
                }
                assert_eq!(shorter, cut, "{enc}");
            }
        }
        assert_eq!(InputEncoding::Surge.text_marked(&lin, "", &z()).unwrap(), ("a d b b e a a d c".to_owned(), vec![17]));
    }

    #[test]
    fn paths_must_chain() {
        assert_eq!(check_path(&[]), Err(KnowledgeProblem::Empty));
        assert_eq!(check_path(&[t("a", "r", "b"), t("b", "~s", "c")]), Ok(()));
        assert_eq!(check_path(&[t("a", "r", "b"), t("c", "s", "d")]), Err(KnowledgeProblem::Broken { index: 1, expected: "b".into(), found: "c".into() }));
        assert_eq!(check_path(&[t("a", "r", "b"), t("b", "s", "c"), t("c", "s", "d")]), Err(KnowledgeProblem::TooLong(3)));
        assert_eq!(t("a", "~r", "b").inverse(), t("b", "r", "a"));
        assert_eq!(t("a", "r", "b").inverse().inverse(), t("a", "r", "b"));
    }
}
