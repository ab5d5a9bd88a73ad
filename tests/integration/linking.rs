//! Entity linking on the bundled sample graph (hand-checked cases) and the shared dialogs.

use crate::common::*;
use trellis::link::{LinkConfig, Linker, MatchKind, Message};
use trellis::Store;

fn sample_store(dir: &std::path::Path) -> std::sync::Arc<Store> {
    let s = dir.join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    std::sync::Arc::new(Store::open_read_only(&s).unwrap())
}

fn names(store: &Store, mentions: &[trellis::link::Mention]) -> Vec<(String, String)> {
    let _ = store;
    mentions.iter().map(|m| (m.text.clone(), m.entities[0].name.clone())).collect()
}

#[test]
fn case_possessives_quotes_articles_and_stop_words() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let linker = Linker::new(store.clone(), LinkConfig::default()).unwrap();
    let m = linker.link_text("do you know anything about JORDAN SPIETH's golf? I love \"Happy Gilmore\".").unwrap();
    assert_eq!(
        names(&store, &m),
        vec![
            ("JORDAN SPIETH's".to_string(), "Jordan Spieth".to_string()),
            ("golf".to_string(), "Golf".to_string()),
            ("Happy Gilmore".to_string(), "Happy Gilmore".to_string()),
        ]
    );
    // Spans are byte offsets into the message.
    let text = "do you know anything about JORDAN SPIETH's golf? I love \"Happy Gilmore\".";
    for mention in &m {
        assert_eq!(&text[mention.start..mention.end], mention.text);
    }
    // Only stop words: nothing ("Yes" and "Love" are entities in the full graph).
    assert!(linker.link_text("yes, I love it, thanks").unwrap().is_empty());
}

#[test]
fn accents_and_punctuation_need_not_be_typed() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "g.tsv", "Alexis Sánchez\tplays for\tArsenal F.C.\nWhat's Up, Doc?\tstarring\tRyan O'Neal\n".as_bytes());
    let s = dir.path().join("s");
    ingest(&s, &[], &[&input]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let linker = Linker::new(store.clone(), LinkConfig::default()).unwrap();
    let m = linker.link_text("Does alexis sanchez still play for Arsenal FC? Whats up doc is great").unwrap();
    let accented = linker.link_text("¿Sánchez? No: Alexis Sánchez").unwrap();
    // "¿Sánchez? No: " is 14 characters and 16 bytes.
    assert_eq!((accented[0].char_start, accented[0].char_end, accented[0].start, accented[0].end), (14, 28, 16, 31));
    assert_eq!(
        names(&store, &m),
        vec![
            ("alexis sanchez".to_string(), "Alexis Sánchez".to_string()),
            ("Arsenal FC".to_string(), "Arsenal F.C.".to_string()),
            ("Whats up doc".to_string(), "What's Up, Doc?".to_string()),
        ]
    );
    assert!(store.validate().unwrap().is_ok(), "{:?}", store.validate().unwrap().problems);
}

#[test]
fn names_with_a_qualifier_are_found_by_their_plain_name() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        dir.path(),
        "g.tsv",
        b"Star Trek (Science Fiction Film)\tdirected_by\tJ. J. Abrams\nStar Trek (TV Series)\tcreated_by\tGene Roddenberry\nStar Trek (TV Series)\tgenre\tScience Fiction\n",
    );
    let s = dir.path().join("s");
    ingest(&s, &[], &[&input]);
    let store = std::sync::Arc::new(Store::open_read_only(&s).unwrap());
    let linker = Linker::new(store.clone(), LinkConfig::default()).unwrap();
    let m = linker.link_text("Have you seen Star Trek?").unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].text, "Star Trek");
    // Both qualified entities, the one with more facts (the series, 2) first.
    let got: Vec<&str> = m[0].entities.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(got, vec!["Star Trek (TV Series)", "Star Trek (Science Fiction Film)"]);
}

#[test]
fn partial_names_and_recency() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let linker = Linker::new(store.clone(), {
        let mut o = LinkConfig::default();
        o.window = 2;
        o
    })
    .unwrap();
    let dialog = vec![
        Message { speaker: "user".into(), text: "Do you know Jordan Spieth?".into() },
        Message { speaker: "assistant".into(), text: "Yes, he was born in Dallas.".into() },
        Message { speaker: "user".into(), text: "Is Spieth any good at golf?".into() },
    ];
    let mentions = linker.link_dialog(&dialog).unwrap();
    let spieth = store.entity_by_key("Jordan Spieth").unwrap().unwrap();
    let later = mentions.iter().find(|m| m.message == 2 && m.text == "Spieth").expect("surname linked");
    assert_eq!(later.kind, MatchKind::PartialName);
    assert_eq!(later.entities[0].id, spieth.0);
    // The turn after message 2 sees messages 1 and 2 only (window 2), most recent first.
    let turn = linker.turn_entities(&mentions, 3);
    let golf = store.entity_by_key("Golf").unwrap().unwrap();
    let dallas = store.entity_by_key("Dallas").unwrap().unwrap();
    let weights: Vec<(u32, f32)> = turn.iter().map(|&(e, w)| (e.0, w)).collect();
    let mut expected: Vec<(u32, f32)> = vec![(spieth.0, 1.0), (golf.0, 1.0), (dallas.0, 0.5)];
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    assert_eq!(weights, expected);
}

#[test]
fn cli_link_text_and_dialog() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let out = stdout_of(trellis().arg("link").arg("--store").arg(&s).arg("Tell me about jordan spieth"));
    assert!(out.contains("\"jordan spieth\" -> Jordan Spieth"), "{out}");
    let dialog = write(dir.path(), "d.json", br#"["I like Golf", {"sender": "user", "message": "Who is Jordan Spieth?"}]"#);
    let out = stdout_of(trellis().arg("link").arg("--store").arg(&s).arg("--dialog").arg(&dialog).arg("--json"));
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "two mentions and the turn set:\n{out}");
    assert_eq!(lines[1]["message"], 1);
    assert_eq!(lines[1]["speaker"], "user");
    assert_eq!(lines[2]["turn_entities"][0]["name"], "Jordan Spieth");
    let bad = write(dir.path(), "bad.json", br#"[{"speaker": "user"}]"#);
    trellis()
        .arg("link")
        .arg("--store")
        .arg(&s)
        .arg("--input")
        .arg(&bad)
        .assert()
        .code(65)
        .stderr(predicates::str::contains("bad.json:1: message 1 needs a \"text\" (or \"message\") string"));
}

#[test]
fn opendialkg_dev_linking_recall() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("kg");
    ingest(&s, &["--on-error", "skip"], &[&shared_data("opendialkg/kg.tsv")]);
    let misses = dir.path().join("misses.jsonl");
    let out = json_of(
        trellis()
            .arg("eval")
            .arg("linking")
            .arg("--store")
            .arg(&s)
            .arg("--input")
            .arg(shared_data("opendialkg/dialogs_dev.csv"))
            .arg("--misses")
            .arg(&misses)
            .arg("--json"),
    );
    // One line per missed turn: turns * (1 - recall).
    let missed = std::fs::read_to_string(&misses).unwrap().lines().count() as f64;
    // Written beside the file and renamed onto it: no temporary file is left.
    let names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    let turns = out["turns"].as_f64().unwrap();
    assert_eq!(missed, (turns * (1.0 - out["trellis"]["recall_all"].as_f64().unwrap())).round());
    // Turn counts as the issue states them, from the data set alone.
    assert_eq!(out["turns"], 4214);
    assert_eq!(out["turns_named"], 3492);
    assert_eq!(out["gold_not_in_store"], 0);
    // The issue's targets (>= 0.97, >= 0.85, <= 6 per turn) and floors just under the
    // figures of docs/results-2026-11-25.md, "Entity linking" (0.9837 / 0.8536 / 4.63).
    let t = &out["trellis"];
    assert!(t["recall_named"].as_f64().unwrap() >= 0.98, "{t}");
    assert!(t["recall_all"].as_f64().unwrap() >= 0.85, "{t}");
    assert!(t["mean_entities_per_turn"].as_f64().unwrap() <= 4.7, "{t}");
    assert_eq!(out["messages"], 13580);
    // The substring baseline finds nearly every named entity, with many more per turn.
    let b = &out["substring"];
    assert!(b["recall_named"].as_f64().unwrap() > 0.99 && b["mean_entities_per_turn"].as_f64().unwrap() > 15.0, "{b}");
}

#[test]
fn any_unicode_text_links_without_panics() {
    // Every message a user can type links or is reported, never panics: one panic would
    // kill a whole `retrieve` or `eval` run. Names of the sample glued by odd whitespace
    // and punctuation, and arbitrary text.
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let linker = Linker::new(store.clone(), LinkConfig::default()).unwrap();
    let spaced = "Jordan\u{a0}Spieth\u{2009}played\u{3000}Golf\u{2028}in Happy\u{202f}Gilmore\u{a0}";
    let mentions = linker.link_text(spaced).unwrap();
    for m in &mentions {
        assert_eq!(&spaced[m.start..m.end], m.text);
        assert_eq!(spaced.chars().skip(m.char_start).take(m.char_end - m.char_start).collect::<String>(), m.text);
    }
    assert!(mentions.iter().any(|m| m.text == "Golf"), "{mentions:?}");
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config { cases: 400, ..Default::default() });
    let strategy = proptest::string::string_regex("(\\PC|\\s|[\u{a0}\u{2000}-\u{200b}\u{3000}\u{2028}\u{feff}'’s.?!-]|Jordan|Spieth|Golf|the ){0,30}").unwrap();
    runner
        .run(&strategy, |text| {
            let mentions = linker.link_text(&text).unwrap();
            for m in &mentions {
                proptest::prop_assert_eq!(&text[m.start..m.end], m.text.as_str());
            }
            Ok(())
        })
        .unwrap();
}

/// A long message with multi-byte characters and many mentions: every mention's character
/// span is the brute-force count of the characters before it (the linker counts on from
/// the previous mention, which keeps linking linear in the text's length:
/// tools/bench/linking_scale.sh measures it).
#[test]
fn character_offsets_of_many_mentions_in_a_long_text_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let linker = Linker::new(store, LinkConfig::default()).unwrap();
    let unit = "Ünïcödé “quotes” and Jordan Spieth, then Happy Gilmore — ✓ 🎾 Golf. ";
    let text = unit.repeat(2_000);
    let mentions = linker.link_text(&text).unwrap();
    assert!(mentions.len() >= 4_000, "{} mentions", mentions.len());
    for m in &mentions {
        assert_eq!(m.char_start, text[..m.start].chars().count(), "{:?} at byte {}", m.text, m.start);
        assert_eq!(m.char_end, text[..m.end].chars().count(), "{:?} at byte {}", m.text, m.end);
        assert_eq!(text.chars().skip(m.char_start).take(m.char_end - m.char_start).collect::<String>(), m.text);
    }
}

/// A request of more text than `limits::DIALOG_BYTES` is refused as bad input naming its
/// line (the others answered with `--on-error skip`), never linked for minutes.
#[test]
fn a_request_longer_than_the_limit_is_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let long = "Jordan Spieth ".repeat(trellis::limits::DIALOG_BYTES / 14 + 10);
    let lines = format!("{{\"history\": [\"Golf\"]}}\n{}\n", serde_json::json!({"history": [long]}));
    let input = write(dir.path(), "in.jsonl", lines.as_bytes());
    let out = trellis()
        .args(["retrieve", "--retriever", "bm25", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("out.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(65));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in.jsonl:2: the dialog holds 1048") && err.contains("more than the 1048576 a request may hold"), "{err}");
    let out = trellis()
        .args(["retrieve", "--retriever", "bm25", "--on-error", "skip", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("skipped.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.path().join("skipped.jsonl")).unwrap().lines().count(), 1);
    // `respond` holds its dialog to the same limit, given as plain text too.
    let text = write(dir.path(), "dialog.txt", long.as_bytes());
    let out = trellis()
        .args(["respond", "--retriever", "bm25", "--generator", "models/generator-opendialkg", "--store"])
        .arg(&store)
        .arg("--dialog")
        .arg(&text)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("dialog.txt:1: the dialog holds"), "{err}");
}
