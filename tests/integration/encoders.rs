//! Encoder models (bi-encoders and a cross-encoder) against the reference packages:
//! tests/fixtures/encoders holds tiny random BERT and T5 encoders exported as a user would
//! (optimum; tools/reference/encoder_fixtures.py) and `goldens.json`, what
//! sentence-transformers' `encode` and transformers' logits give for them. Trellis must
//! reproduce them from the exported files, reading sentence-transformers' own files where
//! trellis.json says nothing; rows must not depend on their batch; bad directories are
//! errors naming the file; `trellis doctor` checks them.

use crate::common::*;
use std::path::{Path, PathBuf};
use trellis::model::encoder::{BiEncoder, CrossEncoder, EncoderDir, EncoderError, EncoderTask};
use trellis::model::RuntimeOptions;

fn goldens() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("encoders/goldens.json")).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
}

const TOLERANCE: f32 = 1e-5;

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst <= TOLERANCE, "{what}: off by {worst} (got {got:?}, want {want:?})");
}

/// Copies a fixture model directory (1_Pooling included) to a temporary one.
fn copy_model(name: &str, to: &Path) -> PathBuf {
    let dst = to.join(name);
    let src = fixture(&format!("encoders/{name}"));
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap();
        std::fs::create_dir_all(dst.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&entry, dst.join(rel)).unwrap();
    }
    dst
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn check_bi_encoder(dir: &Path, name: &str, batch: usize) {
    let g = goldens();
    let texts = strings(&g["texts"]);
    let want = &g["bi_encoders"][name];
    let m = BiEncoder::open(dir, &RuntimeOptions::default(), batch).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(m.dir().pooling().name(), want["pooling"].as_str().unwrap(), "{name}: pooling");
    assert_eq!(m.dir().normalize(), want["normalize"].as_bool().unwrap(), "{name}: normalize");
    assert_eq!(m.dir().max_length() as u64, want["max_length"].as_u64().unwrap(), "{name}: max_length");
    for (i, t) in texts.iter().enumerate() {
        let enc = m.dir().token_ids(t).unwrap();
        assert_eq!(enc, ids(&want["input_ids"][i]), "{name}: token ids of {t:?}");
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let got = m.embed(&refs).unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_close(v, &floats(&want["embeddings"][i]), &format!("{name}: text {i} {:?}", texts[i]));
    }
}

#[test]
fn bi_encoders_match_sentence_transformers() {
    for name in ["bert-mean", "bert-cls", "t5-mean"] {
        check_bi_encoder(&fixture(&format!("encoders/{name}")), name, 4);
    }
}

#[test]
fn cross_encoder_matches_transformers() {
    let g = goldens();
    let c = &g["cross"];
    let pairs: Vec<(String, String)> =
        c["pairs"].as_array().unwrap().iter().map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_str().unwrap().to_owned())).collect();
    let m = CrossEncoder::open(&fixture("encoders/cross"), &RuntimeOptions::default(), 3).unwrap();
    assert_eq!(m.dir().task(), EncoderTask::Rerank);
    assert_eq!(m.dir().max_length(), 32);
    for (i, (q, p)) in pairs.iter().enumerate() {
        let (token_ids, type_ids) = m.dir().pair_ids(q, p).unwrap();
        assert_eq!(token_ids, ids(&c["input_ids"][i]), "token ids of pair {i}");
        assert_eq!(type_ids, ids(&c["token_type_ids"][i]), "type ids of pair {i}");
    }
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(q, p)| (q.as_str(), p.as_str())).collect();
    assert_close(&m.score(&refs).unwrap(), &floats(&c["logits"]), "cross-encoder logits");
}

/// A user's sentence-transformers export with a trellis.json that names only the task:
/// pooling from 1_Pooling/config.json, normalization from modules.json, the length from
/// tokenizer_config.json (sentence-transformers 5's files); and the older files (boolean
/// pooling modes, sentence_bert_config.json's max_seq_length) read the same way.
#[test]
fn sentence_transformers_files_say_what_trellis_json_leaves_out() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["bert-mean", "bert-cls"] {
        let dir = copy_model(name, tmp.path());
        std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense"}"#).unwrap();
        check_bi_encoder(&dir, name, 5);
    }
    // Older sentence-transformers: one boolean per pooling mode, max_seq_length apart.
    let dir = tmp.path().join("bert-cls");
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 32, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false}"#,
    )
    .unwrap();
    std::fs::write(dir.join("tokenizer_config.json"), r#"{"model_max_length": 1000000000000000019884624838656}"#).unwrap();
    std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 24, "do_lower_case": false}"#).unwrap();
    check_bi_encoder(&dir, "bert-cls", 2);
    // Two modes at once is not a pooling Trellis can reproduce: refused, naming the file.
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#).unwrap();
    let e = BiEncoder::open(&dir, &RuntimeOptions::default(), 2).unwrap_err().to_string();
    assert!(e.contains("1_Pooling/config.json") && e.contains("pooling_mode"), "{e}");
}

/// An input's vector is the same whatever else is in its batch and whatever the batch size:
/// the cached vectors of dense retrieval equal fresh ones.
#[test]
fn vectors_do_not_depend_on_the_batch() {
    let g = goldens();
    let texts = strings(&g["texts"]);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for name in ["bert-mean", "t5-mean"] {
        let dir = fixture(&format!("encoders/{name}"));
        let all = BiEncoder::open(&dir, &RuntimeOptions::default(), 32).unwrap().embed(&refs).unwrap();
        let one = BiEncoder::open(&dir, &RuntimeOptions::default(), 1).unwrap();
        for (i, t) in refs.iter().enumerate() {
            assert_eq!(one.embed(&[t]).unwrap()[0], all[i], "{name}: {t:?} alone and in a batch of {}", refs.len());
        }
        let mut reversed = refs.clone();
        reversed.reverse();
        let back = BiEncoder::open(&dir, &RuntimeOptions::default(), 3).unwrap().embed(&reversed).unwrap();
        for (i, v) in back.iter().rev().enumerate() {
            assert_eq!(v, &all[i], "{name}: text {i} in another order and batch size");
        }
    }
}

#[test]
fn bad_encoder_directories_are_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = RuntimeOptions::default();
    // The wrong task for the job.
    let e = BiEncoder::open(&fixture("encoders/cross"), &opts, 1).unwrap_err().to_string();
    assert!(e.contains("trellis.json") && e.contains("rerank") && e.contains("bi-encoder"), "{e}");
    let e = CrossEncoder::open(&fixture("encoders/bert-mean"), &opts, 1).unwrap_err().to_string();
    assert!(e.contains("trellis.json") && e.contains("cross-encoder"), "{e}");
    // No pooling anywhere.
    let dir = copy_model("t5-mean", tmp.path());
    std::fs::remove_dir_all(dir.join("1_Pooling")).unwrap();
    std::fs::remove_file(dir.join("modules.json")).unwrap();
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense"}"#).unwrap();
    let e = BiEncoder::open(&dir, &opts, 1).unwrap_err();
    assert!(matches!(e, EncoderError::Dir(_)), "{e:?}");
    assert!(e.to_string().contains("`dense.pooling`: missing"), "{e}");
    // A length past the model's positions (BERT's 64 here), an unknown field, a missing graph.
    let dir = copy_model("bert-mean", tmp.path());
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense", "dense": {"max_length": 65}}"#).unwrap();
    let e = BiEncoder::open(&dir, &opts, 1).unwrap_err().to_string();
    assert!(e.contains("dense.max_length") && e.contains("65"), "{e}");
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense", "dense": {"polling": "mean"}}"#).unwrap();
    let e = BiEncoder::open(&dir, &opts, 1).unwrap_err().to_string();
    assert!(e.contains("trellis.json") && e.contains("polling"), "{e}");
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense", "rerank": {}}"#).unwrap();
    let e = BiEncoder::open(&dir, &opts, 1).unwrap_err().to_string();
    assert!(e.contains("`rerank`"), "{e}");
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense"}"#).unwrap();
    std::fs::remove_file(dir.join("model.onnx")).unwrap();
    let e = BiEncoder::open(&dir, &opts, 1).unwrap_err().to_string();
    assert!(e.contains("model.onnx") && e.contains("missing"), "{e}");
    // A graph that is not ONNX.
    std::fs::write(dir.join("model.onnx"), b"not a graph").unwrap();
    let e = BiEncoder::open(&dir, &opts, 1).unwrap_err().to_string();
    assert!(e.contains("model.onnx"), "{e}");
    // A T5 generator is not an encoder.
    let e = EncoderDir::open(&fixture("gsr/tiny-split"), None).unwrap_err().to_string();
    assert!(e.contains("trellis.json"), "{e}");
}

#[test]
fn doctor_checks_encoder_models() {
    for (name, task) in [("bert-mean", "dense"), ("t5-mean", "dense"), ("cross", "rerank")] {
        let report = json_of(trellis().args(["doctor", "--json", "--model"]).arg(fixture(&format!("encoders/{name}"))));
        assert_eq!(report["ok"], true, "{name}: {report}");
        assert_eq!(report["encoder"]["task"], task, "{name}");
        if task == "dense" {
            assert_eq!(report["encoder"]["dimension"], 32, "{name}");
        }
    }
    let text = stdout_of(trellis().args(["doctor", "--model"]).arg(fixture("encoders/bert-cls")));
    assert!(text.contains("encoder: dense, pooling cls") && text.ends_with("ok\n"), "{text}");
    // A broken one: exit 65 with the problem.
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("cross", tmp.path());
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "rerank", "rerank": {"max_length": 1}}"#).unwrap();
    let out = trellis().args(["doctor", "--model"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(65));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("problem:") && text.contains("rerank.max_length"), "{text}");
}

/// The sample store and a few requests about its entities.
pub(crate) fn sample(dir: &Path) -> (PathBuf, PathBuf) {
    let s = dir.join("kg");
    ingest(&s, &[], &[&fixture("opendialkg-sample.tsv")]);
    let requests = [
        r#"{"id": "a", "history": ["Do you know anything about Jordan Spieth?"]}"#,
        r#"{"id": "b", "history": ["I love Neil Gaiman's books.", "Which one did you like best?", "Probably the one about children."]}"#,
        r#"{"id": "c", "history": ["Will Smith was great in that movie."]}"#,
        r#"{"id": "d", "history": ["Have you seen anything with Meryl Streep or Robert De Niro?"]}"#,
        r#"{"id": "e", "history": ["nothing to link here"]}"#,
    ];
    let input = write(dir, "req.jsonl", (requests.join("\n") + "\n").as_bytes());
    (s, input)
}

pub(crate) fn retrieve(store: &Path, input: &Path, out: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = trellis();
    cmd.arg("retrieve").arg("--store").arg(store).arg("--input").arg(input).arg("--output").arg(out).args(args);
    stdout_of(&mut cmd);
    std::fs::read_to_string(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A path of the output as its facts' "head relation tail" texts (the engine's
/// verbalization) and as a comparable key.
pub(crate) fn path_text(p: &serde_json::Value) -> String {
    p["triples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let rel: String = t["relation"].as_str().unwrap().to_lowercase().chars().map(|c| if c == '_' || c == '-' { ' ' } else { c }).collect();
            format!("{} {rel} {}", t["head"].as_str().unwrap(), t["tail"].as_str().unwrap())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn query(history: &[&str], turns: usize) -> String {
    history[history.len().saturating_sub(turns)..].iter().rev().copied().collect::<Vec<_>>().join(" | ")
}

pub(crate) fn history_of(input: &Path, id: &str) -> Vec<String> {
    let line = std::fs::read_to_string(input).unwrap().lines().find(|l| l.contains(&format!("\"id\": \"{id}\""))).unwrap().to_owned();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    v["history"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_owned()).collect()
}

/// `--retriever dense`: every candidate path (`--retriever all`), each scored by the inner
/// product of the bi-encoder's vectors of the query and of the path's text, computed here
/// apart with the library's encoder; best first, ties in candidate order.
#[test]
fn dense_retrieval_ranks_every_candidate_by_inner_product() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    let model = fixture("encoders/t5-mean");
    let dense = retrieve(&store, &input, &tmp.path().join("d.jsonl"), &["--retriever", "dense", "--dense-model", model.to_str().unwrap(), "--top", "1000"]);
    let all = retrieve(&store, &input, &tmp.path().join("a.jsonl"), &["--retriever", "all", "--top", "1000"]);
    let encoder = BiEncoder::open(&model, &RuntimeOptions::default(), 7).unwrap();
    let mut scored = 0;
    for (d, a) in dense.iter().zip(&all) {
        let history = history_of(&input, d["id"].as_str().unwrap());
        let h: Vec<&str> = history.iter().map(String::as_str).collect();
        let q = encoder.embed(&[query(&h, 3).as_str()]).unwrap().pop().unwrap();
        let candidates: Vec<String> = a["paths"].as_array().unwrap().iter().map(path_text).collect();
        let texts: Vec<&str> = candidates.iter().map(String::as_str).collect();
        let vectors = if texts.is_empty() { Vec::new() } else { encoder.embed(&texts).unwrap() };
        let mut want: Vec<(String, f64)> =
            candidates.iter().zip(&vectors).map(|(t, v)| (t.clone(), q.iter().zip(v).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum())).collect();
        want.sort_by(|x, y| y.1.total_cmp(&x.1));
        let got: Vec<(String, f64)> = d["paths"].as_array().unwrap().iter().map(|p| (path_text(p), p["score"].as_f64().unwrap())).collect();
        assert_eq!(got.len(), want.len(), "every candidate, once");
        for ((gt, gs), (wt, ws)) in got.iter().zip(&want) {
            assert!((gs - ws).abs() < 1e-9, "{gt}: {gs} vs {ws}");
            // Equal scores may come in either order only when the texts tie.
            assert!(gt == wt || (gs - ws).abs() < 1e-12, "{gt} vs {wt}");
        }
        scored += got.len();
    }
    assert!(scored > 20, "the requests must reach candidates ({scored})");
}

/// `--rerank`: the union of the pooled retrievers' top N (each path once), ordered by the
/// cross-encoder's logit of (query, path text) computed here apart, plus (by default) the
/// sum of 1/rank over the lists that hold the path, taken from those retrievers run apart;
/// `--rerank-fusion 0` orders by the logit alone. Every path is one the pool found, so one
/// the store holds.
#[test]
fn reranking_orders_the_pooled_union() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    let cross = fixture("encoders/cross");
    let top = 4;
    let args = ["--retriever", "bm25", "--rerank", cross.to_str().unwrap(), "--rerank-pool", "pcst,bm25", "--rerank-top", "4", "--top", "100"];
    let fused = retrieve(&store, &input, &tmp.path().join("f.jsonl"), &args);
    let alone = retrieve(&store, &input, &tmp.path().join("r.jsonl"), &[&args[..], &["--rerank-fusion", "0"]].concat());
    let half = retrieve(&store, &input, &tmp.path().join("h.jsonl"), &[&args[..], &["--rerank-fusion", "0.5"]].concat());
    let bm25 = retrieve(&store, &input, &tmp.path().join("b.jsonl"), &["--retriever", "bm25", "--top", &top.to_string()]);
    let pcst = retrieve(&store, &input, &tmp.path().join("p.jsonl"), &["--retriever", "pcst", "--top", &top.to_string()]);
    let encoder = CrossEncoder::open(&cross, &RuntimeOptions::default(), 5).unwrap();
    let (mut merged_any, mut fusion_reorders) = (false, false);
    for (((r, f), (b, p)), h) in alone.iter().zip(&fused).zip(bm25.iter().zip(&pcst)).zip(&half) {
        let texts = |answer: &serde_json::Value| -> Vec<String> { answer["paths"].as_array().unwrap().iter().map(path_text).collect() };
        let (b, p) = (texts(b), texts(p));
        let mut union: Vec<String> = Vec::new();
        for t in b.iter().chain(&p) {
            if union.contains(t) {
                merged_any = true;
            } else {
                union.push(t.clone());
            }
        }
        let mut sorted_union = union.clone();
        sorted_union.sort();
        for answer in [r, h, f] {
            let mut sorted_got = texts(answer);
            sorted_got.sort();
            assert_eq!(sorted_got, sorted_union, "the pool's union, each path once");
        }
        let got = texts(r);
        let history = history_of(&input, r["id"].as_str().unwrap());
        let h_: Vec<&str> = history.iter().map(String::as_str).collect();
        let q = query(&h_, 3);
        let pairs: Vec<(&str, &str)> = union.iter().map(|t| (q.as_str(), t.as_str())).collect();
        let logits = if pairs.is_empty() { Vec::new() } else { encoder.score(&pairs).unwrap() };
        // bm25 (the retriever itself) first, then pcst: the order the engine adds them in.
        let ranks = |t: &String| -> f64 { [&b, &p].iter().filter_map(|l| l.iter().position(|x| x == t)).map(|i| 1.0 / (i + 1) as f64).sum() };
        for (answer, weight) in [(r, 0.0), (h, 0.5), (f, 1.0)] {
            let got = texts(answer);
            let scores: Vec<f64> = answer["paths"].as_array().unwrap().iter().map(|p| p["score"].as_f64().unwrap()).collect();
            for (t, s) in got.iter().zip(&scores) {
                let i = union.iter().position(|u| u == t).unwrap();
                let want = if weight == 0.0 { f64::from(logits[i]) } else { f64::from(logits[i]) + weight * ranks(t) };
                assert_eq!(*s, want, "{t} at fusion {weight}");
            }
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
        }
        fusion_reorders |= texts(f) != got;
    }
    assert!(merged_any, "bm25 and pcst share paths on these requests: the merge must be exercised");
    assert!(fusion_reorders, "the ranks must change some order on these requests, or the fusion is not exercised");
}

/// `--pcst-scores dense` changes the prizes (so the tree) and the path scores, not what a
/// PCST answer is: every path still one of the candidates; and bad flag combinations are
/// usage errors.
#[test]
fn pcst_with_dense_prizes_and_flag_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = sample(tmp.path());
    let model = fixture("encoders/bert-mean");
    let dense =
        retrieve(&store, &input, &tmp.path().join("p.jsonl"), &["--retriever", "pcst", "--pcst-scores", "dense", "--dense-model", model.to_str().unwrap()]);
    let bm25 = retrieve(&store, &input, &tmp.path().join("q.jsonl"), &["--retriever", "pcst"]);
    let all = retrieve(&store, &input, &tmp.path().join("a.jsonl"), &["--retriever", "all", "--top", "1000"]);
    assert_ne!(dense, bm25);
    for (d, a) in dense.iter().zip(&all) {
        let candidates: Vec<String> = a["paths"].as_array().unwrap().iter().map(path_text).collect();
        for p in d["paths"].as_array().unwrap() {
            assert!(candidates.contains(&path_text(p)), "{}", path_text(p));
            assert!(p["explanation"].as_str().unwrap().contains("Steiner tree"));
        }
    }
    for (args, says) in [
        (vec!["--retriever", "dense"], "needs `dense_model`"),
        (vec!["--retriever", "pcst", "--pcst-scores", "dense"], "needs `dense_model`"),
        (vec!["--retriever", "bm25", "--rerank-pool", "pcst"], "`rerank_pool` needs `rerank`"),
        (vec!["--retriever", "bm25", "--rerank-fusion", "1"], "`rerank_fusion` needs `rerank`"),
        (vec!["--retriever", "bm25", "--rerank", "x", "--rerank-fusion", "-1"], "rerank_fusion"),
        (vec!["--retriever", "bm25", "--rerank", "x", "--rerank-fusion", "NaN"], "rerank_fusion"),
    ] {
        let mut cmd = trellis();
        cmd.arg("retrieve").arg("--store").arg(&store).arg("--input").arg(&input).arg("--output").arg(tmp.path().join("x.jsonl")).args(&args);
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let mut cmd = trellis();
    cmd.arg("retrieve").arg("--store").arg(&store).arg("--input").arg(&input).arg("--output").arg(tmp.path().join("x.jsonl"));
    cmd.args(["--retriever", "bm25", "--rerank", fixture("encoders/cross").to_str().unwrap(), "--rerank-pool", "bm26"]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bm26"));
}

/// `dense.query_prefix` / `document_prefix` are put before queries and documents, and
/// nothing else changes: the prefixed vector is the plain `embed` of the prefixed text.
#[test]
fn prefixes_go_before_queries_and_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_model("bert-mean", tmp.path());
    std::fs::write(dir.join("trellis.json"), r#"{"format": 1, "task": "dense", "dense": {"query_prefix": "query: ", "document_prefix": "passage: "}}"#)
        .unwrap();
    let m = BiEncoder::open(&dir, &RuntimeOptions::default(), 4).unwrap();
    let texts = ["Tom Hanks", "Golf"];
    let q = m.embed_queries(&texts).unwrap();
    let d = m.embed_documents(&texts).unwrap();
    assert_eq!(q, m.embed(&["query: Tom Hanks", "query: Golf"]).unwrap());
    assert_eq!(d, m.embed(&["passage: Tom Hanks", "passage: Golf"]).unwrap());
    assert_ne!(q, d);
    assert_ne!(q, m.embed(&texts).unwrap());
}
