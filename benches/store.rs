//! Query and ingest benchmarks on the shared OpenDialKG graph (`../shared/data`).
//!
//! `cargo bench --bench store`. The neighbourhood query runs on a warm store against an
//! entity of degree about 100, as docs/benchmarks-2026-11-25.md's query table
//! ("Queries") states.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use std::ops::ControlFlow;
use std::path::PathBuf;
use trellis::ingest::{BulkLoader, InputSpec};
use trellis::{Direction, EntityId, Store};

fn kg() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/opendialkg/kg.tsv");
    assert!(p.exists(), "{} is missing", p.display());
    p
}

/// The shared OpenDialKG graph loaded into a fresh store (kept while the TempDir lives).
fn load_kg() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("s");
    BulkLoader::new(&store_dir)
        .on_error(trellis::ingest::OnError::Skip)
        .with_rejects_file(dir.path().join("rejects.tsv"))
        .load(&[InputSpec::new(kg())])
        .unwrap();
    (dir, store_dir)
}

/// The entity whose total degree is closest to `target` (lowest id on ties).
fn entity_with_degree(store: &Store, target: u64) -> (EntityId, u64) {
    let mut best = (EntityId(0), u64::MAX, 0);
    for id in 0..store.entity_count() as u32 {
        let e = EntityId(id);
        let d = store.degree(e, Direction::Out).unwrap() + store.degree(e, Direction::In).unwrap();
        let dist = d.abs_diff(target);
        if dist < best.1 {
            best = (e, dist, d);
        }
    }
    (best.0, best.2)
}

fn neighbors(c: &mut Criterion) {
    let (_dir, store_dir) = load_kg();
    let store = std::sync::Arc::new(Store::open_read_only(&store_dir).unwrap());
    let (e, degree) = entity_with_degree(&store, 100);
    let mut g = c.benchmark_group("query");
    g.throughput(Throughput::Elements(degree));
    g.bench_function(format!("neighbors_1hop_degree_{degree}"), |b| {
        b.iter(|| {
            let mut n = 0u32;
            store
                .for_each_neighbor(black_box(e), None, None, |edge| {
                    n = n.wrapping_add(edge.other.0);
                    ControlFlow::Continue(())
                })
                .unwrap();
            n
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("entity_by_key", |b| b.iter(|| store.entity_by_key(black_box("Jordan Spieth")).unwrap()));
    g.bench_function("lookup_name_normalized", |b| b.iter(|| store.lookup_name(black_box("jordan spieth")).unwrap()));
    g.bench_function("relations_at_out", |b| b.iter(|| store.relations_at(black_box(e), Direction::Out).unwrap()));
    g.finish();
}

fn ingest(c: &mut Criterion) {
    let input = kg();
    let lines = std::fs::read_to_string(&input).unwrap().lines().count() as u64;
    let mut g = c.benchmark_group("ingest");
    g.sample_size(10);
    g.throughput(Throughput::Elements(lines));
    g.bench_function("opendialkg_kg_tsv", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |dir| {
                BulkLoader::new(dir.path().join("s"))
                    .on_error(trellis::ingest::OnError::Skip)
                    .with_rejects_file(dir.path().join("r.tsv"))
                    .with_memory_mb(256)
                    .load(&[InputSpec::new(&input)])
                    .unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn linking(c: &mut Criterion) {
    let (_dir, store_dir) = load_kg();
    let store = std::sync::Arc::new(Store::open_read_only(&store_dir).unwrap());
    let dialogs = trellis::dataset::opendialkg::read(&kg().with_file_name("dialogs_dev.csv")).unwrap();
    let dialogs: Vec<_> = dialogs.into_iter().take(50).collect();
    let messages: u64 = dialogs.iter().map(|d| d.messages.len() as u64).sum();
    let linker = trellis::link::Linker::new(store.clone(), trellis::link::LinkConfig::default()).unwrap();
    let mut g = c.benchmark_group("link");
    // Per message: each dialog linked message by message, as a live system would.
    g.throughput(Throughput::Elements(messages));
    g.bench_function(format!("opendialkg_dev_first_50_dialogs_{messages}_messages"), |b| {
        b.iter(|| {
            let mut n = 0;
            for d in &dialogs {
                let mut state = trellis::link::DialogState::default();
                for m in &d.messages {
                    n += linker.push(&mut state, m).unwrap().len();
                }
            }
            n
        })
    });
    g.finish();
}

fn retrieval(c: &mut Criterion) {
    use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
    let (_dir, store_dir) = load_kg();
    let store = std::sync::Arc::new(Store::open_read_only(&store_dir).unwrap());
    let dialogs = trellis::dataset::opendialkg::read(&kg().with_file_name("dialogs_dev.csv")).unwrap();
    // The first 50 turns with a gold path, as eval retrieval sees them.
    let turns: Vec<Vec<trellis::link::Message>> = dialogs.iter().flat_map(|d| d.samples.iter().map(move |s| d.messages[..s.upto].to_vec())).take(50).collect();
    let mut g = c.benchmark_group("retrieve");
    g.throughput(Throughput::Elements(turns.len() as u64));
    g.sample_size(20);
    for kind in [RetrieverKind::All, RetrieverKind::Random, RetrieverKind::Bm25, RetrieverKind::Katz, RetrieverKind::Pcst] {
        let name = kind.name();
        let r = Retriever::new(store.clone(), RetrieverConfig::new(kind)).unwrap();
        g.bench_function(format!("{name}_50_turns"), |b| b.iter(|| turns.iter().map(|h| r.retrieve(h).unwrap().len()).sum::<usize>()));
    }
    let mut cfg = RetrieverConfig::new(RetrieverKind::Pcst);
    cfg.pcst = trellis::retrieve::pcst::PcstConfig::new(trellis::retrieve::pcst::PcstVariant::GRetriever);
    let r = Retriever::new(store.clone(), cfg).unwrap();
    g.bench_function("pcst_g_retriever_50_turns", |b| b.iter(|| turns.iter().map(|h| r.retrieve(h).unwrap().len()).sum::<usize>()));
    g.finish();
}

criterion_group!(benches, neighbors, ingest, linking, retrieval);
criterion_main!(benches);
