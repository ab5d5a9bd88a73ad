//! The response generator against transformers: for every input encoding, the encoder
//! texts and ids of an independent Python statement of the rules, and the token sequences
//! of transformers `generate` (greedy, greedy with a stop id, beam search with 2 returned
//! sequences, and both again with logits processors on) on the PyTorch twin of
//! tests/fixtures/generate/tiny-* (written by tools/reference/generate_fixture.py), with both
//! model layouts; seeded sampling, stop texts and refusals.

use crate::common::fixture;
use serde_json::Value;
use std::path::PathBuf;
use trellis::generate::{
    BeamSettings, Finish, GenerateError, GenerateSettings, Generated, GenerationInput, Generator, InputEncoding, KnowledgePath, KnowledgeProblem, Sampling,
    Strategy, Template, Triple,
};
use trellis::link::Message;
use trellis::model::dir::ModelDirError;
use trellis::model::RuntimeOptions;

/// Scores: ONNX Runtime's logits differ from PyTorch's by about 1e-5.
const SCORE_TOLERANCE: f64 = 1e-3;

fn goldens() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("generate/goldens.json")).expect("tools/reference/generate_fixture.py writes it")).unwrap()
}

fn model(layout: &str) -> PathBuf {
    fixture(&format!("generate/tiny-{layout}"))
}

fn open(layout: &str) -> Generator {
    Generator::open(&model(layout), &{
        let mut o = RuntimeOptions::default();
        o.threads = 1;
        o
    })
    .unwrap_or_else(|e| panic!("tiny-{layout}: {e}"))
}

struct Example {
    name: String,
    history: Vec<Message>,
    knowledge: Vec<KnowledgePath>,
    encodings: Value,
}

fn examples(g: &Value) -> Vec<Example> {
    g["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| Example {
            name: e["name"].as_str().unwrap().into(),
            history: e["history"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| Message { speaker: m["speaker"].as_str().unwrap().into(), text: m["text"].as_str().unwrap().into() })
                .collect(),
            knowledge: e["knowledge"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_array().unwrap().iter().map(|t| Triple::new(t[0].as_str().unwrap(), t[1].as_str().unwrap(), t[2].as_str().unwrap())).collect())
                .collect(),
            encodings: e["encodings"].clone(),
        })
        .collect()
}

fn encodings(g: &Value) -> Vec<(&'static str, InputEncoding)> {
    vec![
        ("dialoggsr", InputEncoding::DialogGsr),
        ("surge", InputEncoding::Surge),
        ("invariant", InputEncoding::Invariant),
        ("efficient", InputEncoding::Efficient),
        ("template", InputEncoding::Template(Template::new(g["template"].as_str().unwrap()).unwrap())),
    ]
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn settings(encoding: InputEncoding, strategy: Strategy, max_new_tokens: usize) -> GenerateSettings {
    {
        let mut o = GenerateSettings::default();
        o.encoding = encoding;
        o.strategy = strategy;
        o.max_new_tokens = max_new_tokens;
        o.stop_ids = Vec::new();
        o.stop = Vec::new();
        o.batch = 8;
        o.no_repeat_ngram_size = 0;
        o.min_new_tokens = 0;
        o.repetition_penalty = 1.0;
        o
    }
}

fn beam4() -> Strategy {
    Strategy::Beam({
        let mut o = BeamSettings::default();
        o.beams = 4;
        o.return_sequences = 2;
        o.length_penalty = 1.5;
        o.early_stopping = true;
        o
    })
}

fn inputs(ex: &[Example]) -> Vec<GenerationInput<'_>> {
    ex.iter().map(|e| GenerationInput::new(&e.history, &e.knowledge)).collect()
}

/// Compares one sequence with its golden; a difference is added to `failures`.
fn check_sequence(what: &str, got: &Generated, want: &Value, eos: u32, failures: &mut Vec<String>) {
    let tokens = ids(&want["tokens"]);
    let score = want["score"].as_f64().unwrap();
    if got.tokens != tokens {
        failures.push(format!("{what}: tokens {:?}, transformers {tokens:?}", got.tokens));
    } else if (got.score - score).abs() >= SCORE_TOLERANCE {
        failures.push(format!("{what}: score {} vs transformers {score}", got.score));
    }
    let finish = if got.tokens.last() == Some(&eos) { Finish::Eos } else { Finish::Length };
    assert_eq!(got.finish, finish, "{what}");
}

#[test]
fn generator_matches_transformers_for_every_encoding_and_layout() {
    let g = goldens();
    let ex = examples(&g);
    let max_new = g["max_new_tokens"].as_u64().unwrap() as usize;
    assert_eq!(g["beam"]["num_beams"], 4);
    let mut counts = [0usize; 4]; // greedy, greedy with a stop id, beam sequences, that ended in EOS
    let mut failures = Vec::new();
    for layout in ["merged", "split"] {
        let gen = open(layout);
        let eos = gen.model().config().eos_token_id;
        for (name, enc) in encodings(&g) {
            for e in &ex {
                let want = &e.encodings[name];
                let got = gen.encoder_input(&GenerationInput::new(&e.history, &e.knowledge), &enc).unwrap();
                assert_eq!(got.text, want["text"].as_str().unwrap(), "{} / {name}: text", e.name);
                assert_eq!(got.ids, ids(&want["ids"]), "{} / {name}: ids", e.name);
                assert_eq!(got.dropped_messages as u64, want["dropped_messages"].as_u64().unwrap(), "{} / {name}", e.name);
                assert_eq!(got.cut, want["cut"].as_bool().unwrap(), "{} / {name}", e.name);
            }
            // All examples in one batch: rows of different lengths, finishing at different steps.
            let greedy = gen.generate_batch(&inputs(&ex), &settings(enc.clone(), Strategy::Greedy, max_new)).unwrap();
            let beam = gen.generate_batch(&inputs(&ex), &settings(enc.clone(), beam4(), max_new)).unwrap();
            for (k, e) in ex.iter().enumerate() {
                let want = &e.encodings[name];
                assert_eq!(greedy[k].len(), 1);
                check_sequence(&format!("{layout} / {} / {name} / greedy", e.name), &greedy[k][0], &want["greedy"], eos, &mut failures);
                counts[0] += 1;
                counts[3] += usize::from(greedy[k][0].finish == Finish::Eos);
                let beams = want["beam"].as_array().unwrap();
                assert_eq!(beam[k].len(), beams.len(), "{layout} / {} / {name}: returned sequences", e.name);
                for (i, (got, w)) in beam[k].iter().zip(beams).enumerate() {
                    check_sequence(&format!("{layout} / {} / {name} / beam {i}", e.name), got, w, eos, &mut failures);
                    counts[2] += 1;
                    counts[3] += usize::from(got.finish == Finish::Eos);
                }
                if let Some(stop) = want.get("greedy_stop") {
                    let mut s = settings(enc.clone(), Strategy::Greedy, max_new);
                    s.stop_ids = vec![stop["stop_id"].as_u64().unwrap() as u32];
                    let got = gen.generate_batch(&[GenerationInput::new(&e.history, &e.knowledge)], &s).unwrap();
                    assert_eq!(got[0][0].tokens, ids(&stop["tokens"]), "{layout} / {} / {name}: greedy with a stop id", e.name);
                    assert_eq!(got[0][0].finish, Finish::Stop);
                    counts[1] += 1;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} sequences differ from transformers:\n{}", failures.len(), failures.join("\n"));
    // 7 examples x 5 encodings x 2 layouts.
    assert_eq!((counts[0], counts[2]), (70, 140), "{counts:?}");
    assert_eq!(counts[1], 70, "every golden has a greedy run with a stop id: {counts:?}");
    assert!(counts[3] >= 100, "most goldens end with EOS before max_new_tokens: {counts:?}");
}

/// A set of logits processors of goldens.json's `processor_settings` on top of `s`.
fn with_processors(mut s: GenerateSettings, p: &Value) -> GenerateSettings {
    s.no_repeat_ngram_size = p.get("no_repeat_ngram_size").map_or(0, |v| v.as_u64().unwrap() as usize);
    s.min_new_tokens = p.get("min_new_tokens").map_or(0, |v| v.as_u64().unwrap() as usize);
    s.repetition_penalty = p.get("repetition_penalty").map_or(1.0, |v| v.as_f64().unwrap());
    s
}

/// no_repeat_ngram_size, min_new_tokens and repetition_penalty, each alone and all three
/// together, in greedy and beam search (4 beams, 2 returned): the sequences of transformers
/// `generate` with the same arguments. Each set changes many goldens against the plain
/// ones, so a generator that ignored the processors would fail here; the penalty below 1
/// (`repetition_reward`) rewards the decoder's start token, and 16 of its goldens change
/// when that token is left out of the sequence.
#[test]
fn processors_match_transformers_for_every_encoding_and_layout() {
    let g = goldens();
    let ex = examples(&g);
    let max_new = g["max_new_tokens"].as_u64().unwrap() as usize;
    let sets = g["processor_settings"].as_object().unwrap();
    assert_eq!(sets.keys().collect::<Vec<_>>(), ["all", "min_new_tokens", "no_repeat_ngram", "repetition_penalty", "repetition_reward"]);
    assert_eq!(sets["all"].as_object().unwrap().len(), 3, "all three together");
    // Per set: goldens checked, and goldens (greedy, beam) that differ from the plain ones.
    let mut checked = 0;
    let mut failures = Vec::new();
    for layout in ["merged", "split"] {
        let gen = open(layout);
        let eos = gen.model().config().eos_token_id;
        for (set, p) in sets {
            let mut changed = [0usize; 2];
            for (name, enc) in encodings(&g) {
                let greedy = gen.generate_batch(&inputs(&ex), &with_processors(settings(enc.clone(), Strategy::Greedy, max_new), p)).unwrap();
                let beam = gen.generate_batch(&inputs(&ex), &with_processors(settings(enc.clone(), beam4(), max_new), p)).unwrap();
                for (k, e) in ex.iter().enumerate() {
                    let plain = &e.encodings[name];
                    let want = &plain["processors"][set];
                    let what = format!("{layout} / {set} / {} / {name}", e.name);
                    check_sequence(&format!("{what} / greedy"), &greedy[k][0], &want["greedy"], eos, &mut failures);
                    changed[0] += usize::from(want["greedy"]["tokens"] != plain["greedy"]["tokens"]);
                    let beams = want["beam"].as_array().unwrap();
                    assert_eq!(beam[k].len(), beams.len(), "{what}: returned sequences");
                    for (i, (got, w)) in beam[k].iter().zip(beams).enumerate() {
                        check_sequence(&format!("{what} / beam {i}"), got, w, eos, &mut failures);
                    }
                    changed[1] += usize::from(want["beam"] != plain["beam"]);
                    checked += 1;
                }
            }
            // 35 inputs: each set moves at least 10 greedy and 20 beam outputs.
            assert!(changed[0] >= 10 && changed[1] >= 20, "{set}: only {changed:?} of 35 goldens differ from the plain ones");
        }
    }
    assert!(failures.is_empty(), "{} sequences differ from transformers:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(checked, 2 * 5 * 35);
}

/// Sampling applies the processors to the raw logits before its warpers, as transformers
/// does: with top-k 1 it is greedy search with the same processors (were they applied after
/// the warpers, a banned best token would leave nothing to draw or another choice).
#[test]
fn sampling_processes_the_logits_before_the_warpers() {
    let g = goldens();
    let ex = examples(&g);
    let gen = open("merged");
    let all = &g["processor_settings"]["all"];
    let greedy = gen.generate_batch(&inputs(&ex), &with_processors(settings(InputEncoding::DialogGsr, Strategy::Greedy, 20), all)).unwrap();
    let k1 = Strategy::Sample({
        let mut o = Sampling::default();
        o.temperature = 0.7;
        o.top_k = 1;
        o.top_p = 0.9;
        o.seed = 3;
        o
    });
    let sampled = gen.generate_batch(&inputs(&ex), &with_processors(settings(InputEncoding::DialogGsr, k1, 20), all)).unwrap();
    for (k, (a, b)) in sampled.iter().zip(&greedy).enumerate() {
        assert_eq!(a[0].tokens, b[0].tokens, "{}", ex[k].name);
        assert_eq!(a[0].tokens, ids(&ex[k].encodings["dialoggsr"]["processors"]["all"]["greedy"]["tokens"]), "{}", ex[k].name);
        // The score stays the model's own log-probability of the tokens.
        assert!((a[0].score - b[0].score).abs() < 1e-9);
    }
    // Sampling proper: min_new_tokens holds EOS back there too.
    let free = Strategy::Sample({
        let mut o = Sampling::default();
        o.seed = 9;
        o
    });
    let mut s = settings(InputEncoding::DialogGsr, free, 20);
    s.min_new_tokens = 12;
    for r in gen.generate_batch(&inputs(&ex), &s).unwrap() {
        assert!(r[0].tokens.len() >= 12 && !r[0].tokens[..12].contains(&1), "{:?}", r[0].tokens);
    }
}

#[test]
fn sampling_is_seeded_per_request_not_per_batch() {
    let g = goldens();
    let ex = examples(&g);
    let gen = open("merged");
    let sample = |seed: u64, top_k: usize| {
        settings(
            InputEncoding::Surge,
            Strategy::Sample({
                let mut o = Sampling::default();
                o.temperature = 1.5;
                o.top_k = top_k;
                o.top_p = 0.95;
                o.seed = seed;
                o
            }),
            20,
        )
    };
    let all = gen.generate_batch(&inputs(&ex), &sample(5, 50)).unwrap();
    // The same tokens (scores up to the float rounding of another batch shape).
    let same = |a: &[Vec<Generated>], b: &[Vec<Generated>], what: &str| {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!((&x[0].tokens, &x[0].text, x[0].finish), (&y[0].tokens, &y[0].text, y[0].finish), "{what}");
            assert!((x[0].score - y[0].score).abs() < 1e-4, "{what}");
        }
    };
    // The same requests alone, and in another order and company.
    for (k, e) in ex.iter().enumerate() {
        let alone = gen.generate_batch(&[GenerationInput::new(&e.history, &e.knowledge)], &sample(5, 50)).unwrap();
        same(&alone, &all[k..=k], &format!("{}: alone vs in the batch", e.name));
    }
    let mut reversed = inputs(&ex);
    reversed.reverse();
    let mut back = gen.generate_batch(&reversed, &sample(5, 50)).unwrap();
    back.reverse();
    same(&back, &all, "reversed");
    let mut small = sample(5, 50);
    small.batch = 2;
    same(&gen.generate_batch(&inputs(&ex), &small).unwrap(), &all, "batches of 2");
    assert_eq!(gen.generate_batch(&inputs(&ex), &sample(5, 50)).unwrap(), all, "again: bit for bit");
    // A request's own seed wins over the settings'.
    let mut own = inputs(&ex);
    for i in &mut own {
        i.seed = Some(5);
    }
    assert_eq!(gen.generate_batch(&own, &sample(77, 50)).unwrap(), all);
    let other = gen.generate_batch(&inputs(&ex), &sample(6, 50)).unwrap();
    let differ = all.iter().zip(&other).filter(|(a, b)| a[0].tokens != b[0].tokens).count();
    assert!(differ >= ex.len() / 2, "another seed, other samples: {differ} of {} differ", ex.len());
    for s in &all {
        assert!(s[0].score < 0.0 && s[0].score.is_finite(), "the model's log-probability of the tokens");
    }
    // top-k 1 leaves only the best token: greedy search.
    let greedy = gen.generate_batch(&inputs(&ex), &settings(InputEncoding::Surge, Strategy::Greedy, 20)).unwrap();
    for seed in [1, 2] {
        let k1 = gen.generate_batch(&inputs(&ex), &sample(seed, 1)).unwrap();
        for (a, b) in k1.iter().zip(&greedy) {
            assert_eq!(a[0].tokens, b[0].tokens);
            assert!((a[0].score - b[0].score).abs() < 1e-9);
        }
    }
}

#[test]
fn stop_ids_and_texts_end_generation() {
    let g = goldens();
    let ex = examples(&g);
    let gen = open("merged");
    let greedy = gen.generate_batch(&inputs(&ex), &settings(InputEncoding::DialogGsr, Strategy::Greedy, 20)).unwrap();
    let (k, full) =
        greedy.iter().enumerate().map(|(k, g)| (k, &g[0])).find(|(_, g)| g.tokens.len() >= 6 && g.text.chars().count() >= 8).expect("a long greedy output");
    let one = [GenerationInput::new(&ex[k].history, &ex[k].knowledge)];
    // A stop text: a piece from the middle of the full text.
    let chars: Vec<char> = full.text.chars().collect();
    let piece: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let mut s = settings(InputEncoding::DialogGsr, Strategy::Greedy, 20);
    s.stop = vec![piece.clone()];
    let got = &gen.generate_batch(&one, &s).unwrap()[0][0];
    assert_eq!(got.finish, Finish::Stop);
    assert!(full.tokens.starts_with(&got.tokens) && got.tokens.len() < full.tokens.len(), "{got:?} vs {full:?}");
    assert!(!got.text.contains(&piece) && full.text.starts_with(&got.text), "{:?} / {:?} / {piece:?}", got.text, full.text);
    assert_eq!(got.text, full.text[..full.text.find(&piece).unwrap()]);
    // A stop id ends the sequence there and stays out of the text.
    let mut s = settings(InputEncoding::DialogGsr, Strategy::Greedy, 20);
    s.stop_ids = vec![full.tokens[2]];
    let got = &gen.generate_batch(&one, &s).unwrap()[0][0];
    let at = full.tokens.iter().position(|&t| t == full.tokens[2]).unwrap();
    assert_eq!((got.tokens.as_slice(), got.finish), (&full.tokens[..=at], Finish::Stop));
    // Beam search: its sequences are cut at the first stop afterwards.
    let beam = gen.generate_batch(&inputs(&ex), &settings(InputEncoding::DialogGsr, beam4(), 20)).unwrap();
    let k = beam.iter().position(|b| b[0].tokens.len() >= 4).expect("a beam output of 4 tokens");
    let best = &beam[k][0];
    let mut s = settings(InputEncoding::DialogGsr, beam4(), 20);
    s.stop_ids = vec![best.tokens[1]];
    let cut = gen.generate_batch(&[GenerationInput::new(&ex[k].history, &ex[k].knowledge)], &s).unwrap();
    assert_eq!(cut[0][0].tokens, best.tokens[..=best.tokens.iter().position(|&t| t == best.tokens[1]).unwrap()]);
    assert_eq!(cut[0][0].finish, Finish::Stop);
    assert!((cut[0][0].score - best.score).abs() < 1e-4, "the search's score");
    // max_new_tokens: the sequence ends there.
    let short = gen.generate_batch(&inputs(&ex), &settings(InputEncoding::DialogGsr, Strategy::Greedy, 3)).unwrap();
    for (a, b) in short.iter().zip(&greedy) {
        let n = b[0].tokens.len().min(3);
        assert_eq!(a[0].tokens, b[0].tokens[..n]);
        assert_eq!(a[0].finish, if b[0].tokens.len() > 3 { Finish::Length } else { b[0].finish });
    }
}

#[test]
fn wrong_models_settings_and_knowledge_are_refused() {
    let opts = {
        let mut o = RuntimeOptions::default();
        o.threads = 1;
        o
    };
    let e = Generator::open(&fixture("gsr/tiny-split"), &opts).unwrap_err();
    assert!(matches!(&e, GenerateError::NotAGenerator { task, .. } if task == "retriever"), "{e:?}");
    assert!(e.to_string().contains("not a generator"), "{e}");
    let e = Generator::open(&fixture("generate/none"), &opts).unwrap_err();
    assert!(matches!(e, GenerateError::ModelDir(ModelDirError::NotADirectory { .. })), "{e:?}");
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(model("merged")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(tmp.path().join("trellis.json"), r#"{"task": "generator", "generation": {"top_p": 0}}"#).unwrap();
    let e = Generator::open(tmp.path(), &opts).unwrap_err();
    assert!(matches!(&e, GenerateError::ModelDir(ModelDirError::Field { field, .. }) if field == "generation.top_p"), "{e:?}");
    std::fs::remove_file(tmp.path().join("trellis.json")).unwrap();
    let e = Generator::open(tmp.path(), &opts).unwrap_err();
    assert!(matches!(e, GenerateError::NoTrellisFile { .. }), "{e:?}");

    let gen = open("merged");
    assert_eq!(gen.settings().encoding, InputEncoding::DialogGsr, "trellis.json's defaults");
    assert_eq!(
        gen.settings().strategy,
        Strategy::Beam({
            let mut o = BeamSettings::default();
            o.beams = 4;
            o.return_sequences = 1;
            o.length_penalty = 1.5;
            o.early_stopping = true;
            o
        })
    );
    let history = [Message { speaker: "user".into(), text: "hi".into() }];
    let good: Vec<KnowledgePath> = vec![vec![Triple::new("a", "r", "b")]];
    let ok = [GenerationInput::new(&history, &good)];
    for (strategy, max_new) in [
        (
            Strategy::Beam({
                let mut o = BeamSettings::default();
                o.beams = 0;
                o.return_sequences = 1;
                o.length_penalty = 1.0;
                o.early_stopping = true;
                o
            }),
            5,
        ),
        (
            Strategy::Beam({
                let mut o = BeamSettings::default();
                o.beams = 2;
                o.return_sequences = 3;
                o.length_penalty = 1.0;
                o.early_stopping = true;
                o
            }),
            5,
        ),
        (
            Strategy::Sample({
                let mut o = Sampling::default();
                o.temperature = 0.0;
                o
            }),
            5,
        ),
        (
            Strategy::Sample({
                let mut o = Sampling::default();
                o.top_p = 0.0;
                o
            }),
            5,
        ),
        (Strategy::Greedy, 0),
    ] {
        let e = gen.generate_batch(&ok, &settings(InputEncoding::Surge, strategy.clone(), max_new)).unwrap_err();
        assert!(matches!(e, GenerateError::Setting(_)), "{strategy:?}: {e:?}");
    }
    let e = gen.generate_batch(&ok, &settings(InputEncoding::Surge, Strategy::Greedy, 1025)).unwrap_err();
    assert_eq!(e.to_string(), "max_new_tokens must be within 1..=1024, not 1025");
    let beam = |beams, return_sequences, length_penalty| {
        Strategy::Beam({
            let mut o = BeamSettings::default();
            o.beams = beams;
            o.return_sequences = return_sequences;
            o.length_penalty = length_penalty;
            o.early_stopping = true;
            o
        })
    };
    let e = gen.generate_batch(&ok, &settings(InputEncoding::Surge, beam(2, 3, 1.0), 5)).unwrap_err();
    assert_eq!(e.to_string(), "return_sequences must be within 1..=2, not 3");
    let e = gen.generate_batch(&ok, &settings(InputEncoding::Surge, beam(2, 1, f64::NAN), 5)).unwrap_err();
    assert_eq!(e.to_string(), "length_penalty must be a finite number within [-100, 100], not NaN");
    let mut s = settings(InputEncoding::Surge, Strategy::Greedy, 5);
    s.repetition_penalty = 0.0;
    assert_eq!(gen.generate_batch(&ok, &s).unwrap_err().to_string(), "repetition_penalty must be a finite number within [0.001, 1000], not 0");
    s.repetition_penalty = 1.0;
    s.no_repeat_ngram_size = 1025;
    assert_eq!(gen.generate_batch(&ok, &s).unwrap_err().to_string(), "no_repeat_ngram_size must be within 0..=1024, not 1025");
    s.no_repeat_ngram_size = 0;
    s.min_new_tokens = 1025;
    assert_eq!(gen.generate_batch(&ok, &s).unwrap_err().to_string(), "min_new_tokens must be within 0..=1024, not 1025");
    // The largest beam search on the tiny model fits the memory budget whole.
    assert_eq!(gen.batch_for(&settings(InputEncoding::Surge, beam(64, 1, 1.0), 1024)).unwrap(), 8);
    let mut s = settings(InputEncoding::Surge, Strategy::Greedy, 5);
    s.stop_ids = vec![100_000];
    assert!(matches!(gen.generate_batch(&ok, &s).unwrap_err(), GenerateError::StopIdOutOfRange { token: 100_000, .. }));
    let broken: Vec<KnowledgePath> = vec![vec![Triple::new("a", "r", "b"), Triple::new("c", "s", "d")]];
    let two = [GenerationInput::new(&history, &good), GenerationInput::new(&history, &broken)];
    let e = gen.generate_batch(&two, &settings(InputEncoding::Surge, Strategy::Greedy, 5)).unwrap_err();
    assert!(matches!(&e, GenerateError::Knowledge { input: 1, path: 0, problem: KnowledgeProblem::Broken { .. } }), "{e:?}");
    assert_eq!(e.to_string(), "request 1, knowledge path 0: triple 1 starts at \"c\", not at \"b\" where the one before ended");
    // An empty history and no knowledge still make an input (the EOS alone at worst).
    let none = [GenerationInput::new(&[], &[])];
    let out = gen.generate_batch(&none, &settings(InputEncoding::Surge, Strategy::Greedy, 4)).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(gen.encoder_input(&none[0], &InputEncoding::Surge).unwrap().ids, vec![gen.model().config().eos_token_id]);
}
