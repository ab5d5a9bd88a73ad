//! Per beam-step cost of the constraint automaton (allowed set + graph prior + advance) on the
//! shared OpenDialKG graph with the 32k T5-style tokenizer (benches/support/opendialkg.rs).
//!
//! `TRELLIS_SHARED_DATA=/path/to/shared/data cargo bench --bench decode_step --features internals`. For 300
//! requests (one or two mentioned entities spread over the id space), five seeded random walks
//! from the start to EOS stand in for five beams; every step (`allowed` then `advance`) is
//! timed:
//! - cold: a new request (`PathGraph::new` not included, reported apart): the first walks
//!   build the groups, read the store, score the entities;
//! - warm: the same walks again on the same request with the memo of allowed sets dropped
//!   (`forget_allowed`): store reads cached, every allowed set and its prior recomputed;
//! - memo: the same walks again as beams meet them in production (allowed sets memoized).
//!
//! The percentiles are printed as one JSON line (`decode_step figures: {...}`) for
//! docs/benchmarks-2026-11-25.md ("Constraint automaton"); criterion then times two single steps.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;
use trellis::decode::{CandidateMode, PriorMode, PriorNorm};
use trellis::graph::CandidateConfig;
use trellis::ingest::NameTokenizer;
use trellis::internals::{Boundaries, PathGraph, PriorConfig, State};
use trellis::linearize::Linearization;
use trellis::store::tokens::TokenIndex;
use trellis::{Direction, EntityId, Store};

#[path = "support/opendialkg.rs"]
mod opendialkg;

const WALKS: u64 = 5;

/// xorshift64*: a seeded choice among the allowed tokens, the same on every run.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed >> 12;
    *seed ^= *seed << 25;
    *seed ^= *seed >> 27;
    seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// One walk from the start to EOS; each step's time pushed to `times` (ns).
fn walk(g: &mut PathGraph<'_>, seed: u64, times: &mut Vec<u64>) -> usize {
    let mut s: State = g.start();
    let mut seed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut allowed = Vec::new();
    let mut steps = 0;
    while !g.is_done(&s) {
        let t0 = Instant::now();
        g.allowed(&s, &mut allowed).unwrap();
        let pick = allowed[(next(&mut seed) % allowed.len() as u64) as usize].0;
        s = g.advance(&s, pick).unwrap().expect("an allowed token advances");
        times.push(t0.elapsed().as_nanos() as u64);
        steps += 1;
    }
    steps
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}

fn requests(store: &Store) -> Vec<Vec<EntityId>> {
    let n = store.entity_count() as u32;
    let with_facts = |e: u32| store.degree(EntityId(e), Direction::Out).unwrap() + store.degree(EntityId(e), Direction::In).unwrap() > 0;
    let ids: Vec<u32> = (0..n).step_by((n / 400).max(1) as usize).filter(|&e| with_facts(e)).collect();
    let mut out: Vec<Vec<EntityId>> = ids.iter().take(200).map(|&e| vec![EntityId(e)]).collect();
    out.extend(ids.windows(2).skip(200).take(100).map(|w| vec![EntityId(w[0]), EntityId(w[1])]));
    out
}

struct Figures {
    cold: Vec<u64>,
    warm: Vec<u64>,
    memo: Vec<u64>,
    setup: Vec<u64>,
}

fn measure(store: &std::sync::Arc<Store>, index: &TokenIndex, b: &Boundaries, reqs: &[Vec<EntityId>], mode: &CandidateMode, prior: &PriorConfig) -> Figures {
    let mut f = Figures { cold: Vec::new(), warm: Vec::new(), memo: Vec::new(), setup: Vec::new() };
    for (r, m) in reqs.iter().enumerate() {
        let t0 = Instant::now();
        let mut g = PathGraph::new(store.clone(), index, b, m, mode.clone(), prior.clone()).unwrap();
        let empty = g.is_empty().unwrap();
        f.setup.push(t0.elapsed().as_nanos() as u64);
        if empty {
            continue;
        }
        for w in 0..WALKS {
            walk(&mut g, r as u64 * 31 + w, &mut f.cold);
        }
        g.forget_allowed();
        for w in 0..WALKS {
            walk(&mut g, r as u64 * 31 + w, &mut f.warm);
        }
        for w in 0..WALKS {
            walk(&mut g, r as u64 * 31 + w, &mut f.memo);
        }
    }
    f
}

fn summary(f: &mut Figures) -> serde_json::Value {
    let part = |v: &mut Vec<u64>| serde_json::json!({"steps": v.len(), "p50_us": pct(v, 0.5), "p99_us": pct(v, 0.99), "max_us": pct(v, 1.0), "mean_us": v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0});
    serde_json::json!({"cold": part(&mut f.cold), "warm": part(&mut f.warm), "memo": part(&mut f.memo), "request_setup": part(&mut f.setup)})
}

fn decode_step(c: &mut Criterion) {
    let (tok, store, index): (NameTokenizer, _, TokenIndex) = opendialkg::setup();
    let lin = Linearization::trellis();
    let backend = trellis::internals::backend_tokenizer(&tok);
    let eos = backend.token_to_id("</s>").unwrap();
    let b = Boundaries::new(&lin, backend, eos).unwrap();
    let reqs = requests(&store);
    let katz = PriorConfig::new(PriorMode::Katz, PriorNorm::Proportional, 0.001);
    let modes = [("capped", CandidateMode::Capped(CandidateConfig::default())), ("uncapped", CandidateMode::Uncapped { hub_degree: 10_000 })];
    let mut all = serde_json::Map::new();
    for (name, mode) in &modes {
        let mut f = measure(&store, &index, &b, &reqs, mode, &katz);
        all.insert(format!("{name}_katz_proportional"), summary(&mut f));
    }
    let mut f = measure(&store, &index, &b, &reqs, &modes[0].1, &PriorConfig::new(PriorMode::Hard, PriorNorm::Proportional, 0.001));
    all.insert("capped_hard".into(), summary(&mut f));
    all.insert("requests".into(), reqs.len().into());
    all.insert("walks_per_request".into(), WALKS.into());
    println!("decode_step figures: {}", serde_json::Value::Object(all));

    // Criterion: one warm step inside the first entity's name, and a cold first name step.
    let m = reqs[0].clone();
    let mut g = PathGraph::new(store.clone(), &index, &b, &m, modes[0].1.clone(), katz.clone()).unwrap();
    let s = g.advance(&g.start(), b.head()[0]).unwrap().unwrap();
    let mut out = Vec::new();
    let mut grp = c.benchmark_group("decode_step");
    grp.warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    grp.bench_function("allowed_memoized_first_name_token", |bch| bch.iter(|| g.allowed(black_box(&s), &mut out).unwrap()));
    grp.bench_function("new_request_and_first_allowed", |bch| {
        bch.iter(|| {
            let mut g = PathGraph::new(store.clone(), &index, &b, &m, modes[0].1.clone(), katz.clone()).unwrap();
            let s = g.advance(&g.start(), b.head()[0]).unwrap().unwrap();
            g.allowed(&s, &mut out).unwrap();
            out.len()
        })
    });
    grp.finish();
}

criterion_group!(benches, decode_step);
criterion_main!(benches);
