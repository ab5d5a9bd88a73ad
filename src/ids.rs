//! Dense numeric identifiers. Dense u32 ids keep adjacency lists small and let id sets
//! live in roaring bitmaps.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An entity of the graph (a node): dense, assigned in load order, stable across loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EntityId(pub u32);

/// A relation type (an edge label): dense, assigned in load order, stable across loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RelationId(pub u32);

impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

impl fmt::Display for RelationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// Which way an edge is walked from the entity at hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Direction {
    /// `relation(entity, other)`: the entity is the subject.
    Out = 0,
    /// `relation(other, entity)`: the entity is the object (the edge walked backwards).
    In = 1,
}

impl Direction {
    /// Both directions, `Out` first.
    pub const BOTH: [Direction; 2] = [Direction::Out, Direction::In];

    /// The direction's byte in store keys (0 `Out`, 1 `In`).
    pub fn as_byte(self) -> u8 {
        self as u8
    }

    /// The direction of a key byte (`None`: neither 0 nor 1).
    pub fn from_byte(b: u8) -> Option<Direction> {
        match b {
            0 => Some(Direction::Out),
            1 => Some(Direction::In),
            _ => None,
        }
    }

    /// The other direction.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::Out => Direction::In,
            Direction::In => Direction::Out,
        }
    }
}
