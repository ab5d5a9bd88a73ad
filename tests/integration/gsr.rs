//! Generative retrieval against the goldens of an independent Python reference
//! (tools/reference/gsr_goldens.py: transformers `generate` on the PyTorch twin of the fixture
//! model, with the constraint and the graph prior as a logits processor, informativeness by
//! numpy matrix powers): the same sequences in the same order, scores within 1e-4, for every
//! prior mode and normalization, with both model layouts.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::decode::{ModelNorm, PriorMode, PriorNorm};
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

/// A golden mode: `prior[/prior_norm][@model_norm]`.
fn retriever(store: &Arc<Store>, layout: &str, mode: &str) -> Retriever {
    let (mode, model_norm) = match mode.split_once('@') {
        Some((m, n)) => (m, Some(n.parse::<ModelNorm>().unwrap())),
        None => (mode, None),
    };
    let (prior, norm) = match mode.split_once('/') {
        Some((p, n)) => (p, Some(n)),
        None => (mode, None),
    };
    let mut o = GsrOptions::new(fixture(&format!("gsr/{layout}")));
    o.overrides.prior = Some(prior.parse::<PriorMode>().unwrap());
    o.overrides.prior_norm = norm.map(|n| n.parse::<PriorNorm>().unwrap());
    o.overrides.model_norm = model_norm;
    o.runtime.threads = 1;
    Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::Gsr(o))).unwrap()
}

#[test]
fn gsr_matches_the_python_reference_for_every_prior_and_layout() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let g = goldens();
    let modes: Vec<&str> = g["modes"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(modes.len(), 7);
    assert!(modes.contains(&"hard@allowed") && modes.contains(&"katz/proportional@allowed"));
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
                inputs.push(RetrievalInput::given(h, mentioned));
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
    use trellis::dataset::opendialkg;
    use trellis::graph::CandidateScope;
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
        let mut cfg = RetrieverConfig::new(RetrieverKind::Gsr(o));
        cfg.scope = scope;
        let r = Retriever::new(store.clone(), cfg).unwrap();
        let (mut turns, mut paths) = (0, 0);
        // The last turn of every dev dialog, decoded 16 at a time.
        let inputs: Vec<RetrievalInput<'_>> = dialogs.iter().filter_map(|d| d.samples.last().map(|smp| r.input(&d.messages[..smp.upto]).unwrap())).collect();
        {
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
        assert!(turns > 1500 && paths > 3 * turns, "{scope:?}: {paths} paths for {turns} turns");
    }
}

fn requests(dir: &Path) -> PathBuf {
    let g = goldens();
    let lines: Vec<String> = g["dialogs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut req = serde_json::json!({"id": i, "history": d["history"]});
            if !d["entities"].is_null() {
                req["entities"] = d["entities"].clone();
            }
            req.to_string()
        })
        .collect();
    write(dir, "requests.jsonl", (lines.join("\n") + "\n").as_bytes())
}

fn retrieve_gsr(store: &Path, input: &Path, output: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    retrieve_gsr_with(&fixture("gsr/tiny-split"), store, input, output, extra)
}

fn retrieve_gsr_with(model: &Path, store: &Path, input: &Path, output: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(store)
        .arg("--retriever")
        .arg("gsr")
        .arg("--model")
        .arg(model)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output)
        .args(extra)
        .assert()
}

#[test]
fn retrieve_cli_writes_explained_paths_and_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let input = requests(dir.path());
    let out = |name: &str, extra: &[&str]| {
        let p = dir.path().join(name);
        retrieve_gsr(&store, &input, &p, extra).success();
        std::fs::read_to_string(p).unwrap()
    };
    let explained = out("a.jsonl", &["--explain", "--prior", "katz", "--alpha", "0.8"]);
    let lines: Vec<Value> = explained.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 23);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["id"], i);
        let paths = line["paths"].as_array().unwrap();
        assert!(!paths.is_empty() && paths.len() <= 5, "{line}");
        for p in paths {
            // The score is the tokens' alpha-mixed log-probabilities over the length.
            let tokens = p["tokens"].as_array().unwrap();
            let sum: f64 = tokens.iter().map(|t| 0.8 * t["model"].as_f64().unwrap() + 0.2 * t["prior"].as_f64().unwrap()).sum();
            let score = p["score"].as_f64().unwrap();
            assert!((sum / tokens.len() as f64 - score).abs() < 1e-9, "{p}");
            assert_eq!(tokens.last().unwrap()["text"], "</s>");
            assert!(tokens.iter().all(|t| t["model"].as_f64().unwrap() <= 0.0 && t["prior"].as_f64().unwrap() <= 1e-12));
            assert!(!p["triples"].as_array().unwrap().is_empty());
        }
    }
    // Bit-identical across runs and thread counts (without --explain).
    let a = out("b.jsonl", &[]);
    assert_eq!(a, out("c.jsonl", &["--model-threads", "2", "--threads", "2"]));
    assert_eq!(a, out("d.jsonl", &["--model-threads", "1", "--threads", "1"]));
    // And across batch sizes: every batch is padded to the model's input.max_tokens, so a
    // request's numbers do not depend on its neighbours (this float model moved by up to
    // 1.1e-7 when batches were padded to their longest input).
    assert_eq!(a, out("f.jsonl", &["--batch", "3"]));
    assert_eq!(a, out("f1.jsonl", &["--batch", "1"]));
    assert_ne!(a, out("e.jsonl", &["--prior", "hard"]), "the prior changes scores");
    // --model-norm allowed: a token that was the only one allowed scores exactly 0 (the
    // forced rest of a name); over the vocabulary no token does.
    let forced = |text: &str| -> (usize, usize) {
        let mut zero_and_all = (0, 0);
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            for p in v["paths"].as_array().unwrap() {
                for t in p["tokens"].as_array().unwrap() {
                    let m = t["model"].as_f64().unwrap();
                    assert!(m <= 0.0, "{t}");
                    zero_and_all.0 += usize::from(m == 0.0);
                    zero_and_all.1 += 1;
                }
            }
        }
        zero_and_all
    };
    let (zero, all) = forced(&out("h.jsonl", &["--explain", "--model-norm", "allowed"]));
    assert!(zero > 0 && zero < all, "{zero} of {all}");
    assert_eq!(forced(&out("i.jsonl", &["--explain", "--model-norm", "vocabulary"])).0, 0);
    let bad = retrieve_gsr(&store, &input, &dir.path().join("j.jsonl"), &["--model-norm", "allowed-tokens"]);
    let err = String::from_utf8_lossy(&bad.get_output().stderr).to_string();
    assert_eq!(bad.get_output().status.code(), Some(2), "{err}");
    assert!(err.contains("unknown model normalization \"allowed-tokens\" (vocabulary, allowed)"), "{err}");
    // --start-recency: the sample has requests whose mentioned entities differ in age, so a
    // strong recency changes scores; out of range it is refused, naming the setting.
    assert_ne!(a, out("k.jsonl", &["--start-recency", "50"]), "the start recency changes scores");
    let bad = retrieve_gsr(&store, &input, &dir.path().join("l.jsonl"), &["--start-recency", "2000000"]);
    let err = String::from_utf8_lossy(&bad.get_output().stderr).to_string();
    assert_eq!(bad.get_output().status.code(), Some(2), "{err}");
    assert!(err.contains("start_recency must be a finite number within [0, 1000000], not 2000000"), "{err}");
    // A negative length penalty is a number, not a flag: the score is the sum times length.
    let shorter = out("g.jsonl", &["--explain", "--length-penalty", "-1"]);
    for line in shorter.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        for p in v["paths"].as_array().unwrap() {
            let tokens = p["tokens"].as_array().unwrap();
            let sum: f64 = tokens.iter().map(|t| 0.8 * t["model"].as_f64().unwrap() + 0.2 * t["prior"].as_f64().unwrap()).sum();
            assert!((sum * tokens.len() as f64 - p["score"].as_f64().unwrap()).abs() < 1e-6, "{p}");
        }
    }
}

#[test]
fn gsr_refuses_what_cannot_work_with_clear_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let input = requests(dir.path());
    let output = dir.path().join("out.jsonl");
    // No model: a usage error.
    let a = trellis().arg("retrieve").arg("--store").arg(&store).arg("--retriever").arg("gsr").arg("--input").arg(&input).arg("--output").arg(&output).assert();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(a.get_output().status.code(), Some(2), "{err}");
    assert!(err.contains("the gsr retriever needs `model`"), "{err}");
    // --scope uncapped with a retriever that enumerates its candidates.
    let a = trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&store)
        .arg("--retriever")
        .arg("all")
        .arg("--scope")
        .arg("uncapped")
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .assert();
    assert_eq!(a.get_output().status.code(), Some(2));
    // CUDA on a machine without it: never a silent CPU fallback.
    let a = retrieve_gsr(&store, &input, &output, &["--device", "cuda"]);
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(a.get_output().status.code(), Some(1), "{err}");
    assert!(err.contains("CUDA execution provider could not be registered"), "{err}");
    // A store without the model's token index: the command to run.
    let bare = dir.path().join("bare");
    ingest(&bare, &[], &[&fixture("opendialkg-sample.tsv")]);
    let a = retrieve_gsr(&bare, &input, &output, &[]);
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(a.get_output().status.code(), Some(1), "{err}");
    // The command names the model's own tokenizer file, ready to paste.
    let command = format!("run `trellis index-tokens --store {} --tokenizer {}`", bare.display(), fixture("gsr/tiny-split/tokenizer.json").display());
    assert!(err.contains(&command), "{err}");
    // An index a later load made stale: the library's reason, then the command (with the
    // model's linearization).
    std::fs::create_dir(dir.path().join("stale")).unwrap();
    let stale = sample_store(&dir.path().join("stale"));
    // (Loads keep an index current since format 4; one built before it has no stored tokenizer.)
    forget_stored_tokenizers(&stale);
    ingest(&stale, &[], &[&write(dir.path(), "more.tsv", b"Somebody New\tknows\tJordan Spieth\n")]);
    let a = retrieve_gsr(&stale, &input, &output, &[]);
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(a.get_output().status.code(), Some(1), "{err}");
    let command = format!(
        "it needs building again; run `trellis index-tokens --store {} --tokenizer {} --linearization dialoggsr` again",
        stale.display(),
        fixture("gsr/tiny-split/tokenizer.json").display()
    );
    assert!(err.contains(&command), "{err}");
    // A bad setting.
    let a = retrieve_gsr(&store, &input, &output, &["--alpha", "1.5"]);
    assert_eq!(a.get_output().status.code(), Some(2));
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("alpha must be a finite number within [0, 1], not 1.5"));
}

#[test]
fn eval_retrieval_runs_gsr_and_reports_candidate_recall() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    // The hand-written dialog of the baselines' test, on the sample graph.
    let messages = r#"[{"type": "chat", "sender": "user", "message": "Do you know anything about Jordan Spieth?"}, {"type": "action", "sender": "assistant", "metadata": {"path": [1, [["Jordan Spieth", "Sport played", "Golf"]], "x"]}}]"#;
    let csv = format!("Messages,User Rating,Assistant Rating\n\"{}\",5,5\n", messages.replace('"', "\"\""));
    let dialogs = write(dir.path(), "d.csv", csv.as_bytes());
    let report = json_of(
        trellis()
            .arg("eval")
            .arg("retrieval")
            .arg("--store")
            .arg(&store)
            .arg("--input")
            .arg(&dialogs)
            .arg("--retriever")
            .arg("gsr")
            .arg("--model")
            .arg(fixture("gsr/tiny-merged"))
            .arg("--json"),
    );
    assert_eq!(report["turns"], 1);
    assert_eq!(report["candidate_recall"], 1.0);
    // The golden of this dialog (katz, proportional) puts the gold path 4th.
    assert_eq!(report["path_at"]["1"], 0.0);
    assert_eq!(report["path_at"]["5"], 1.0);
    assert_eq!(report["mean_size"], 5.0);
}

/// Multi-step retrieval: step 1 decodes the dialog with ` [SEP] path` appended, so its new
/// paths are exactly what one step on a history whose last message carries that text
/// gives, minus the path already found.
#[test]
fn a_second_step_conditions_on_the_first_path() {
    use trellis::linearize::{HopText, Linearization};
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let g = goldens();
    let d = &g["dialogs"][0];
    let history = history_of(d);
    let open = |steps: usize| {
        let mut o = GsrOptions::new(fixture("gsr/tiny-split"));
        o.steps = steps;
        Retriever::new(store.clone(), RetrieverConfig::new(RetrieverKind::Gsr(o))).unwrap()
    };
    let two = open(2);
    let mentioned = two.mentioned(&history).unwrap();
    let got = two.rank(&RetrievalInput::given(&history, mentioned.clone())).unwrap();
    let one = open(1).rank(&RetrievalInput::given(&history, mentioned.clone())).unwrap();
    assert_eq!(got[0].hops, one[0].hops, "step 0 keeps its best path");
    assert!(got[0].explanation.contains("step 0") && got[1..].iter().all(|p| p.explanation.contains("step 1")));
    for (i, p) in got.iter().enumerate() {
        assert!(got[..i].iter().all(|q| q.hops != p.hops), "no path twice");
    }
    // The first path as the linearization writes it, appended to the last message.
    let name = |e| store.entity_names(&[e]).unwrap()[0].clone().unwrap();
    let rels: Vec<String> = got[0].hops.iter().map(|h| store.relation_names(&[h.edge.relation]).unwrap()[0].clone().unwrap()).collect();
    let tos: Vec<String> = got[0].hops.iter().map(|h| name(h.edge.other)).collect();
    let hops: Vec<HopText<'_>> = got[0]
        .hops
        .iter()
        .zip(rels.iter().zip(&tos))
        .map(|(h, (r, t))| HopText { relation: r, reversed: h.edge.direction == trellis::Direction::In, to: t })
        .collect();
    let text = Linearization::dialoggsr().render_path(&name(got[0].hops[0].from), &hops).unwrap();
    let mut conditioned = history.clone();
    let last = conditioned.last_mut().unwrap();
    last.text = format!("{} [SEP] {text}", last.text);
    let want: Vec<_> = open(1).rank(&RetrievalInput::given(&conditioned, mentioned)).unwrap().into_iter().filter(|p| p.hops != got[0].hops).collect();
    assert_eq!(got[1..].iter().map(|p| (p.hops.clone(), p.score)).collect::<Vec<_>>(), want.iter().map(|p| (p.hops.clone(), p.score)).collect::<Vec<_>>());
}

/// `--prior none` decodes without the constraint; whatever parses back is a real path.
#[test]
fn unconstrained_decoding_keeps_only_real_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = sample_store(dir.path());
    let store = Arc::new(Store::open_read_only(&store_dir).unwrap());
    let r = retriever(&store, "tiny-split", "none");
    let g = goldens();
    for d in g["dialogs"].as_array().unwrap() {
        let h = history_of(d);
        let mentioned = r.mentioned(&h).unwrap();
        for p in r.rank(&RetrievalInput::given(&h, mentioned)).unwrap() {
            for h in &p.hops {
                let (a, rel, b) = h.fact();
                assert!(store.neighbors_via(a, trellis::Direction::Out, rel).unwrap().contains(&b));
            }
        }
    }
}

#[test]
fn the_listed_logits_step_ranks_as_the_whole_vocabulary_and_alone_in_its_batch() {
    // tiny-split has decoder_listed_model.onnx (tools/train/listed_logits.py): under
    // --model-norm allowed its cached steps compute only the allowed tokens' logits. The
    // same directory without that file decodes every step on the whole vocabulary: the
    // same paths in the same order, scores within float rounding.
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let input = requests(dir.path());
    let plain = dir.path().join("plain");
    copy_dir(&fixture("gsr/tiny-split"), &plain);
    std::fs::remove_file(plain.join("decoder_listed_model.onnx")).unwrap();
    let run = |model: &Path, name: &str, extra: &[&str]| -> (String, Value) {
        let out = dir.path().join(name);
        let summary = retrieve_gsr_with(model, &store, &input, &out, &[extra, &["--json"]].concat()).success().get_output().stdout.clone();
        (std::fs::read_to_string(out).unwrap(), serde_json::from_slice(&summary).unwrap())
    };
    let allowed = ["--model-norm", "allowed"];
    let (listed, listed_json) = run(&fixture("gsr/tiny-split"), "listed.jsonl", &allowed);
    let (whole, whole_json) = run(&plain, "whole.jsonl", &allowed);
    let steps = |v: &Value, k: &str| v["gsr"]["timings"][k].as_u64().unwrap();
    assert!(steps(&listed_json, "decoder_listed_steps") > 0, "{listed_json}");
    // Every step but each search's first (which has no cache yet) is listed: 23 requests
    // in batches of 8 are three searches.
    assert_eq!(steps(&listed_json, "decoder_steps"), steps(&whole_json, "decoder_steps"));
    assert_eq!(steps(&listed_json, "decoder_listed_steps"), steps(&listed_json, "decoder_steps") - 3, "{listed_json}");
    assert_eq!(steps(&whole_json, "decoder_listed_steps"), 0, "{whole_json}");
    let (mut paths, mut worst) = (0, 0f64);
    for (a, b) in listed.lines().zip(whole.lines()) {
        let (a, b): (Value, Value) = (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
        let (pa, pb) = (a["paths"].as_array().unwrap(), b["paths"].as_array().unwrap());
        assert_eq!(pa.len(), pb.len(), "{a}\n{b}");
        for (x, y) in pa.iter().zip(pb) {
            assert_eq!(x["triples"], y["triples"], "{a}\n{b}");
            worst = worst.max((x["score"].as_f64().unwrap() - y["score"].as_f64().unwrap()).abs());
            paths += 1;
        }
    }
    assert_eq!(listed.lines().count(), 23);
    assert!(paths > 23 && worst < 1e-6, "{paths} paths, largest score difference {worst}");
    // A request's answer does not depend on its batch: each row lists its own allowed
    // tokens, padded to a multiple of 16 whatever the others allow.
    for batch in ["1", "3", "7"] {
        let (again, _) = run(&fixture("gsr/tiny-split"), &format!("listed-{batch}.jsonl"), &["--model-norm", "allowed", "--batch", batch]);
        assert_eq!(listed, again, "--batch {batch}");
    }
    // Vocabulary normalization needs every logit: no listed step.
    let (_, vocab_json) = run(&fixture("gsr/tiny-split"), "vocab.jsonl", &["--model-norm", "vocabulary"]);
    assert_eq!(steps(&vocab_json, "decoder_listed_steps"), 0, "{vocab_json}");
    // A file in its place that is not a listed step is refused at load, naming it and what
    // it lacks, when the decoding would use it; vocabulary normalization never reads it.
    let wrong = dir.path().join("wrong");
    copy_dir(&fixture("gsr/tiny-split"), &wrong);
    std::fs::copy(wrong.join("decoder_with_past_model.onnx"), wrong.join("decoder_listed_model.onnx")).unwrap();
    let (unread, _) = run(&wrong, "unread.jsonl", &["--model-norm", "vocabulary"]);
    assert_eq!(unread.lines().count(), 23);
    let refused = retrieve_gsr_with(&wrong, &store, &input, &dir.path().join("wrong.jsonl"), &["--model-norm", "allowed"]).failure();
    let out = refused.get_output();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("decoder_listed_model.onnx") && err.contains("allowed_ids"), "{err}");
    assert!(!dir.path().join("wrong.jsonl").exists() || std::fs::read_to_string(dir.path().join("wrong.jsonl")).unwrap().is_empty());
}
