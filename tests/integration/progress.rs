//! One progress-and-cancel shape (`trellis::Monitor`) on every kind of long work: a load
//! reports each input in bytes then its commit, token indexing each side in names, batch
//! retrieval, batch replies and evaluations in turns; each stops with its family's
//! `Cancelled` error once cancelled, a cancelled load or index leaving the store as it was;
//! the batch calls answer exactly what the one-at-a-time calls answer.

use crate::common::*;
use crate::gsr::sample_store;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use trellis::dataset::opendialkg;
use trellis::generate::Generator;
use trellis::ingest::{Format, NameTokenizer};
use trellis::linearize::Linearization;
use trellis::link::Message;
use trellis::model::RuntimeOptions;
use trellis::pipeline::{Pipeline, PipelineError, PipelineRequest};
use trellis::progress::{Unit, Work};
use trellis::retrieve::gsr::GsrOptions;
use trellis::retrieve::{RetrieveError, Retriever, RetrieverConfig, RetrieverKind, ScoredPath};
use trellis::{BulkLoader, IngestError, InputSpec, Monitor, Progress, Store};

/// A monitor that keeps every report.
fn recorder() -> (Monitor, Arc<Mutex<Vec<Progress>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    (Monitor::with_callback(move |p| sink.lock().unwrap().push(p.clone())), seen)
}

/// A monitor that cancels itself at its first report (from inside the work, the latest a
/// host's cancel can come before the work's next check).
fn cancel_at_first_report() -> Monitor {
    let slot: Arc<Mutex<Option<Monitor>>> = Arc::default();
    let inner = slot.clone();
    let m = Monitor::with_callback(move |_| {
        if let Some(m) = inner.lock().unwrap().as_ref() {
            m.cancel();
        }
    });
    *slot.lock().unwrap() = Some(m.clone());
    m
}

/// The store's statistics but its size on disk (opening a generation to write rewrites
/// RocksDB's options file in it: bytes, not data).
fn contents(store: &std::path::Path) -> serde_json::Value {
    let mut s = stats(store);
    s.as_object_mut().unwrap().remove("size_on_disk_bytes");
    s
}

fn spec(path: PathBuf) -> InputSpec {
    InputSpec { path, format: Some(Format::Tsv), compression: None }
}

#[test]
fn a_load_reports_each_input_in_bytes_then_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\n");
    let b = write(dir.path(), "b.tsv", b"Bravo\tt\tDelta\n");
    let (m, seen) = recorder();
    let report = BulkLoader::new(dir.path().join("s")).with_monitor(m).load(&[spec(a.clone()), spec(b.clone())]).unwrap();
    let seen = seen.lock().unwrap();
    // Two inputs, both adjacency directions (reported every 2^20 facts: none here), the commit.
    assert!(seen.iter().all(|p| p.work == Work::Load && p.steps == 5), "{seen:?}");
    let last_of = |step| seen.iter().rfind(|p| p.step == step).unwrap().clone();
    let (ra, rb) = (last_of(1), last_of(2));
    assert_eq!((ra.stage, ra.unit, ra.done, ra.total, ra.facts), (format!("read {}", a.display()), Unit::Bytes, 30, Some(30), Some(2)));
    assert_eq!((rb.stage, rb.done, rb.total, rb.facts), (format!("read {}", b.display()), 14, Some(14), Some(3)));
    assert_eq!(report.facts_read, 3);
    let last = seen.last().unwrap();
    assert_eq!((last.step, last.stage.as_str()), (5, "commit"));
    assert!(seen.windows(2).all(|w| w[0].step <= w[1].step), "steps in order");
}

#[test]
fn a_cancelled_load_leaves_the_store_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let before = contents(&s);
    let more = write(dir.path(), "more.tsv", b"Alpha\tr\tBravo\nBravo\tt\tDelta\n");
    let err = BulkLoader::new(&s).with_monitor(cancel_at_first_report()).load(&[spec(more.clone())]).unwrap_err();
    assert!(matches!(err, IngestError::Cancelled), "{err}");
    assert!(trellis::Error::from(err).is_cancelled());
    assert_valid(&s);
    assert_eq!(contents(&s), before);
    // Cancelled before it starts: the same.
    let m = Monitor::new();
    m.cancel();
    assert!(matches!(BulkLoader::new(&s).with_monitor(m).load(&[spec(more.clone())]), Err(IngestError::Cancelled)));
    assert_eq!(contents(&s), before);
    // The load goes through with a fresh monitor.
    BulkLoader::new(&s).with_monitor(Monitor::new()).load(&[spec(more)]).unwrap();
    assert_ne!(contents(&s)["facts"], before["facts"]);
}

fn tokenizer() -> NameTokenizer {
    NameTokenizer::from_file(&fixture("gsr/tiny-split/tokenizer.json"), Linearization::dialoggsr()).unwrap()
}

#[test]
fn token_indexing_reports_both_sides_and_a_cancelled_one_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("kg");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let before = contents(&s);
    let err = Store::index_tokens(&s, &tokenizer(), "t", &cancel_at_first_report()).unwrap_err();
    assert!(matches!(err, IngestError::Cancelled), "{err}");
    assert_valid(&s);
    assert_eq!(contents(&s), before);
    assert!(Store::open_read_only(&s).unwrap().tokenizers().unwrap().is_empty(), "no index committed");

    let (m, seen) = recorder();
    let info = Store::index_tokens(&s, &tokenizer(), "t", &m).unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.iter().all(|p| p.work == Work::IndexTokens && p.steps == 2 && p.unit == Unit::Names));
    let last_of = |step| seen.iter().rfind(|p| p.step == step).unwrap().clone();
    let (e, r) = (last_of(1), last_of(2));
    assert_eq!((e.stage.as_str(), e.done, e.total), ("entity names", info.entities, Some(info.entities)));
    assert_eq!((r.stage.as_str(), r.done, r.total), ("relation names", info.relations, Some(info.relations)));
    assert_eq!(Store::open_read_only(&s).unwrap().tokenizers().unwrap().len(), 1);
}

/// The retriever goldens' dialogs (they mention entities of the sample KG), twice over, so
/// that a batch of the generative retriever holds several.
fn histories() -> Vec<Vec<Message>> {
    let one = crate::pipeline::dialogs();
    one.iter().chain(one.iter()).cloned().collect()
}

fn gsr_kind() -> RetrieverKind {
    let mut o = GsrOptions::new(fixture("gsr/tiny-split"));
    o.runtime.threads = 1;
    o.batch = 3;
    RetrieverKind::Gsr(o)
}

fn same(a: &[ScoredPath], b: &[ScoredPath]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.hops == y.hops && x.score.to_bits() == y.score.to_bits() && x.explanation == y.explanation)
}

#[test]
fn retrieve_many_answers_what_retrieve_answers_alone_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let histories = histories();
    let refs: Vec<&[Message]> = histories.iter().map(Vec::as_slice).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    for kind in [RetrieverKind::Bm25, RetrieverKind::Pcst, gsr_kind()] {
        let r = Retriever::new(store.clone(), RetrieverConfig::new(kind.clone())).unwrap();
        let (m, seen) = recorder();
        let many = pool.install(|| r.retrieve_many(&refs, &m)).unwrap();
        assert_eq!(many.len(), refs.len());
        for (h, got) in refs.iter().zip(&many) {
            assert!(same(got, &r.retrieve(h).unwrap()), "{}: a batch answer differs from the answer alone", kind.name());
        }
        assert!(many.iter().any(|p| !p.is_empty()), "{}: something retrieved", kind.name());
        // One report per batch, from whichever thread finished it: the counts are the
        // running totals, the largest is all.
        let seen = seen.lock().unwrap();
        let batches = refs.len().div_ceil(r.batch_size());
        assert_eq!(seen.len(), batches, "{}", kind.name());
        let mut done: Vec<u64> = seen.iter().map(|p| p.done).collect();
        done.sort_unstable();
        assert_eq!(done.last().copied(), Some(refs.len() as u64));
        assert!(seen.iter().all(|p| p.work == Work::Retrieve && p.unit == Unit::Turns && p.total == Some(refs.len() as u64)));
        // Cancelled: no answers, the family's error.
        let err = r.retrieve_many(&refs, &cancel_at_first_report()).unwrap_err();
        assert!(matches!(err, RetrieveError::Cancelled), "{err}");
    }
}

#[test]
fn respond_many_answers_what_respond_answers_alone_and_stops_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let retriever = Retriever::new(store, RetrieverConfig::new(gsr_kind())).unwrap();
    let generator = Generator::open(&fixture("generate/tiny-merged"), &RuntimeOptions::default()).unwrap();
    let pipeline = Pipeline::new(retriever, generator, None).unwrap();
    let histories = histories();
    let requests: Vec<PipelineRequest<'_>> = histories.iter().map(|h| PipelineRequest::new(h)).collect();
    let (m, seen) = recorder();
    let many = pipeline.respond_many(&requests, &m).unwrap();
    assert_eq!(many.len(), requests.len());
    for (req, got) in requests.iter().zip(&many) {
        let alone = pipeline.respond(req).unwrap();
        assert_eq!((got.text(), &got.knowledge), (alone.text(), &alone.knowledge));
    }
    assert_eq!(seen.lock().unwrap().iter().map(|p| p.done).max(), Some(requests.len() as u64));
    let m = Monitor::new();
    m.cancel();
    assert!(matches!(pipeline.respond_many(&requests, &m), Err(PipelineError::Cancelled)));
}

#[test]
fn a_retrieval_evaluation_reports_turns_and_stops_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    ingest(&s, &[], &[&write(dir.path(), "g.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\nBravo\tt\tDelta\n")]);
    // Three dialogs of one turn each: a user message naming an entity, then an assistant
    // action walking one of its facts.
    let dialog = |name: &str, fact: &str| {
        let m = format!(
            r#"[{{"type": "chat", "sender": "user", "message": "Tell me about {name}"}}, {{"type": "action", "sender": "assistant", "metadata": {{"path": [1, [{fact}], "x"]}}}}]"#
        );
        format!("\"{}\",5,5\n", m.replace('"', "\"\""))
    };
    let csv = format!(
        "Messages,User Rating,Assistant Rating\n{}{}{}",
        dialog("Alpha", r#"["Alpha", "r", "Bravo"]"#),
        dialog("Bravo", r#"["Bravo", "t", "Delta"]"#),
        dialog("Alpha", r#"["Alpha", "s", "Charlie"]"#)
    );
    let dialogs = opendialkg::read(&write(dir.path(), "d.csv", csv.as_bytes())).unwrap();
    let store = Arc::new(Store::open_read_only(&s).unwrap());
    let r = Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::Bm25)).unwrap();
    let (m, seen) = recorder();
    let report = trellis::eval::retrieval::evaluate(&store, &r, &dialogs, &[1], &m).unwrap();
    assert_eq!(report.turns, 3);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len() as u64, report.turns, "bm25 ranks one turn a batch");
    assert_eq!(seen.last().map(|p| (p.done, p.total, p.work)), Some((report.turns, Some(report.turns), Work::Evaluate)));
    let err = trellis::eval::retrieval::evaluate(&store, &r, &dialogs, &[1], &cancel_at_first_report()).unwrap_err();
    assert!(matches!(err, RetrieveError::Cancelled), "{err}");
}

/// A cancel at any moment of a load, from the library: at the commit step's report (the
/// last moment before the commit point) the load stops and the store is as it was; after the
/// load, the same monitor is refused nothing (it stops the next piece of work), and says a
/// commit happened under it.
#[test]
fn a_cancel_at_the_commit_step_stops_the_load_and_the_monitor_serves_the_next_work() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    let first = write(dir.path(), "a.tsv", b"Alpha\tr\tBravo\n");
    let more = write(dir.path(), "b.tsv", b"Bravo\tt\tDelta\nCharlie\tu\tEcho\n");
    BulkLoader::new(&store).load(&[spec(first)]).unwrap();
    let before = contents(&store);
    for stage in ["commit", "facts"] {
        // Cancels itself at the first report of `stage` (the commit step's is `commit`).
        let slot: Arc<Mutex<Option<Monitor>>> = Arc::default();
        let inner = slot.clone();
        let m = Monitor::with_callback(move |p| {
            if p.stage == stage || (stage == "facts" && p.unit == Unit::Facts) {
                if let Some(m) = inner.lock().unwrap().as_ref() {
                    assert!(m.cancel(), "before the commit point a cancel takes effect");
                }
            }
        });
        *slot.lock().unwrap() = Some(m.clone());
        let e = BulkLoader::new(&store).with_monitor(m.clone()).load(&[spec(more.clone())]).unwrap_err();
        assert!(matches!(e, IngestError::Cancelled), "{stage}: {e:?}");
        assert!(!m.committed());
        assert_eq!(contents(&store), before, "{stage}: the store is as it was");
    }
    // A load that commits, then the same monitor cancels the next work.
    let m = Monitor::new();
    BulkLoader::new(&store).with_monitor(m.clone()).load(&[spec(more.clone())]).unwrap();
    assert!(m.committed());
    assert!(m.cancel(), "after the commit the monitor stops the next piece of work");
    let e = BulkLoader::new(&store).with_monitor(m).load(&[spec(more)]).unwrap_err();
    assert!(matches!(e, IngestError::Cancelled), "{e:?}");
    assert_valid(&store);
}
