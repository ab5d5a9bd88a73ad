//! The token index as a constrained decoder uses it, on the shared OpenDialKG graph with a
//! T5-style tokenizer of 32k pieces (SentencePiece Unigram, Metaspace, the `trellis`
//! linearization's boundary tokens added).
//!
//! `cargo bench --bench decode_index` (`TRELLIS_SHARED_DATA=/path/to/shared/data` when the data is
//! not at `../shared/data`). The tokenizer is trained here, in Rust, on the KG's
//! names (as the linearization writes them) the first time and kept in
//! `~/.cache/trellis/bench/`, with the indexed store; both are rebuilt when missing or stale.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use std::ops::ControlFlow;
use trellis::linearize::{Linearization, Side};
use trellis::store::tokens::TokenIndex;
use trellis::{Direction, EntityId, Store};

#[path = "support/opendialkg.rs"]
mod opendialkg;
use opendialkg::setup;

/// Neighbour ids of entities in id order, until `n` distinct ones (the ids a decoder
/// restricts to after a hop).
fn neighbour_ids(store: &Store, n: usize) -> Vec<u32> {
    let mut out = std::collections::BTreeSet::new();
    for e in 0..store.entity_count() as u32 {
        store
            .for_each_neighbor(EntityId(e), None, None, |edge| {
                out.insert(edge.other.0);
                if out.len() >= n {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        if out.len() >= n {
            break;
        }
    }
    out.into_iter().collect()
}

fn decode_index(c: &mut Criterion) {
    let (tok, store, index) = setup();
    let lin = Linearization::trellis();
    let entities = store.entity_count() as u32;
    // A name of 4+ tokens from the entity of degree closest to 100, as in benches/store.rs.
    let mut best = (0u32, u64::MAX);
    for e in 0..entities {
        let d = store.degree(EntityId(e), Direction::Out).unwrap() + store.degree(EntityId(e), Direction::In).unwrap();
        let tokens = index.tokens(Side::Entity, e).unwrap().unwrap();
        if tokens.len() >= 4 && d.abs_diff(100) < best.1 {
            best = (e, d.abs_diff(100));
        }
    }
    let name = index.tokens(Side::Entity, best.0).unwrap().unwrap();
    let roots = index.root_children(Side::Entity).unwrap().len();
    eprintln!(
        "vocabulary {}, {} entities, {} root children, name of {} tokens: {:?}",
        tok.vocab_size(),
        entities,
        roots,
        name.len(),
        store.entity(EntityId(best.0)).unwrap().unwrap().name
    );

    let mut g = c.benchmark_group("decode_index");
    g.warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    // Cursor: one advance (one seek) at depth 1 -> 2, and the whole name token by token.
    let mut cur = index.cursor(Side::Entity);
    g.bench_function("cursor_advance_one_token_depth_1", |b| {
        b.iter(|| {
            cur.reset();
            cur.advance(name[0]).unwrap();
            cur.advance(black_box(name[1])).unwrap()
        })
    });
    g.bench_function(format!("cursor_walk_whole_name_{}_tokens", name.len()), |b| {
        b.iter(|| {
            cur.reset();
            name.iter().all(|&t| cur.advance(t).unwrap())
        })
    });
    g.bench_function(format!("cursor_walk_then_children_and_ending_depth_{}", name.len() - 1), |b| {
        b.iter(|| {
            cur.reset();
            for &t in &name[..name.len() - 1] {
                cur.advance(t).unwrap();
            }
            cur.children().unwrap().len() + cur.ending().unwrap().len()
        })
    });
    // Children at the root: cached, and the skip-scan that fills the cache.
    g.bench_function(format!("children_root_cached_{roots}"), |b| b.iter(|| index.children(Side::Entity, black_box(&[])).unwrap().len()));
    g.bench_function(format!("children_root_scan_{roots}"), |b| {
        b.iter_batched(
            || TokenIndex::open(store.clone(), tok.fingerprint(), &lin).unwrap(),
            |fresh| fresh.root_children(Side::Entity).unwrap().len(),
            BatchSize::PerIteration,
        )
    });
    for depth in [1, 2] {
        let prefix = &name[..depth];
        let n = index.children(Side::Entity, prefix).unwrap().len();
        g.bench_function(format!("children_depth_{depth}_{n}_children"), |b| b.iter(|| index.children(Side::Entity, black_box(prefix)).unwrap().len()));
    }
    for n in [10, 100, 1000] {
        let ids = neighbour_ids(&store, n);
        g.bench_function(format!("children_within_{n}_ids_at_root"), |b| {
            b.iter(|| index.children_within(Side::Entity, black_box(&[]), &ids).unwrap().continuing.len())
        });
        g.bench_function(format!("tokens_many_{n}_ids"), |b| b.iter(|| index.tokens_many(Side::Entity, black_box(&ids)).unwrap().len()));
        if n == 1000 {
            g.bench_function("tokens_one_by_one_1000_ids", |b| {
                b.iter(|| ids.iter().map(|&id| index.tokens(Side::Entity, id).unwrap().map_or(0, |t| t.len())).sum::<usize>())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decode_index);
criterion_main!(benches);
