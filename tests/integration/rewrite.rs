//! The dialog rewrite (`--rewrite`, `trellis::link::rewrite`): pronouns and references
//! resolved by the graph's gender and type facts, on a dialog worked by hand (the paper's
//! own example among them), through the library and the command line.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::link::{rewrite, LinkConfig, Linker, MatchKind, Message};
use trellis::Store;

const GRAPH: &[u8] = b"Lev Grossman\tGender\tMale
Lev Grossman\tis-a\tAuthor
The Magicians\twritten_by\tLev Grossman
The Magician's Land\twritten_by\tLev Grossman
The Magician's Land\tis-a\tBook
Jhumpa Lahiri\tGender\tFemale
Jhumpa Lahiri\tis-a\tAuthor
Interpreter of Maladies\twritten_by\tJhumpa Lahiri
Interpreter of Maladies\tis-a\tBook
Happy Gilmore\tis-a\tFilm
Happy Gilmore\tstarred_actors\tAdam Sandler
";

fn store(dir: &Path, graph: &[u8]) -> PathBuf {
    let input = write(dir, "g.tsv", graph);
    let store = dir.join("kg");
    ingest(&store, &[], &[&input]);
    store
}

fn says(speaker: &str, text: &str) -> Message {
    Message { speaker: speaker.into(), text: text.into() }
}

fn dialog() -> Vec<Message> {
    vec![
        says("user", "Do you know Lev Grossman?"),
        says("assistant", "Yes! He wrote The Magician's Land."),
        says("user", "I liked the book. Does Jhumpa Lahiri write fantasy too?"),
        says("assistant", "No, her books are about immigrants, like Interpreter of Maladies."),
        says("user", "Did she write it in English? His books are longer."),
    ]
}

/// `trellis retrieve` of one request (the dialog `texts`) with `args`, its one answer.
fn retrieve_one(dir: &Path, store: &Path, texts: &[&str], args: &[&str]) -> serde_json::Value {
    let input = write(dir, "in.jsonl", (serde_json::json!({"id": 1, "history": texts}).to_string() + "\n").as_bytes());
    let out = dir.join("out.jsonl");
    let o = trellis().arg("retrieve").args(args).arg("--store").arg(store).arg("--input").arg(&input).arg("--output").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(std::fs::read_to_string(&out).unwrap().trim()).unwrap()
}

fn linker(store: &Path, rewrite: bool) -> Linker {
    let mut cfg = LinkConfig::default();
    cfg.rewrite = rewrite;
    Linker::new(Arc::new(Store::open_read_only(store).unwrap()), cfg).unwrap()
}

#[test]
fn pronouns_and_references_resolve_to_the_entities_the_graph_agrees_with() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let messages = dialog();
    let mentions = linker(&store, true).link_dialog(&messages).unwrap();
    let resolved: Vec<(usize, &str, &str, usize)> = mentions
        .iter()
        .filter(|m| m.kind == MatchKind::Resolved)
        .map(|m| (m.message, m.text.as_str(), m.entities[0].name.as_str(), m.resolution.as_ref().unwrap().messages_back))
        .collect();
    // Worked by hand: "He" is the one male candidate; "the book" the most recent Book;
    // "her" the one female; "she" again her, one back through the resolved "her"; "it" the
    // most recent entity with no gender (the novel, one back); "His" Lev Grossman, three
    // back through the resolved "He" (resolved words are mentions: chains follow them).
    assert_eq!(
        resolved,
        [
            (1, "He", "Lev Grossman", 1),
            (2, "the book", "The Magician's Land", 1),
            (3, "her", "Jhumpa Lahiri", 1),
            (4, "she", "Jhumpa Lahiri", 1),
            (4, "it", "Interpreter of Maladies", 1),
            (4, "His", "Lev Grossman", 3),
        ]
    );
    // The explanation: the facts that agreed.
    let he = mentions.iter().find(|m| m.text == "He").unwrap().resolution.clone().unwrap();
    assert_eq!(he.agreed, [["Lev Grossman".to_owned(), "Gender".to_owned(), "Male".to_owned()]]);
    assert_eq!(he.agreement, rewrite::Agreement::Masculine);
    let book = mentions.iter().find(|m| m.text == "the book").unwrap().resolution.clone().unwrap();
    assert_eq!(book.agreed, [["The Magician's Land".to_owned(), "is-a".to_owned(), "Book".to_owned()]]);
    // The paper's example, and a possessive.
    assert_eq!(rewrite::rewritten_text(&messages[1].text, 1, &mentions), "Yes! Lev Grossman wrote The Magician's Land.");
    assert_eq!(
        rewrite::rewritten_text(&messages[4].text, 4, &mentions),
        "Did Jhumpa Lahiri write Interpreter of Maladies in English? Lev Grossman's books are longer."
    );
    // The resolved entity joins the turn's entities: without the rewrite the last turn
    // names nobody.
    let plain = linker(&store, false).link_dialog(&messages).unwrap();
    assert!(plain.iter().all(|m| m.kind != MatchKind::Resolved && m.resolution.is_none()));
    let l = linker(&store, true);
    let weight = |ms: &[trellis::link::Mention], name: &str| {
        let id = Store::open_read_only(&store).unwrap().entity_by_key(name).unwrap().unwrap();
        l.turn_entities(ms, 5).into_iter().find(|(e, _)| *e == id).map(|(_, w)| w).unwrap_or(0.0)
    };
    assert!(weight(&mentions, "Jhumpa Lahiri") > weight(&plain, "Jhumpa Lahiri"));
}

/// How resolved words weigh in the turn's entity set, worked by hand (window 8, decay 0.5:
/// a message k back weighs 0.5^k): a resolved word counts like a name, but once per message
/// and entity, not beside the entity's own name, and it does not make the entity younger.
#[test]
fn resolved_words_weigh_once_per_message_and_leave_ages_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let l = linker(&store, true);
    let id = |name: &str| Store::open_read_only(&store).unwrap().entity_by_key(name).unwrap().unwrap();
    let weights = |messages: &[Message]| {
        let mentions = l.link_dialog(messages).unwrap();
        let set = l.turn_entities(&mentions, messages.len());
        let ids: Vec<_> = set.iter().map(|(e, _)| *e).collect();
        let ages = l.entity_ages(&mentions, messages.len(), &ids);
        set.into_iter().zip(ages).map(|((e, w), a)| (e, w, a)).collect::<Vec<_>>()
    };
    let find = |set: &[(trellis::ids::EntityId, f32, u32)], name: &str| set.iter().find(|(e, _, _)| *e == id(name)).map(|&(_, w, a)| (w, a)).unwrap();
    // The dialog of the test above, after its fifth message: Lev Grossman named 4 back (1/16),
    // "He" 3 back (1/8), "His" in the last (1); Jhumpa Lahiri named 2 back (1/4), "her" 1
    // back (1/2), "she" (1); Interpreter of Maladies named 1 back (1/2), "it" (1); The
    // Magician's Land named 3 back (1/8), "the book" 2 back (1/4). Ages: when named.
    let set = weights(&dialog());
    assert_eq!(find(&set, "Jhumpa Lahiri"), (1.75, 2));
    assert_eq!(find(&set, "Interpreter of Maladies"), (1.5, 1));
    assert_eq!(find(&set, "Lev Grossman"), (1.1875, 4));
    assert_eq!(find(&set, "The Magician's Land"), (0.375, 3));
    let order: Vec<_> = set.iter().map(|(e, _, _)| *e).collect();
    assert_eq!(order[..4], [id("Jhumpa Lahiri"), id("Interpreter of Maladies"), id("Lev Grossman"), id("The Magician's Land")]);
    // Two words resolved to him in one message count once: 1/2 + 1, not 1/2 + 2.
    let twice = [says("user", "Do you know Lev Grossman?"), says("assistant", "Yes, he is great and he wrote a lot.")];
    assert_eq!(find(&weights(&twice), "Lev Grossman"), (1.5, 1));
    // Beside his name in the same message the word adds nothing: 1/2 + 1.
    let named = [says("user", "Do you know Lev Grossman?"), says("assistant", "Yes, he is great. Lev Grossman wrote a lot.")];
    assert_eq!(find(&weights(&named), "Lev Grossman"), (1.5, 0));
}

#[test]
fn the_rewrite_never_guesses() {
    let dir = tempfile::tempdir().unwrap();
    // No gender facts at all: "he" stays unresolved; "it" goes to the entity without one.
    let store = store(dir.path(), b"Happy Gilmore\tis-a\tFilm\nHappy Gilmore\tstarred_actors\tAdam Sandler\n");
    let messages = vec![says("user", "I loved Happy Gilmore with Adam Sandler."), says("assistant", "He was great in it. The movie is funny.")];
    let mentions = linker(&store, true).link_dialog(&messages).unwrap();
    let resolved: Vec<(&str, &str)> = mentions.iter().filter(|m| m.resolution.is_some()).map(|m| (m.text.as_str(), m.entities[0].name.as_str())).collect();
    // "it": the most recent entity without a gender fact is Adam Sandler (named after the
    // film), whom the graph gives no gender: the graph agrees, and the rewrite says so.
    assert_eq!(resolved, [("it", "Adam Sandler"), ("The movie", "Happy Gilmore")]);
}

#[test]
fn link_rewrite_on_the_command_line_explains_each_resolution() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let input = write(
        dir.path(),
        "d.json",
        serde_json::to_string(&serde_json::json!([
            {"speaker": "user", "text": "Do you know Lev Grossman?"},
            {"speaker": "assistant", "text": "Yes! He wrote The Magician's Land."}
        ]))
        .unwrap()
        .as_bytes(),
    );
    let text = stdout_of(trellis().arg("link").arg("--store").arg(&store).arg("--input").arg(&input).arg("--rewrite"));
    assert!(text.contains("\"He\" -> Lev Grossman"), "{text}");
    assert!(text.contains("resolved (Masculine, 1 message(s) back): Lev Grossman Gender Male"), "{text}");
    assert!(text.contains("rewritten message 1: Yes! Lev Grossman wrote The Magician's Land."), "{text}");
    // JSON: the mention carries its resolution; without --rewrite there is none.
    let out = stdout_of(trellis().arg("link").arg("--store").arg(&store).arg("--input").arg(&input).arg("--rewrite").arg("--json"));
    let he: serde_json::Value = out.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).find(|v| v["text"] == "He").unwrap();
    assert_eq!(he["kind"], "resolved");
    assert_eq!(he["resolution"]["agreed"][0][2], "Male");
    let out = stdout_of(trellis().arg("link").arg("--store").arg(&store).arg("--input").arg(&input).arg("--json"));
    assert!(!out.contains("resolution"), "{out}");
}

#[test]
fn a_message_full_of_pronouns_resolves_at_most_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let messages = vec![says("user", "I loved Happy Gilmore."), says("assistant", &"it ".repeat(1000))];
    let mentions = linker(&store, true).link_dialog(&messages).unwrap();
    let resolved: Vec<&str> = mentions.iter().filter(|m| m.resolution.is_some()).map(|m| m.entities[0].name.as_str()).collect();
    assert_eq!(resolved.len(), rewrite::MAX_RESOLVED_PER_MESSAGE);
    assert!(resolved.iter().all(|n| *n == "Happy Gilmore"), "{resolved:?}");
}

/// Every resolution explained where the rewrite is used: `retrieve --explain` answers and
/// `respond`/`run` replies carry the resolved words (which entity, which facts agreed);
/// `--gen-rewrite` hands the generator the rewritten dialog (a different encoder input).
#[test]
fn retrieve_and_respond_explain_what_the_rewrite_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let texts = ["Do you know Lev Grossman?", "Yes! He wrote The Magician's Land."];
    let retrieve = |extra: &[&str]| retrieve_one(dir.path(), &store, &texts, &[&["--retriever", "bm25"], extra].concat());
    let a = retrieve(&["--rewrite", "--explain"]);
    let r = &a["resolutions"];
    assert_eq!(r.as_array().unwrap().len(), 1, "{a}");
    assert_eq!((r[0]["text"].as_str(), r[0]["message"].as_i64()), (Some("He"), Some(1)));
    assert_eq!(r[0]["entities"][0]["name"], "Lev Grossman");
    assert_eq!(r[0]["resolution"]["agreed"][0], serde_json::json!(["Lev Grossman", "Gender", "Male"]));
    assert!(retrieve(&["--rewrite"]).get("resolutions").is_none(), "only with --explain");
    assert!(retrieve(&["--explain"]).get("resolutions").is_none(), "only with --rewrite");

    let generator = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/generator-opendialkg");
    let respond = |extra: &[&str]| {
        trellis()
            .args(["respond", "--retriever", "bm25", "--store"])
            .arg(&store)
            .arg("--generator")
            .arg(&generator)
            .args(extra)
            .args(["Do you know Lev Grossman?", "Yes! He wrote The Magician's Land."])
            .output()
            .unwrap()
    };
    let o = respond(&["--rewrite"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("resolved \"He\" (message 2) -> Lev Grossman (1 back; agreed: Lev Grossman Gender Male)"), "{err}");
    let o = respond(&["--rewrite", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["resolutions"][0]["entities"][0]["name"], "Lev Grossman");
    let o = respond(&["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("resolutions").is_none());
    // --gen-rewrite needs --rewrite, and is refused without it as a usage error.
    let o = respond(&["--gen-rewrite"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`gen_rewrite` needs `rewrite`"));
}

/// `--rewrite-input bm25`: the ranking reads the dialog as the rewrite resolved it. BM25's scores of
/// every candidate path on the hand-worked dialog equal those of the same dialog with its
/// pronouns and references replaced by hand (read as written, no rewrite), and differ from
/// `--rewrite` alone, which changes the linked entities but not the text the ranking reads.
/// Without `--rewrite` the setting is refused as a usage error.
#[test]
fn rewrite_input_ranks_the_dialog_as_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let by_hand = [
        "Do you know Lev Grossman?",
        "Yes! Lev Grossman wrote The Magician's Land.",
        "I liked The Magician's Land. Does Jhumpa Lahiri write fantasy too?",
        // "her" before a noun is possessive.
        "No, Jhumpa Lahiri's books are about immigrants, like Interpreter of Maladies.",
        "Did Jhumpa Lahiri write Interpreter of Maladies in English? Lev Grossman's books are longer.",
    ];
    let original: Vec<String> = dialog().into_iter().map(|m| m.text).collect();
    let scores = |texts: &[&str], extra: &[&str]| -> std::collections::BTreeMap<String, f64> {
        let v = retrieve_one(dir.path(), &store, texts, &[&["--retriever", "bm25", "--top", "100"], extra].concat());
        v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let t: Vec<String> = p["triples"].as_array().unwrap().iter().map(|t| format!("{} {} {}", t["head"], t["relation"], t["tail"])).collect();
                (t.join(" / "), p["score"].as_f64().unwrap())
            })
            .collect()
    };
    let original: Vec<&str> = original.iter().map(String::as_str).collect();
    let rewritten = scores(&original, &["--rewrite", "--rewrite-input", "bm25"]);
    let literal = scores(&by_hand, &[]);
    assert!(rewritten.len() >= 5, "{rewritten:?}");
    assert_eq!(rewritten, literal);
    let linked_only = scores(&original, &["--rewrite"]);
    assert_eq!(linked_only.keys().collect::<Vec<_>>(), rewritten.keys().collect::<Vec<_>>());
    assert_ne!(linked_only, rewritten, "the rewritten text must change some path's score");

    let input = write(dir.path(), "in.jsonl", (serde_json::json!({"id": 1, "history": original}).to_string() + "\n").as_bytes());
    let o = trellis()
        .args(["retrieve", "--retriever", "bm25", "--rewrite-input", "bm25", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("refused.jsonl"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`rewrite_input` needs `rewrite`"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `--explain`'s `input_ids` are the encoder input gsr read: the rewritten dialog when
/// `--rewrite-input` names gsr (the same ids as the dialog rewritten by hand, read as
/// written), the dialog as written when only another part reads the rewrite (a pool member
/// here) or none does.
#[test]
fn explain_shows_the_input_gsr_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), GRAPH);
    let model = fixture("gsr/tiny-split");
    stdout_of(
        trellis().args(["index-tokens", "--store"]).arg(&store).arg("--tokenizer").arg(model.join("tokenizer.json")).args(["--linearization", "dialoggsr"]),
    );
    let written = ["Do you know Lev Grossman?", "Yes! He wrote The Magician's Land.", "I liked the book."];
    let by_hand = ["Do you know Lev Grossman?", "Yes! Lev Grossman wrote The Magician's Land.", "I liked The Magician's Land."];
    let gsr = ["--retriever", "gsr", "--explain", "--model-threads", "1", "--model", model.to_str().unwrap()];
    let input_ids = |texts: &[&str], extra: &[&str]| retrieve_one(dir.path(), &store, texts, &[&gsr[..], extra].concat())["input_ids"].clone();
    let cross = fixture("encoders/cross");
    let pool = ["--rerank", cross.to_str().unwrap(), "--rerank-pool", "pcst"];
    let as_written = input_ids(&written, &[]);
    let rewritten = input_ids(&written, &["--rewrite", "--rewrite-input", "gsr"]);
    assert!(as_written.as_array().is_some_and(|a| !a.is_empty()), "{as_written}");
    assert_eq!(rewritten, input_ids(&by_hand, &[]), "gsr read the dialog as rewritten");
    assert_ne!(rewritten, as_written);
    assert_eq!(input_ids(&written, &["--rewrite"]), as_written, "the rewrite alone changes links, not gsr's text");
    let mut pcst_reads = pool.to_vec();
    pcst_reads.extend(["--rewrite", "--rewrite-input", "pcst"]);
    assert_eq!(input_ids(&written, &pcst_reads), as_written, "only the pool's pcst reads the rewrite");
    let mut both = pool.to_vec();
    both.extend(["--rewrite", "--rewrite-input", "gsr,pcst"]);
    assert_eq!(input_ids(&written, &both), rewritten);
}
