//! Every numeric option of `retrieve`, `run`, `link` and `eval`, given 0, 1, -1, the top of
//! its range, one past it, 2^64 - 1, NaN and inf, on the sample store with the tiny fixture
//! models: the command ends with exit 0 or 2, never by a signal (a panic, an abort, the
//! kernel's OOM killer) and never 1; a value outside the range of `trellis::limits` exits 2
//! with that range in the message, and a value inside it runs.

use crate::common::*;
use crate::gsr::sample_store;
use std::path::{Path, PathBuf};
use trellis::limits::{self, FloatRange, IntRange};

#[derive(Clone, Copy)]
enum Range {
    Int(IntRange),
    Float(FloatRange),
}

impl Range {
    fn text(&self) -> String {
        match self {
            Range::Int(r) => r.to_string(),
            Range::Float(r) => r.to_string(),
        }
    }

    fn contains(&self, value: &str) -> bool {
        match self {
            Range::Int(r) => value.parse::<u64>().is_ok_and(|v| r.contains(v)),
            Range::Float(r) => value.parse::<f64>().is_ok_and(|v| r.contains(v)),
        }
    }

    /// 0, 1, -1, the top, one past it, 2^64 - 1, NaN, inf.
    fn values(&self) -> Vec<String> {
        let (max, past) = match self {
            Range::Int(r) => (r.max.to_string(), (u128::from(r.max) + 1).to_string()),
            Range::Float(r) => (r.max.to_string(), (r.max + 1.0).to_string()),
        };
        ["0", "1", "-1", &max, &past, "18446744073709551615", "NaN", "inf"].iter().map(|s| s.to_string()).collect()
    }
}

/// A command line as flag-value pairs (so the option under test replaces its default)
/// followed by free arguments.
struct Command {
    args: Vec<String>,
    pairs: Vec<(&'static str, String)>,
}

impl Command {
    fn new(args: &[&str]) -> Command {
        Command { args: args.iter().map(|s| s.to_string()).collect(), pairs: Vec::new() }
    }

    fn with(mut self, flag: &'static str, value: impl AsRef<std::ffi::OsStr>) -> Command {
        self.pairs.push((flag, value.as_ref().to_string_lossy().into_owned()));
        self
    }

    fn line(&self, flag: &str, value: &str) -> Vec<String> {
        let mut out = self.args.clone();
        for (f, v) in self.pairs.iter().filter(|(f, _)| *f != flag) {
            out.push(f.to_string());
            out.push(v.clone());
        }
        out.push(flag.into());
        out.push(value.into());
        out
    }
}

/// Runs every (option, value) pair, a few processes at a time; returns the failures.
fn fuzz(cmd: &Command, options: &[(&'static str, Range)]) -> Vec<String> {
    let jobs: Vec<(&str, Range, String)> = options.iter().flat_map(|&(flag, range)| range.values().into_iter().map(move |v| (flag, range, v))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((flag, range, value)) = jobs.get(i) else { break };
                let mut line = cmd.line(flag, value);
                // An output of its own: two runs on one --output refuse each other (its
                // partial file is locked while a run writes it).
                if let Some(at) = line.iter().position(|a| a == "--output") {
                    line[at + 1] = format!("{}.{i}", line[at + 1]);
                }
                let out = std::process::Command::new(bin_path()).args(&line).output().expect("runs");
                let err = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code();
                let ok = match code {
                    // A value in range runs; only a rule between settings (return_sequences
                    // above the model's beams, a path longer than max_new_tokens) refuses it.
                    Some(0) => range.contains(value),
                    Some(2) if range.contains(value) => err.contains(" must be ") && !err.contains(&range.text()),
                    // Refused by clap's value parser, or by the library's settings (which
                    // name the setting as the library does: `--max-ngram` is `max_ngram`).
                    Some(2) => {
                        let library = format!("error: {} must be", flag.trim_start_matches("--").replace('-', "_"));
                        (err.contains(&format!("'{flag} <")) || err.contains(&library)) && err.contains(&range.text())
                    }
                    _ => false,
                };
                if !ok {
                    failures.lock().unwrap().push(format!("{flag} {value}: {:?}\n{}", out.status, err.trim_end()));
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

fn setup(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let store = sample_store(dir);
    let requests = write(dir, "requests.jsonl", b"{\"id\": 1, \"history\": [\"Do you know anything about Jordan Spieth?\"]}\n");
    (store, requests, dir.join("out.jsonl"))
}

fn assert_none(failures: Vec<String>) {
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn retrieve_gsr_options_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (store, input, output) = setup(dir.path());
    let cmd = Command::new(&["retrieve", "--retriever", "gsr"])
        .with("--store", &store)
        .with("--model", fixture("gsr/tiny-split"))
        .with("--input", &input)
        .with("--output", &output)
        .with("--model-threads", "1");
    use limits::*;
    let options = [
        ("--alpha", Range::Float(ALPHA)),
        ("--start-recency", Range::Float(START_RECENCY)),
        ("--beams", Range::Int(BEAMS)),
        ("--return-sequences", Range::Int(RETURN_SEQUENCES)),
        ("--length-penalty", Range::Float(LENGTH_PENALTY)),
        ("--max-new-tokens", Range::Int(MAX_NEW_TOKENS)),
        ("--steps", Range::Int(STEPS)),
        ("--batch", Range::Int(BATCH)),
        ("--model-threads", Range::Int(MODEL_THREADS)),
    ];
    assert_none(fuzz(&cmd, &options));
}

#[test]
fn retrieve_and_link_options_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (store, input, output) = setup(dir.path());
    let cmd = Command::new(&["retrieve", "--retriever", "bm25"]).with("--store", &store).with("--input", &input).with("--output", &output);
    use limits::*;
    let options = [
        ("--bm25-turns", Range::Int(BM25_TURNS)),
        ("--top", Range::Int(PATHS_TOP)),
        ("--threads", Range::Int(THREADS)),
        ("--window", Range::Int(WINDOW)),
        ("--max-ngram", Range::Int(MAX_NGRAM)),
        ("--max-entities", Range::Int(MAX_ENTITIES)),
        ("--min-word-chars", Range::Int(MIN_WORD_CHARS)),
    ];
    assert_none(fuzz(&cmd, &options));
    let random = Command::new(&["retrieve", "--retriever", "random"]).with("--store", &store).with("--input", &input).with("--output", &output);
    assert_none(fuzz(&random, &[("--seed", Range::Int(SEED))]));
    let link = Command::new(&["link", "Do you know anything about Jordan Spieth?"]).with("--store", &store);
    assert_none(fuzz(&link, &options[3..]));
}

#[test]
fn run_generator_options_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (store, input, output) = setup(dir.path());
    let base = || {
        Command::new(&["run", "--retriever", "bm25"])
            .with("--store", &store)
            .with("--generator", fixture("generate/tiny-merged"))
            .with("--input", &input)
            .with("--output", &output)
            .with("--model-threads", "1")
    };
    use limits::*;
    let options = [
        ("--top", Range::Int(KNOWLEDGE_TOP)),
        ("--gen-beams", Range::Int(BEAMS)),
        ("--gen-return-sequences", Range::Int(RETURN_SEQUENCES)),
        ("--gen-length-penalty", Range::Float(LENGTH_PENALTY)),
        ("--gen-max-new-tokens", Range::Int(MAX_NEW_TOKENS)),
        ("--gen-no-repeat-ngram-size", Range::Int(NO_REPEAT_NGRAM_SIZE)),
        ("--gen-min-new-tokens", Range::Int(MIN_NEW_TOKENS)),
        ("--gen-repetition-penalty", Range::Float(REPETITION_PENALTY)),
        ("--sessions", Range::Int(SESSIONS)),
        ("--threads", Range::Int(THREADS)),
        ("--batch", Range::Int(BATCH)),
    ];
    assert_none(fuzz(&base(), &options));
    let sampling = [
        ("--gen-temperature", Range::Float(TEMPERATURE)),
        ("--gen-top-k", Range::Int(TOP_K)),
        ("--gen-top-p", Range::Float(TOP_P)),
        ("--gen-seed", Range::Int(SEED)),
    ];
    assert_none(fuzz(&base().with("--gen-strategy", "sample"), &sampling));
}

#[test]
fn eval_options_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let store = sample_store(dir.path());
    let messages = r#"[{"message": "Do you know anything about Jordan Spieth?", "type": "chat", "sender": "user"}, {"metadata": {"path": [-1, [["Jordan Spieth", "Sport played", "Golf"]], ""]}, "type": "action", "sender": "assistant", "action_id": "kgwalk/choose_path"}, {"message": "He plays Golf", "type": "chat", "sender": "assistant"}]"#;
    let csv = write(dir.path(), "dialogs.csv", format!("Messages,User Rating,Assistant Rating\n\"{}\",5,5\n", messages.replace('"', "\"\"")).as_bytes());
    let cmd = Command::new(&["eval", "retrieval", "--retriever", "bm25"]).with("--store", &store).with("--input", &csv);
    use limits::*;
    assert_none(fuzz(&cmd, &[("--k", Range::Int(EVAL_K)), ("--max-turns", Range::Int(MAX_TURNS))]));
}

/// The ranges named in the messages, exactly.
#[test]
fn out_of_range_values_name_the_flag_and_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let (store, input, output) = setup(dir.path());
    let retrieve = |extra: &[&str]| {
        let mut c = trellis();
        c.arg("retrieve").arg("--store").arg(&store).arg("--input").arg(&input).arg("--output").arg(&output).args(extra);
        let out = c.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).trim_end().to_string())
    };
    // The library checks the settings: its sentence, named as the library names the setting.
    assert_eq!(retrieve(&["--retriever", "bm25", "--max-entities", "0"]), (Some(2), "error: max_entities must be within 1..=64, not 0".into()));
    let (code, err) = retrieve(&["--retriever", "bm25", "--window", "-1"]);
    assert_eq!(code, Some(2));
    assert_eq!(err, "error: window must be within 1..=1024, not -1");
    let (code, err) = retrieve(&["--retriever", "gsr", "--beams", "18446744073709551615"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("beams must be within 1..=64, not 18446744073709551615"), "{err}");
    let (code, err) = retrieve(&["--retriever", "gsr", "--length-penalty", "NaN"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("length_penalty must be a finite number within [-100, 100], not NaN"), "{err}");
    // A rule between settings, found when the model is opened: exit 2 too.
    let model = fixture("gsr/tiny-split");
    let (code, err) = retrieve(&["--retriever", "gsr", "--model", model.to_str().unwrap(), "--return-sequences", "6"]);
    assert_eq!((code, err.as_str()), (Some(2), "error: generative retrieval: return_sequences must be within 1..=5, not 6"));
    // The shortest dialoggsr path: [HEAD] e [Int1_1][Int1_2] r [Int2_1][Int2_2] e [TAIL] EOS.
    let (code, err) = retrieve(&["--retriever", "gsr", "--model", model.to_str().unwrap(), "--model-threads", "1", "--max-new-tokens", "9"]);
    assert_eq!(code, Some(2));
    assert!(
        err.ends_with(
            "max_new_tokens must be at least 10 with the dialoggsr linearization (its shortest path: five or more boundary tokens, three names and EOS), not 9"
        ),
        "{err}"
    );
    let (code, err) = retrieve(&["--retriever", "gsr", "--model", model.to_str().unwrap(), "--model-threads", "1", "--max-new-tokens", "10"]);
    assert_eq!(code, Some(0), "{err}");
}

/// A batch whose beams would hold more than the budget is decoded in smaller batches, and
/// the command says so; the answers are the same.
#[test]
fn a_batch_too_big_for_memory_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (store, input, output) = setup(dir.path());
    let run = |batch: &str| {
        let out = trellis()
            .arg("retrieve")
            .arg("--store")
            .arg(&store)
            .args(["--retriever", "gsr", "--model-threads", "1", "--beams", "64", "--batch", batch, "--model"])
            .arg(fixture("gsr/tiny-split"))
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8_lossy(&out.stderr).to_string(), std::fs::read_to_string(&output).unwrap())
    };
    // The tiny model (2 decoder layers, 4 heads of 8, 1529 tokens, 256 input tokens, 64 new):
    // per row 2*2*4*8*4 bytes x 320 positions + 1529 x 8, 64 rows, and 4 x 256^2 x 4 bytes of
    // encoder attention: 12 317 184 bytes a request, 174 requests in 2 GiB.
    let per_request: u64 = 64 * (512 * 320 + 1529 * 8) + 4 * 256 * 256 * 4;
    assert_eq!(per_request, 12_317_184);
    assert_eq!((limits::DECODE_MEMORY_BUDGET / per_request), 174);
    let (cut, cut_answers) = run("4096");
    assert!(cut.contains("note: gsr: decoding 174 requests at a time, not --batch 4096: 4096 x 64 beams would hold more than 2048 MiB"), "{cut}");
    let (whole, whole_answers) = run("8");
    assert!(!whole.contains("note:"), "{whole}");
    assert_eq!(cut_answers, whole_answers);
}

/// A `trellis.json` number `run` would refuse, `doctor` refuses too, and each sentence of an
/// error is printed once.
#[test]
fn doctor_checks_the_numbers_run_checks() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    for f in std::fs::read_dir(fixture("generate/tiny-merged")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, model.join(f.file_name().unwrap())).unwrap();
    }
    let trellis_json = |text: &str| std::fs::write(model.join("trellis.json"), text).unwrap();
    let doctor = || {
        let out = trellis().arg("doctor").arg("--model").arg(&model).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    trellis_json(r#"{"task": "generator", "generation": {"stop_ids": [999999]}}"#);
    let (code, out) = doctor();
    assert_eq!(code, Some(65), "{out}");
    assert!(out.contains("field `generation.stop_ids[0]`: must be a token id within 0..=1528 (config.json's vocab_size is 1529), not 999999."), "{out}");
    trellis_json(r#"{"task": "generator", "generation": {"beams": 1000}}"#);
    let (code, out) = doctor();
    assert_eq!(code, Some(65), "{out}");
    assert!(out.contains("field `generation.beams`: must be within 1..=64, not 1000."), "{out}");
    // A message that embeds its cause's text: the cause is not printed again.
    trellis_json("{\"task\": \"generator\",");
    let store = sample_store(dir.path());
    let out = trellis().arg("respond").arg("--store").arg(&store).arg("--generator").arg(&model).args(["--retriever", "bm25", "hi"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // serde_json's sentence, which ModelDirError::Json's message embeds.
    let cause = "EOF while parsing a value at line 1 column 21";
    assert_eq!(err.matches(cause).count(), 1, "{err}");
}

/// The library's constructors refuse what the command line refuses, with the same sentence.
#[test]
fn library_constructors_refuse_out_of_range_settings() {
    use std::sync::Arc;
    use trellis::link::{LinkConfig, Linker};
    use trellis::retrieve::gsr::GsrOptions;
    use trellis::retrieve::{Retriever, RetrieverConfig, RetrieverKind};
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(trellis::Store::open_read_only(sample_store(dir.path())).unwrap());
    assert_eq!(
        refused(Linker::new(store.clone(), {
            let mut o = LinkConfig::default();
            o.max_entities_per_mention = 0;
            o
        })),
        "max_entities must be within 1..=64, not 0"
    );
    assert_eq!(
        refused(Linker::new(store.clone(), {
            let mut o = LinkConfig::default();
            o.decay = f32::NAN;
            o
        })),
        "decay must be a finite number within [0, 1], not NaN"
    );
    let mut cfg = RetrieverConfig::new(RetrieverKind::Bm25);
    cfg.bm25_turns = 0;
    assert_eq!(refused(Retriever::new(store.clone(), cfg)), "bm25_turns must be within 1..=1024, not 0");
    // Refused before the model is loaded.
    let mut o = GsrOptions::new(fixture("gsr/tiny-split"));
    o.runtime.threads = 100_000;
    let cfg = RetrieverConfig::new(RetrieverKind::Gsr(o));
    assert_eq!(refused(Retriever::new(store.clone(), cfg)), "model_threads must be within 0..=256, not 100000");
    let mut o = GsrOptions::new(fixture("gsr/tiny-split"));
    o.runtime.threads = 1;
    o.overrides.beams = Some(3);
    o.overrides.return_sequences = Some(4);
    let cfg = RetrieverConfig::new(RetrieverKind::Gsr(o));
    assert_eq!(refused(Retriever::new(store, cfg)), "generative retrieval: return_sequences must be within 1..=3, not 4");
}

fn refused<T>(r: Result<T, impl std::fmt::Display>) -> String {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}
