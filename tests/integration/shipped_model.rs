//! The models shipped in `models/` (trained by `tools/train/train.sh`, the encoders by
//! `encoders.sh` and `surge.sh`): the retriever (`gsr-opendialkg`), the generator
//! (`generator-opendialkg`) and the encoder models load, `doctor` finds nothing wrong, on the bundled sample the retriever writes only real paths of the store (checked
//! against the sample's own lines), and the chain ends with a reply grounded in such paths.

use crate::common::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/gsr-opendialkg")
}

fn shipped_generator() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/generator-opendialkg")
}

#[test]
fn the_shipped_models_pass_doctor() {
    let encoders = ["dense-opendialkg", "dense-minilm-opendialkg", "rerank-opendialkg", "rerank-minilm-opendialkg", "surge-opendialkg"]
        .map(|m| Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(m));
    for model in [shipped(), shipped_generator()].into_iter().chain(encoders) {
        let out = trellis().args(["doctor", "--json", "--model"]).arg(&model).output().unwrap();
        assert!(out.status.success(), "{}: {}", model.display(), String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["problems"], serde_json::json!([]), "{v}");
        assert_eq!(v["ok"], true);
    }
}

#[test]
fn the_shipped_models_reply_on_the_sample() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(trellis().args(["index-tokens", "--linearization", "trellis", "--store"]).arg(&store).arg("--tokenizer").arg(shipped().join("tokenizer.json")));
    let out = stdout_of(
        trellis()
            .args(["respond", "--json", "--retriever", "gsr", "--store"])
            .arg(&store)
            .arg("--model")
            .arg(shipped())
            .arg("--generator")
            .arg(shipped_generator())
            .args(["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"]),
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reply = v["response"].as_str().unwrap();
    assert!(reply.split_whitespace().count() >= 2, "a reply of words: {v}");
    let facts = sample_facts();
    let paths = v["paths"].as_array().unwrap();
    assert!(!paths.is_empty(), "{v}");
    for p in paths {
        for t in p["triples"].as_array().unwrap() {
            let fact = (t["head"].as_str().unwrap().to_string(), t["relation"].as_str().unwrap().to_string(), t["tail"].as_str().unwrap().to_string());
            assert!(facts.contains(&fact), "not a fact of the sample: {t}");
        }
    }
}

/// The sample's facts in stored orientation (`~r(a, b)` is `r(b, a)`), read independently.
fn sample_facts() -> HashSet<(String, String, String)> {
    let text = std::fs::read_to_string(fixture("opendialkg-sample.tsv")).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut c = l.split('\t');
            let (s, r, o) = (c.next()?, c.next()?, c.next()?);
            Some(match r.strip_prefix('~') {
                Some(base) => (o.to_string(), base.to_string(), s.to_string()),
                None => (s.to_string(), r.to_string(), o.to_string()),
            })
        })
        .collect()
}

/// The sample store token-indexed for the shipped retriever, and four requests about it (one
/// to three messages, a pronoun among them) written as a request file: (the folder holding
/// both, the store, the file, the requests' histories).
fn sample_with_four_requests() -> (tempfile::TempDir, PathBuf, PathBuf, Vec<Vec<&'static str>>) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(trellis().args(["index-tokens", "--linearization", "trellis", "--store"]).arg(&store).arg("--tokenizer").arg(shipped().join("tokenizer.json")));
    let dialogs = vec![
        vec!["Do you know anything about Jordan Spieth?"],
        vec!["I loved Happy Gilmore.", "Me too, Adam Sandler is so funny. Do you like him?"],
        vec!["Who wrote Coraline?", "Neil Gaiman did. Have you read it?", "Yes! What else did he write?"],
        vec!["I want to watch something with Will Smith in it."],
    ];
    let requests: String = dialogs.iter().enumerate().map(|(i, h)| serde_json::json!({"id": i, "history": h}).to_string() + "\n").collect();
    let input = write(dir.path(), "requests.jsonl", requests.as_bytes());
    (dir, store, input, dialogs)
}

#[test]
fn the_shipped_model_retrieves_real_paths_on_the_sample() {
    let (dir, store, input, dialogs) = sample_with_four_requests();
    let output = dir.path().join("answers.jsonl");
    stdout_of(
        trellis()
            .args(["retrieve", "--retriever", "gsr", "--top", "5", "--store"])
            .arg(&store)
            .arg("--model")
            .arg(shipped())
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output),
    );
    let facts = sample_facts();
    let answers: Vec<serde_json::Value> = std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), dialogs.len());
    let mut paths = 0;
    for a in &answers {
        assert!(!a["mentioned"].as_array().unwrap().is_empty(), "{a}");
        let found = a["paths"].as_array().unwrap();
        assert!(!found.is_empty(), "a dialog with linked entities gets paths: {a}");
        for p in found {
            let mut at: Option<String> = None;
            for t in p["triples"].as_array().unwrap() {
                let (h, r, o) = (t["head"].as_str().unwrap(), t["relation"].as_str().unwrap(), t["tail"].as_str().unwrap());
                assert!(facts.contains(&(h.to_string(), r.to_string(), o.to_string())), "not a fact of the sample: {t}");
                let reverse = t["reverse"].as_bool().unwrap();
                let (from, to) = if reverse { (o, h) } else { (h, o) };
                if let Some(prev) = &at {
                    assert_eq!(prev, from, "hops of a path connect: {p}");
                }
                at = Some(to.to_string());
            }
            paths += 1;
        }
    }
    assert!(paths >= dialogs.len());
    // The answers recorded with the shipped models (fixtures/shipped/README.md).
    let golden: Vec<serde_json::Value> =
        std::fs::read_to_string(fixture("shipped/gsr-sample-answers.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), golden.len());
    for (i, (a, g)) in answers.iter().zip(&golden).enumerate() {
        assert_same(a, g, &format!("answer {i}"));
    }
}

/// `got` equals `want` but for numbers, which may differ by 1e-6 relative: this machine gives
/// the recorded bytes, another CPU's ONNX Runtime kernels (AVX2 against AVX-512) may round
/// otherwise in the last bits, and that is not what these goldens guard.
fn assert_same(got: &serde_json::Value, want: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (got, want) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{at}: {a} against the recorded {b}");
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{at}: fields");
            for (k, x) in a {
                assert_same(x, &b[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(got, want, "{at}"),
    }
}

/// The chain of the shipped retriever and generator (beam search, three sequences) writes the
/// replies, scores and knowledge recorded with them (fixtures/shipped/README.md): on this
/// machine byte for byte but for the timings.
#[test]
fn the_shipped_chain_replies_as_recorded() {
    let (dir, store, input, _dialogs) = sample_with_four_requests();
    let output = dir.path().join("replies.jsonl");
    stdout_of(
        trellis()
            .args(["run", "--retriever", "gsr", "--gen-beams", "4", "--gen-return-sequences", "3", "--store"])
            .arg(&store)
            .arg("--model")
            .arg(shipped())
            .arg("--generator")
            .arg(shipped_generator())
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output),
    );
    let got: Vec<serde_json::Value> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("timings");
            v
        })
        .collect();
    let want: Vec<serde_json::Value> =
        std::fs::read_to_string(fixture("shipped/run-sample-replies.jsonl")).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_same(g, w, &format!("reply {i} (tests/fixtures/shipped/run-sample-replies.jsonl)"));
    }
}

/// Requests about the sample's films: a first message naming a film and, for every other
/// request, a second one naming one of its actors, so inputs differ in length (padding in a
/// batch) and in how many entities they mention.
fn sample_requests(n: usize) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(fixture("opendialkg-sample.tsv")).unwrap();
    let mut films: Vec<(String, String)> = Vec::new();
    for l in text.lines() {
        let c: Vec<&str> = l.split('\t').collect();
        if c.len() == 3 && c[1] == "starred_actors" && !films.iter().any(|(f, _)| f == c[0]) {
            films.push((c[0].to_string(), c[2].to_string()));
        }
    }
    assert!(films.len() >= n, "the sample has {} films with actors", films.len());
    films
        .into_iter()
        .take(n)
        .enumerate()
        .map(|(i, (film, actor))| {
            let mut history = vec![format!("Have you seen {film}?")];
            if i % 2 == 1 {
                history.push(format!("Yes! {actor} was in it, and I liked the music too. Who else starred in {film}?"));
            }
            serde_json::json!({"id": format!("r{i}"), "history": history})
        })
        .collect()
}

/// Runs `args` over `requests` written in `order` and returns each output line by its id,
/// without its input line number (and `run`'s without its timings).
fn answers_by_id(
    dir: &Path,
    name: &str,
    requests: &[serde_json::Value],
    order: &[usize],
    args: &[&std::ffi::OsStr],
) -> std::collections::BTreeMap<String, String> {
    let input = dir.join(format!("{name}.jsonl"));
    let output = dir.join(format!("{name}.out.jsonl"));
    let lines: Vec<String> = order.iter().map(|&i| requests[i].to_string()).collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    stdout_of(trellis().args(args).arg("--input").arg(&input).arg("--output").arg(&output));
    let out = std::fs::read_to_string(&output).unwrap();
    let mut by_id = std::collections::BTreeMap::new();
    for line in out.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap().to_string();
        // Where the request sat in the input ("line") and a reply's stage timings (and its
        // batch's size) are about the run, not the answer.
        let o = v.as_object_mut().unwrap();
        assert!(o.remove("line").is_some(), "{line}");
        o.remove("timings");
        let line = v.to_string();
        assert!(by_id.insert(id, line).is_none(), "one answer per request");
    }
    assert_eq!(by_id.len(), requests.len());
    by_id
}

/// A request's answer is the same bytes whatever else is in its batch: the shipped models
/// (weight-only int8: float arithmetic, no activation scale shared by a batch) over the same
/// requests in three orders, batches of 1, 3, 5, 8 and all, one and two threads.
#[test]
fn the_shipped_models_answer_a_request_the_same_in_any_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    stdout_of(trellis().args(["index-tokens", "--linearization", "trellis", "--store"]).arg(&store).arg("--tokenizer").arg(shipped().join("tokenizer.json")));
    let requests = sample_requests(16);
    let n = requests.len();
    let forward: Vec<usize> = (0..n).collect();
    let backward: Vec<usize> = (0..n).rev().collect();
    // A fixed shuffle: i -> 7i mod 16 (7 is prime to 16).
    let shuffled: Vec<usize> = (0..n).map(|i| (7 * i) % n).collect();
    let model = shipped();
    let generator = shipped_generator();
    let common = |cmd: &str| -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> =
            vec![cmd.into(), "--store".into(), store.clone().into(), "--retriever".into(), "gsr".into(), "--model".into(), model.clone().into()];
        if cmd == "run" {
            v.extend(["--generator".into(), generator.clone().into()]);
        }
        v
    };
    for cmd in ["retrieve", "run"] {
        let runs: [(&str, &[usize], &str, &str); 5] =
            [("a", &forward, "1", "1"), ("b", &forward, "8", "2"), ("c", &backward, "5", "2"), ("d", &shuffled, "3", "1"), ("e", &shuffled, "16", "2")];
        let mut first: Option<std::collections::BTreeMap<String, String>> = None;
        for (name, order, batch, threads) in runs {
            let mut args = common(cmd);
            args.extend(["--batch".into(), batch.into(), "--threads".into(), threads.into()]);
            let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            let got = answers_by_id(dir.path(), &format!("{cmd}-{name}"), &requests, order, &refs);
            match &first {
                None => first = Some(got),
                Some(want) => {
                    for (id, line) in want {
                        assert_eq!(&got[id], line, "{cmd}: request {id} answered differently with --batch {batch} --threads {threads}");
                    }
                }
            }
        }
        // The answers are real ones: every request gets paths (and, from run, a reply).
        for line in first.unwrap().values() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(!v["paths"].as_array().unwrap().is_empty(), "{cmd}: {line}");
        }
    }
}

/// The shipped generator is delexicalized: what it reads, what it is trained to write and
/// what a caller gets back go through the placeholders. Expected texts worked by hand from
/// the rules of schema/model.md ("Delexicalization") on the first dev turn: the path
/// `Jordan Spieth --Sport played--> Golf`, the reply "I know he played Golf".
#[test]
fn the_shipped_generator_reads_and_writes_placeholders() {
    use trellis::generate::targets::response_target;
    use trellis::generate::{GenerationConfig, GenerationInput, Generator, Triple};
    use trellis::link::Message;
    use trellis::model::{ModelDir, RuntimeOptions};
    let dir = ModelDir::open_spec(&shipped_generator()).unwrap();
    let config: GenerationConfig = dir.section().unwrap();
    let dialogs = trellis::dataset::opendialkg::read(&shared_data("opendialkg/dialogs_dev.csv")).unwrap();
    let t = response_target(&dir, &config, 0, &dialogs[0], &dialogs[0].samples[0]).unwrap();
    // Decoded by the tokenizer itself, loaded apart from Trellis.
    let raw = tokenizers::Tokenizer::from_file(shipped_generator().join("tokenizer.json")).unwrap();
    assert_eq!(raw.decode(&t.target_ids, true).unwrap(), "I know he played [E2]");

    let mut opts = RuntimeOptions::default();
    opts.threads = 1;
    opts.sessions = 1;
    let g = Generator::open(&shipped_generator(), &opts).unwrap();
    let history = [Message { speaker: "user".into(), text: "Do you know anything about Jordan Spieth?".into() }];
    let knowledge = [vec![Triple::new("Jordan Spieth", "Sport played", "Golf")]];
    let input = GenerationInput::new(&history, &knowledge);
    let e = g.encoder_input(&input, &g.settings().encoding).unwrap();
    assert_eq!(e.text, "knowledge: [Head] [E1] Jordan Spieth [Int1] Sport played [Int2] [E2] Golf [Tail]</s>dialogue: Do you know anything about [E1]?");
    assert_eq!(e.names, ["Jordan Spieth", "Golf"]);
    assert_eq!(t.input_ids, e.ids, "training input = run-time input");

    // Replies: the model's placeholders become the names, cased; none is left (the request
    // without knowledge has no names, and the model still writes placeholders there). The
    // expected text is the decoded tokens with each placeholder replaced by plain string
    // replacement.
    let names = ["Jordan Spieth", "Golf", "Adam Sandler", "Happy Gilmore"];
    let two = [vec![Triple::new("Adam Sandler", "~Starred actors", "Happy Gilmore")]];
    let h2 = [Message { speaker: "user".into(), text: "I loved Happy Gilmore.".into() }];
    let inputs = [input, GenerationInput::new(&history, &knowledge[..0]), GenerationInput::new(&h2, &two)];
    let out = g.generate_batch(&inputs, g.settings()).unwrap();
    let mut with_placeholder = 0;
    for (i, seqs) in out.iter().enumerate() {
        let gen = &seqs[0];
        let body: Vec<u32> = gen.tokens.iter().copied().filter(|&t| t != 1).collect();
        let mut want = raw.decode(&body, true).unwrap();
        with_placeholder += usize::from(want.contains("[E"));
        let here: &[&str] = match i {
            0 => &names[..2],
            1 => &[],
            _ => &names[2..],
        };
        for k in 1..=12 {
            match here.get(k - 1) {
                Some(name) => want = want.replace(&format!("[E{k}]"), name),
                // No entity for it: dropped with the space before it (at the start, after it).
                None => want = want.replace(&format!(" [E{k}]"), "").replace(&format!("[E{k}] "), "").replace(&format!("[E{k}]"), ""),
            }
        }
        assert_eq!(gen.text, want, "request {i}");
        assert!(!gen.text.contains("[E"), "request {i}: {}", gen.text);
    }
    assert!(with_placeholder >= 1, "the model wrote no placeholder: {out:?}");
}

/// A model directory copied without its `trellis.json` runs on the defaults (the paper's
/// dialoggsr linearization): against a store indexed for the model's real linearization the
/// error says the file is missing and which defaults were used, not only that the index
/// differs.
#[test]
fn a_retriever_without_its_trellis_json_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    for e in std::fs::read_dir(shipped()).unwrap().flatten() {
        if e.file_name() != "trellis.json" && e.path().is_file() {
            std::fs::copy(e.path(), model.join(e.file_name())).unwrap();
        }
    }
    let store = dir.path().join("kg");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let tokenizer = shipped().join("tokenizer.json");
    let indexed =
        trellis().arg("index-tokens").arg("--store").arg(&store).arg("--tokenizer").arg(&tokenizer).args(["--linearization", "trellis"]).output().unwrap();
    assert!(indexed.status.success());
    let input = write(dir.path(), "in.jsonl", b"{\"history\": [\"Jordan Spieth\"]}\n");
    let out = trellis()
        .args(["retrieve", "--retriever", "gsr", "--store"])
        .arg(&store)
        .arg("--model")
        .arg(&model)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(dir.path().join("out.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("has no trellis.json, so its defaults were used (linearization dialoggsr)"), "{err}");
}

/// The shipped generator never writes a placeholder its request has no entity for (which
/// relexicalization would drop, leaving a hole: "Do you like ", "written by Clint Eastwood and
/// directed by "): on dev assistant turns, with the gold path as knowledge and with none,
/// no generated token is a placeholder past the request's names, and no reply ends with the
/// lone space piece the tokenizer writes before a placeholder. The first 150 turns here;
/// `TRELLIS_DEV_TURNS=all` runs every dev turn (docs/results-2026-11-27.md).
#[test]
fn the_shipped_generator_writes_no_placeholder_without_an_entity() {
    use trellis::generate::{GenerationInput, Generator, KnowledgePath, Triple};
    use trellis::model::RuntimeOptions;
    let raw = tokenizers::Tokenizer::from_file(shipped_generator().join("tokenizer.json")).unwrap();
    let placeholders: Vec<u32> = (1..).map_while(|k| raw.token_to_id(&format!("[E{k}]"))).collect();
    assert!(placeholders.len() >= 8, "{placeholders:?}");
    let space = raw.token_to_id("\u{2581}").unwrap();
    let mut opts = RuntimeOptions::default();
    opts.threads = 2;
    opts.sessions = 1;
    let g = Generator::open(&shipped_generator(), &opts).unwrap();
    let mut dialogs = trellis::dataset::opendialkg::read(&shared_data("opendialkg/dialogs_dev.csv")).unwrap();
    trellis::dataset::opendialkg::keep_samples_of(&mut dialogs, "assistant");
    let limit = match std::env::var("TRELLIS_DEV_TURNS").as_deref() {
        Ok("all") => usize::MAX,
        _ => 150,
    };
    let turns: Vec<(&[trellis::link::Message], KnowledgePath)> = dialogs
        .iter()
        .flat_map(|d| d.samples.iter().map(move |s| (&d.messages[..s.upto], s.gold.iter().map(|(h, r, t)| Triple::new(h, r, t)).collect())))
        .filter(|(history, _)| !history.is_empty())
        .take(limit)
        .collect();
    let (mut replies, mut with_placeholders) = (0usize, 0usize);
    for chunk in turns.chunks(32) {
        for with_knowledge in [true, false] {
            let knowledge: Vec<Vec<KnowledgePath>> = chunk.iter().map(|(_, k)| if with_knowledge { vec![k.clone()] } else { vec![] }).collect();
            let inputs: Vec<GenerationInput<'_>> = chunk.iter().zip(&knowledge).map(|((h, _), k)| GenerationInput::new(h, k)).collect();
            let out = g.generate_batch(&inputs, g.settings()).unwrap();
            for (input, seqs) in inputs.iter().zip(&out) {
                let names = g.encoder_input(input, &g.settings().encoding).unwrap().names.len();
                let tokens = &seqs[0].tokens;
                let bad: Vec<u32> = tokens.iter().copied().filter(|t| placeholders[names.min(placeholders.len())..].contains(t)).collect();
                assert!(bad.is_empty(), "{names} names, placeholders {bad:?} written: {:?}", seqs[0].text);
                // Nor the lone space the tokenizer writes before a placeholder, then the end.
                assert!(!tokens.windows(2).any(|w| w == [space, 1]), "a space then the end: {:?}", seqs[0].text);
                with_placeholders += usize::from(tokens.iter().any(|t| placeholders.contains(t)));
                replies += 1;
            }
        }
    }
    // Greedy decoding bans the same tokens (its own code path), on the first turns.
    let mut greedy = g.settings().clone();
    greedy.strategy = trellis::generate::Strategy::Greedy;
    let none: Vec<KnowledgePath> = Vec::new();
    let inputs: Vec<GenerationInput<'_>> = turns.iter().take(64).map(|(h, _)| GenerationInput::new(h, &none)).collect();
    for (input, seqs) in inputs.iter().zip(g.generate_batch(&inputs, &greedy).unwrap()) {
        let names = g.encoder_input(input, &g.settings().encoding).unwrap().names.len();
        let tokens = &seqs[0].tokens;
        assert!(!tokens.iter().any(|t| placeholders[names.min(placeholders.len())..].contains(t)), "greedy: {:?}", seqs[0].text);
        assert!(!tokens.windows(2).any(|w| w == [space, 1]), "greedy, a space then the end: {:?}", seqs[0].text);
    }
    // The model still writes the placeholders it has entities for.
    assert!(with_placeholders * 4 >= replies / 2, "{with_placeholders} of {replies}");
    eprintln!("{replies} replies, {with_placeholders} with a placeholder, none without its entity");
}

fn model_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models").join(name)
}

/// The MiniLM cross-encoder on its real weights (issue 36) against
/// `tools/reference/minilm_goldens.py`: the pretrained WordPiece tokenizer's ids of pairs with
/// capitals, accents, punctuation, digits, Chinese and Japanese, and texts past 96 tokens,
/// exactly; the logits within 1e-4 of onnxruntime's on the same int8 file, and within a tenth
/// of their spread of the float PyTorch model it was exported from.
#[test]
fn the_minilm_reranker_matches_its_python_reference() {
    use trellis::model::encoder::CrossEncoder;
    use trellis::model::RuntimeOptions;
    let g: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("encoders/minilm-rerank-goldens.json")).unwrap()).unwrap();
    let m = CrossEncoder::open(&model_dir("rerank-minilm-opendialkg"), &RuntimeOptions::default(), 5).unwrap();
    assert_eq!(m.dir().max_length() as u64, g["max_length"].as_u64().unwrap());
    let pairs: Vec<(String, String)> =
        g["pairs"].as_array().unwrap().iter().map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_str().unwrap().to_owned())).collect();
    let ids = |v: &serde_json::Value| -> Vec<u32> { v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect() };
    let floats = |v: &serde_json::Value| -> Vec<f32> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect() };
    let mut cut = 0;
    for (i, (q, p)) in pairs.iter().enumerate() {
        let (token_ids, type_ids) = m.dir().pair_ids(q, p).unwrap();
        assert_eq!(token_ids, ids(&g["input_ids"][i]), "token ids of pair {i}: {q:?} / {p:?}");
        assert_eq!(type_ids, ids(&g["token_type_ids"][i]), "type ids of pair {i}");
        cut += usize::from(token_ids.len() == m.dir().max_length());
    }
    assert!(cut > 0, "some pair must be cut at max_length");
    let refs: Vec<(&str, &str)> = pairs.iter().map(|(q, p)| (q.as_str(), p.as_str())).collect();
    let got = m.score(&refs).unwrap();
    let (int8, float) = (floats(&g["logits_int8"]), floats(&g["logits_float"]));
    let tolerance = g["float_tolerance"].as_f64().unwrap() as f32;
    for (i, ((a, b), c)) in got.iter().zip(&int8).zip(&float).enumerate() {
        assert!((a - b).abs() <= 1e-4, "pair {i}: {a} against onnxruntime's {b}");
        assert!((a - c).abs() <= tolerance, "pair {i}: {a} against PyTorch's {c} (tolerance {tolerance})");
    }
}

/// The MiniLM bi-encoder on its real weights (issue 36) against
/// `tools/reference/minilm_goldens.py --task dense`: the WordPiece ids of queries (the last 3
/// messages newest first) and paths, one cut at max_length, exactly; the mean-pooled,
/// normalized vectors within 1e-4 of onnxruntime's on the same int8 file, and within the
/// export check's 0.05 a float of the fine-tuned PyTorch model it was exported from.
#[test]
fn the_minilm_bi_encoder_matches_its_python_reference() {
    use trellis::model::encoder::BiEncoder;
    use trellis::model::RuntimeOptions;
    let g: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("encoders/minilm-dense-goldens.json")).unwrap()).unwrap();
    let m = BiEncoder::open(&model_dir("dense-minilm-opendialkg"), &RuntimeOptions::default(), 4).unwrap();
    assert_eq!(m.dir().max_length() as u64, g["max_length"].as_u64().unwrap());
    let texts: Vec<&str> = g["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let mut cut = 0;
    for (i, t) in texts.iter().enumerate() {
        let ids: Vec<u32> = g["input_ids"][i].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        let got = m.dir().token_ids(t).unwrap();
        assert_eq!(got, ids, "token ids of text {i}: {t:?}");
        cut += usize::from(got.len() == m.dir().max_length());
    }
    assert!(cut > 0, "some text must be cut at max_length");
    let got = m.embed_documents(&texts).unwrap();
    let tolerance = g["float_tolerance"].as_f64().unwrap() as f32;
    for (i, v) in got.iter().enumerate() {
        let int8: Vec<f32> = g["vectors_int8"][i].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let float: Vec<f32> = g["vectors_float"][i].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        assert_eq!(v.len(), int8.len(), "text {i}: width");
        for (j, ((a, b), c)) in v.iter().zip(&int8).zip(&float).enumerate() {
            assert!((a - b).abs() <= 1e-4, "text {i} float {j}: {a} against onnxruntime's {b}");
            assert!((a - c).abs() <= tolerance, "text {i} float {j}: {a} against PyTorch's {c}");
        }
    }
}

/// A mixed pool (issue 36): gsr's T5 model (SentencePiece, cased) writes paths through the
/// token index of its own tokenizer, PCST adds its own, and the MiniLM reranker (WordPiece,
/// lower-cased, another vocabulary) scores the union: every returned score is the
/// cross-encoder's logit of (the last 3 messages newest first, the path's text) computed here
/// apart, so the verbalization and the caches do not carry one model's tokens into the other's.
#[test]
fn a_t5_retriever_and_a_wordpiece_reranker_pool_together() {
    use trellis::model::encoder::CrossEncoder;
    use trellis::model::RuntimeOptions;
    let tmp = tempfile::tempdir().unwrap();
    let (store, input) = crate::encoders::sample(tmp.path());
    stdout_of(trellis().args(["index-tokens", "--linearization", "trellis", "--store"]).arg(&store).arg("--tokenizer").arg(shipped().join("tokenizer.json")));
    let rerank = model_dir("rerank-minilm-opendialkg");
    let gsr = shipped();
    let args = [
        "--retriever",
        "gsr",
        "--model",
        gsr.to_str().unwrap(),
        "--rerank",
        rerank.to_str().unwrap(),
        "--rerank-pool",
        "pcst",
        "--rerank-top",
        "5",
        "--rerank-fusion",
        "0",
        "--top",
        "100",
    ];
    let answers = crate::encoders::retrieve(&store, &input, &tmp.path().join("out.jsonl"), &args);
    let encoder = CrossEncoder::open(&rerank, &RuntimeOptions::default(), 7).unwrap();
    let mut scored = 0;
    for answer in &answers {
        let history = crate::encoders::history_of(&input, answer["id"].as_str().unwrap());
        let h: Vec<&str> = history.iter().map(String::as_str).collect();
        let q = crate::encoders::query(&h, 3);
        let texts: Vec<String> = answer["paths"].as_array().unwrap().iter().map(crate::encoders::path_text).collect();
        if texts.is_empty() {
            continue;
        }
        let pairs: Vec<(&str, &str)> = texts.iter().map(|t| (q.as_str(), t.as_str())).collect();
        let want = encoder.score(&pairs).unwrap();
        for (p, w) in answer["paths"].as_array().unwrap().iter().zip(&want) {
            assert_eq!(p["score"].as_f64().unwrap(), f64::from(*w), "{}: {}", answer["id"], crate::encoders::path_text(p));
        }
        scored += texts.len();
    }
    assert!(scored >= 10, "the sample's requests must give the pool paths to rerank ({scored})");
}

/// The pretrained all-MiniLM-L6-v2 exported zero-shot, as a user's sentence-transformers export
/// is (issue 36), against sentence-transformers itself on the real weights
/// (`tools/train/pretrained.py goldens`): the ids of transformers' tokenizer exactly (capitals,
/// accents, Japanese, an empty text, one past the 256-token limit) and `encode`'s vectors
/// within 1e-5. Ignored: the export is 90 MB of float weights that CI has no copy of; run it
/// with `TRELLIS_ZERO_SHOT_MODEL=DIR` (the steps in `tools/train/pretrained.py`).
#[test]
#[ignore]
fn the_zero_shot_minilm_export_matches_sentence_transformers() {
    use trellis::model::encoder::BiEncoder;
    use trellis::model::RuntimeOptions;
    let dir = PathBuf::from(std::env::var_os("TRELLIS_ZERO_SHOT_MODEL").expect("TRELLIS_ZERO_SHOT_MODEL: the export's directory"));
    let g: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("encoders/minilm-zero-shot-goldens.json")).unwrap()).unwrap();
    // The goldens belong to the weights the export was made from.
    let provenance: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(provenance["weights"]["sha256"], g["weights_sha256"], "the export's weights are not the goldens'");
    let m = BiEncoder::open(&dir, &RuntimeOptions::default(), 4).unwrap();
    assert_eq!(m.dir().max_length() as u64, g["max_length"].as_u64().unwrap());
    let texts: Vec<&str> = g["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let mut cut = 0;
    for (i, t) in texts.iter().enumerate() {
        let want: Vec<u32> = g["input_ids"][i].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        let got = m.dir().token_ids(t).unwrap();
        assert_eq!(got, want, "token ids of text {i}: {t:?}");
        cut += usize::from(got.len() == m.dir().max_length());
    }
    assert!(cut > 0, "some text must be cut at max_length");
    let got = m.embed_documents(&texts).unwrap();
    let mut worst = 0f32;
    for (i, v) in got.iter().enumerate() {
        let want: Vec<f32> = g["vectors"][i].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        assert_eq!(v.len(), want.len(), "text {i}: width");
        for (j, (a, b)) in v.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-5, "text {i} float {j}: {a} against sentence-transformers' {b}");
            worst = worst.max((a - b).abs());
        }
    }
    eprintln!("{} texts: the largest difference from sentence-transformers {worst:.2e}", texts.len());
}
