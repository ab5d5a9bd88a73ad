//! Generative retrieval against the goldens of an independent Python reference
//! (tools/gsr/make_goldens.py: transformers `generate` on the PyTorch twin of the fixture
//! model, with the constraint and the graph prior as a logits processor, informativeness by
//! numpy matrix powers): the same sequences in the same order, scores within 1e-4, for every
//! prior mode and normalization, with both model layouts.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::decode::prior::{PriorMode, PriorNorm};
use trellis::link::Message;
use trellis::retrieve::gsr::GsrOptions;
use trellis::retrieve::{RetrievalInput, Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

/// The sample KG with the fixture tokenizer's token index (dialoggsr linearization).
pub fn sample_store(dir: &Path) -> PathBuf {
    let s = dir.join("kg");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(
        trellis()
            .arg("index-tokens")
            .arg("--store")
            .arg(&s)
            .arg("--tokenizer")
            .arg(fixture("gsr/tiny-split/tokenizer.json"))
            .arg("--linearization")
            .arg("dialoggsr"),
    );
    s
}

fn goldens() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("gsr/goldens.json")).unwrap()).unwrap()
}

fn history_of(d: &Value) -> Vec<Message> {
    d["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| Message { speaker: m["speaker"].as_str().unwrap().into(), text: m["text"].as_str().unwrap().into() })
        .collect()
}

fn retriever(store: &Arc<Store>, layout: &str, mode: &str) -> Retriever {
    let (prior, norm) = match mode.split_once('/') {
        Some((p, n)) => (p, Some(n)),
        None => (mode, None),
    };
    let mut o = GsrOptions::new(fixture(&format!("gsr/{layout}")));
    o.overrides.prior = Some(prior.parse::<PriorMode>().unwrap());
    o.overrides.prior_norm = norm.map(|n| n.parse::<PriorNorm>().unwrap());
    o.runtime.threads = 1;
    let mut cfg = RetrieverConfig::new(RetrieverKind::Gsr);
    cfg.gsr = Some(o);
    Retriever::open(store.clone(), cfg).unwrap()
}

#[test]
fn gsr_matches_the_python_reference_for_every_prior_and_layout() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let g = goldens();
    let modes: Vec<&str> = g["modes"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(modes.len(), 5);
    let dialogs = g["dialogs"].as_array().unwrap();
    let mut compared = 0;
    for layout in ["tiny-split", "tiny-merged"] {
        for mode in &modes {
            let r = retriever(&store, layout, mode);
            let histories: Vec<Vec<Message>> = dialogs.iter().map(history_of).collect();
            let mut inputs = Vec::new();
            for (d, h) in dialogs.iter().zip(&histories) {
                let mentioned = match d["entities"].as_array() {
                    Some(keys) => keys.iter().map(|k| store.entity_by_key(k.as_str().unwrap()).unwrap().unwrap()).collect(),
                    None => r.mentioned(h).unwrap(),
                };
                let names: Vec<Option<String>> = store.entity_names(&mentioned).unwrap();
                let want: Vec<&str> = d["mentioned"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
                assert_eq!(names.iter().map(|n| n.as_deref().unwrap()).collect::<Vec<_>>(), want);
                inputs.push(RetrievalInput { history: h, mentioned });
            }
            // All dialogs in one batch: their beams share decoder calls.
            let ranked = r.rank_batch(&inputs).unwrap();
            for (d, got) in dialogs.iter().zip(&ranked) {
                let res = &d["results"][*mode];
                let want = if res["spec5_agrees"].as_bool().unwrap() { &res["sequences"] } else { &res["spec5_sequences"] };
                let want = want.as_array().unwrap();
                let ctx = format!("{layout} {mode} {:?}", d["mentioned"]);
                let got_tokens: Vec<Vec<u64>> = got.iter().map(|p| p.tokens.iter().map(|t| u64::from(t.id)).collect()).collect();
                let want_tokens: Vec<Vec<u64>> = want.iter().map(|s| s["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect()).collect();
                assert_eq!(got_tokens, want_tokens, "{ctx}");
                for (p, w) in got.iter().zip(want) {
                    let ws = w["score"].as_f64().unwrap();
                    assert!((p.score - ws).abs() < 1e-4, "{ctx}: score {} vs {ws}", p.score);
                    let triples: Vec<(String, String, String, bool)> = p
                        .hops
                        .iter()
                        .map(|h| {
                            let (s, rel, o) = h.fact();
                            let en = |e| store.entity_names(&[e]).unwrap()[0].clone().unwrap();
                            (en(s), store.relation_names(&[rel]).unwrap()[0].clone().unwrap(), en(o), h.edge.direction == trellis::Direction::In)
                        })
                        .collect();
                    let wt: Vec<(String, String, String, bool)> = w["path"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| (t[0].as_str().unwrap().into(), t[1].as_str().unwrap().into(), t[2].as_str().unwrap().into(), t[3].as_bool().unwrap()))
                        .collect();
                    assert_eq!(triples, wt, "{ctx}");
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 400, "{compared} sequences compared");
}

/// Every path the generative retriever returns for every dev dialog, with the fixture model
/// on the whole shared OpenDialKG graph, is a real path of the store from a mentioned entity;
/// capped and uncapped.
#[test]
fn every_path_for_every_dev_dialog_is_in_the_store() {
    use trellis::eval::opendialkg;
    use trellis::graph::candidates::CandidateScope;
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("kg");
    ingest(&s, &["--on-error", "skip"], &[&shared_data("opendialkg/kg.tsv")]);
    stdout_of(
        trellis()
            .arg("index-tokens")
            .arg("--store")
            .arg(&s)
            .arg("--tokenizer")
            .arg(fixture("gsr/tiny-split/tokenizer.json"))
            .arg("--linearization")
            .arg("dialoggsr"),
    );
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let dialogs = opendialkg::read(&shared_data("opendialkg/dialogs_dev.csv")).unwrap();
    for scope in [CandidateScope::Capped, CandidateScope::Uncapped] {
        let mut o = GsrOptions::new(fixture("gsr/tiny-split"));
        o.batch = 16;
        let mut cfg = RetrieverConfig::new(RetrieverKind::Gsr);
        cfg.gsr = Some(o);
        cfg.scope = scope;
        let r = Retriever::open(store.clone(), cfg).unwrap();
        let (mut turns, mut paths) = (0, 0);
        // Every turn of the first 150 dialogs (all of them in the ignored long run below).
        for d in dialogs.iter().take(if std::env::var_os("TRELLIS_LONG_TESTS").is_some() { usize::MAX } else { 150 }) {
            let inputs: Vec<RetrievalInput<'_>> = d
                .samples
                .iter()
                .map(|smp| RetrievalInput { history: &d.messages[..smp.upto], mentioned: r.mentioned(&d.messages[..smp.upto]).unwrap() })
                .collect();
            for (input, ranked) in inputs.iter().zip(r.rank_batch(&inputs).unwrap()) {
                turns += 1;
                assert!(ranked.len() <= 5);
                for p in &ranked {
                    paths += 1;
                    assert!(!p.hops.is_empty() && p.hops.len() <= 2);
                    assert!(input.mentioned.contains(&p.hops[0].from), "starts at a mentioned entity");
                    for (i, h) in p.hops.iter().enumerate() {
                        let (a, rel, b) = h.fact();
                        assert!(store.neighbors_via(a, trellis::Direction::Out, rel).unwrap().contains(&b), "a fact of the store");
                        if i == 1 {
                            assert_eq!(h.from, p.hops[0].edge.other, "hops join");
                            assert_ne!(h.edge.other, p.hops[0].from, "no return to the start");
                        }
                    }
                }
            }
        }
        assert!(turns > 200 && paths > 3 * turns / 2, "{scope:?}: {paths} paths for {turns} turns");
    }
}
