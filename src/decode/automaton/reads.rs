//! What the automaton reads from the store, cached in its [`PathGraph`] for the request and
//! shared by all beams: token lists, candidate paths, relation and neighbour lists, hub
//! degrees, and whether a relation or direction leads to a usable path (liveness).

use super::*;

impl PathGraph<'_> {
    pub(super) fn prefetch(&mut self, side: Side, ids: impl Iterator<Item = u32>) -> Result<(), DecodeError> {
        let mut missing: Vec<u32> = ids.filter(|id| !self.tokens.contains_key(&(side, *id))).collect();
        if missing.is_empty() {
            return Ok(());
        }
        missing.sort_unstable();
        missing.dedup();
        let lists = self.index.tokens_many(side, &missing)?;
        for (id, t) in missing.into_iter().zip(lists) {
            let usable = t.filter(|t| !self.b.is_reserved(t)).map(Vec::into_boxed_slice);
            self.tokens.insert((side, id), usable);
        }
        Ok(())
    }

    /// The term has a token list without reserved ids.
    pub(super) fn valid(&mut self, side: Side, id: u32) -> Result<bool, DecodeError> {
        if let Some(t) = self.tokens.get(&(side, id)) {
            return Ok(t.is_some());
        }
        self.prefetch(side, std::iter::once(id))?;
        Ok(self.tokens.get(&(side, id)).is_some_and(Option::is_some))
    }

    pub(super) fn capped(&mut self, m: EntityId) -> Result<Option<Arc<CappedPaths>>, DecodeError> {
        let Source::Capped { cfg, paths } = &mut self.source else { return Ok(None) };
        if let Some(p) = paths.get(&m) {
            return Ok(Some(p.clone()));
        }
        // Each mentioned entity's paths are independent of the others' (caps are per entity).
        let c = candidate_subgraph(&self.store, &[m], cfg)?;
        let p = Arc::new(CappedPaths { one: c.one_hop.iter().map(|h| h.edge).collect(), two: c.two_hop.iter().map(|p| (p[0].edge, p[1].edge)).collect() });
        paths.insert(m, p.clone());
        Ok(Some(p))
    }

    pub(super) fn store_relations(&mut self, e: EntityId, d: Direction) -> Result<Arc<[RelationId]>, DecodeError> {
        if let Some(r) = self.relations.get(&(e, d)) {
            return Ok(r.clone());
        }
        let r: Arc<[RelationId]> = self.store.relations_at(e, d)?.into_iter().map(|(r, _)| r).collect();
        self.relations.insert((e, d), r.clone());
        Ok(r)
    }

    pub(super) fn store_neighbours(&mut self, e: EntityId, d: Direction, r: RelationId) -> Result<Arc<[EntityId]>, DecodeError> {
        if let Some(n) = self.neighbours.get(&(e, d, r)) {
            return Ok(n.clone());
        }
        let n: Arc<[EntityId]> = self.store.neighbors_via(e, d, r)?.into();
        self.neighbours.insert((e, d, r), n.clone());
        Ok(n)
    }

    /// More facts than the uncapped mode's `hub_degree` (never, capped).
    pub(super) fn is_hub(&mut self, e: EntityId) -> Result<bool, DecodeError> {
        let Source::Uncapped { hub_degree } = self.source else { return Ok(false) };
        if let Some(&h) = self.hubs.get(&e) {
            return Ok(h);
        }
        let h = self.store.degree(e, Direction::Out)? + self.store.degree(e, Direction::In)? > hub_degree as u64;
        self.hubs.insert(e, h);
        Ok(h)
    }

    /// Relations of the first hops from `m` in direction `d`, ascending.
    pub(super) fn rels1(&mut self, m: EntityId, d: Direction) -> Result<Arc<[RelationId]>, DecodeError> {
        match self.capped(m)? {
            Some(p) => {
                let mut v: Vec<RelationId> = p.one.iter().filter(|e| e.direction == d).map(|e| e.relation).collect();
                v.dedup();
                Ok(v.into())
            }
            None => self.store_relations(m, d),
        }
    }

    /// Neighbours of the first hops from `m` via (`d`, `r`), ascending.
    pub(super) fn nbrs1(&mut self, m: EntityId, d: Direction, r: RelationId) -> Result<Arc<[EntityId]>, DecodeError> {
        match self.capped(m)? {
            Some(p) => Ok(p.one.iter().filter(|e| e.direction == d && e.relation == r).map(|e| e.other).collect()),
            None => self.store_neighbours(m, d, r),
        }
    }

    /// Relations of the second hops after `it`'s first hop in direction `d`, ascending.
    pub(super) fn rels2(&mut self, it: &Item, d: Direction) -> Result<Arc<[RelationId]>, DecodeError> {
        match self.capped(it.m)? {
            Some(p) => {
                let mut v: Vec<RelationId> = second_hops(&p, it.hop1).iter().filter(|(_, e)| e.direction == d).map(|(_, e)| e.relation).collect();
                v.dedup();
                Ok(v.into())
            }
            None => {
                if self.is_hub(it.hop1.other)? {
                    return Ok(Arc::from([]));
                }
                self.store_relations(it.hop1.other, d)
            }
        }
    }

    /// Ends of the second hops after `it`'s first hop via (`d`, `r`), ascending, never the
    /// start entity.
    pub(super) fn nbrs2(&mut self, it: &Item, d: Direction, r: RelationId) -> Result<Vec<EntityId>, DecodeError> {
        match self.capped(it.m)? {
            Some(p) => Ok(second_hops(&p, it.hop1).iter().filter(|(_, e)| e.direction == d && e.relation == r).map(|(_, e)| e.other).collect()),
            None => {
                if self.is_hub(it.hop1.other)? {
                    return Ok(Vec::new());
                }
                Ok(self.store_neighbours(it.hop1.other, d, r)?.iter().copied().filter(|&y| y != it.m).collect())
            }
        }
    }

    /// Some complete path continues `m` through (`d`, `r`).
    pub(super) fn live_r1(&mut self, m: EntityId, d: Direction, r: RelationId) -> Result<bool, DecodeError> {
        let key = (m, d, r, edge_key(NONE_EDGE));
        if let Some(&l) = self.live_rel.get(&key) {
            return Ok(l);
        }
        let mut live = false;
        if self.valid(Side::Relation, r.0)? {
            for &x in self.nbrs1(m, d, r)?.iter() {
                if self.valid(Side::Entity, x.0)? {
                    live = true;
                    break;
                }
            }
        }
        self.live_rel.insert(key, live);
        Ok(live)
    }

    pub(super) fn live_dir1(&mut self, m: EntityId, d: Direction) -> Result<bool, DecodeError> {
        for &r in self.rels1(m, d)?.iter() {
            if self.live_r1(m, d, r)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Some complete path continues `it` (second relation set) through its second relation.
    pub(super) fn live_r2(&mut self, it: &Item) -> Result<bool, DecodeError> {
        let (d, r) = (it.hop2.direction, it.hop2.relation);
        let key = (it.m, d, r, edge_key(it.hop1));
        if let Some(&l) = self.live_rel.get(&key) {
            return Ok(l);
        }
        let mut live = false;
        if self.valid(Side::Relation, r.0)? {
            for y in self.nbrs2(it, d, r)? {
                if self.valid(Side::Entity, y.0)? {
                    live = true;
                    break;
                }
            }
        }
        self.live_rel.insert(key, live);
        Ok(live)
    }

    pub(super) fn live_dir2(&mut self, it: &Item, d: Direction) -> Result<bool, DecodeError> {
        for &r in self.rels2(it, d)?.iter() {
            if self.live_r2(&Item { hop2: Edge { direction: d, relation: r, other: EntityId(u32::MAX) }, ..*it })? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
