//! The pipeline (link, retrieve, generate) with the fixture models on the sample KG: a reply
//! is exactly the generator run on the retriever's best paths by name (each checked with its
//! own store reads), one `Pipeline` called from 8 threads gives the sequential answers, and
//! the commands `respond`, `run`, `eval pipeline` and `targets` (generator) agree with the
//! library and with `eval responses`.

use crate::common::*;
use crate::gsr::sample_store;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::generate::{GenerationInput, Generator, KnowledgePath, Triple};
use trellis::link::Message;
use trellis::model::RuntimeOptions;
use trellis::pipeline::{KnowledgeSource, Pipeline, PipelineRequest, PipelineSettings};
use trellis::retrieve::gsr::GsrOptions;
use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
use trellis::{Direction, Store};

fn generator_dir() -> PathBuf {
    fixture("generate/tiny-merged")
}

fn open_generator(sessions: usize) -> Generator {
    Generator::open(&generator_dir(), &{
        let mut o = RuntimeOptions::default();
        o.threads = 1;
        o.sessions = sessions;
        o
    })
    .unwrap()
}

/// `kind` is `RetrieverKind::Gsr` with any options for the fixture model.
fn open_retriever(store: &Arc<Store>, kind: RetrieverKind, sessions: usize) -> Retriever {
    let kind = match kind {
        RetrieverKind::Gsr(_) => {
            let mut o = GsrOptions::new(fixture("gsr/tiny-split"));
            o.runtime.threads = 1;
            o.runtime.sessions = sessions;
            RetrieverKind::Gsr(o)
        }
        other => other,
    };
    Retriever::new(store.clone(), RetrieverConfig::new(kind)).unwrap()
}

fn gsr() -> RetrieverKind {
    RetrieverKind::Gsr(GsrOptions::new(fixture("gsr/tiny-split")))
}

fn pipeline(store: &Arc<Store>, kind: RetrieverKind, top: usize, sessions: usize) -> Pipeline {
    let g = open_generator(sessions);
    let settings = PipelineSettings::new(top, g.settings().clone());
    Pipeline::new(open_retriever(store, kind, sessions), g, Some(settings)).unwrap()
}

/// The dialogs of the retriever's goldens (they mention entities of the sample KG).
pub fn dialogs() -> Vec<Vec<Message>> {
    let g: Value = serde_json::from_str(&std::fs::read_to_string(fixture("gsr/goldens.json")).unwrap()).unwrap();
    g["dialogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            d["history"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| Message { speaker: m["speaker"].as_str().unwrap().into(), text: m["text"].as_str().unwrap().into() })
                .collect()
        })
        .collect()
}

/// A retrieved path by name, each name read on its own: `~r` where a hop walks a fact backwards.
fn named(store: &Store, hops: &[trellis::graph::Hop]) -> KnowledgePath {
    let name = |e| store.entity_names(&[e]).unwrap()[0].clone().unwrap();
    hops.iter()
        .map(|h| {
            let r = store.relation_names(&[h.edge.relation]).unwrap()[0].clone().unwrap();
            let r = if h.edge.direction == Direction::In { format!("~{r}") } else { r };
            Triple::new(name(h.from), r, name(h.edge.other))
        })
        .collect()
}

#[test]
fn a_reply_is_the_generator_on_the_retrievers_best_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    for kind in [RetrieverKind::Bm25, gsr()] {
        let p = pipeline(&store, kind.clone(), 2, 1);
        let retriever = open_retriever(&store, kind.clone(), 1);
        let generator = open_generator(1);
        let mut with_paths = 0;
        for history in dialogs().iter().take(8) {
            let reply = p.respond(&PipelineRequest::new(history)).unwrap();
            let mut expected = retriever.retrieve(history).unwrap();
            expected.truncate(2);
            let hops: Vec<_> = reply.paths.iter().map(|x| x.hops.clone()).collect();
            assert_eq!(hops, expected.iter().map(|x| x.hops.clone()).collect::<Vec<_>>(), "{kind:?}: the retriever's best 2");
            let knowledge: Vec<KnowledgePath> = expected.iter().map(|x| named(&store, &x.hops)).collect();
            assert_eq!(reply.knowledge, knowledge);
            with_paths += usize::from(!knowledge.is_empty());
            let direct = generator.generate_batch(&[GenerationInput::new(history, &knowledge)], generator.settings()).unwrap();
            assert_eq!(reply.responses, direct[0], "{kind:?}: the generator on those paths");
            assert_eq!(reply.mentioned, retriever.mentioned(history).unwrap());
            assert!(reply.timings.generate_ms > 0.0 && reply.timings.batch == 1);
        }
        assert!(with_paths >= 6, "{kind:?}: most sample dialogs get knowledge ({with_paths})");
    }
}

#[test]
fn given_or_no_knowledge_skips_retrieval() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let p = pipeline(&store, gsr(), 3, 1);
    let generator = open_generator(1);
    let history = &dialogs()[0];
    let given = vec![vec![Triple::new("Jordan Spieth", "~Winner", "2015 Masters Tournament")]];
    let requests = [
        PipelineRequest { knowledge: KnowledgeSource::Given(&given), ..PipelineRequest::new(history) },
        PipelineRequest { knowledge: KnowledgeSource::Nothing, ..PipelineRequest::new(history) },
    ];
    let replies = p.respond_batch(&requests).unwrap();
    let expect = generator.generate_batch(&[GenerationInput::new(history, &given), GenerationInput::new(history, &[])], generator.settings()).unwrap();
    for (reply, want) in replies.iter().zip(&expect) {
        assert!(reply.paths.is_empty() && reply.mentioned.is_empty() && reply.timings.retrieve_ms == 0.0);
        assert_eq!(&reply.responses, want);
    }
    assert_eq!(replies[0].knowledge, given);
    assert!(replies[1].knowledge.is_empty());
    assert_ne!(replies[0].responses, replies[1].responses, "the knowledge reaches the generator");
}

#[test]
fn one_pipeline_from_eight_threads_gives_the_sequential_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_read_only(sample_store(dir.path())).unwrap());
    let p = Arc::new(pipeline(&store, gsr(), 3, 2));
    let dialogs = Arc::new(dialogs());
    let sequential: Vec<(Vec<KnowledgePath>, String)> = dialogs
        .iter()
        .map(|h| {
            let r = p.respond(&PipelineRequest::new(h)).unwrap();
            (r.knowledge.clone(), r.text().to_owned())
        })
        .collect();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (p, dialogs) = (p.clone(), dialogs.clone());
            std::thread::spawn(move || {
                // Each thread its own order, some calls batched: any interleaving.
                let n = dialogs.len();
                let mut out = vec![None; n];
                let order: Vec<usize> = (0..n).map(|i| (i * 7 + t * 3) % n).collect();
                for pair in order.chunks(if t % 2 == 0 { 1 } else { 3 }) {
                    let requests: Vec<PipelineRequest<'_>> = pair.iter().map(|&i| PipelineRequest::new(&dialogs[i])).collect();
                    for (&i, r) in pair.iter().zip(p.respond_batch(&requests).unwrap()) {
                        out[i] = Some((r.knowledge.clone(), r.text().to_owned()));
                    }
                }
                out.into_iter().map(Option::unwrap).collect::<Vec<_>>()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), sequential);
    }
}

fn pipeline_cmd(cmd: &str, store: &Path) -> assert_cmd::Command {
    let mut c = trellis();
    c.args(cmd.split(' '))
        .arg("--store")
        .arg(store)
        .args(["--retriever", "gsr", "--model-threads", "1", "--top", "2", "--model"])
        .arg(fixture("gsr/tiny-split"))
        .arg("--generator")
        .arg(generator_dir());
    c
}

#[test]
fn run_answers_in_input_order_and_reports_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let d = dialogs();
    let lines = [
        json!({"id": "a", "history": d[0]}).to_string(),
        json!({"id": "b", "history": d[1], "knowledge": [[{"head": "2015 Masters Tournament", "relation": "Winner", "tail": "Jordan Spieth", "reverse": true}]]})
            .to_string(),
        String::new(),
        json!({"id": "c", "history": d[2], "knowledge": []}).to_string(),
        json!({"id": "d", "history": d[3], "knowledge": [[["A", "r"]]]}).to_string(),
        json!({"id": "e", "history": d[4], "entities": ["no such entity"]}).to_string(),
        json!({"id": "f", "history": d[5]}).to_string(),
    ];
    let input = write(dir.path(), "requests.jsonl", (lines.join("\n") + "\n").as_bytes());
    let output = dir.path().join("out.jsonl");
    let stop = pipeline_cmd("run", &store).arg("--input").arg(&input).arg("--output").arg(&output).assert().code(65);
    let err = String::from_utf8_lossy(&stop.get_output().stderr).to_string();
    assert!(err.contains("requests.jsonl:5: knowledge[0][0]: a triple is"), "{err}");
    // The answers before the bad line are kept; continuing with --on-error skip answers the rest.
    assert!(!output.exists());
    // Not with other decoding: the checkpoint records the logits processors' settings too.
    for (flag, value) in [("--gen-repetition-penalty", "1.3"), ("--gen-no-repeat-ngram-size", "2"), ("--gen-min-new-tokens", "3")] {
        let other = pipeline_cmd("run", &store)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output)
            .args(["--on-error", "skip", "--resume", flag, value])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&other.get_output().stderr).to_string();
        assert!(err.contains("cannot resume") && err.contains("its generation was"), "{flag}: {err}");
    }
    let skip = pipeline_cmd("run", &store)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .args(["--on-error", "skip", "--json", "--resume"])
        .assert()
        .success();
    let summary: Value = serde_json::from_slice(&skip.get_output().stdout).unwrap();
    assert_eq!((summary["answered"].as_u64(), summary["skipped"].as_u64()), (Some(4), Some(2)), "{summary}");
    assert_eq!((summary["resumed_at_line"].as_u64(), summary["answered_now"].as_u64()), (Some(5), Some(1)), "{summary}");
    let err = String::from_utf8_lossy(&skip.get_output().stderr).to_string();
    assert!(err.contains("requests.jsonl:6: entities[0]: no entity with key \"no such entity\" in the store (skipped)"), "{err}");
    let out: Vec<Value> = std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(out.iter().map(|v| v["id"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b", "c", "f"]);
    // Each answer names its input line (the blank line 3 and the skipped 5 and 6 have none).
    assert_eq!(out.iter().map(|v| v["line"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 4, 7]);
    assert_eq!(out[1]["knowledge"], json!([[["Jordan Spieth", "~Winner", "2015 Masters Tournament"]]]));
    assert!(out[1].get("paths").is_none() && out[2]["knowledge"] == json!([]));
    // The retrieved paths are `trellis retrieve`'s best 2, triple for triple.
    let rin = write(dir.path(), "r.jsonl", format!("{}\n{}\n", lines[0], lines[6]).as_bytes());
    let rout = dir.path().join("r-out.jsonl");
    stdout_of(
        trellis()
            .arg("retrieve")
            .arg("--store")
            .arg(&store)
            .args(["--retriever", "gsr", "--model-threads", "1", "--top", "2", "--model"])
            .arg(fixture("gsr/tiny-split"))
            .arg("--input")
            .arg(&rin)
            .arg("--output")
            .arg(&rout),
    );
    let retrieved: Vec<Value> = std::fs::read_to_string(&rout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (ran, ret) in [(&out[0], &retrieved[0]), (&out[3], &retrieved[1])] {
        let ours: Vec<&Value> = ran["paths"].as_array().unwrap().iter().map(|p| &p["triples"]).collect();
        let theirs: Vec<&Value> = ret["paths"].as_array().unwrap().iter().map(|p| &p["triples"]).collect();
        assert_eq!(ours, theirs);
        assert_eq!(ran["mentioned"], ret["mentioned"]);
        assert!(!ours.is_empty());
    }
    // The given knowledge's reply is the library generator's on it.
    let g = open_generator(1);
    let given = vec![vec![Triple::new("Jordan Spieth", "~Winner", "2015 Masters Tournament")]];
    let direct = g.generate_batch(&[GenerationInput::new(&d[1], &given)], g.settings()).unwrap();
    assert_eq!(out[1]["response"], json!(direct[0][0].text));
}

#[test]
fn respond_prints_the_reply_run_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let history = ["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"];
    let text = stdout_of(pipeline_cmd("respond", &store).args(history));
    let json_out: Value = serde_json::from_str(&stdout_of(pipeline_cmd("respond", &store).args(history).arg("--json"))).unwrap();
    let input = write(dir.path(), "one.jsonl", format!("{}\n", json!({"history": history})).as_bytes());
    let output = dir.path().join("one-out.jsonl");
    stdout_of(pipeline_cmd("run", &store).arg("--input").arg(&input).arg("--output").arg(&output));
    let ran: Value = serde_json::from_str(std::fs::read_to_string(&output).unwrap().trim()).unwrap();
    assert_eq!(text.trim_end_matches('\n'), ran["response"].as_str().unwrap());
    for key in ["response", "knowledge", "paths", "mentioned"] {
        assert_eq!(json_out[key], ran[key], "{key}");
    }
    // The same dialog from a file, one message per line.
    let file = write(dir.path(), "dialog.txt", (history.join("\n") + "\n").as_bytes());
    assert_eq!(stdout_of(pipeline_cmd("respond", &store).arg("--dialog").arg(&file)), text);
    let none = pipeline_cmd("respond", &store).assert().code(2);
    assert!(String::from_utf8_lossy(&none.get_output().stderr).contains("give the dialog"));
}

/// The entity names of some knowledge (as written in a predictions file) that the grounding
/// figures look for: each path's first head, then every tail, each once (compared lowercased).
fn entities_of(knowledge: &Value) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for path in knowledge.as_array().unwrap() {
        let triples = path.as_array().unwrap();
        let heads = triples.first().map(|t| &t["head"]).into_iter();
        for name in heads.chain(triples.iter().map(|t| &t["tail"])) {
            let name = name.as_str().unwrap();
            let fold = |s: &str| s.chars().map(|c| c.to_lowercase().next().unwrap()).collect::<String>();
            if !name.is_empty() && !names.iter().any(|n| fold(n) == fold(name)) {
                names.push(name.to_string());
            }
        }
    }
    names
}

#[test]
fn eval_pipeline_agrees_with_eval_responses_on_its_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let dev = shared_data("opendialkg/dialogs_dev.csv");
    let mut reports = Vec::new();
    for knowledge in ["none", "gold", "retrieved"] {
        let preds = dir.path().join(format!("{knowledge}.jsonl"));
        let report: Value = serde_json::from_str(&stdout_of(
            pipeline_cmd("eval pipeline", &store)
                .arg("--input")
                .arg(&dev)
                .args(["--knowledge", knowledge, "--max-turns", "12", "--json", "--predictions"])
                .arg(&preds),
        ))
        .unwrap_or_else(|e| panic!("{knowledge}: {e}"));
        let lines: Vec<Value> = std::fs::read_to_string(&preds).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len() as u64, report["samples"].as_u64().unwrap());
        assert!(lines.len() >= 8, "{knowledge}: {}", lines.len());
        // The same predictions scored by `eval responses`.
        let kf1_text = |k: &Value| {
            let words: Vec<String> = k
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|p| p.as_array().unwrap().iter())
                .map(|t| {
                    format!(
                        "{} {} {}",
                        t["head"].as_str().unwrap(),
                        t["relation"].as_str().unwrap().trim_start_matches('~').replace('_', " "),
                        t["tail"].as_str().unwrap()
                    )
                })
                .collect();
            words.join(" ")
        };
        let gold: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut g = json!({"id": i, "response": l["reference"]});
                if knowledge != "none" {
                    g["knowledge"] = json!(kf1_text(&l["knowledge"]));
                    g["entities"] = json!(entities_of(&l["knowledge"]));
                }
                g.to_string() + "\n"
            })
            .collect();
        let pred: String = lines.iter().enumerate().map(|(i, l)| json!({"id": i, "response": l["response"]}).to_string() + "\n").collect();
        let gold = write(dir.path(), &format!("{knowledge}-gold.jsonl"), gold.as_bytes());
        let pred = write(dir.path(), &format!("{knowledge}-pred.jsonl"), pred.as_bytes());
        let scored = json_of(trellis().args(["eval", "responses", "--json", "--pred"]).arg(&pred).arg("--gold").arg(&gold));
        assert_eq!(report["responses"], scored, "{knowledge}");
        assert_eq!(report["retrieval"].is_null(), knowledge != "retrieved");
        assert_eq!(report["responses"]["kf1"].is_null(), knowledge == "none");
        let grounded = report["responses"]["grounding"]["pairs"].as_u64().unwrap();
        assert_eq!(grounded == 0, knowledge == "none", "{knowledge}: {grounded} pairs with entities");
        if knowledge == "gold" {
            // The gold knowledge is the annotated path of the turn, as the csv has it.
            let dialogs = trellis::dataset::opendialkg::read(&dev).unwrap();
            for l in &lines {
                let sample = dialogs[l["dialog"].as_u64().unwrap() as usize].samples.iter().find(|s| s.upto as u64 == l["upto"].as_u64().unwrap()).unwrap();
                let want: Vec<Vec<Value>> =
                    sample.paths.iter().map(|p| p.iter().map(|(h, r, t)| json!({"head": h, "relation": r, "tail": t})).collect()).collect();
                assert_eq!(l["knowledge"], json!(want));
            }
        }
        reports.push(report);
    }
    assert_eq!(reports[0]["samples"], reports[2]["samples"]);
}

#[test]
fn generator_targets_are_the_generators_inputs_and_the_replies() {
    let dir = tempfile::tempdir().unwrap();
    let dev = shared_data("opendialkg/dialogs_dev.csv");
    let csv: String = std::fs::read_to_string(&dev).unwrap().lines().take(21).collect::<Vec<_>>().join("\n") + "\n";
    let small = write(dir.path(), "dev20.csv", csv.as_bytes());
    let out = dir.path().join("targets.jsonl");
    let summary = json_of(trellis().args(["targets", "--json", "--model"]).arg(generator_dir()).arg("--dialogs").arg(&small).arg("--output").arg(&out));
    let lines: Vec<Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(summary["turns"].as_u64().unwrap() as usize, lines.len());
    let dialogs = trellis::dataset::opendialkg::read(&small).unwrap();
    let g = open_generator(1);
    let tokenizer = tokenizers::Tokenizer::from_file(generator_dir().join("tokenizer.json")).unwrap();
    let mut with_reply = 0;
    for l in &lines {
        let d = &dialogs[l["dialog"].as_u64().unwrap() as usize];
        let upto = l["upto"].as_u64().unwrap() as usize;
        let sample = d.samples.iter().find(|s| s.upto == upto).unwrap();
        let next = d.messages.get(upto).filter(|m| m.speaker == sample.speaker);
        match next {
            None => assert_eq!(l["skipped"], "no_reply"),
            Some(reply) => {
                with_reply += 1;
                let knowledge: Vec<KnowledgePath> =
                    sample.paths.iter().map(|p| p.iter().map(|(h, r, t)| Triple::new(h.as_str(), r.as_str(), t.as_str())).collect()).collect();
                let input = g.encoder_input(&GenerationInput::new(&d.messages[..upto], &knowledge), &g.settings().encoding).unwrap();
                assert_eq!(l["input_ids"], json!(input.ids));
                assert_eq!(l["target_ids"], json!(tokenizer.encode(reply.text.as_str(), true).unwrap().get_ids()));
                assert_eq!(*l["target_ids"].as_array().unwrap().last().unwrap(), json!(1), "ends with EOS");
            }
        }
    }
    assert!(with_reply >= 10, "{with_reply}");
    assert_eq!(summary["with_target"].as_u64().unwrap(), with_reply);
    // A retriever's targets need a store.
    let err = trellis().args(["targets", "--model"]).arg(fixture("gsr/tiny-split")).arg("--dialogs").arg(&small).arg("--output").arg(&out).assert().code(2);
    assert!(String::from_utf8_lossy(&err.get_output().stderr).contains("its targets need --store DIR"));
}

#[test]
fn targets_without_knowledge_add_the_replies_after_no_action_with_an_empty_knowledge() {
    let dir = tempfile::tempdir().unwrap();
    let dev = shared_data("opendialkg/dialogs_dev.csv");
    let csv: String = std::fs::read_to_string(&dev).unwrap().lines().take(11).collect::<Vec<_>>().join("\n") + "\n";
    let small = write(dir.path(), "dev10.csv", csv.as_bytes());
    let targets = |extra: &[&str], name: &str| -> Vec<Value> {
        let out = dir.path().join(name);
        stdout_of(trellis().args(["targets", "--model"]).arg(generator_dir()).arg("--dialogs").arg(&small).arg("--output").arg(&out).args(extra));
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let with = targets(&[], "with.jsonl");
    let all = targets(&["--without-knowledge"], "all.jsonl");
    let dialogs = trellis::dataset::opendialkg::read(&small).unwrap();
    let g = open_generator(1);
    let key = |l: &Value| (l["dialog"].as_u64().unwrap() as usize, l["upto"].as_u64().unwrap() as usize);
    // Every turn with a gold path is there as before; every other message after the first
    // is a turn of its own, its writer the speaker, its input the dialog with no knowledge.
    let mut expected: Vec<(usize, usize)> = Vec::new();
    for (i, d) in dialogs.iter().enumerate() {
        for upto in 1..d.messages.len() {
            if !d.samples.iter().any(|s| s.upto == upto) {
                expected.push((i, upto));
            }
        }
        expected.extend(d.samples.iter().map(|s| (i, s.upto)));
    }
    expected.sort();
    let keys: Vec<(usize, usize)> = all.iter().map(key).collect();
    assert_eq!(keys, expected);
    let mut without = 0;
    for l in &all {
        let (i, upto) = key(l);
        let d = &dialogs[i];
        if let Some(w) = with.iter().find(|w| key(w) == (i, upto) && w["speaker"] == l["speaker"]) {
            assert_eq!(w, l, "a turn with a gold path is unchanged");
            continue;
        }
        without += 1;
        assert_eq!(l["speaker"], d.messages[upto].speaker.as_str());
        let input = g.encoder_input(&GenerationInput::new(&d.messages[..upto], &[]), &g.settings().encoding).unwrap();
        assert_eq!(l["input_ids"], json!(input.ids));
        assert!(l.get("skipped").is_none());
    }
    assert!(without >= 20, "{without}");
    // A retriever has no such targets.
    let out = dir.path().join("r.jsonl");
    let cmd = trellis()
        .args(["targets", "--without-knowledge", "--model"])
        .arg(fixture("gsr/tiny-split"))
        .arg("--dialogs")
        .arg(&small)
        .arg("--output")
        .arg(&out)
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&cmd.get_output().stderr).contains("--without-knowledge is for a generator's targets"));
}

#[test]
fn generator_options_override_the_models_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let history = ["Do you know anything about Jordan Spieth?"];
    let v: Value = serde_json::from_str(&stdout_of(
        pipeline_cmd("respond", &store).args(["--json", "--gen-strategy", "greedy", "--gen-max-new-tokens", "5"]).args(history),
    ))
    .unwrap();
    let knowledge: Vec<KnowledgePath> = v["knowledge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_array().unwrap().iter().map(|t| Triple::new(t[0].as_str().unwrap(), t[1].as_str().unwrap(), t[2].as_str().unwrap())).collect())
        .collect();
    assert!(!knowledge.is_empty());
    let g = open_generator(1);
    let mut settings = g.settings().clone();
    settings.strategy = trellis::generate::Strategy::Greedy;
    settings.max_new_tokens = 5;
    let messages: Vec<Message> = history.iter().map(|t| Message { speaker: String::new(), text: t.to_string() }).collect();
    let direct = g.generate_batch(&[GenerationInput::new(&messages, &knowledge)], &settings).unwrap();
    assert_eq!(v["response"], json!(direct[0][0].text));
    assert!(direct[0][0].tokens.len() <= 5);
    // A sampling request: the same seed, the same reply; sequences come back when asked for.
    let sample = |seed: &str| stdout_of(pipeline_cmd("respond", &store).args(["--gen-strategy", "sample", "--gen-seed", seed]).args(history));
    assert_eq!(sample("7"), sample("7"));
    let beams: Value = serde_json::from_str(&stdout_of(
        pipeline_cmd("respond", &store).args(["--json", "--gen-strategy", "beam", "--gen-beams", "3", "--gen-return-sequences", "2"]).args(history),
    ))
    .unwrap();
    assert_eq!(beams["responses"].as_array().unwrap().len(), 2, "{beams}");
    // The logits processors' flags reach the generator: the reply of the same settings set
    // directly, and another reply than without them.
    let flags = ["--json", "--gen-strategy", "greedy", "--gen-no-repeat-ngram-size", "1", "--gen-min-new-tokens", "10", "--gen-repetition-penalty", "1.5"];
    let v: Value = serde_json::from_str(&stdout_of(pipeline_cmd("respond", &store).args(flags).args(history))).unwrap();
    settings.max_new_tokens = g.settings().max_new_tokens;
    let plain = g.generate_batch(&[GenerationInput::new(&messages, &knowledge)], &settings).unwrap();
    (settings.no_repeat_ngram_size, settings.min_new_tokens, settings.repetition_penalty) = (1, 10, 1.5);
    let direct = g.generate_batch(&[GenerationInput::new(&messages, &knowledge)], &settings).unwrap();
    assert_eq!(v["response"], json!(direct[0][0].text));
    assert_ne!(direct[0][0].tokens, plain[0][0].tokens);
    let mut seen = std::collections::HashSet::new();
    assert!(direct[0][0].tokens.iter().all(|t| seen.insert(t)), "no token twice (n-grams of 1): {:?}", direct[0][0].tokens);
    assert!(direct[0][0].tokens.len() > 10 && plain[0][0].tokens.len() < 10, "EOS held back: {:?} / {:?}", direct[0][0].tokens, plain[0][0].tokens);
}

#[test]
fn a_missing_input_leaves_an_existing_output_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let output = write(dir.path(), "answers.jsonl", b"{\"kept\": true}\n");
    let missing = dir.path().join("no-such-requests.jsonl");
    let run = pipeline_cmd("run", &store).arg("--input").arg(&missing).arg("--output").arg(&output).assert().code(1);
    assert!(String::from_utf8_lossy(&run.get_output().stderr).contains("no-such-requests.jsonl"));
    let retrieve = trellis()
        .arg("retrieve")
        .arg("--store")
        .arg(&store)
        .args(["--retriever", "bm25", "--input"])
        .arg(&missing)
        .arg("--output")
        .arg(&output)
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&retrieve.get_output().stderr).contains("opening"));
    assert_eq!(std::fs::read(&output).unwrap(), b"{\"kept\": true}\n");
}
