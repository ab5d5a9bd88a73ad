//! The query producer (`trellis::queries`, `trellis eval queries`): a hand-worked three-turn
//! dialog (its candidates, what each retrieves, R@k of every row), the CLI on the sample
//! graph, and refusals of bad scorer files.

use crate::common::*;
use std::path::Path;
use std::sync::Arc;
use trellis::dataset::opendialkg::{Dialog, Sample};
use trellis::dialog::Message;
use trellis::eval::queries::evaluate;
use trellis::link::{LinkConfig, Linker};
use trellis::queries::{CandidateSource, LinearScorer, Producer, QueryEngine, FEATURE_NAMES};
use trellis::text::TextIndex;
use trellis::Store;

fn msg(speaker: &str, text: &str) -> Message {
    Message { speaker: speaker.into(), text: text.into() }
}

/// Four books and people; only "Lev Grossman" retrieves the document of the book the reply
/// introduces (Codex Arcanum's one fact names him).
fn tiny_store(dir: &Path) -> Arc<Store> {
    let store = dir.join("kg");
    let tsv = write(
        dir,
        "kg.tsv",
        b"Lev Grossman\twrote\tFillory Chronicles\nLev Grossman\twrote\tCodex Arcanum\nLev Grossman\tborn_in\tNew York City\nFillory Chronicles\tgenre\tFantasy\n",
    );
    ingest(&store, &[], &[&tsv]);
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    Arc::new(Store::open_read_only(&store).unwrap())
}

#[test]
fn a_hand_worked_three_turn_dialog() {
    let dir = tempfile::tempdir().unwrap();
    let store = tiny_store(dir.path());
    let engine = QueryEngine::new(Linker::new(store.clone(), LinkConfig::default()).unwrap(), TextIndex::open(&store).unwrap());
    let messages = vec![
        msg("user", "I love Fillory Chronicles."),
        msg("assistant", "Lev Grossman wrote it. Do you read fantasy?"),
        msg("user", "Yes! What else did he write?"),
        msg("assistant", "He also wrote Codex Arcanum."),
    ];
    let context = &messages[..3];
    let mentions = engine.linker().link_dialog(context).unwrap();
    let turn = engine.turn(context, &mentions).unwrap();
    // Spans in order of appearance, then keywords outside them (stop words and pronouns
    // dropped: "love", "read", "yes", "else" are stop words): "write".
    let texts: Vec<(&str, CandidateSource)> = turn.candidates.iter().map(|c| (c.text.as_str(), c.source)).collect();
    assert_eq!(
        texts,
        [
            ("Fillory Chronicles", CandidateSource::Span),
            ("Lev Grossman", CandidateSource::Span),
            ("fantasy", CandidateSource::Span),
            ("write", CandidateSource::Keyword),
        ]
    );
    let f: Vec<_> = turn.candidates.iter().map(|c| c.features).collect();
    // "he" in the last turn: its antecedent is the latest mention before it, "fantasy".
    assert_eq!(f.iter().map(|x| x.antecedent).collect::<Vec<_>>(), [0.0, 0.0, 1.0, 0.0]);
    assert_eq!(f.iter().map(|x| x.turn_distance).collect::<Vec<_>>(), [2.0, 1.0, 1.0, 0.0]);
    assert_eq!(f.iter().map(|x| x.in_last_turn).collect::<Vec<_>>(), [0.0, 0.0, 0.0, 1.0]);
    // Each mention links one entity: link probability 1.
    assert_eq!(f.iter().map(|x| x.link_probability).collect::<Vec<_>>(), [1.0, 1.0, 1.0, 0.0]);
    // idf ln((N+1)/(df+1)) over 5 documents: "write" is in none: ln 6.
    assert!((f[3].mean_idf - 6f32.ln()).abs() < 1e-6, "{}", f[3].mean_idf);
    // What each retrieves (top 5 of 5 documents; phrase and name matches first).
    let retrieved: Vec<Vec<&str>> = turn.results.iter().map(|r| r.iter().map(|h| h.document.name.as_str()).collect()).collect();
    assert!(retrieved[1].contains(&"Codex Arcanum"), "{retrieved:?}");
    for (i, r) in retrieved.iter().enumerate() {
        assert_eq!(r.contains(&"Codex Arcanum"), i == 1, "{i}: {r:?}");
    }
    assert!(retrieved[3].is_empty(), "{retrieved:?}");
    // R@k: the gold entity is Codex Arcanum (new in the reply; Lev Grossman was named).
    let dialog = Dialog {
        messages: messages.clone(),
        samples: vec![Sample {
            upto: 3,
            speaker: "assistant".into(),
            gold: vec![("Lev Grossman".into(), "wrote".into(), "Codex Arcanum".into())],
            paths: vec![vec![("Lev Grossman".into(), "wrote".into(), "Codex Arcanum".into())]],
            documents: Vec::new(),
        }],
    };
    let (report, records) = evaluate(&engine, &[dialog], None, true, &trellis::Monitor::new()).unwrap();
    assert_eq!((report.turns, report.excluded_no_new_entity, report.mean_candidates, report.ceiling), (1, 0, 4.0, 1.0));
    assert_eq!(records[0].gold, ["Codex Arcanum"]);
    assert_eq!(records[0].hits, [false, true, false, false]);
    let r = |name: &str| {
        let row = report.rows.iter().find(|r| r.name == name).unwrap();
        [row.recall_at[&1], row.recall_at[&3], row.recall_at[&5]]
    };
    let fact = |name: &str| {
        let row = report.rows.iter().find(|r| r.name == name).unwrap();
        [row.fact_recall_at[&1], row.fact_recall_at[&3], row.fact_recall_at[&5]]
    };
    // TF-IDF: mean idf ln(6/(df+1)), df the most documents of one field holding the word:
    // "write" 0 -> 1.79, "fantasy" 1 -> 1.10, "fillory"/"chronicles" 2 (two facts) -> 0.69,
    // "lev"/"grossman" 3 -> 0.41: Lev Grossman last.
    assert_eq!(r("tfidf"), [0.0, 0.0, 1.0]);
    // Fillory Chronicles retrieves Lev Grossman's document, which holds the gold fact.
    assert_eq!(records[0].fact_hits, [true, true, false, false]);
    assert_eq!(fact("tfidf"), [0.0, 1.0, 1.0]);
    // BM25(q,u): no candidate holds a word of "he also wrote codex arcanum" ("write" is not
    // "wrote"): all zero, ties by order: Lev Grossman second.
    assert_eq!(r("bm25(q,u)"), [0.0, 1.0, 1.0]);
    // The labels: Lev Grossman retrieves Codex Arcanum's short document ("codex arcanum",
    // "lev grossman wrote": three of the reply's words), which no other candidate does;
    // Fillory Chronicles' best is Lev Grossman's longer document; the keyword retrieves
    // nothing (label 0).
    for labels in [&records[0].bm25, &records[0].bm25pp] {
        assert!(labels[1] > labels[0] && labels[0] > 0.0 && labels[3] == 0.0, "{labels:?}");
    }
    assert_eq!(r("bm25 label"), [1.0, 1.0, 1.0]);
    assert_eq!(r("bm25++ label"), [1.0, 1.0, 1.0]);
}

#[test]
fn eval_queries_on_the_sample_graph_with_the_shipped_scorer() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let dialogs = shared_data("opendialkg/dialogs_dev.csv");
    let run = |extra: &[&str]| {
        trellis()
            .args(["eval", "queries", "--store"])
            .arg(&store)
            .arg("--input")
            .arg(&dialogs)
            .args(["--max-turns", "40", "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("trellis index-text"), "{}", String::from_utf8_lossy(&out.stderr));
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/query-producer-opendialkg");
    let features = dir.path().join("features.jsonl");
    let out = run(&["--producer-model", shipped.to_str().unwrap(), "--features", features.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["random", "tfidf", "learned", "bm25(q,u)", "bm25 label", "bm25++ label"]);
    let turns = v["turns"].as_u64().unwrap();
    assert!(turns > 0 && v["mean_candidates"].as_f64().unwrap() > 1.0, "{v}");
    // No producer can beat the ceiling; recall grows with the cut-off.
    for row in v["rows"].as_array().unwrap() {
        let r: Vec<f64> = ["1", "3", "5"].iter().map(|k| row["recall_at"][k].as_f64().unwrap()).collect();
        assert!(r[0] <= r[1] && r[1] <= r[2] && r[2] <= v["ceiling"].as_f64().unwrap() + 1e-12, "{row}");
    }
    let lines = std::fs::read_to_string(&features).unwrap();
    assert_eq!(lines.lines().count() as u64, turns);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["features"][0].as_array().unwrap().len(), FEATURE_NAMES.len());
}

#[test]
fn bad_scorer_files_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/query-producer-opendialkg/query-producer.json")).unwrap();
    assert!(LinearScorer::from_json(&good).is_ok());
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    for (edit, says) in [
        (serde_json::json!({"task": "dense"}), "task"),
        (serde_json::json!({"features": ["a"]}), "features"),
        (serde_json::json!({"scale": vec![0.0; 11]}), "scale positive"),
        (serde_json::json!({"weights": [1.0]}), "11 numbers"),
    ] {
        let mut bad = v.clone();
        for (k, x) in edit.as_object().unwrap() {
            bad[k] = x.clone();
        }
        let e = LinearScorer::from_json(&bad.to_string()).unwrap_err().to_string();
        assert!(e.contains(says), "{edit}: {e}");
    }
    v["weights"][0] = serde_json::json!("x");
    assert!(LinearScorer::from_json(&v.to_string()).is_err());
    let path = write(dir.path(), "query-producer.json", b"{not json");
    let e = LinearScorer::from_path(dir.path()).unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()) && e.contains("not a query producer scorer"), "{e}");
    let _ = Producer::TfIdf.name();
}

#[test]
fn the_search_retriever_answers_from_the_produced_queries_documents() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let requests = write(dir.path(), "req.jsonl", b"{\"history\": [\"I loved Happy Gilmore.\", \"Do you like golf?\"]}\n");
    let out = dir.path().join("out.jsonl");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/query-producer-opendialkg");
    let run = |extra: &[&str]| {
        trellis()
            .args(["retrieve", "--store"])
            .arg(&store)
            .args(["--retriever", "search", "--top", "5", "--input"])
            .arg(&requests)
            .arg("--output")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    // No text index: refused, naming the command.
    let o = run(&["--search-producer", "tfidf"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("trellis index-text"), "{}", String::from_utf8_lossy(&o.stderr));
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    let answer = |extra: &[&str]| -> serde_json::Value {
        let o = run(extra);
        assert!(o.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap()).unwrap()
    };
    // Facts: every path is one fact of a found entity, explained by its query.
    let facts = answer(&["--search-producer", shipped.to_str().unwrap()]);
    let paths = facts["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 5, "{facts}");
    for p in paths {
        assert_eq!(p["triples"].as_array().unwrap().len(), 1, "{p}");
        assert!(p["explanation"].as_str().unwrap().starts_with("search: a fact of a found entity, query "), "{p}");
    }
    let scores: Vec<f64> = paths.iter().map(|p| p["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]) && scores[0] == 1.0, "{scores:?}");
    // Paths: candidate paths from the mentioned entities, the ones reaching a found entity first.
    let cands = answer(&["--search-producer", "tfidf", "--search-paths", "paths"]);
    let first = &cands["paths"][0];
    assert!(first["explanation"].as_str().unwrap().starts_with("search: reaches a found entity"), "{first}");
    // The library gives the same answer as the command line (settings by name).
    let s = Arc::new(Store::open_read_only(&store).unwrap());
    let mut settings = trellis::settings::Settings::new();
    settings.set("search_producer", shipped.to_str().unwrap());
    let cfg = trellis::settings::retriever("search", &settings).unwrap();
    let r = trellis::retrieve::Retriever::new(s, cfg).unwrap();
    let got = r.retrieve(&[msg("user", "I loved Happy Gilmore."), msg("user", "Do you like golf?")]).unwrap();
    assert!(got.len() >= 5, "{}", got.len());
    for (g, want) in got.iter().zip(paths) {
        assert_eq!(g.explanation, want["explanation"].as_str().unwrap());
    }
}

#[test]
fn a_refreshed_search_retriever_reads_the_new_generation_s_text_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(trellis().arg("index-text").arg("--store").arg(&store));
    let mut settings = trellis::settings::Settings::new();
    settings.set("search_producer", "tfidf");
    let cfg = trellis::settings::retriever("search", &settings).unwrap();
    let r = trellis::retrieve::Retriever::new(Arc::new(Store::open_read_only(&store).unwrap()), cfg).unwrap();
    let history = [msg("user", "Have you read anything by Quillon Verbatim?")];
    let facts = |r: &trellis::retrieve::Retriever| -> Vec<String> {
        let names = |e: trellis::EntityId| r.store().entity(e).unwrap().unwrap().name;
        r.retrieve(&history).unwrap().iter().map(|p| names(p.hops[0].fact().0) + " -> " + &names(p.hops[0].fact().2)).collect()
    };
    assert!(!facts(&r).iter().any(|f| f.contains("Quillon")));
    trellis::Updater::new(&store)
        .apply(vec![(
            None,
            trellis::ingest::Change::Add(trellis::ingest::FactKeys {
                subject: "Quillon Verbatim".into(),
                relation: "wrote".into(),
                object: "Happy Gilmore".into(),
            }),
        )])
        .unwrap();
    // The old handle keeps its generation; the refreshed one finds the new entity's fact.
    assert!(!facts(&r).iter().any(|f| f.contains("Quillon")));
    let fresh = r.refreshed().unwrap().expect("a newer generation");
    assert_eq!(facts(&fresh).first().map(String::as_str), Some("Quillon Verbatim -> Happy Gilmore"));
}
