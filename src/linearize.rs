//! The one definition of how a path is written as text: the boundary tokens of every
//! position, how a reversed edge is marked, how names are cased and how relation names
//! become words. The token index, BM25's verbalization, the constrained decoder and the
//! generator all read it from here, so they cannot drift apart.
//!
//! A 2-hop path is `[Head] e1 [Int1] r1 [Int2] e2 [Int3] r2 [Int4] e3 [Tail]`; an edge walked
//! against its stored direction uses `[RevN]` instead of `[IntN]` on both sides of its
//! relation; paths are separated by `[SEP]`. Each boundary may be several tokens (the
//! DialogGSR authors use two learned tokens per boundary, `[Int1_1][Int1_2]`).
//!
//! Reverse relations: a load folds `~r(b, a)` into the stored fact `r(a, b)`
//! (schema, "Reverse relations"), so a path never names `~r`: walking `r` from `b` to `a` is
//! written `[Head] b [Rev1] r [Rev2] a [Tail]`, with the name of the stored relation.
//!
//! This module depends on nothing else in the crate.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which dictionary a name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// An entity's name.
    Entity = 0,
    /// A relation's name.
    Relation = 1,
}

/// A boundary position of a linearized path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// `[Head]`: before the path's first entity.
    Head,
    /// `[IntN]`, N in 1..=4: around the relation of hop (N + 1) / 2, walked forwards.
    Int(u8),
    /// `[RevN]`, N in 1..=4: the same, walked backwards.
    Rev(u8),
    /// `[Tail]`: after the path's last entity.
    Tail,
    /// `[SEP]`: between paths.
    Sep,
}

/// How paths are written. Serialized as JSON (`--linearization FILE.json`); its
/// [`fingerprint`](Linearization::fingerprint) is recorded with every token index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Linearization {
    /// A name for humans (`trellis`, `dialoggsr`, or the file's); not part of the fingerprint.
    pub name: String,
    /// Each boundary is one or more tokens, written one after the other without spaces.
    pub head: Vec<String>,
    /// `[Int1]` .. `[Int4]`.
    pub int: [Vec<String>; 4],
    /// `[Rev1]` .. `[Rev4]`.
    pub rev: [Vec<String>; 4],
    /// `[Tail]`.
    pub tail: Vec<String>,
    /// `[SEP]`: between paths (and before earlier paths in a retriever's input).
    pub sep: Vec<String>,
    /// Names are lowercased (entities and relations).
    pub lowercase: bool,
    /// Characters of relation names written as spaces (`_`, `-`).
    pub relation_spaces: String,
}

/// Why a linearization cannot be used. `path` is `<json>` for text given in memory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinearizeError {
    /// A linearization file cannot be read.
    #[error("{path}: not a linearization: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A linearization's JSON does not parse or has unknown fields.
    #[error("{path}: not a linearization: {source}")]
    Json {
        /// The file (`<json>` for text given directly).
        path: PathBuf,
        /// serde_json's error.
        source: serde_json::Error,
    },
    /// A boundary no tokenizer can write; `name` is the linearization's own name (data).
    #[error("linearization {name:?}: {problem}")]
    Invalid {
        /// The linearization's name.
        name: String,
        /// Which boundary and why.
        problem: BoundaryProblem,
    },
    /// A path with no hop or more than two.
    #[error("a path has 1 or 2 hops, not {0}")]
    Hops(usize),
}

/// A boundary no tokenizer can write as its own tokens. `boundary` and `token` are data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BoundaryProblem {
    /// A boundary with no token.
    #[error("boundary {boundary} has no token")]
    NoToken {
        /// The boundary, e.g. `Int1`.
        boundary: String,
    },
    /// A boundary token that is empty or holds white space.
    #[error("boundary {boundary} has the token {token:?} (empty or with white space)")]
    BadToken {
        /// The boundary, e.g. `Int1`.
        boundary: String,
        /// The token.
        token: String,
    },
}

/// One hop of a path as names: the relation, whether the edge is walked backwards, and the
/// entity it reaches.
#[derive(Clone, Copy, Debug)]
pub struct HopText<'a> {
    /// The relation's name.
    pub relation: &'a str,
    /// Whether the edge is walked backwards (object to subject).
    pub reversed: bool,
    /// The entity the hop reaches.
    pub to: &'a str,
}

/// The boundaries that enclose a name at one position of a path.
#[derive(Clone, Copy, Debug)]
pub struct Slot<'a> {
    /// The boundary tokens before the name.
    pub open: &'a [String],
    /// The boundary tokens after the name.
    pub close: &'a [String],
}

/// FNV-1a, 64 bits: a stable fingerprint that needs no extra dependency.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_more(0xcbf2_9ce4_8422_2325, bytes)
}

/// [`fnv1a64`] of the bytes hashed into `h` followed by `bytes`: a hash of several
/// pieces, or of a file read in parts, without joining them.
pub fn fnv1a64_more(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Default for Linearization {
    fn default() -> Self {
        Linearization::trellis()
    }
}

impl Linearization {
    /// One token per boundary: `[Head]`, `[Int1]`..`[Int4]`, `[Rev1]`..`[Rev4]`, `[Tail]`, `[SEP]`.
    pub fn trellis() -> Linearization {
        let one = |s: String| vec![s];
        Linearization {
            name: "trellis".into(),
            head: one("[Head]".into()),
            int: [1, 2, 3, 4].map(|n| one(format!("[Int{n}]"))),
            rev: [1, 2, 3, 4].map(|n| one(format!("[Rev{n}]"))),
            tail: one("[Tail]".into()),
            sep: one("[SEP]".into()),
            lowercase: true,
            relation_spaces: "_-".into(),
        }
    }

    /// The DialogGSR authors' 18 added tokens: `[HEAD]`, `[Int1_1][Int1_2]` .. `[Rev4_2]`,
    /// `[TAIL]`. None of the 18 is a separator: `[SEP]` separates paths as in `trellis`.
    pub fn dialoggsr() -> Linearization {
        let two = |kind: &str, n: u32| vec![format!("[{kind}{n}_1]"), format!("[{kind}{n}_2]")];
        Linearization {
            name: "dialoggsr".into(),
            head: vec!["[HEAD]".into()],
            int: [1, 2, 3, 4].map(|n| two("Int", n)),
            rev: [1, 2, 3, 4].map(|n| two("Rev", n)),
            tail: vec!["[TAIL]".into()],
            sep: vec!["[SEP]".into()],
            lowercase: true,
            relation_spaces: "_-".into(),
        }
    }

    /// A preset by name, or a JSON file.
    pub fn from_arg(arg: &str) -> Result<Linearization, LinearizeError> {
        match arg {
            "trellis" => Ok(Linearization::trellis()),
            "dialoggsr" => Ok(Linearization::dialoggsr()),
            path => {
                let text = std::fs::read_to_string(path).map_err(|source| LinearizeError::Read { path: path.into(), source })?;
                Linearization::from_json(&text).map_err(|e| match e {
                    LinearizeError::Json { source, .. } => LinearizeError::Json { path: path.into(), source },
                    other => other,
                })
            }
        }
    }

    /// A linearization from its JSON text, checked.
    pub fn from_json(text: &str) -> Result<Linearization, LinearizeError> {
        let lin: Linearization = serde_json::from_str(text).map_err(|source| LinearizeError::Json { path: "<json>".into(), source })?;
        lin.check()?;
        Ok(lin)
    }

    /// Every boundary has at least one token, no token is empty or holds white space (a
    /// boundary token must be one token of the vocabulary).
    pub fn check(&self) -> Result<(), LinearizeError> {
        for (what, b) in self.boundaries() {
            if b.is_empty() {
                return Err(LinearizeError::Invalid { name: self.name.clone(), problem: BoundaryProblem::NoToken { boundary: what } });
            }
            if let Some(t) = b.iter().find(|t| t.is_empty() || t.chars().any(char::is_whitespace)) {
                return Err(LinearizeError::Invalid {
                    name: self.name.clone(),
                    problem: BoundaryProblem::BadToken { boundary: what.clone(), token: t.clone() },
                });
            }
        }
        Ok(())
    }

    /// Every boundary with a name for messages, in a fixed order.
    pub fn boundaries(&self) -> Vec<(String, &[String])> {
        let mut out = vec![("Head".to_string(), &self.head[..])];
        for n in 0..4 {
            out.push((format!("Int{}", n + 1), &self.int[n][..]));
        }
        for n in 0..4 {
            out.push((format!("Rev{}", n + 1), &self.rev[n][..]));
        }
        out.push(("Tail".into(), &self.tail[..]));
        out.push(("SEP".into(), &self.sep[..]));
        out
    }

    /// The tokens of a boundary. `Int(n)` and `Rev(n)` take n in 1..=4 (others are clamped).
    pub fn boundary(&self, p: Position) -> &[String] {
        let i = |n: u8| usize::from(n.clamp(1, 4)) - 1;
        match p {
            Position::Head => &self.head,
            Position::Int(n) => &self.int[i(n)],
            Position::Rev(n) => &self.rev[i(n)],
            Position::Tail => &self.tail,
            Position::Sep => &self.sep,
        }
    }

    /// A boundary as text: its tokens one after the other.
    pub fn boundary_text(&self, p: Position) -> String {
        self.boundary(p).concat()
    }

    /// Fingerprint over the canonical JSON (object keys sorted) without `name`: two
    /// definitions that write the same text have the same fingerprint.
    pub fn fingerprint(&self) -> u64 {
        let mut v = serde_json::to_value(self).expect("a linearization serializes");
        if let Some(o) = v.as_object_mut() {
            o.remove("name");
        }
        fnv1a64(v.to_string().as_bytes())
    }

    /// [`Linearization::fingerprint`] as 16 hex digits.
    pub fn fingerprint_hex(&self) -> String {
        format!("{:016x}", self.fingerprint())
    }

    /// An entity name as written in a path.
    pub fn entity_text(&self, name: &str) -> String {
        if self.lowercase {
            name.to_lowercase()
        } else {
            name.to_owned()
        }
    }

    /// A relation name as written in a path: cased like entities, separators as spaces.
    pub fn relation_text(&self, name: &str) -> String {
        self.entity_text(name).chars().map(|c| if self.relation_spaces.contains(c) { ' ' } else { c }).collect()
    }

    /// A name as written in a path: [`Linearization::entity_text`] or [`Linearization::relation_text`].
    pub fn name_text(&self, side: Side, name: &str) -> String {
        match side {
            Side::Entity => self.entity_text(name),
            Side::Relation => self.relation_text(name),
        }
    }

    /// Every position a name of `side` can take in a path of 1 or 2 hops, as the boundaries
    /// around it. The first is the one the token index encodes names in.
    pub fn slots(&self, side: Side) -> Vec<Slot<'_>> {
        use Position::*;
        let pairs: Vec<(Position, Position)> = match side {
            Side::Relation => vec![(Int(1), Int(2)), (Rev(1), Rev(2)), (Int(3), Int(4)), (Rev(3), Rev(4))],
            Side::Entity => {
                let mut v = vec![(Head, Int(1)), (Head, Rev(1))];
                for first in [Int(2), Rev(2)] {
                    for close in [Tail, Int(3), Rev(3)] {
                        v.push((first, close));
                    }
                }
                v.extend([(Int(4), Tail), (Rev(4), Tail)]);
                v
            }
        };
        pairs.into_iter().map(|(o, c)| Slot { open: self.boundary(o), close: self.boundary(c) }).collect()
    }

    /// A name between the boundaries of a slot: `open name close`.
    pub fn in_slot(&self, side: Side, slot: Slot<'_>, name: &str) -> String {
        format!("{} {} {}", slot.open.concat(), self.name_text(side, name), slot.close.concat())
    }

    /// A path of 1 or 2 hops from `start`, as text.
    pub fn render_path(&self, start: &str, hops: &[HopText<'_>]) -> Result<String, LinearizeError> {
        if hops.is_empty() || hops.len() > 2 {
            return Err(LinearizeError::Hops(hops.len()));
        }
        let mut out = format!("{} {}", self.boundary_text(Position::Head), self.entity_text(start));
        for (i, hop) in hops.iter().enumerate() {
            let n = 2 * i as u8 + 1;
            let (open, close) = if hop.reversed { (Position::Rev(n), Position::Rev(n + 1)) } else { (Position::Int(n), Position::Int(n + 1)) };
            out.push_str(&format!(
                " {} {} {} {}",
                self.boundary_text(open),
                self.relation_text(hop.relation),
                self.boundary_text(close),
                self.entity_text(hop.to)
            ));
        }
        out.push(' ');
        out.push_str(&self.boundary_text(Position::Tail));
        Ok(out)
    }

    /// Several paths, separated by the `[SEP]` boundary.
    pub fn render_paths<'a>(&self, paths: impl IntoIterator<Item = (&'a str, &'a [HopText<'a>])>) -> Result<String, LinearizeError> {
        let sep = format!(" {} ", self.boundary_text(Position::Sep));
        let parts = paths.into_iter().map(|(s, h)| self.render_path(s, h)).collect::<Result<Vec<_>, _>>()?;
        Ok(parts.join(&sep))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn presets_write_the_documented_paths() {
        let hops = [HopText { relation: "Sport_played", reversed: false, to: "Golf" }, HopText { relation: "Parent-genre", reversed: true, to: "Sports Game" }];
        assert_eq!(
            Linearization::trellis().render_path("Jordan Spieth", &hops).unwrap(),
            "[Head] jordan spieth [Int1] sport played [Int2] golf [Rev3] parent genre [Rev4] sports game [Tail]"
        );
        assert_eq!(
            Linearization::dialoggsr().render_path("Jordan Spieth", &hops[..1]).unwrap(),
            "[HEAD] jordan spieth [Int1_1][Int1_2] sport played [Int2_1][Int2_2] golf [TAIL]"
        );
        let one = [HopText { relation: "r", reversed: false, to: "B" }];
        assert_eq!(
            Linearization::trellis().render_paths([("A", &one[..]), ("C", &one[..])]).unwrap(),
            "[Head] a [Int1] r [Int2] b [Tail] [SEP] [Head] c [Int1] r [Int2] b [Tail]"
        );
        assert!(matches!(Linearization::trellis().render_path("A", &[]), Err(LinearizeError::Hops(0))));
    }

    #[test]
    fn dialoggsr_has_the_authors_18_tokens() {
        let lin = Linearization::dialoggsr();
        let mut tokens: Vec<&String> = lin.boundaries().into_iter().filter(|(w, _)| w != "SEP").flat_map(|(_, b)| b.iter()).collect();
        tokens.sort();
        tokens.dedup();
        assert_eq!(tokens.len(), 18);
        assert!(tokens.iter().any(|t| *t == "[Rev4_2]"));
    }

    #[test]
    fn fingerprint_ignores_the_name_and_sees_every_field() {
        let a = Linearization::trellis();
        let mut b = a.clone();
        b.name = "mine".into();
        assert_eq!(a.fingerprint(), b.fingerprint());
        let mut c = a.clone();
        c.lowercase = false;
        assert_ne!(a.fingerprint(), c.fingerprint());
        let mut d = a.clone();
        d.rev[3] = vec!["[R4]".into()];
        assert_ne!(a.fingerprint(), d.fingerprint());
        assert_ne!(a.fingerprint(), Linearization::dialoggsr().fingerprint());
        // Stable across builds: the value is part of the on-disk format (schema/v4.md).
        assert_eq!(a.fingerprint_hex(), TRELLIS_FINGERPRINT);
    }

    /// Computed independently (Python: json.dumps(sort_keys=True, separators=(",", ":")) of the
    /// preset without `name`, FNV-1a 64); a change here changes the format.
    const TRELLIS_FINGERPRINT: &str = "d0595369770b0eec";

    #[test]
    fn bad_definitions_are_refused() {
        let mut j = serde_json::to_value(Linearization::trellis()).unwrap();
        j["tail"] = serde_json::json!([]);
        let e = Linearization::from_json(&j.to_string()).unwrap_err();
        assert!(e.to_string().contains("boundary Tail has no token"), "{e}");
        assert!(matches!(e, LinearizeError::Invalid { problem: BoundaryProblem::NoToken { ref boundary }, .. } if boundary == "Tail"), "{e:?}");
        j["tail"] = serde_json::json!(["[T ail]"]);
        assert!(Linearization::from_json(&j.to_string()).is_err());
        assert!(Linearization::from_json("{\"name\": 1}").is_err());
        assert!(Linearization::from_arg("/nonexistent/lin.json").unwrap_err().to_string().contains("/nonexistent/lin.json"));
    }

    proptest! {
        #[test]
        fn json_round_trips(lower: bool, spaces in "[_\\-.]{0,3}", head in "\\[[A-Za-z0-9_]{1,6}\\]") {
            let mut lin = Linearization::dialoggsr();
            lin.lowercase = lower;
            lin.relation_spaces = spaces;
            lin.head = vec![head];
            let back = Linearization::from_json(&serde_json::to_string(&lin).unwrap()).unwrap();
            prop_assert_eq!(back.fingerprint(), lin.fingerprint());
            prop_assert_eq!(back, lin);
        }

        #[test]
        fn relation_text_has_no_separator_left(name in "\\PC{0,20}") {
            let lin = Linearization::trellis();
            let t = lin.relation_text(&name);
            prop_assert!(!t.contains('_') && !t.contains('-'));
            prop_assert_eq!(t.chars().count(), name.to_lowercase().chars().count());
        }
    }
}
