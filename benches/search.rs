//! Text search latency on the shared OpenDialKG graph (`../shared/data`), warm: the store
//! is loaded and its text index built once, then every query runs once to warm the page
//! cache and again to be timed. Queries: 500 entity names (every k-th live entity), the same
//! names with one letter dropped from their longest word (a misspelling), and 500 dev
//! replies' first 8 words (a description). p50 / p99 / mean per search, fuzzy and exact, and
//! the share of names whose top hit is the entity so named (a name held by several entities
//! counts as found when the top hit carries it).
//!
//! `cargo bench --bench search` (tools/bench/search.sh runs it and keeps the output).

use std::path::PathBuf;
use std::time::Instant;
use trellis::ingest::{BulkLoader, InputSpec};
use trellis::text::{SearchOptions, TextIndex};
use trellis::{EntityId, Monitor, Store};

fn data(rel: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/opendialkg").join(rel);
    assert!(p.exists(), "{} is missing", p.display());
    p
}

fn misspelt(name: &str) -> String {
    let words: Vec<&str> = name.split_whitespace().collect();
    let Some((i, longest)) = words.iter().enumerate().max_by_key(|(_, w)| w.chars().count()) else { return name.to_owned() };
    let chars: Vec<char> = longest.chars().collect();
    let cut: String = chars.iter().enumerate().filter(|(j, _)| *j != chars.len() / 2).map(|(_, c)| c).collect();
    let mut out: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    out[i] = cut;
    out.join(" ")
}

/// The share of `queries` whose top hit is named `names[i]` (None: not measured).
fn found(index: &TextIndex, queries: &[String], names: Option<&[String]>, options: SearchOptions) -> String {
    let Some(names) = names else { return "-".into() };
    let hits = queries
        .iter()
        .zip(names)
        .filter(|(q, n)| index.search(q, 1, options).ok().and_then(|h| h.first().map(|h| h.document.name == **n)).unwrap_or(false))
        .count();
    format!("{:.3}", hits as f64 / queries.len() as f64)
}

fn time(index: &TextIndex, queries: &[String], options: SearchOptions) -> (f64, f64, f64) {
    for q in queries {
        let _ = index.search(q, 10, options);
    }
    let mut ms: Vec<f64> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            let _ = std::hint::black_box(index.search(q, 10, options));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    (ms[ms.len() / 2], ms[ms.len() * 99 / 100], mean)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("s");
    BulkLoader::new(&store_dir)
        .on_error(trellis::ingest::OnError::Skip)
        .with_rejects_file(dir.path().join("rejects.tsv"))
        .load(&[InputSpec::new(data("kg.tsv")), InputSpec::new(data("kg_train_paths.tsv"))])
        .unwrap();
    let t = Instant::now();
    let built = Store::index_text(&store_dir, None, &Monitor::new()).unwrap();
    println!("index-text: {} documents in {:.2} s", built.documents, t.elapsed().as_secs_f64());
    let store = Store::open_read_only(&store_dir).unwrap();
    let index = TextIndex::open(&store).unwrap();
    let step = (store.entity_count() / 500).max(1) as u32;
    let names: Vec<String> =
        (0..store.entity_count() as u32).step_by(step as usize).take(500).filter_map(|e| store.entity(EntityId(e)).unwrap()).map(|r| r.name).collect();
    let typos: Vec<String> = names.iter().map(|n| misspelt(n)).collect();
    let dialogs = trellis::dataset::opendialkg::read(&data("dialogs_dev.csv")).unwrap();
    let replies: Vec<String> = dialogs
        .iter()
        .flat_map(|d| d.messages.iter())
        .filter(|m| m.text.split_whitespace().count() >= 4)
        .take(500)
        .map(|m| m.text.split_whitespace().take(8).collect::<Vec<_>>().join(" "))
        .collect();
    println!("| queries | search | p50 ms | p99 ms | mean ms | top hit is the named entity |");
    println!("|---|---|---|---|---|---|");
    for (what, qs, truth) in
        [("entity names", &names, Some(&names[..])), ("names, one letter dropped", &typos, Some(&names[..])), ("reply words (8)", &replies, None)]
    {
        for (mode, options) in [("fuzzy (default)", SearchOptions { fuzzy: true }), ("exact", SearchOptions { fuzzy: false })] {
            let (p50, p99, mean) = time(&index, qs, options);
            println!("| {what} ({}) | {mode} | {p50:.3} | {p99:.3} | {mean:.3} | {} |", qs.len(), found(&index, qs, truth, options));
        }
    }
}
