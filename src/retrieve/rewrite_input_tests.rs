//! `rewrite_input`: each part of a ranking reads the rewritten dialog only when named.

use super::*;
use crate::ingest::{BulkLoader, InputSpec};

const GRAPH: &str = "Lev Grossman\tGender\tMale\nLev Grossman\tis-a\tAuthor\nThe Magicians\twritten_by\tLev Grossman\n\
The Magician's Land\twritten_by\tLev Grossman\nThe Magician's Land\tis-a\tBook\nJhumpa Lahiri\tGender\tFemale\n\
Interpreter of Maladies\twritten_by\tJhumpa Lahiri\nInterpreter of Maladies\tis-a\tBook\n";

fn says(text: &str) -> Message {
    Message { speaker: String::new(), text: text.into() }
}

fn scores(paths: Vec<ScoredPath>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = paths.into_iter().map(|p| (format!("{:?}", p.hops), p.score.to_bits())).collect();
    v.sort();
    v
}

/// A bm25 retriever reranked over a pcst pool: each part reads the rewritten history only
/// when `rewrite_input` names it (its own kind for a pool member, `rerank` for the
/// cross-encoder), on a newer generation too; an unnamed part ranks exactly what it ranks
/// without the rewritten history, a named one differs; the library refuses a part the
/// ranking lacks and the setting without the rewrite; a part named twice counts once.
#[test]
fn each_part_reads_the_rewrite_only_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("g.tsv");
    std::fs::write(&tsv, GRAPH).unwrap();
    BulkLoader::new(dir.path().join("kg")).load(&[InputSpec::new(&tsv)]).unwrap();
    let store = Arc::new(Store::open_read_only(dir.path().join("kg")).unwrap());
    let cross = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/encoders/cross");
    let cfg = |parts: &[&str]| {
        let mut c = RetrieverConfig::new(RetrieverKind::Bm25);
        c.link.rewrite = true;
        let mut r = rerank::RerankOptions::new(&cross);
        r.pool = vec![RetrieverKind::Pcst];
        c.rerank = Some(r);
        c.rewrite_input = parts.iter().map(|p| p.to_string()).collect();
        c
    };
    let flags = |r: &Retriever| {
        let rr = r.rerank.as_ref().unwrap();
        (r.reads_rewrite, rr.pool[0].reads_rewrite, rr.reads_rewrite)
    };
    let pcst_only = Retriever::new(store.clone(), cfg(&["pcst"])).unwrap();
    assert_eq!(flags(&pcst_only), (false, true, false));
    assert_eq!(flags(&pcst_only.on_store(store.clone()).unwrap()), (false, true, false));
    assert_eq!(flags(&Retriever::new(store.clone(), cfg(&["bm25", "rerank"])).unwrap()), (true, false, true));
    assert_eq!(flags(&Retriever::new(store.clone(), cfg(&[])).unwrap()), (false, false, false));

    let history = [
        says("Do you know Lev Grossman?"),
        says("Yes! He wrote The Magician's Land."),
        says("I liked the book. Does Jhumpa Lahiri write fantasy too?"),
        says("No, she wrote Interpreter of Maladies. His books are longer."),
    ];
    let input = pcst_only.input(&history).unwrap();
    let rewritten = input.rewritten.clone().expect("a part reads the rewrite");
    assert_eq!(rewritten[1].text, "Yes! Lev Grossman wrote The Magician's Land.");
    let written = input.as_written();
    let pcst = &pcst_only.rerank.as_ref().unwrap().pool[0];
    assert_eq!(scores(pcst_only.rank_own(&input).unwrap()), scores(pcst_only.rank_own(&written).unwrap()), "bm25 is not named");
    assert_ne!(scores(pcst.rank_own(&input).unwrap()), scores(pcst.rank_own(&written).unwrap()), "pcst is named");
    let bm25 = Retriever::new(store.clone(), cfg(&["bm25"])).unwrap();
    assert_ne!(scores(bm25.rank_own(&input).unwrap()), scores(bm25.rank_own(&written).unwrap()), "bm25 is named");

    let refused = |c: RetrieverConfig| Retriever::new(store.clone(), c).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(refused(cfg(&["gsr"])).starts_with("`rewrite_input gsr` is not a part of this ranking"), "{}", refused(cfg(&["gsr"])));
    assert!(refused(cfg(&["katz"])).starts_with("`rewrite_input katz` is not a part"));
    // A part named twice counts once, as in the rerank pool and the settings layer.
    let twice = Retriever::new(store.clone(), cfg(&["pcst", "pcst"])).unwrap();
    assert_eq!(flags(&twice), (false, true, false));
    let mut c = cfg(&["pcst"]);
    c.link.rewrite = false;
    assert_eq!(refused(c), "`rewrite_input` needs `rewrite` (the dialog rewrite the ranking would read)");
}
