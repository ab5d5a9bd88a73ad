//! The store's vector index (`trellis index-vectors`, `crate::vectors`): every fact's and
//! entity name's vector written once, read by `--dense-paths facts` and PCST's dense prizes.
//! The file must be an accelerator only: answers are the same bytes with or without it, after
//! an update that renames an entity (whose stored vectors then describe an old text), and a
//! damaged file is an error naming it, never a wrong answer or a panic.

use crate::common::*;
use crate::encoders::{history_of, query, retrieve, sample};
use std::path::{Path, PathBuf};
use trellis::model::encoder::BiEncoder;
use trellis::model::RuntimeOptions;
use trellis::vectors::{StoredVectors, VectorKey, VectorsError};

fn model() -> PathBuf {
    fixture("encoders/bert-mean")
}

fn index_vectors(store: &Path) -> serde_json::Value {
    json_of(trellis().args(["index-vectors", "--json", "--store"]).arg(store).arg("--dense-model").arg(model()))
}

/// The vector file of the store's current generation.
fn vector_file(store: &Path) -> PathBuf {
    let s = trellis::Store::open_read_only(store).unwrap();
    let dir = s.generation_dir().join("vectors");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn dense_facts(store: &Path, input: &Path, out: &Path) -> Vec<serde_json::Value> {
    retrieve(store, input, out, &["--retriever", "dense", "--dense-model", model().to_str().unwrap(), "--dense-paths", "facts", "--top", "1000"])
}

fn pcst_dense(store: &Path, input: &Path, out: &Path) -> Vec<serde_json::Value> {
    retrieve(store, input, out, &["--retriever", "pcst", "--pcst-scores", "dense", "--dense-model", model().to_str().unwrap(), "--top", "1000"])
}

fn relation_words(r: &str) -> String {
    r.to_lowercase().chars().map(|c| if c == '_' || c == '-' { ' ' } else { c }).collect()
}

/// Every vector of the file is the encoder's vector of the text it names, bit for bit: the
/// entity's name, the fact's "head relation tail", computed here apart from the store's names.
#[test]
fn the_file_holds_the_encoder_s_vector_of_every_name_and_fact() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = sample(tmp.path());
    let report = index_vectors(&store);
    let s = trellis::Store::open_read_only(&store).unwrap();
    let entities = s.entity_count() as usize;
    assert_eq!(report["header"]["entities"].as_u64().unwrap() as usize, entities);
    assert_eq!(report["header"]["facts"].as_u64().unwrap(), s.meta().facts);
    assert_eq!(report["header"]["dims"], 32);
    let file = StoredVectors::open_file(&vector_file(&store)).unwrap();
    let encoder = BiEncoder::open(&model(), &RuntimeOptions::default(), 5).unwrap();
    let ids: Vec<trellis::EntityId> = (0..entities as u32).map(trellis::EntityId).collect();
    let names: Vec<String> = s.entity_names(&ids).unwrap().into_iter().map(Option::unwrap).collect();
    let mut checked = 0;
    for (e, name) in ids.iter().zip(&names).step_by(7) {
        let want = encoder.embed_documents(&[name.as_str()]).unwrap().pop().unwrap();
        assert_eq!(file.get(VectorKey::Entity(*e), name).unwrap().as_deref(), Some(want.as_slice()), "{name}");
        assert_eq!(file.get(VectorKey::Entity(*e), "another text").unwrap(), None, "a vector of another text is not used");
        checked += 1;
    }
    let relations: Vec<trellis::RelationId> = (0..s.relation_count() as u32).map(trellis::RelationId).collect();
    let relation_names: Vec<String> = s.relation_names(&relations).unwrap().into_iter().map(Option::unwrap).collect();
    for (e, name) in ids.iter().zip(&names).step_by(11) {
        let mut facts = Vec::new();
        s.for_each_neighbor(*e, Some(trellis::Direction::Out), None, |edge| {
            facts.push((edge.relation, edge.other));
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        for (r, o) in facts {
            let text = format!("{name} {} {}", relation_words(&relation_names[r.0 as usize]), names[o.0 as usize]);
            let want = encoder.embed_documents(&[text.as_str()]).unwrap().pop().unwrap();
            assert_eq!(file.get(VectorKey::Fact(*e, r, o), &text).unwrap().as_deref(), Some(want.as_slice()), "{text}");
            checked += 1;
        }
    }
    assert!(checked > 200, "{checked}");
    let (hits, misses) = file.lookups();
    assert_eq!(misses as usize, ids.iter().step_by(7).count());
    assert_eq!(hits as usize, checked);
}

/// `--dense-paths facts`: a path's score is the mean over its facts of the inner product of
/// the query's vector with the fact's, computed here apart; the answers are the same bytes
/// with the vector file and without it.
#[test]
fn fact_scores_are_the_mean_of_their_facts_and_the_file_changes_no_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    let before = dense_facts(&store, &input, &tmp.path().join("before.jsonl"));
    let facts_before = std::fs::read(tmp.path().join("before.jsonl")).unwrap();
    pcst_dense(&store, &input, &tmp.path().join("pcst-before.jsonl"));
    index_vectors(&store);
    dense_facts(&store, &input, &tmp.path().join("after.jsonl"));
    pcst_dense(&store, &input, &tmp.path().join("pcst-after.jsonl"));
    assert_eq!(facts_before, std::fs::read(tmp.path().join("after.jsonl")).unwrap(), "dense facts with and without the file");
    assert_eq!(std::fs::read(tmp.path().join("pcst-before.jsonl")).unwrap(), std::fs::read(tmp.path().join("pcst-after.jsonl")).unwrap(), "pcst dense");

    let encoder = BiEncoder::open(&model(), &RuntimeOptions::default(), 3).unwrap();
    let mut scored = 0;
    let mut multi = 0;
    for answer in &before {
        let history = history_of(&input, answer["id"].as_str().unwrap());
        let h: Vec<&str> = history.iter().map(String::as_str).collect();
        let q = encoder.embed(&[query(&h, 3).as_str()]).unwrap().pop().unwrap();
        let mut last = f64::INFINITY;
        for p in answer["paths"].as_array().unwrap() {
            let triples = p["triples"].as_array().unwrap();
            let texts: Vec<String> = triples
                .iter()
                .map(|t| format!("{} {} {}", t["head"].as_str().unwrap(), relation_words(t["relation"].as_str().unwrap()), t["tail"].as_str().unwrap()))
                .collect();
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = encoder.embed_documents(&refs).unwrap();
            let want = vectors.iter().map(|v| q.iter().zip(v).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>()).sum::<f64>() / texts.len() as f64;
            let got = p["score"].as_f64().unwrap();
            assert!((got - want).abs() <= 1e-6, "{}: {texts:?}: {got} against {want}", answer["id"]);
            assert!(got <= last + 1e-12, "best first");
            last = got;
            scored += 1;
            multi += usize::from(texts.len() > 1);
        }
    }
    assert!(scored > 100 && multi > 10, "{scored} paths, {multi} of two facts");
}

/// FNV-1a 64 continued from `h` over `bytes` (schema/v4.md's record hash, written here apart).
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// The file is read: fact vectors rewritten as zeros with the hash a writer would give them
/// make every path of stored facts score 0; zeros under the old hash (damaged floats) are
/// not used: the answers stay those of the encoder.
#[test]
fn the_retriever_reads_the_stored_vectors_and_skips_damaged_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    index_vectors(&store);
    let before = dense_facts(&store, &input, &tmp.path().join("a.jsonl"));
    let path = vector_file(&store);
    let file = StoredVectors::open_file(&path).unwrap();
    let header = *file.header();
    drop(file);
    let good = std::fs::read(&path).unwrap();
    let record = 8 + 4 * header.dims as usize;
    let facts = header.entities as usize..(header.entities + header.facts) as usize;

    // Damaged: every fact record's floats zeroed, its hash kept.
    let mut damaged = good.clone();
    for i in facts.clone() {
        let at = 64 + i * record + 8;
        damaged[at..at + record - 8].fill(0);
    }
    std::fs::write(&path, &damaged).unwrap();
    dense_facts(&store, &input, &tmp.path().join("damaged.jsonl"));
    assert_eq!(std::fs::read(tmp.path().join("a.jsonl")).unwrap(), std::fs::read(tmp.path().join("damaged.jsonl")).unwrap());
    let out = trellis().arg("validate").arg("--store").arg(&store).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains(&format!("{} match the store's texts now ({} recomputed", header.entities, header.facts)), "{said}");

    // Rewritten: zeros with the hash of (text, zeros), the text from the store's names.
    let s = trellis::Store::open_read_only(&store).unwrap();
    let ids: Vec<trellis::EntityId> = (0..s.entity_count() as u32).map(trellis::EntityId).collect();
    let names: Vec<String> = s.entity_names(&ids).unwrap().into_iter().map(Option::unwrap).collect();
    let relations: Vec<trellis::RelationId> = (0..s.relation_count() as u32).map(trellis::RelationId).collect();
    let relation_names: Vec<String> = s.relation_names(&relations).unwrap().into_iter().map(Option::unwrap).collect();
    drop(s);
    let keys_at = good.len() - header.facts as usize * 12;
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap()) as usize;
    for (n, i) in facts.enumerate() {
        let k = &good[keys_at + n * 12..keys_at + n * 12 + 12];
        let text = format!("{} {} {}", names[be(&k[..4])], relation_words(&relation_names[be(&k[4..8])]), names[be(&k[8..])]);
        let zeros = vec![0u8; record - 8];
        let at = 64 + i * record;
        damaged[at..at + 8].copy_from_slice(&fnv(fnv(FNV_START, text.as_bytes()), &zeros).to_be_bytes());
    }
    std::fs::write(&path, &damaged).unwrap();
    let after = dense_facts(&store, &input, &tmp.path().join("b.jsonl"));
    let mut zeroed = 0;
    for (a, b) in before.iter().zip(&after) {
        for p in b["paths"].as_array().unwrap() {
            assert_eq!(p["score"].as_f64().unwrap(), 0.0, "{p}");
            zeroed += 1;
        }
        assert_eq!(a["paths"].as_array().unwrap().len(), b["paths"].as_array().unwrap().len());
    }
    assert!(zeroed > 100);
}

/// A renamed entity's (Dallas, a neighbour of a linked one) facts have stored vectors of the old text: they are embedded again at
/// query time, so after the update the answers equal those of a store without the file.
#[test]
fn after_a_rename_the_answers_equal_those_without_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    index_vectors(&store);
    stdout_of(trellis().args(["update", "--store"]).arg(&store).args(["--rename", "Dallas", "Dallas, Texas"]));
    let carried = vector_file(&store);
    assert!(carried.to_string_lossy().contains("gen-000002"), "{}", carried.display());
    let with = dense_facts(&store, &input, &tmp.path().join("with.jsonl"));
    assert!(with[0]["paths"].to_string().contains("Dallas, Texas"), "{}", with[0]);
    // validate counts the renamed entity's name and facts as no longer matching.
    let said = stdout_of(trellis().arg("validate").arg("--store").arg(&store));
    let stale: u64 = said.split(" recomputed").next().unwrap().rsplit('(').next().unwrap().trim().parse().unwrap();
    assert!(stale >= 2, "{said}");
    std::fs::remove_file(&carried).unwrap();
    dense_facts(&store, &input, &tmp.path().join("without.jsonl"));
    assert_eq!(std::fs::read(tmp.path().join("with.jsonl")).unwrap(), std::fs::read(tmp.path().join("without.jsonl")).unwrap());
    stdout_of(trellis().arg("validate").arg("--store").arg(&store));
}

/// A damaged file stops retrieval with an error naming it; a rebuild mends it.
#[test]
fn a_damaged_file_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    index_vectors(&store);
    stdout_of(trellis().arg("validate").arg("--store").arg(&store));
    let path = vector_file(&store);
    let good = std::fs::read(&path).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() - 5].to_vec(), "but its header says"),
        (good[..10].to_vec(), "shorter than its 64-byte header"),
        ([b"NOTVEC\0\0".as_slice(), &good[8..]].concat(), "no vector-file magic"),
        (
            {
                let mut b = good.clone();
                b[8..12].copy_from_slice(&9u32.to_be_bytes());
                b
            },
            "vector file format 9, this build reads format 2",
        ),
        (
            {
                let mut b = good.clone();
                b[12..16].copy_from_slice(&0u32.to_be_bytes());
                b
            },
            "0 floats a vector",
        ),
        (
            {
                // Another model's file under this one's name.
                let mut b = good.clone();
                b[32] ^= 0xff;
                b
            },
            "written for model",
        ),
        (
            {
                // The last two fact keys swapped.
                let mut b = good.clone();
                let n = b.len();
                let (x, y) = (b[n - 24..n - 12].to_vec(), b[n - 12..].to_vec());
                b[n - 24..n - 12].copy_from_slice(&y);
                b[n - 12..].copy_from_slice(&x);
                b
            },
            "fact keys out of order",
        ),
    ];
    for (bytes, want) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let out = trellis()
            .args(["retrieve", "--retriever", "dense", "--dense-paths", "facts", "--dense-model"])
            .arg(model())
            .arg("--store")
            .arg(&store)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(tmp.path().join("out.jsonl"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{want}: {err}");
        assert!(err.contains(&path.display().to_string()) && err.contains(want) && err.contains("trellis index-vectors"), "{want}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        // Whole path texts read no stored vectors: the damaged file does not fail them.
        let text = trellis()
            .args(["retrieve", "--retriever", "dense", "--dense-model"])
            .arg(model())
            .arg("--store")
            .arg(&store)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(tmp.path().join("text.jsonl"))
            .output()
            .unwrap();
        assert!(text.status.success(), "{want}: {}", String::from_utf8_lossy(&text.stderr));
        // validate names the file too (a bad model only where the header's id is not the name's).
        let v = trellis().arg("validate").arg("--store").arg(&store).output().unwrap();
        let said = String::from_utf8_lossy(&v.stdout);
        assert_eq!(v.status.code(), Some(1), "{want}: {said}");
        assert!(said.contains("INVALID: 1 problem(s)") && said.contains(&path.display().to_string()), "{want}: {said}");
    }
    index_vectors(&store);
    assert_eq!(std::fs::read(&path).unwrap(), good, "a rebuild writes the same bytes");
}

#[test]
fn a_cancelled_build_leaves_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = sample(tmp.path());
    let monitor = trellis::Monitor::new();
    monitor.cancel();
    let opts = trellis::vectors::VectorOptions::new(model());
    assert!(matches!(trellis::vectors::index_vectors(&store, &opts, &monitor), Err(VectorsError::Cancelled)));
    let s = trellis::Store::open_read_only(&store).unwrap();
    let dir = s.generation_dir().join("vectors");
    let left: Vec<_> = std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    stdout_of(trellis().arg("validate").arg("--store").arg(&store));
}

#[test]
fn index_vectors_takes_its_settings_from_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = sample(tmp.path());
    let out = trellis().args(["index-vectors", "--store"]).arg(&store).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the vector index needs `dense_model`"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = trellis().args(["index-vectors", "--encoder-batch", "0", "--dense-model"]).arg(model()).arg("--store").arg(&store).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("encoder_batch must be within"), "{}", String::from_utf8_lossy(&out.stderr));
    // A batch of 3 writes the same bytes as the default 32: a vector does not depend on its batch.
    index_vectors(&store);
    let path = vector_file(&store);
    let default = std::fs::read(&path).unwrap();
    stdout_of(trellis().args(["index-vectors", "--encoder-batch", "3", "--dense-model"]).arg(model()).arg("--store").arg(&store));
    assert_eq!(std::fs::read(&path).unwrap(), default);
}

/// A file is refused for a query of another width (a dot product would drop floats), and a
/// model's identity names its device: vectors written on CUDA are never read on the CPU.
#[test]
fn another_width_or_device_is_not_taken_for_the_model_s() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = sample(tmp.path());
    index_vectors(&store);
    let path = vector_file(&store);
    let file = StoredVectors::open_file(&path).unwrap();
    assert!(file.check_width(32).is_ok());
    let err = file.check_width(31).unwrap_err();
    assert!(matches!(err, VectorsError::Width { file: 32, model: 31, .. }), "{err}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    let dir = trellis::model::encoder::EncoderDir::open(&model(), None).unwrap();
    use trellis::model::session::Device;
    let cpu = trellis::vectors::model_id(&dir, Device::Cpu).unwrap();
    assert_eq!(path.file_stem().unwrap().to_str().unwrap(), format!("{cpu:016x}"), "the file is named by the CPU identity");
    assert_ne!(cpu, trellis::vectors::model_id(&dir, Device::Cuda(0)).unwrap());
}
