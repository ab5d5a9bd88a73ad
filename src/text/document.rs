//! An entity's document: what the text index holds for it and what search returns. Its
//! name, its aliases and up to [`FACTS_PER_DOCUMENT`] of its facts, each written as the
//! relation and the other end, in a fixed order (outgoing facts first, by relation id then
//! the other end's id, then incoming ones the same way), so the same store always gives the
//! same documents, whether built whole or kept up to date by updates. A documents input
//! adds a text ([`super::documents`]).

use crate::ids::{Direction, EntityId};
use crate::store::codec::{adj_prefix, decode_adj_key, decode_term, id_key};
use crate::store::error::ReadError;
use crate::store::schema::{CF_ADJACENCY, CF_ENTITIES, CF_RELATIONS, CF_RETIRED};
use crate::store::{idlist, read_aliases};
use rocksdb::{ReadOptions, DB};
use std::collections::HashMap;

/// Facts a document holds at most. Enough for an entity's salient facts; a hub's
/// thousands of facts would drown its name in the ranking and make its document cost
/// what its degree costs.
pub const FACTS_PER_DOCUMENT: usize = 32;

/// Of those, outgoing facts kept before incoming ones take the rest (each direction gets
/// at least half when it has that many).
const OUT_SHARE: usize = FACTS_PER_DOCUMENT / 2;

fn rocks(e: rocksdb::Error) -> ReadError {
    ReadError::Rocks(e.into())
}

/// One fact of a document, seen from its entity.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DocFact {
    /// `Out`: `relation(entity, other)`; `In`: `relation(other, entity)`.
    pub direction: Direction,
    /// The relation's name.
    pub relation: String,
    /// The other end's name.
    pub other: String,
}

impl DocFact {
    /// The fact as the document indexes it: `relation other` for an outgoing fact,
    /// `other relation` for an incoming one.
    pub fn text(&self) -> String {
        match self.direction {
            Direction::Out => format!("{} {}", self.relation, self.other),
            Direction::In => format!("{} {}", self.other, self.relation),
        }
    }

    /// The fact as a (subject, relation, object) triple of names, given its entity's name.
    pub fn triple<'a>(&'a self, entity: &'a str) -> (&'a str, &'a str, &'a str) {
        match self.direction {
            Direction::Out => (entity, &self.relation, &self.other),
            Direction::In => (&self.other, &self.relation, entity),
        }
    }
}

/// An entity's document.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EntityDocument {
    /// The entity.
    pub entity: EntityId,
    /// Its display name.
    pub name: String,
    /// Its aliases, sorted.
    pub aliases: Vec<String>,
    /// Its facts, at most [`FACTS_PER_DOCUMENT`], in the order the module describes.
    pub facts: Vec<DocFact>,
    /// The text a documents input gave it ([`super::DocumentsInput`]), or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
}

impl EntityDocument {
    /// The whole document as one text (name, aliases, facts, one per line): what the query
    /// producer's label function scores.
    pub fn text(&self) -> String {
        let mut out = self.name.clone();
        for a in &self.aliases {
            out.push('\n');
            out.push_str(a);
        }
        if !self.text.is_empty() {
            out.push('\n');
            out.push_str(&self.text);
        }
        for f in &self.facts {
            out.push('\n');
            out.push_str(&f.text());
        }
        out
    }
}

/// Reads documents from one generation's database (a committed one through `Store`, or
/// the one an update is writing). Relation names are cached: there are few of them.
pub(crate) struct DocumentReader<'a> {
    db: &'a DB,
    relations: HashMap<u32, String>,
}

impl<'a> DocumentReader<'a> {
    pub(crate) fn new(db: &'a DB) -> DocumentReader<'a> {
        DocumentReader { db, relations: HashMap::new() }
    }

    fn cf(&self, name: &'static str) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(name).expect("column family exists")
    }

    fn name(&self, cf: &'static str, id: u32) -> Result<Option<String>, ReadError> {
        let key = id_key(id);
        match self.db.get_pinned_cf(self.cf(cf), key).map_err(rocks)? {
            None => Ok(None),
            Some(v) => decode_term(&v).map(|t| Some(t.name)).ok_or_else(|| ReadError::corrupt(cf, &key, "undecodable dictionary record")),
        }
    }

    fn relation_name(&mut self, r: u32) -> Result<String, ReadError> {
        if let Some(n) = self.relations.get(&r) {
            return Ok(n.clone());
        }
        let name = self.name(CF_RELATIONS, r)?.ok_or_else(|| ReadError::corrupt(CF_RELATIONS, &id_key(r), "relation of a fact without a record"))?;
        self.relations.insert(r, name.clone());
        Ok(name)
    }

    /// Up to `limit` edges of `e` in direction `dir`, in (relation, other) order.
    fn edges(&self, e: u32, dir: Direction, limit: usize) -> Result<Vec<(u32, u32)>, ReadError> {
        let prefix = adj_prefix(dir, EntityId(e));
        let mut ro = ReadOptions::default();
        ro.set_prefix_same_as_start(true);
        let mut it = self.db.raw_iterator_cf_opt(self.cf(CF_ADJACENCY), ro);
        it.seek(prefix);
        let mut out = Vec::new();
        while let Some((k, v)) = it.item() {
            if !k.starts_with(&prefix) || out.len() >= limit {
                break;
            }
            let (_, _, r) = decode_adj_key(k).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, k, "malformed adjacency key"))?;
            // Only the ids kept are decoded from a delta-varint list (a hub's list holds
            // millions; a roaring one is read whole, but not copied into a vector).
            let ids = idlist::IdIter::new(v).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, k, "malformed id list"))?;
            for o in ids.take(limit - out.len()) {
                out.push((r.0, o.ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, k, "malformed id list"))?));
            }
            it.next();
        }
        it.status().map_err(rocks)?;
        Ok(out)
    }

    /// The entities `e` shares a fact with, in either direction (every one of them:
    /// renaming `e` changes their documents).
    pub(crate) fn neighbours(&self, e: u32) -> Result<Vec<u32>, ReadError> {
        let mut out = Vec::new();
        for dir in Direction::BOTH {
            out.extend(self.edges(e, dir, usize::MAX)?.into_iter().map(|(_, o)| o));
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The document of `e`, or `None` for a retired entity or an id without a record.
    pub(crate) fn document(&mut self, e: u32) -> Result<Option<EntityDocument>, ReadError> {
        if self.db.get_pinned_cf(self.cf(CF_RETIRED), id_key(e)).map_err(rocks)?.is_some() {
            return Ok(None);
        }
        let Some(name) = self.name(CF_ENTITIES, e)? else { return Ok(None) };
        let mut aliases = read_aliases(self.db, EntityId(e))?;
        aliases.sort();
        let out = self.edges(e, Direction::Out, FACTS_PER_DOCUMENT)?;
        let inc = self.edges(e, Direction::In, FACTS_PER_DOCUMENT)?;
        // Each direction keeps at least its share; what one leaves unused goes to the other.
        let keep_out = out.len().min(OUT_SHARE.max(FACTS_PER_DOCUMENT - inc.len().min(FACTS_PER_DOCUMENT - OUT_SHARE)));
        let keep_in = inc.len().min(FACTS_PER_DOCUMENT - keep_out);
        let mut facts = Vec::with_capacity(keep_out + keep_in);
        for (dir, edges) in [(Direction::Out, &out[..keep_out]), (Direction::In, &inc[..keep_in])] {
            for &(r, o) in edges {
                let relation = self.relation_name(r)?;
                let other = self.name(CF_ENTITIES, o)?.ok_or_else(|| ReadError::corrupt(CF_ENTITIES, &id_key(o), "entity of a fact without a record"))?;
                facts.push(DocFact { direction: dir, relation, other });
            }
        }
        Ok(Some(EntityDocument { entity: EntityId(e), name, aliases, facts, text: String::new() }))
    }
}
