//! Walks over the stored graph, streamed from the store, and scores computed on it.

// documented when the split lands
#[allow(missing_docs)]
pub mod candidates;
pub mod informativeness;
pub mod pcst;

use crate::ids::{Direction, EntityId, RelationId};
use crate::store::error::ReadError;
use crate::store::{Edge, Store};
use std::ops::ControlFlow;

/// One fact reached from the start entity: `hop` 1 touches the start, `hop` 2 starts at a
/// neighbour `from`. `edge.direction` is `In` when the fact was walked backwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// 1 or 2: how far the fact is from the start entity.
    pub hop: u8,
    /// The entity the fact was reached from (the start, for hop 1).
    pub from: EntityId,
    /// The fact, seen from `from`.
    pub edge: Edge,
}

impl Step {
    /// The fact as stored: (subject, relation, object).
    pub fn fact(&self) -> (EntityId, RelationId, EntityId) {
        match self.edge.direction {
            Direction::Out => (self.from, self.edge.relation, self.edge.other),
            Direction::In => (self.edge.other, self.edge.relation, self.from),
        }
    }
}

/// Facts within `hops` (1 or 2) of `start`, both directions, in a deterministic order
/// (direction, relation, neighbour id; 2-hop facts after all 1-hop facts), at most `limit`.
/// `relation` restricts the first hop. The second hop never walks straight back along the
/// fact it came by.
pub fn neighborhood(store: &Store, start: EntityId, relation: Option<RelationId>, hops: u8, limit: usize, mut f: impl FnMut(Step)) -> Result<usize, ReadError> {
    let mut emitted = 0usize;
    let mut first: Vec<Edge> = Vec::new();
    store.for_each_neighbor(start, None, relation, |edge| {
        if emitted >= limit {
            return ControlFlow::Break(());
        }
        f(Step { hop: 1, from: start, edge });
        emitted += 1;
        if hops >= 2 {
            first.push(edge);
        }
        ControlFlow::Continue(())
    })?;
    for via in first {
        if emitted >= limit {
            break;
        }
        let back = Edge { direction: via.direction.reverse(), relation: via.relation, other: start };
        store.for_each_neighbor(via.other, None, None, |edge| {
            if emitted >= limit {
                return ControlFlow::Break(());
            }
            if edge != back {
                f(Step { hop: 2, from: via.other, edge });
                emitted += 1;
            }
            ControlFlow::Continue(())
        })?;
    }
    Ok(emitted)
}
