//! The boundary tokens of a linearization as the automaton reads them: the token ids of
//! `[Head]`, `[Int*]`/`[Rev*]` and `[Tail]` in a model's vocabulary, checked once so that the
//! boundaries that can follow one another at a choice are never prefixes of each other and
//! no boundary holds the end-of-sequence id.

use super::automaton::DecodeError;
use crate::linearize::{Linearization, Position};

/// The token ids of the boundaries of a linearization and the end-of-sequence id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundaries {
    pub(super) head: Vec<u32>,
    int: [Vec<u32>; 4],
    rev: [Vec<u32>; 4],
    pub(super) tail: Vec<u32>,
    pub(super) eos: u32,
    /// Every boundary id and EOS, sorted: names holding one are never offered.
    pub(super) reserved: Vec<u32>,
}

pub(super) const NAMES: [&str; 9] = ["Tail", "Int1", "Rev1", "Int2", "Rev2", "Int3", "Rev3", "Int4", "Rev4"];

impl Boundaries {
    /// The ids of `lin`'s boundaries in `tokenizer` (`token_to_id`) and `eos`
    /// (`config.eos_token_id`).
    pub fn new(lin: &Linearization, tokenizer: &tokenizers::Tokenizer, eos: u32) -> Result<Boundaries, DecodeError> {
        let ids = |p: Position, what: &str| -> Result<Vec<u32>, DecodeError> {
            lin.boundary(p)
                .iter()
                .map(|t| {
                    tokenizer.token_to_id(t).ok_or_else(|| DecodeError::MissingBoundary {
                        token: t.clone(),
                        boundary: what.to_owned(),
                        linearization: lin.name.clone(),
                    })
                })
                .collect()
        };
        let int = [ids(Position::Int(1), "Int1")?, ids(Position::Int(2), "Int2")?, ids(Position::Int(3), "Int3")?, ids(Position::Int(4), "Int4")?];
        let rev = [ids(Position::Rev(1), "Rev1")?, ids(Position::Rev(2), "Rev2")?, ids(Position::Rev(3), "Rev3")?, ids(Position::Rev(4), "Rev4")?];
        Boundaries::from_ids(ids(Position::Head, "Head")?, int, rev, ids(Position::Tail, "Tail")?, eos)
    }

    /// From ids directly; checks what [`Boundaries::new`] checks.
    pub fn from_ids(head: Vec<u32>, int: [Vec<u32>; 4], rev: [Vec<u32>; 4], tail: Vec<u32>, eos: u32) -> Result<Boundaries, DecodeError> {
        let mut b = Boundaries { head, int, rev, tail, eos, reserved: Vec::new() };
        if b.head.is_empty() {
            return Err(DecodeError::EmptyBoundary { boundary: "Head" });
        }
        for c in 0..NAMES.len() as u8 {
            if b.seq(c).is_empty() {
                return Err(DecodeError::EmptyBoundary { boundary: NAMES[c as usize] });
            }
        }
        for set in [&[FWD1, BWD1][..], &[TAIL, FWD2, BWD2][..]] {
            for &x in set {
                for &y in set {
                    if x != y && b.seq(y).starts_with(b.seq(x)) {
                        return Err(DecodeError::AmbiguousBoundaries { first: NAMES[x as usize], second: NAMES[y as usize] });
                    }
                }
            }
        }
        if b.head.contains(&eos) {
            return Err(DecodeError::EosInBoundary { eos, boundary: "Head" });
        }
        for c in 0..NAMES.len() as u8 {
            if b.seq(c).contains(&eos) {
                return Err(DecodeError::EosInBoundary { eos, boundary: NAMES[c as usize] });
            }
        }
        let mut reserved: Vec<u32> = b.head.clone();
        for c in 0..NAMES.len() as u8 {
            reserved.extend_from_slice(b.seq(c));
        }
        reserved.push(eos);
        reserved.sort_unstable();
        reserved.dedup();
        b.reserved = reserved;
        Ok(b)
    }

    #[cfg(test)]
    pub fn eos(&self) -> u32 {
        self.eos
    }

    /// The tokens of the head boundary (a path's first token(s)).
    #[cfg(feature = "internals")]
    pub fn head(&self) -> &[u32] {
        &self.head
    }

    /// The tokens a decoder writes for a path (schema/gsr-decoding.md §3), EOS included:
    /// `names` are the token lists of e1, r1, e2 (and r2, e3 for two hops), `reversed`
    /// says per hop whether it walks its fact backwards. `None` unless there are 3 names
    /// and 1 direction, or 5 and 2.
    pub fn path_tokens(&self, names: &[&[u32]], reversed: &[bool]) -> Option<Vec<u32>> {
        if !((names.len() == 3 && reversed.len() == 1) || (names.len() == 5 && reversed.len() == 2)) {
            return None;
        }
        let mut out = self.head.clone();
        out.extend_from_slice(names[0]);
        for (hop, &rev) in reversed.iter().enumerate() {
            let pair = if rev { &self.rev } else { &self.int };
            out.extend_from_slice(&pair[2 * hop]);
            out.extend_from_slice(names[1 + 2 * hop]);
            out.extend_from_slice(&pair[2 * hop + 1]);
            out.extend_from_slice(names[2 + 2 * hop]);
        }
        out.extend_from_slice(&self.tail);
        out.push(self.eos);
        Some(out)
    }

    /// The ids of a boundary choice (`TAIL`, `FWD1`, ...).
    pub(super) fn seq(&self, c: u8) -> &[u32] {
        match c {
            TAIL => &self.tail,
            FWD1 => &self.int[0],
            BWD1 => &self.rev[0],
            INT2 => &self.int[1],
            REV2 => &self.rev[1],
            FWD2 => &self.int[2],
            BWD2 => &self.rev[2],
            INT4 => &self.int[3],
            _ => &self.rev[3],
        }
    }

    pub(super) fn is_reserved(&self, tokens: &[u32]) -> bool {
        tokens.iter().any(|t| self.reserved.binary_search(t).is_ok())
    }
}

// Boundary choices, as bits of a mask.
pub(super) const TAIL: u8 = 0;
pub(super) const FWD1: u8 = 1;
pub(super) const BWD1: u8 = 2;
pub(super) const INT2: u8 = 3;
pub(super) const REV2: u8 = 4;
pub(super) const FWD2: u8 = 5;
pub(super) const BWD2: u8 = 6;
pub(super) const INT4: u8 = 7;
pub(super) const REV4: u8 = 8;
