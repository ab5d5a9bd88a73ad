//! Adjacency merge (steps 3 and 4 of the write phase): the sorter's streams, merged from
//! its runs, become one id list per (entity, relation, direction), unioned with the list
//! the store already holds, and the entity degrees.

use super::error::IngestError;
use super::sort::{Order, TripleSorter};
use super::sst::{SstOptions, SstSink};
use crate::backend::RocksResult;
use crate::ids::{Direction, EntityId, RelationId};
use crate::progress::{Monitor, Progress, Unit, Work};
use crate::store::codec;
use crate::store::error::{Corruption, Key, ReadError};
use crate::store::idlist;
use crate::store::schema::*;
use rocksdb::DB;
use std::path::PathBuf;
use std::time::Instant;

/// SST files per column family.
pub(super) type CfFiles = Vec<(&'static str, Vec<PathBuf>)>;

/// Steps 3 and 4: outgoing then incoming adjacency and degrees. Returns the SST files and
/// the number of facts the load adds (checked equal from both directions).
pub(super) fn write_adjacency_both(
    sorter: &mut TripleSorter,
    old: Option<&DB>,
    set: &SstOptions,
    monitor: &Monitor,
    inputs: usize,
    load: u32,
) -> Result<(CfFiles, u64), IngestError> {
    let mut files = Vec::new();
    let mut added_out = 0;
    for (order, dir) in [(Order::Spo, Direction::Out), (Order::Ops, Direction::In)] {
        let t = Instant::now();
        let (adj, deg, provenance, added) = write_adjacency(sorter, old, set, order, dir, monitor, inputs, load)?;
        tracing::info!(?dir, elapsed_ms = t.elapsed().as_millis() as u64, "wrote adjacency");
        files.push((CF_ADJACENCY, adj));
        files.push((CF_DEGREES, deg));
        files.extend(provenance);
        sorter.remove_runs(order)?;
        if dir == Direction::Out {
            added_out = added;
        } else if added != added_out {
            return Err(ReadError::Corrupt {
                cf: CF_ADJACENCY,
                key: Key(Box::default()),
                what: Corruption::DirectionCounts { outgoing: added_out, incoming: added },
            }
            .into());
        }
    }
    Ok((files, added_out))
}

/// One direction's adjacency and degrees; the outgoing pass also writes the load's
/// provenance (`fact_sources`, `source_facts`: every fact the load read, stored before or not).
#[allow(clippy::too_many_arguments)]
fn write_adjacency(
    sorter: &mut TripleSorter,
    old: Option<&DB>,
    set: &SstOptions,
    order: Order,
    dir: Direction,
    monitor: &Monitor,
    inputs: usize,
    load: u32,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>, CfFiles, u64), IngestError> {
    // The load's steps: one per input, both adjacency directions, the commit.
    let (step, steps) = (inputs + if dir == Direction::Out { 1 } else { 2 }, inputs + 3);
    let stage = if dir == Direction::Out { "write outgoing adjacency" } else { "write incoming adjacency" };
    let total = sorter.pushed();
    let mut adj = SstSink::new(set, CF_ADJACENCY)?;
    let mut deg = SstSink::new(set, CF_DEGREES)?;
    let mut provenance = if dir == Direction::Out { Some((SstSink::new(set, CF_FACT_SOURCES)?, SstSink::new(set, CF_SOURCE_FACTS)?)) } else { None };
    let mut group: Option<(u32, u32)> = None;
    let mut others: Vec<u32> = Vec::new();
    let mut entity_added: u64 = 0;
    let mut added: u64 = 0;
    let mut seen: u64 = 0;
    let mut buf = Vec::new();
    let mut flush_group = |group: Option<(u32, u32)>,
                           others: &mut Vec<u32>,
                           entity_added: &mut u64,
                           adj: &mut SstSink<'_>,
                           provenance: &mut Option<(SstSink<'_>, SstSink<'_>)>|
     -> Result<(), IngestError> {
        let Some((e, r)) = group else { return Ok(()) };
        // Runs are deduplicated each, not across each other.
        others.dedup();
        if let Some((sources, facts)) = provenance {
            idlist::encode_ids(others, &mut buf);
            sources.put(&codec::fact_source_key(EntityId(e), RelationId(r), load), &buf)?;
            facts.put(&codec::source_fact_key(load, EntityId(e), RelationId(r)), &[])?;
        }
        let key = codec::adj_key(dir, EntityId(e), RelationId(r));
        let stored = match old {
            Some(db) => match db.get_pinned_cf(db.cf_handle(CF_ADJACENCY).expect("cf"), key).rocks()? {
                Some(v) => Some(idlist::decode_ids(&v).ok_or_else(|| ReadError::corrupt(CF_ADJACENCY, &key, "malformed id list"))?),
                None => None,
            },
            None => None,
        };
        let (list, new) = match stored {
            Some(stored) => {
                let union = idlist::union_sorted(&stored, others);
                let new = (union.len() - stored.len()) as u64;
                (union, new)
            }
            None => {
                let n = others.len() as u64;
                (std::mem::take(others), n)
            }
        };
        if new > 0 {
            idlist::encode_ids(&list, &mut buf);
            adj.put(&key, &buf)?;
        }
        *entity_added += new;
        others.clear();
        Ok(())
    };
    let flush_entity = |e: u32, entity_added: u64, deg: &mut SstSink<'_>| -> Result<(), IngestError> {
        if entity_added == 0 {
            return Ok(());
        }
        let key = codec::degree_key(dir, EntityId(e));
        let before = match old {
            Some(db) => match db.get_pinned_cf(db.cf_handle(CF_DEGREES).expect("cf"), key).rocks()? {
                Some(v) => u64::from(codec::be_u32(&v).ok_or_else(|| ReadError::corrupt(CF_DEGREES, &key, "degree is not 4 bytes"))?),
                None => 0,
            },
            None => 0,
        };
        let value = u32::try_from(before + entity_added).unwrap_or(u32::MAX);
        deg.put(&key, &value.to_be_bytes())
    };
    let result = sorter.for_each(order, |t| {
        let (e, r, other) = (t[0], t[1], t[2]);
        if group != Some((e, r)) {
            flush_group(group, &mut others, &mut entity_added, &mut adj, &mut provenance)?;
            if let Some((prev_e, _)) = group {
                if prev_e != e {
                    flush_entity(prev_e, entity_added, &mut deg)?;
                    added += entity_added;
                    entity_added = 0;
                }
            }
            group = Some((e, r));
        }
        others.push(other);
        seen += 1;
        if seen.is_multiple_of(1 << 20) {
            monitor.check().map_err(|_| IngestError::Cancelled)?;
            monitor.report(&Progress::new(Work::Load, (step, steps), stage, seen, Some(total), Unit::Facts));
        }
        Ok(())
    });
    result?;
    flush_group(group, &mut others, &mut entity_added, &mut adj, &mut provenance)?;
    if let Some((e, _)) = group {
        flush_entity(e, entity_added, &mut deg)?;
        added += entity_added;
    }
    let provenance = match provenance {
        Some((sources, facts)) => vec![(CF_FACT_SOURCES, sources.finish()?), (CF_SOURCE_FACTS, facts.finish()?)],
        None => Vec::new(),
    };
    Ok((adj.finish()?, deg.finish()?, provenance, added))
}
