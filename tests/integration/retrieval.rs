//! Retrieval metrics on a hand-worked example, and the retrievers on the shared dialogs.

use crate::common::*;
use trellis::dataset::opendialkg;
use trellis::eval::retrieval;
use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
use trellis::Store;

fn at(pairs: &[(usize, f64)]) -> std::collections::BTreeMap<usize, f64> {
    pairs.iter().copied().collect()
}

#[test]
fn metrics_on_a_hand_worked_example() {
    let dir = tempfile::tempdir().unwrap();
    let kg = write(dir.path(), "g.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\nBravo\tt\tDelta\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kg]);
    // One dialog: a user message naming Alpha, then an assistant action walking r(Alpha, Bravo).
    let messages = r#"[{"type": "chat", "sender": "user", "message": "Tell me about Alpha"}, {"type": "action", "sender": "assistant", "metadata": {"path": [1, [["Alpha", "r", "Bravo"]], "x"]}}]"#;
    let csv = format!("Messages,User Rating,Assistant Rating\n\"{}\",5,5\n", messages.replace('"', "\"\""));
    let dialogs_path = write(dir.path(), "d.csv", csv.as_bytes());
    let dialogs = opendialkg::read(&dialogs_path).unwrap();
    assert_eq!(dialogs[0].samples.len(), 1);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let r = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::All)).unwrap();
    // Candidates in store order: r(Alpha, Bravo), s(Alpha, Charlie), then the 2-hop path
    // r(Alpha, Bravo) t(Bravo, Delta).
    let ranked = r.retrieve(&dialogs[0].messages[..1]).unwrap();
    let names: Vec<String> = ranked.iter().map(|p| r.verbalize(&p.hops).unwrap()).collect();
    assert_eq!(names, vec!["Alpha r Bravo", "Alpha s Charlie", "Alpha r Bravo Bravo t Delta"]);
    let report = retrieval::evaluate(&store, &r, &dialogs, &[1, 3], &trellis::Monitor::new()).unwrap();
    assert_eq!(report.turns, 1);
    assert_eq!(report.path_at, at(&[(1, 1.0), (3, 1.0)]));
    assert_eq!(report.triple_recall_at, at(&[(1, 1.0), (3, 1.0)]));
    assert_eq!(report.mrr, 1.0);
    assert_eq!(report.hits_at, at(&[(1, 1.0), (3, 1.0), (10, 1.0)]));
    // Top-10 triples {r(A,B), s(A,C), t(B,D)} against {r(A,B)}: P 1/3, R 1, F1 1/2.
    assert_eq!(report.precision, 1.0 / 3.0);
    assert_eq!(report.recall, 1.0);
    assert_eq!(report.f1, 0.5);
    assert_eq!(report.mean_size, 3.0);
    // Random is seeded: the same order twice.
    let random = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::Random)).unwrap();
    let a: Vec<f64> = random.retrieve(&dialogs[0].messages[..1]).unwrap().iter().map(|p| p.score).collect();
    let b: Vec<f64> = random.retrieve(&dialogs[0].messages[..1]).unwrap().iter().map(|p| p.score).collect();
    assert_eq!(a, b);
}

/// The diagnosis of the top path, by hand: on the graph above, `all` puts r(Alpha, Bravo)
/// first for any history naming Alpha. Gold s(Alpha, Charlie): right start, wrong relation.
/// Gold ~r(Bravo, Alpha) (Bravo -> Alpha backwards): wrong start, though the same fact, so
/// path@1 counts it. Gold r(Alpha, Bravo) t(Bravo, Delta): right start and first relation
/// (in its direction), wrong path.
#[test]
fn top_path_start_and_first_relation_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let kg = write(dir.path(), "g.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\nBravo\tt\tDelta\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kg]);
    let action = |path: &str| format!(r#"{{"type": "action", "sender": "assistant", "metadata": {{"path": [1, {path}, "x"]}}}}"#);
    let chat = r#"{"type": "chat", "sender": "user", "message": "Tell me about Alpha"}"#;
    let messages = format!(
        "[{chat}, {}, {chat}, {}, {chat}, {}]",
        action(r#"[["Alpha", "s", "Charlie"]]"#),
        action(r#"[["Bravo", "~r", "Alpha"]]"#),
        action(r#"[["Alpha", "r", "Bravo"], ["Bravo", "t", "Delta"]]"#)
    );
    let csv = format!("Messages,User Rating,Assistant Rating\n\"{}\",5,5\n", messages.replace('"', "\"\""));
    let dialogs = opendialkg::read(&write(dir.path(), "d.csv", csv.as_bytes())).unwrap();
    assert_eq!(dialogs[0].samples.len(), 3);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let r = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::All)).unwrap();
    let report = retrieval::evaluate(&store, &r, &dialogs, &[1], &trellis::Monitor::new()).unwrap();
    assert_eq!(report.path_at, at(&[(1, 1.0 / 3.0)]));
    assert_eq!(report.top_start_entity, 2.0 / 3.0);
    assert_eq!(report.top_first_relation, 1.0 / 3.0);
}

#[test]
fn retrievers_on_the_opendialkg_dev_dialogs() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("kg");
    ingest(&s, &["--on-error", "skip"], &[&shared_data("opendialkg/kg.tsv")]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let dialogs = opendialkg::read(&shared_data("opendialkg/dialogs_dev.csv")).unwrap();
    let dialogs = &dialogs[..300];
    let mut at10 = Vec::new();
    for kind in [RetrieverKind::All, RetrieverKind::Random, RetrieverKind::Bm25, RetrieverKind::Katz, RetrieverKind::Pcst] {
        let name = kind.name();
        let r = Retriever::new(store.clone(), RetrieverConfig::new(kind)).unwrap();
        let report = retrieval::evaluate(&store, &r, dialogs, &[1, 10], &trellis::Monitor::new()).unwrap();
        at10.push((name, report.triple_recall_at[&10], report.mean_size));
    }
    // The rankers order the same candidates; PCST keeps a small tree of them.
    let sizes: Vec<f64> = at10[..4].iter().map(|x| x.2).collect();
    assert!(sizes.windows(2).all(|w| w[0] == w[1]), "{at10:?}");
    assert!(at10[4].2 > 1.0 && at10[4].2 < sizes[0] / 10.0, "{at10:?}");
    assert!(at10[4].1 > at10[1].1, "PCST beats the random order: {at10:?}");
    // Ranking beats chance: BM25 and Katz above the seeded random order.
    let recall = |k: &str| at10.iter().find(|x| x.0 == k).unwrap().1;
    assert!(recall("bm25") > recall("random"), "{at10:?}");
    assert!(recall("katz") > recall("random"), "{at10:?}");
}

#[test]
fn retrieve_jsonl_in_order_with_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let mut input = String::new();
    for i in 0..300 {
        let who = if i % 2 == 0 { "Jordan Spieth" } else { "Golf" };
        input.push_str(&format!("{{\"id\": {i}, \"history\": [\"Tell me about {who}\"]}}\n"));
    }
    input.push_str("{\"id\": 300, \"history\": [{\"speaker\": \"user\"}]}\n");
    let path = write(dir.path(), "in.jsonl", input.as_bytes());
    let out = dir.path().join("out.jsonl");
    // Stop mode: the bad line is named, exit 65.
    trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&s)
        .arg("--retriever")
        .arg("bm25")
        .arg("--input")
        .arg(&path)
        .arg("--output")
        .arg(dir.path().join("stopped.jsonl"))
        .assert()
        .code(65)
        .stderr(predicates::str::contains("in.jsonl:301: history[0] needs a \"text\" (or \"message\") string"));
    // Skip mode: every good line answered, in input order.
    trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&s)
        .arg("--retriever")
        .arg("katz")
        .arg("--input")
        .arg(&path)
        .arg("--output")
        .arg(&out)
        .arg("--on-error")
        .arg("skip")
        .arg("--threads")
        .arg("2")
        .arg("--top")
        .arg("3")
        .assert()
        .success()
        .stderr(predicates::str::contains("answered 300 requests, skipped 1 bad lines"));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 300);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["id"], i);
        let who = if i % 2 == 0 { "Jordan Spieth" } else { "Golf" };
        assert_eq!(l["mentioned"][0], who);
        assert!(l["paths"].as_array().unwrap().len() <= 3);
    }
    // Jordan Spieth's top paths start at him.
    let first = &lines[0]["paths"][0]["triples"][0];
    assert!(first["head"] == "Jordan Spieth" || first["tail"] == "Jordan Spieth", "{first}");
}

#[test]
fn metaqa_questions_walk_inverse_relations_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let kb = write(dir.path(), "kb.txt", b"Kismet|directed_by|William Dieterle\nKismet|written_by|Edward Knoblock\nJuarez|directed_by|William Dieterle\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kb]);
    let qa = write(
        dir.path(),
        "qa.json",
        br#"{"question": "which films did [William Dieterle] direct", "triples": [{"h": "William Dieterle", "r": "directed_by [inverse]", "t": "Kismet"}, {"h": "William Dieterle", "r": "directed_by [inverse]", "t": "Juarez"}]}
"#,
    );
    let dialogs = trellis::dataset::metaqa::read(&qa).unwrap();
    assert_eq!(dialogs[0].messages[0].text, "which films did William Dieterle direct");
    assert_eq!(dialogs[0].samples[0].gold[0], ("William Dieterle".to_string(), "~directed_by".to_string(), "Kismet".to_string()));
    assert_eq!(dialogs[0].samples[0].paths.len(), 2);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let r = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::All)).unwrap();
    let report = retrieval::evaluate(&store, &r, &dialogs, &[1, 2], &trellis::Monitor::new()).unwrap();
    assert_eq!((report.gold_not_in_store, report.gold_unknown_name, report.gold_empty_name), (0, 0, 0));
    // William Dieterle's candidates, in store order: directed_by(Kismet, WD), then
    // directed_by(Juarez, WD) (ids in load order), then the 2-hop paths. Each answer triple
    // is a right path; the top 1 holds one of the two gold triples, the top 2 both.
    assert_eq!(report.path_at, at(&[(1, 1.0), (2, 1.0)]));
    assert_eq!(report.triple_recall_at, at(&[(1, 0.5), (2, 1.0)]));
}

/// Worked by hand (see the comments): the history names Alpha; the candidates are
/// r(Alpha, Bravo), s(Alpha, Charlie) and the path r(Alpha, Bravo) t(Bravo, Delta).
#[test]
fn pcst_keeps_the_tree_of_the_relevant_facts() {
    use trellis::graph::pcst::Pruning;
    use trellis::retrieve::pcst::{PcstConfig, PcstVariant};
    let dir = tempfile::tempdir().unwrap();
    let kg = write(dir.path(), "g.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\nBravo\tt\tDelta\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kg]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let history = [trellis::link::Message { speaker: String::new(), text: "Tell me about Alpha".into() }];
    // BM25 against "tell me about alpha": only the entity Alpha scores among the names;
    // "alpha" is in two of the three facts (negative idf, floored at epsilon > 0), so
    // r(A, B) and s(A, C) score equally and positively, t(B, D) zero.
    // Seed 003: Alpha prize 3, facts 5 and 4 as virtual nodes; Bravo, Charlie, Delta and
    // the t fact have no prize and stop at t = 0. At t = 0.25 Alpha meets both virtual nodes
    // (edges of cost 0.5, grown from both sides) and that cluster is the last active one.
    // G-Retriever: the two facts share the one distinct value: prize 0.5 each, cost 0.4975,
    // so virtual nodes of prize 0.0025 on free edges; the free edges to Bravo and Charlie
    // join clusters that had gone inactive, which GW and strong pruning both cut.
    for variant in [PcstVariant::Seed003, PcstVariant::GRetriever] {
        for pruning in [Pruning::Gw, Pruning::Strong] {
            let mut cfg = RetrieverConfig::new(RetrieverKind::Pcst);
            cfg.pcst = PcstConfig::new(variant);
            cfg.pcst.pruning = pruning;
            let r = Retriever::new(store.clone(), cfg).unwrap();
            let got: Vec<String> = r.retrieve(&history).unwrap().iter().map(|p| r.verbalize(&p.hops).unwrap()).collect();
            assert_eq!(got, vec!["Alpha r Bravo", "Alpha s Charlie"], "{variant:?} {pruning:?}");
        }
    }
}

#[test]
fn retrieve_cli_takes_the_pcst_options() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let path = write(dir.path(), "in.jsonl", b"{\"id\": 1, \"history\": [\"Do you know Jordan Spieth?\", \"He plays golf, right?\"]}\n");
    let mut sizes = Vec::new();
    for extra in [&["--retriever", "all"][..], &["--retriever", "pcst"], &["--retriever", "pcst", "--pcst-variant", "g-retriever", "--pruning", "strong"]] {
        let out = dir.path().join("out.jsonl");
        trellis()
            .arg("retrieve")
            .arg("--store")
            .arg(&s)
            .args(extra)
            .arg("--input")
            .arg(&path)
            .arg("--output")
            .arg(&out)
            .arg("--top")
            .arg("1000")
            .assert()
            .success();
        let line: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&out).unwrap().trim()).unwrap();
        sizes.push(line["paths"].as_array().unwrap().len());
        if extra.len() > 2 {
            assert!(line["paths"][0]["explanation"].as_str().unwrap().contains("G-Retriever Steiner tree"), "{line}");
        }
    }
    assert!(sizes[1] >= 1 && sizes[1] < sizes[0] && sizes[2] >= 1 && sizes[2] < sizes[0], "{sizes:?}");
    // The other retriever options: BM25 over the last message only (the history has two),
    // another seed for random.
    let run = |extra: &[&str]| -> String {
        trellis()
            .arg("retrieve")
            .arg("--store")
            .arg(&s)
            .args(extra)
            .arg("--input")
            .arg(&path)
            .arg("--output")
            .arg(dir.path().join("o.jsonl"))
            .assert()
            .success();
        std::fs::read_to_string(dir.path().join("o.jsonl")).unwrap()
    };
    assert!(run(&["--retriever", "bm25"]).contains("mean over the last 2 messages"));
    assert!(run(&["--retriever", "bm25", "--bm25-turns", "1"]).contains("mean over the last 1 messages"));
    assert_ne!(run(&["--retriever", "random"]), run(&["--retriever", "random", "--seed", "7"]));
    trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&s)
        .arg("--retriever")
        .arg("pcst")
        .arg("--pruning")
        .arg("best")
        .arg("--input")
        .arg(&path)
        .arg("--output")
        .arg(dir.path().join("x.jsonl"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("unknown pruning \"best\" (none, simple, gw, strong)"));
}

/// Requests may name their entities instead of having them linked; an unknown key is a bad
/// line like any other.
#[test]
fn retrieve_takes_entities_instead_of_linking() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let path = write(
        dir.path(),
        "in.jsonl",
        b"{\"id\": 1, \"history\": [\"Tell me more\"], \"entities\": [\"Golf\"]}\n{\"id\": 2, \"history\": [\"x\"], \"entities\": [\"No Such Thing\"]}\n",
    );
    let out = dir.path().join("out.jsonl");
    trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&s)
        .arg("--retriever")
        .arg("all")
        .arg("--input")
        .arg(&path)
        .arg("--output")
        .arg(&out)
        .assert()
        .code(65)
        .stderr(predicates::str::contains("in.jsonl:2: entities[0]: no entity with key \"No Such Thing\" in the store"));
    trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&s)
        .arg("--retriever")
        .arg("all")
        .arg("--input")
        .arg(&path)
        .arg("--output")
        .arg(&out)
        .arg("--on-error")
        .arg("skip")
        .arg("--resume")
        .assert()
        .success();
    let line: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap()).unwrap();
    // Nothing in "Tell me more" links, yet the paths are Golf's.
    assert_eq!(line["mentioned"], serde_json::json!(["Golf"]));
    let first = &line["paths"][0]["triples"][0];
    assert!(first["head"] == "Golf" || first["tail"] == "Golf", "{first}");
}

/// Batched name reads answer in the order asked, `None` past the end, like one read each;
/// and a retriever answers the same on a second call (names then come from its cache) as
/// a fresh one does.
#[test]
fn batched_names_and_the_name_cache() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let n = store.entity_count() as u32;
    let ids: Vec<trellis::EntityId> = [n - 1, 0, n + 5, 7, 0].into_iter().map(trellis::EntityId).collect();
    let batched = store.entity_names(&ids).unwrap();
    let one_by_one: Vec<Option<String>> = ids.iter().map(|&e| store.entity(e).unwrap().map(|r| r.name)).collect();
    assert_eq!(batched, one_by_one);
    assert_eq!(batched[2], None);
    assert!(batched[0].is_some() && batched[1].is_some());
    let rels = store.relation_names(&[trellis::RelationId(0), trellis::RelationId(u32::MAX)]).unwrap();
    assert_eq!(rels, vec![store.relation(trellis::RelationId(0)).unwrap().map(|r| r.name), None]);

    let history = [trellis::link::Message { speaker: String::new(), text: "Do you know Jordan Spieth? He plays golf.".into() }];
    for kind in [RetrieverKind::Bm25, RetrieverKind::Pcst] {
        let warm = Retriever::new(store.clone(), RetrieverConfig::new(kind.clone())).unwrap();
        let view = |r: &Retriever| -> Vec<(String, f64)> { r.retrieve(&history).unwrap().iter().map(|p| (r.verbalize(&p.hops).unwrap(), p.score)).collect() };
        let first = view(&warm);
        assert!(!first.is_empty(), "{kind:?}");
        assert_eq!(view(&warm), first, "{kind:?}: second call, cached names");
        assert_eq!(view(&Retriever::new(store.clone(), RetrieverConfig::new(kind.clone())).unwrap()), first, "{kind:?}: fresh retriever");
    }
}

/// Why a gold path cannot be retrieved, counted three ways: a fact the graph lacks though
/// its names are known, a name the store lacks, an empty name.
#[test]
fn gold_paths_the_store_lacks_are_counted_by_cause() {
    let dir = tempfile::tempdir().unwrap();
    let kb = write(dir.path(), "kb.txt", b"Kismet|directed_by|William Dieterle\nJuarez|written_by|Edward Knoblock\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kb]);
    // 1: in the store. 2: Juarez and directed_by are known, the fact is not. 3: an unknown
    // entity. 4: an empty name (and so unknown too).
    let qa = write(
        dir.path(),
        "qa.json",
        br#"{"question": "who directed [Kismet]", "triples": [{"h": "Kismet", "r": "directed_by", "t": "William Dieterle"}]}
{"question": "who directed [Juarez]", "triples": [{"h": "Juarez", "r": "directed_by", "t": "William Dieterle"}]}
{"question": "who directed [Casablanca]", "triples": [{"h": "Casablanca", "r": "directed_by", "t": "Michael Curtiz"}]}
{"question": "who wrote [Kismet]", "triples": [{"h": "Kismet", "r": "written_by", "t": ""}]}
"#,
    );
    let out = json_of(
        trellis()
            .arg("eval")
            .arg("retrieval")
            .arg("--store")
            .arg(&s)
            .arg("--retriever")
            .arg("all")
            .arg("--dataset")
            .arg("metaqa")
            .arg("--input")
            .arg(&qa)
            .arg("--json"),
    );
    assert_eq!(out["turns"], 4);
    assert_eq!(out["gold_not_in_store"], 3);
    assert_eq!(out["gold_unknown_name"], 2);
    assert_eq!(out["gold_empty_name"], 1);
}

/// The counts on the shared dev sets in docs/results-2026-11-25.md ("Retrieval baselines"),
/// computed independently with Python over the files (json/csv readers, the KB as a set of
/// triples): OpenDialKG has 4,214 path actions, 2,753 the assistant's and 1,461 the user's, and
/// 2 gold paths with an empty entity name (every other gold triple is in kg.tsv); MetaQA has
/// 9,990 questions, 903 with a gold triple missing from kb.txt, 81 of them naming an entity or
/// relation kb.txt lacks.
#[test]
fn gold_counts_on_the_shared_dev_sets() {
    let dir = tempfile::tempdir().unwrap();
    let kg = dir.path().join("kg");
    ingest(&kg, &["--on-error", "skip"], &[&shared_data("opendialkg/kg.tsv")]);
    let eval = |store: &std::path::Path, extra: &[&str]| {
        json_of(trellis().arg("eval").arg("retrieval").arg("--store").arg(store).arg("--retriever").arg("all").args(extra).arg("--json"))
    };
    let dev = shared_data("opendialkg/dialogs_dev.csv");
    let dev = dev.to_str().unwrap();
    let all = eval(&kg, &["--input", dev]);
    assert_eq!((all["turns"].as_u64(), all["gold_not_in_store"].as_u64(), all["gold_empty_name"].as_u64()), (Some(4214), Some(2), Some(2)));
    assert_eq!(all["gold_unknown_name"], 2);
    assert_eq!(eval(&kg, &["--input", dev, "--actions", "assistant"])["turns"], 2753);
    assert_eq!(eval(&kg, &["--input", dev, "--actions", "user"])["turns"], 1461);
    let kb = dir.path().join("kb");
    ingest(&kb, &[], &[&shared_data("metaqa/kb.txt")]);
    let qa = shared_data("metaqa/qa_1hop_dev.json");
    let m = eval(&kb, &["--dataset", "metaqa", "--input", qa.to_str().unwrap()]);
    assert_eq!(m["turns"], 9990);
    assert_eq!(m["gold_not_in_store"], 903);
    assert_eq!(m["gold_unknown_name"], 81);
    assert_eq!(m["gold_empty_name"], 0);
}

#[test]
fn candidate_recall_is_the_share_of_gold_paths_among_the_candidates() {
    use trellis::graph::CandidateScope;
    let dir = tempfile::tempdir().unwrap();
    let kg = write(dir.path(), "g.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\nBravo\tt\tDelta\n");
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kg]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let id = |k: &str| store.entity_by_key(k).unwrap().unwrap();
    let rel = |k: &str| store.relation_by_key(k).unwrap().unwrap();
    let (a, b, c, d) = (id("Alpha"), id("Bravo"), id("Charlie"), id("Delta"));
    let (r, s_, t) = (rel("r"), rel("s"), rel("t"));
    // Uncapped, a path is a candidate when it is in the 1- and 2-hop neighbourhood (hubs,
    // over `katz.hub_degree` facts, not expanded).
    let within = |m: &[trellis::EntityId], p: &[(trellis::EntityId, trellis::RelationId, trellis::EntityId)], hub: usize| {
        let mut cfg = RetrieverConfig::new(RetrieverKind::All);
        cfg.scope = CandidateScope::Uncapped;
        cfg.katz.hub_degree = hub;
        Retriever::new(store.clone(), cfg).unwrap().admits_any(m, &[p.to_vec()]).unwrap()
    };
    assert!(within(&[a], &[(a, r, b)], 100));
    assert!(within(&[b], &[(a, r, b)], 100), "walked backwards from Bravo");
    assert!(!within(&[c], &[(a, r, b)], 100), "not at a mentioned entity");
    assert!(within(&[a], &[(a, r, b), (b, t, d)], 100));
    assert!(!within(&[d], &[(a, r, b), (b, t, d)], 100), "facts in walking order: from Delta the first is t");
    assert!(within(&[d], &[(b, t, d), (a, r, b)], 100));
    assert!(!within(&[a], &[(a, s_, c), (a, s_, c)], 100), "a second hop back to the start");
    assert!(!within(&[a], &[(a, r, b), (b, t, d)], 1), "Bravo (2 facts) is a hub at 1: not expanded");
    assert!(within(&[a], &[(a, r, b)], 1), "a hub still ends a 1-hop path");
    assert!(!within(&[a], &[(a, r, c)], 100), "no such fact");

    // Two dialogs naming Alpha; gold paths s(Alpha, Charlie) and t(Bravo, Delta).
    let dialog = |path: &str| {
        let m = format!(
            r#"[{{"type": "chat", "sender": "user", "message": "Tell me about Alpha"}}, {{"type": "action", "sender": "assistant", "metadata": {{"path": [1, [{path}], "x"]}}}}]"#
        );
        format!("\"{}\",5,5\n", m.replace('"', "\"\""))
    };
    let csv = format!("Messages,User Rating,Assistant Rating\n{}{}", dialog(r#"["Alpha", "s", "Charlie"]"#), dialog(r#"["Bravo", "t", "Delta"]"#));
    let dialogs = opendialkg::read(&write(dir.path(), "d.csv", csv.as_bytes())).unwrap();
    // One fact per entity: Alpha's candidates are r(Alpha, Bravo) and its 2-hop path only.
    let mut cfg = RetrieverConfig::new(RetrieverKind::All);
    cfg.candidates.facts_per_entity = 1;
    let report = retrieval::evaluate(&store, &Retriever::new(store.clone(), cfg.clone()).unwrap(), &dialogs, &[1], &trellis::Monitor::new()).unwrap();
    assert_eq!(report.candidate_recall, 0.0);
    cfg.candidates.facts_per_entity = 100;
    let report = retrieval::evaluate(&store, &Retriever::new(store.clone(), cfg.clone()).unwrap(), &dialogs, &[1], &trellis::Monitor::new()).unwrap();
    assert_eq!(report.candidate_recall, 0.5, "s(Alpha, Charlie) is a candidate; t(Bravo, Delta) does not start at Alpha");
    cfg.candidates.facts_per_entity = 1;
    cfg.scope = CandidateScope::Uncapped;
    let report = retrieval::evaluate(&store, &Retriever::new(store.clone(), cfg).unwrap(), &dialogs, &[1], &trellis::Monitor::new()).unwrap();
    assert_eq!(report.candidate_recall, 0.5, "uncapped: no caps");
}

/// `--retriever all --top 100000` lists every candidate of a request, also past the 1,000
/// paths the old limit cut at (tools/bench/gsr.sh's reference harness reads the candidate
/// set this way and stopped on dev dialogs that mention many entities).
#[test]
fn every_candidate_of_a_request_with_many_entities_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    // Six hubs, each with 100 facts (20 relations x 5 objects: under the per-relation cap of
    // 10) and one fact out of each object: 100 facts and 100 two-hop paths per hub, by hand
    // 6 x 200 = 1,200 candidates when the dialog names all six.
    let names = ["Hubalpha", "Hubbravo", "Hubcharlie", "Hubdelta", "Hubecho", "Hubfoxtrot"];
    let mut tsv = String::new();
    for (h, hub) in names.iter().enumerate() {
        for k in 0..100 {
            tsv.push_str(&format!("{hub}\trel{}\tobject {h} {k}\n", k % 20));
            tsv.push_str(&format!("object {h} {k}\tnext\ttail {h} {k}\n"));
        }
    }
    let kg = write(dir.path(), "hubs.tsv", tsv.as_bytes());
    let s = dir.path().join("s");
    ingest(&s, &[], &[&kg]);
    let input = write(dir.path(), "in.jsonl", format!("{{\"id\": 1, \"history\": [\"{}\"]}}\n", names.join(" and ")).as_bytes());
    let paths = |top: &str| -> usize {
        let out = dir.path().join(format!("out-{top}.jsonl"));
        let o = trellis()
            .args(["retrieve", "--retriever", "all", "--store"])
            .arg(&s)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .args(["--top", top])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let answer: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&out).unwrap().trim()).unwrap();
        answer["paths"].as_array().unwrap().len()
    };
    assert_eq!(paths("100000"), 1200);
    assert_eq!(paths("1000"), 1000, "a smaller --top still cuts");
    let o = trellis()
        .args(["retrieve", "--retriever", "all", "--store"])
        .arg(&s)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("x"))
        .args(["--top", "100001"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("top must be within 1..=100000, not 100001"));
}
