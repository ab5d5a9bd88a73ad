//! The T5 retriever on ONNX Runtime against PyTorch: encoder output and 5 cached decoder
//! steps of a padded batch of 3 match `logits_golden.json` (written by
//! tools/reference/gsr_fixture.py from the same weights in PyTorch), for both layouts;
//! reordering rows, stepping several tokens at once and the I/O-binding path give what
//! decoding each row alone gives; broken model files and devices are errors.

use crate::common::{fixture, trellis};
use std::path::{Path, PathBuf};
use trellis::link::Message;
use trellis::model::dir::{Layout, ModelDir};
use trellis::model::session::{CallError, InterfaceIssue, ListedProblem, Seq2Seq, Seq2SeqError};
use trellis::model::{Device, RuntimeOptions};

struct Golden {
    inputs: Vec<Vec<u32>>,
    texts: Vec<String>,
    decoder_ids: Vec<Vec<u32>>,
    /// [step][row][vocab]
    logits: Vec<Vec<Vec<f32>>>,
    hidden: Vec<f32>,
    mask: Vec<Vec<i64>>,
    d_model: usize,
    tolerance: f32,
}

fn golden() -> Golden {
    let text = std::fs::read_to_string(fixture("gsr/logits_golden.json")).expect("tests/fixtures/gsr/logits_golden.json (tools/reference/gsr_fixture.py)");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ints = |x: &serde_json::Value| {
        x.as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect::<Vec<i64>>()).collect::<Vec<_>>()
    };
    let ids = ints(&v["input_ids"]);
    let mask = ints(&v["attention_mask"]);
    // The unpadded inputs: Trellis pads them again.
    let inputs = ids.iter().zip(&mask).map(|(r, m)| r.iter().zip(m).filter(|(_, &m)| m == 1).map(|(&t, _)| t as u32).collect()).collect();
    let decoder_ids = ints(&v["decoder_input_ids"]).into_iter().map(|r| r.into_iter().map(|t| t as u32).collect()).collect();
    let logits = v["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step.as_array().unwrap().iter().map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()).collect())
        .collect();
    Golden {
        inputs,
        texts: v["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect(),
        decoder_ids,
        logits,
        hidden: v["last_hidden_state"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect(),
        mask,
        d_model: v["shape"]["d_model"].as_u64().unwrap() as usize,
        tolerance: v["tolerance"].as_f64().unwrap() as f32,
    }
}

fn model_dir(layout: &str) -> PathBuf {
    fixture(&format!("gsr/tiny-{layout}"))
}

fn open(layout: &str, opts: RuntimeOptions) -> Seq2Seq {
    Seq2Seq::open(&model_dir(layout), &opts).unwrap_or_else(|e| panic!("open tiny-{layout}: {e}"))
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn parity(layout: &str) {
    let g = golden();
    let m = open(layout, RuntimeOptions::default());
    assert_eq!(m.dir().layout(), if layout == "split" { Layout::Split } else { Layout::Merged });
    let mut s = m.session().unwrap();
    let enc = s.encode(&g.inputs).unwrap();
    // Padded to the batch's longest input rounded up to a multiple of PAD_MULTIPLE.
    let seq = trellis::model::session::padded_batch_length(g.mask[0].len());
    assert_eq!(seq % trellis::model::session::PAD_MULTIPLE, 0);
    assert_eq!((enc.batch(), enc.seq_len()), (3, seq));
    let hidden = enc.hidden_states().unwrap();
    let d = g.d_model;
    let mut worst: f32 = 0.0;
    for (row, mask) in g.mask.iter().enumerate() {
        for (pos, &on) in mask.iter().enumerate() {
            if on == 1 {
                let (at, gold) = ((row * seq + pos) * d, (row * mask.len() + pos) * d);
                worst = worst.max(max_diff(&hidden[at..at + d], &g.hidden[gold..gold + d]));
            }
        }
    }
    assert!(worst <= g.tolerance, "encoder output differs from PyTorch by {worst}");
    let mut state = s.start(&enc, &[0, 1, 2]).unwrap();
    let vocab = m.config().vocab_size as usize;
    for step in 0..g.logits.len() {
        let tokens: Vec<u32> = g.decoder_ids.iter().map(|r| r[step]).collect();
        let logits = s.step(&mut state, &tokens).unwrap().to_vec();
        assert_eq!(logits.len(), 3 * vocab);
        for row in 0..3 {
            let diff = max_diff(&logits[row * vocab..(row + 1) * vocab], &g.logits[step][row]);
            assert!(diff <= g.tolerance, "{layout}: step {step} row {row}: logits differ from PyTorch by {diff}");
        }
    }
    assert_eq!(state.past_len(), g.logits.len());
    let t = m.timings();
    assert_eq!(t.steps, g.logits.len() as u64);
}

#[test]
fn split_layout_matches_pytorch_logits() {
    parity("split");
}

#[test]
fn merged_layout_matches_pytorch_logits() {
    parity("merged");
}

#[test]
fn encoder_input_ids_are_the_python_tokenizers() {
    let g = golden();
    let dir = ModelDir::open(&model_dir("split"), None).unwrap();
    for (text, want) in g.texts.iter().zip(&g.inputs) {
        let history = [Message { speaker: "user".into(), text: text.clone() }];
        assert_eq!(&dir.encode_history(&history, &[], &[]).unwrap(), want, "{text}");
    }
    // Turns: the last 3 messages, oldest first, joined by a space; earlier paths after [SEP].
    let msgs: Vec<Message> = ["a", "b", "c", "d"].iter().map(|t| Message { speaker: "s".into(), text: (*t).into() }).collect();
    assert_eq!(dir.encoder_text(&msgs, &[], &[]), "b c d");
    assert_eq!(dir.encoder_text(&msgs, &[], &["[HEAD] x [TAIL]".into()]), "b c d [SEP] [HEAD] x [TAIL]");
    let long: Vec<Message> = (0..400).map(|i| Message { speaker: String::new(), text: format!("golf {i}") }).collect();
    let ids = dir.encode_history(&long[long.len() - 3..], &[], &[]).unwrap();
    assert_eq!(*ids.last().unwrap(), dir.config().eos_token_id);
}

#[test]
fn long_inputs_keep_their_end_and_the_eos() {
    let dir = ModelDir::open(&model_dir("split"), None).unwrap();
    let max = dir.trellis().input.max_tokens;
    let text = (0..300).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ");
    let full = dir.token_ids(&text).unwrap();
    assert!(full.len() > max);
    let ids = dir.encode_history(&[Message { speaker: String::new(), text }], &[], &[]).unwrap();
    assert_eq!(ids.len(), max);
    assert_eq!(ids.last(), full.last());
    assert_eq!(&ids[..max - 1], &full[full.len() - max..full.len() - 1]);
}

/// Decodes `tokens` for one input alone (batch of 1, no padding): the logits of each step.
fn solo(m: &Seq2Seq, input: &[u32], tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut s = m.session().unwrap();
    let enc = s.encode(&[input.to_vec()]).unwrap();
    let mut st = s.start(&enc, &[0]).unwrap();
    tokens.iter().map(|&t| s.step(&mut st, &[t]).unwrap().to_vec()).collect()
}

/// Beams: 3 inputs, the start step with one row each, then rows expanded (parents
/// [0,0,1,2,2]), stepped, then shrunk and permuted (input 1 finished), stepped again. Each
/// row's logits must be those of its own token history decoded alone.
fn reorder_scenario(opts: RuntimeOptions, layout: &str) -> Vec<f32> {
    let g = golden();
    // Two sessions: the solo decodes run while the batch holds one.
    let m = open(layout, {
        let mut o = opts;
        o.sessions = 2;
        o
    });
    let vocab = m.config().vocab_size as usize;
    let start = m.config().decoder_start_token_id;
    let mut s = m.session().unwrap();
    let enc = s.encode(&g.inputs).unwrap();
    let mut st = s.start(&enc, &[0, 1, 2]).unwrap();
    s.step(&mut st, &[start, start, start]).unwrap();
    // Row histories as (input, tokens after the start token).
    let mut hist: Vec<(usize, Vec<u32>)> = (0..3).map(|i| (i, vec![])).collect();
    let mut all = Vec::new();
    // Beams opening (rows added: a gather), a chain of rows moving as rows drop (in place,
    // each row written after the row that reads it), rows dropping, and a cycle of rows
    // trading places across inputs (in place, one row saved).
    let plan: [(&[usize], &[u32]); 4] =
        [(&[0, 0, 1, 2, 2], &[962, 17, 1514, 242, 1300]), (&[4, 0, 1, 3], &[5, 6, 7, 8]), (&[0, 0, 3], &[1511, 255, 1]), (&[1, 2, 0], &[20, 21, 22])];
    for (parents, tokens) in plan {
        s.reorder(&mut st, parents).unwrap();
        hist = parents.iter().map(|&p| hist[p].clone()).collect();
        assert_eq!(st.row_inputs(), hist.iter().map(|h| h.0).collect::<Vec<_>>());
        for (h, &t) in hist.iter_mut().zip(tokens) {
            h.1.push(t);
        }
        let logits = s.step(&mut st, tokens).unwrap().to_vec();
        for (row, (input, toks)) in hist.iter().enumerate() {
            let mut seq = vec![start];
            seq.extend(toks);
            let alone = solo(&m, &g.inputs[*input], &seq);
            let diff = max_diff(&logits[row * vocab..(row + 1) * vocab], alone.last().unwrap());
            assert!(diff <= 1e-4, "{layout}: row {row} (input {input}, tokens {toks:?}) differs from decoding it alone by {diff}");
        }
        all.extend(logits);
    }
    all
}

/// A request's logits are the same bits alone and in a batch with a longer request,
/// whatever the longer one's length: the batch's padded length must not reach the numbers
/// (ONNX Runtime's one-row kernel scores key positions in groups of 4, 2 and 1, so padding to
/// the longest input alone fails here at most lengths not a multiple of 4).
fn padding_scenario(layout: &str) {
    let m = open(layout, RuntimeOptions::default());
    let cfg = m.config();
    let (vocab, start) = (cfg.vocab_size as usize, cfg.decoder_start_token_id);
    // Deterministic pseudo-random ids in the vocabulary, never a special id.
    let ids = |n: usize, salt: usize| -> Vec<u32> { (0..n).map(|i| (3 + (i * 7919 + salt * 104_729) % (vocab - 3)) as u32).collect() };
    let tokens = [start, 17, 242, 1300];
    let mut checked = 0;
    for n in 1..=21 {
        let request = ids(n, n);
        let alone = solo(&m, &request, &tokens);
        for longer in (n + 1..=n + 9).chain([61]) {
            let mut s = m.session().unwrap();
            let enc = s.encode(&[ids(longer, longer + 1000), request.clone()]).unwrap();
            assert_eq!(enc.seq_len(), trellis::model::session::padded_batch_length(longer));
            let mut st = s.start(&enc, &[0, 1]).unwrap();
            for (step, &t) in tokens.iter().enumerate() {
                let logits = s.step(&mut st, &[t, t]).unwrap();
                let row = &logits[vocab..2 * vocab];
                assert!(
                    row.iter().zip(&alone[step]).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{layout}: a {n}-token request beside a {longer}-token one: step {step} logits differ from alone by {}",
                    max_diff(row, &alone[step])
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 21 * 10);
}

#[test]
fn a_request_s_logits_do_not_depend_on_the_padded_length_split() {
    padding_scenario("split");
}

#[test]
fn a_request_s_logits_do_not_depend_on_the_padded_length_merged() {
    padding_scenario("merged");
}

#[test]
fn reordered_rows_decode_as_if_alone_split() {
    reorder_scenario(RuntimeOptions::default(), "split");
}

#[test]
fn reordered_rows_decode_as_if_alone_merged() {
    reorder_scenario(RuntimeOptions::default(), "merged");
}

/// The CUDA path (I/O binding, cache reordered by a Gather graph) run on CPU gives the same
/// numbers as the plain path.
#[test]
fn the_io_binding_path_matches_the_plain_path() {
    let plain = reorder_scenario(RuntimeOptions::default(), "split");
    let bound = reorder_scenario(
        {
            let mut o = RuntimeOptions::default();
            o.io_binding = true;
            o
        },
        "split",
    );
    assert_eq!(max_diff(&plain, &bound), 0.0);
    let bound_merged = reorder_scenario(
        {
            let mut o = RuntimeOptions::default();
            o.io_binding = true;
            o
        },
        "merged",
    );
    assert!(max_diff(&plain, &bound_merged) <= 1e-5);
}

#[test]
fn outputs_are_bit_identical_across_thread_counts_and_runs() {
    let one = reorder_scenario(
        {
            let mut o = RuntimeOptions::default();
            o.threads = 1;
            o
        },
        "split",
    );
    let two = reorder_scenario(
        {
            let mut o = RuntimeOptions::default();
            o.threads = 2;
            o
        },
        "split",
    );
    let again = reorder_scenario(
        {
            let mut o = RuntimeOptions::default();
            o.threads = 2;
            o
        },
        "split",
    );
    let spinning = reorder_scenario(
        {
            let mut o = RuntimeOptions::default();
            o.threads = 2;
            o.spinning = true;
            o
        },
        "split",
    );
    assert!(one.iter().zip(&two).all(|(a, b)| a.to_bits() == b.to_bits()), "1 vs 2 threads: max diff {}", max_diff(&one, &two));
    assert!(two.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert!(two.iter().zip(&spinning).all(|(a, b)| a.to_bits() == b.to_bits()), "threads spinning or not: max diff {}", max_diff(&two, &spinning));
}

#[test]
fn several_tokens_in_one_call_equal_single_steps() {
    let g = golden();
    for layout in ["split", "merged"] {
        let m = open(layout, RuntimeOptions::default());
        let vocab = m.config().vocab_size as usize;
        let mut s = m.session().unwrap();
        let enc = s.encode(&g.inputs).unwrap();
        // First call: start token + 2 more per row at once; then 2 more at once.
        let mut st = s.start(&enc, &[0, 1, 2]).unwrap();
        let first: Vec<u32> = g.decoder_ids.iter().flat_map(|r| r[..3].to_vec()).collect();
        let a = s.step_many(&mut st, &first, 3).unwrap().to_vec();
        let second: Vec<u32> = g.decoder_ids.iter().flat_map(|r| r[3..5].to_vec()).collect();
        let b = s.step_many(&mut st, &second, 2).unwrap().to_vec();
        for row in 0..3 {
            for k in 0..5 {
                let got = if k < 3 { &a[(row * 3 + k) * vocab..(row * 3 + k + 1) * vocab] } else { &b[(row * 2 + k - 3) * vocab..(row * 2 + k - 2) * vocab] };
                let diff = max_diff(got, &g.logits[k][row]);
                assert!(diff <= g.tolerance, "{layout}: row {row} position {k}: {diff}");
            }
        }
    }
}

#[test]
fn a_pool_serves_threads_at_once() {
    let g = golden();
    let m = open("split", {
        let mut o = RuntimeOptions::default();
        o.sessions = 2;
        o.threads = 1;
        o
    });
    let want = solo(&m, &g.inputs[2], &g.decoder_ids[2]);
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..4).map(|_| sc.spawn(|| solo(&m, &g.inputs[2], &g.decoder_ids[2]))).collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), want);
        }
    });
}

#[test]
fn bad_calls_are_errors() {
    let m = open("split", RuntimeOptions::default());
    let mut s = m.session().unwrap();
    assert!(matches!(s.encode(&[]), Err(Seq2SeqError::Call(CallError::EmptyBatch))));
    assert!(matches!(s.encode(&[vec![3], vec![]]), Err(Seq2SeqError::Call(CallError::EmptyInput { index: 1 }))));
    assert!(matches!(s.encode(&[vec![5000]]), Err(Seq2SeqError::Call(CallError::TokenOutOfRange { token: 5000, vocab: 1529 }))));
    let enc = s.encode(&[vec![5, 1], vec![6, 1]]).unwrap();
    assert!(matches!(s.start(&enc, &[0, 2]), Err(Seq2SeqError::Call(CallError::NoSuchInput { row: 1, input: 2, batch: 2 }))));
    let mut st = s.start(&enc, &[0, 1]).unwrap();
    assert!(matches!(s.step(&mut st, &[0]), Err(Seq2SeqError::Call(CallError::TokenCount { got: 1, rows: 2, per_row: 1 }))));
    assert!(matches!(s.step(&mut st, &[0, 99999]), Err(Seq2SeqError::Call(CallError::TokenOutOfRange { .. }))));
    assert!(matches!(s.reorder(&mut st, &[0, 2]), Err(Seq2SeqError::Call(CallError::NoSuchParent { row: 1, parent: 2, rows: 2 }))));
    assert!(matches!(s.reorder(&mut st, &[]), Err(Seq2SeqError::Call(CallError::NoRows))));
    // The state is still usable after refused calls.
    s.step(&mut st, &[0, 0]).unwrap();
}

/// A copy of a fixture model directory to break.
fn copy_model(layout: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(model_dir(layout)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    tmp
}

fn set_config(dir: &Path, field: &str, value: serde_json::Value) {
    let p = dir.join("config.json");
    let mut c: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    c[field] = value;
    std::fs::write(&p, c.to_string()).unwrap();
}

fn issues(e: Seq2SeqError) -> Vec<(String, InterfaceIssue)> {
    match e {
        Seq2SeqError::Interface { problems } => problems.into_iter().map(|p| (p.file.file_name().unwrap().to_string_lossy().into_owned(), p.issue)).collect(),
        other => panic!("expected an interface error, got {other:?}"),
    }
}

#[test]
fn truncated_and_garbage_model_files_are_load_errors_naming_the_file() {
    let tmp = copy_model("split");
    let p = tmp.path().join("decoder_with_past_model.onnx");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let e = Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err();
    assert!(matches!(&e, Seq2SeqError::Load { path, .. } if *path == p), "{e:?}");
    assert!(e.to_string().starts_with(&format!("{}: ONNX Runtime cannot load this model", p.display())), "{e}");
    let enc = tmp.path().join("encoder_model.onnx");
    std::fs::write(&enc, b"this is not a protobuf at all").unwrap();
    let e = Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err();
    assert!(matches!(&e, Seq2SeqError::Load { path, .. } if *path == enc), "{e:?}");
    std::fs::write(&enc, b"").unwrap();
    assert!(matches!(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()), Err(Seq2SeqError::Load { .. })));
}

#[test]
fn a_config_lying_about_layers_heads_or_vocabulary_is_refused_at_open() {
    let tmp = copy_model("split");
    set_config(tmp.path(), "num_decoder_layers", serde_json::json!(3));
    let got = issues(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err());
    assert!(got.contains(&("decoder_with_past_model.onnx".into(), InterfaceIssue::MissingInput { name: "past_key_values.2.decoder.key".into() })), "{got:?}");
    assert!(got.contains(&("decoder_model.onnx".into(), InterfaceIssue::MissingOutput { name: "present.2.encoder.value".into() })), "{got:?}");

    set_config(tmp.path(), "num_decoder_layers", serde_json::json!(1));
    let got = issues(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err());
    assert!(
        got.contains(&("decoder_with_past_model.onnx".into(), InterfaceIssue::ExtraLayer { name: "past_key_values.1.decoder.key".into(), layers: 1 })),
        "{got:?}"
    );

    set_config(tmp.path(), "num_decoder_layers", serde_json::json!(2));
    set_config(tmp.path(), "d_kv", serde_json::json!(16));
    let got = issues(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err());
    assert!(
        got.iter().any(|(_, i)| matches!(i, InterfaceIssue::WrongDim { name, axis: 3, expected: 16, found: 8 } if name == "past_key_values.0.decoder.key")),
        "{got:?}"
    );
}

/// The fixture's graphs declare the vocabulary statically: a config.json that disagrees is
/// refused at open, before any logits are read with the wrong width.
#[test]
fn a_vocabulary_the_graphs_disagree_with_is_refused_at_open() {
    let tmp = copy_model("split");
    set_config(tmp.path(), "vocab_size", serde_json::json!(1600));
    let got = issues(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err());
    assert!(got.contains(&("decoder_model.onnx".into(), InterfaceIssue::WrongDim { name: "logits".into(), axis: 2, expected: 1600, found: 1529 })), "{got:?}");
}

#[test]
fn graphs_with_the_wrong_inputs_are_refused_with_every_problem_named() {
    let tmp = copy_model("split");
    // An encoder file that is a decoder.
    std::fs::copy(tmp.path().join("decoder_model.onnx"), tmp.path().join("encoder_model.onnx")).unwrap();
    let got = issues(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err());
    let enc: Vec<&InterfaceIssue> = got.iter().filter(|(f, _)| f == "encoder_model.onnx").map(|(_, i)| i).collect();
    assert!(enc.contains(&&InterfaceIssue::MissingInput { name: "attention_mask".into() }), "{got:?}");
    assert!(enc.contains(&&InterfaceIssue::UnknownInput { name: "encoder_hidden_states".into() }), "{got:?}");
    assert!(enc.contains(&&InterfaceIssue::MissingOutput { name: "last_hidden_state".into() }), "{got:?}");
    // A with-past decoder swapped for the first-step one.
    let tmp = copy_model("split");
    std::fs::copy(tmp.path().join("decoder_model.onnx"), tmp.path().join("decoder_with_past_model.onnx")).unwrap();
    let got = issues(Seq2Seq::open(tmp.path(), &RuntimeOptions::default()).unwrap_err());
    assert!(got.contains(&("decoder_with_past_model.onnx".into(), InterfaceIssue::MissingInput { name: "past_key_values.0.encoder.value".into() })), "{got:?}");
}

#[test]
fn cuda_without_a_cuda_runtime_is_a_clear_error() {
    let e = Seq2Seq::open(&model_dir("split"), &{
        let mut o = RuntimeOptions::default();
        o.device = Device::Cuda(0);
        o
    })
    .unwrap_err();
    assert!(matches!(&e, Seq2SeqError::Device { device: Device::Cuda(0), .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with("device cuda:0: the CUDA execution provider could not be registered"), "{msg}");
    assert!(msg.contains("onnxruntime-gpu") && msg.ends_with("or the CPU"), "{msg}");
}

#[test]
fn doctor_reports_the_runtime_and_checks_the_model() {
    let out = trellis().args(["doctor", "--json", "--model"]).arg(model_dir("merged")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runtime"]["version"], "1.31.1");
    assert!(v["runtime"]["providers"].as_array().unwrap().iter().any(|p| p == "CPUExecutionProvider"), "{v}");
    assert_eq!(v["model"]["layout"], "merged");
    assert_eq!(v["model"]["decoder_layers"], 2);
    assert_eq!(v["problems"], serde_json::json!([]));
    assert_eq!(v["ok"], true);

    let out = trellis().args(["doctor", "--model"]).arg(model_dir("split")).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("onnx runtime: 1.31.1") && text.contains("layout: split") && text.contains("ok"), "{text}");
}

#[test]
fn doctor_names_each_problem_in_one_sentence() {
    let tmp = copy_model("split");
    set_config(tmp.path(), "num_decoder_layers", serde_json::json!(3));
    let out = trellis().args(["doctor", "--json", "--model"]).arg(tmp.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(65), "a broken model is bad input");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems: Vec<&str> = v["problems"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(
        problems.iter().any(|p| p.ends_with("decoder_with_past_model.onnx: has no input \"past_key_values.2.decoder.key\", which the decoder needs.")),
        "{problems:?}"
    );
    assert_eq!(v["ok"], false);

    let out = trellis().args(["doctor", "--device", "cuda:1", "--model"]).arg(model_dir("split")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("device cuda:1: the CUDA execution provider could not be registered"), "{err}");

    let out = trellis().args(["doctor", "--device", "tpu"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_missing_or_wrong_runtime_library_is_an_error_that_says_what_to_do() {
    let out = trellis().args(["doctor"]).env("ORT_DYLIB_PATH", "/nonexistent/libonnxruntime.so").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("/nonexistent/libonnxruntime.so: no such ONNX Runtime library (ORT_DYLIB_PATH)") && err.contains("tools/setup.sh"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("libonnxruntime.so");
    std::fs::write(&fake, b"garbage").unwrap();
    let out = trellis().args(["doctor", "--model"]).arg(model_dir("split")).env("ORT_DYLIB_PATH", &fake).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cannot load it as a shared library"), "{err}");
    // Nothing set and nothing installed: the places looked at are named.
    let out = trellis().args(["doctor"]).env_remove("ORT_DYLIB_PATH").env("HOME", tmp.path()).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no ONNX Runtime library found (looked at") && err.contains(&tmp.path().display().to_string()), "{err}");
}

/// Not a test: prints where decoder-step time goes (ONNX Runtime's run vs. the rest), on
/// the fixture or on the model directory in `TRELLIS_STEP_MODEL` (e.g. a t5-small-shaped
/// export). `cargo test --release --test integration model_step_time -- --ignored --nocapture`
#[test]
#[ignore]
fn model_step_time() {
    let g = golden();
    let other = std::env::var_os("TRELLIS_STEP_MODEL").map(PathBuf::from);
    let dirs: Vec<(String, PathBuf)> = match &other {
        Some(d) => vec![(d.display().to_string(), d.clone())],
        None => ["split", "merged"].iter().map(|l| (l.to_string(), model_dir(l))).collect(),
    };
    for (layout, dir) in dirs {
        let m = Seq2Seq::open(&dir, &{
            let mut o = RuntimeOptions::default();
            o.threads = 1;
            o
        })
        .unwrap();
        let vocab = m.config().vocab_size;
        let mut s = m.session().unwrap();
        let inputs: Vec<Vec<u32>> = (0..8).map(|i| g.inputs[i % 3].clone()).collect();
        let enc = s.encode(&inputs).unwrap();
        let beams = 5;
        let rows: Vec<usize> = (0..inputs.len()).collect();
        let before = m.timings();
        for _ in 0..20 {
            let mut st = s.start(&enc, &rows).unwrap();
            s.step(&mut st, &vec![0; rows.len()]).unwrap();
            let parents: Vec<usize> = (0..rows.len() * beams).map(|i| i / beams).collect();
            s.reorder(&mut st, &parents).unwrap();
            for step in 0..15u32 {
                let toks: Vec<u32> = (0..st.rows()).map(|r| 2 + ((r as u32 * 7 + step) % (vocab - 2))).collect();
                s.step(&mut st, &toks).unwrap();
                // A beam permutation within each input (rows keep their inputs).
                let perm: Vec<usize> = (0..st.rows()).map(|r| (r / beams) * beams + (r + 1) % beams).collect();
                s.reorder(&mut st, &perm).unwrap();
            }
        }
        let t = m.timings();
        let (steps, run, outside) = (t.steps - before.steps, t.run_ns - before.run_ns, t.outside_ns - before.outside_ns);
        println!(
            "{layout}: {steps} steps of {} rows: ONNX Runtime run {:.1} us/step, outside (inputs, output checks, reorder) {:.1} us/step = {:.1}%",
            inputs.len() * beams,
            run as f64 / steps as f64 / 1e3,
            outside as f64 / steps as f64 / 1e3,
            100.0 * outside as f64 / (run + outside) as f64
        );
    }
}

#[test]
fn one_runtime_library_per_process() {
    let rt = trellis::model::Runtime::get().unwrap();
    assert_eq!(rt.version(), "1.31.1");
    assert!(std::ptr::eq(trellis::model::Runtime::load(rt.library(), "test").unwrap(), rt), "the same library: the loaded runtime");
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("libonnxruntime.so");
    let e = trellis::model::Runtime::load(&other, "test").unwrap_err();
    assert!(matches!(&e, trellis::model::RuntimeError::AlreadyLoaded { requested, .. } if *requested == other), "{e:?}");
}

/// A copy of the split fixture whose trellis.json has `input.entities` with these markers.
fn with_entity_markers(markers: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(model_dir("split")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), tmp.path().join(f.file_name())).unwrap();
    }
    let mut spec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(tmp.path().join("trellis.json")).unwrap()).unwrap();
    spec["input"]["entities"] = serde_json::json!({"markers": markers, "max": 2});
    std::fs::write(tmp.path().join("trellis.json"), spec.to_string()).unwrap();
    tmp
}

#[test]
fn linked_entities_are_written_after_the_messages_with_their_recency() {
    use trellis::model::dir::InputEntity;
    let tmp = with_entity_markers(&["[Head]", "[Tail]"]);
    let dir = ModelDir::open(tmp.path(), None).unwrap();
    assert!(dir.shows_entities());
    let msgs: Vec<Message> = ["who wrote coraline?", "Neil Gaiman did."].iter().map(|t| Message { speaker: "s".into(), text: (*t).into() }).collect();
    let e = |name: &str, age| InputEntity { name: name.into(), age };
    // Age 0 takes the first marker, any older the last; names as the linearization writes
    // them (lowercased); at most `max` entities.
    let entities = [e("Neil Gaiman", 0), e("Coraline", 1), e("Fantasy", 5)];
    assert_eq!(dir.encoder_text(&msgs, &entities, &[]), "who wrote coraline? Neil Gaiman did. [Head] neil gaiman [Tail] coraline");
    assert_eq!(dir.encoder_text(&msgs, &entities[2..], &["x".into()]), "who wrote coraline? Neil Gaiman did. [Tail] fantasy [SEP] x");
    let ids = dir.encode_history(&msgs, &entities, &[]).unwrap();
    let want = dir.token_ids("who wrote coraline? Neil Gaiman did. [Head] neil gaiman [Tail] coraline").unwrap();
    assert_eq!(ids, want);
    // A marker the tokenizer splits is refused when the directory is opened.
    let tmp = with_entity_markers(&["[Head]", "[Ent9]"]);
    let err = ModelDir::open(tmp.path(), None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the entity marker \"[Ent9]\" of trellis.json is not one token of tokenizer.json (add it as a special token)",
            tmp.path().join("trellis.json").display()
        )
    );
}

/// What is in place of a model file, through the command line: a FIFO (opening it would
/// wait forever for a writer), a link to /dev/zero (read whole, 4 GB), a directory. Each is
/// named for what it is, at once.
#[test]
fn doctor_names_a_fifo_a_device_or_a_directory_in_place_of_a_model_file() {
    let problem = |dir: &Path| {
        let out = trellis().args(["doctor", "--json", "--model"]).arg(dir).timeout(std::time::Duration::from_secs(60)).output().unwrap();
        assert_eq!(out.status.code(), Some(65), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["problems"][0].as_str().unwrap().to_owned()
    };
    let tmp = copy_model("split");
    let config = tmp.path().join("config.json");
    std::fs::remove_file(&config).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&config).status().unwrap().success());
    assert_eq!(problem(tmp.path()), format!("{}: is not a regular file (a FIFO, socket or device).", config.display()));
    std::fs::remove_file(&config).unwrap();
    std::fs::copy(model_dir("split").join("config.json"), &config).unwrap();
    let tokenizer = tmp.path().join("tokenizer.json");
    std::fs::remove_file(&tokenizer).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &tokenizer).unwrap();
    assert_eq!(problem(tmp.path()), format!("{}: is not a regular file (a FIFO, socket or device).", tokenizer.display()));
    std::fs::remove_file(&tokenizer).unwrap();
    std::fs::copy(model_dir("split").join("tokenizer.json"), &tokenizer).unwrap();
    let decoder = tmp.path().join("decoder_with_past_model.onnx");
    std::fs::remove_file(&decoder).unwrap();
    std::fs::create_dir(&decoder).unwrap();
    assert_eq!(problem(tmp.path()), format!("{}: is a directory, not a file.", decoder.display()));
}

#[test]
fn a_listed_step_gives_each_row_its_listed_logits_whatever_the_width() {
    // tiny-split's decoder_listed_model.onnx: a row's logits for its listed ids are the full
    // step's at those ids (within float rounding), and the same bits whether the rows are
    // padded to 16, 32, 48 or 1,024 ids (the beam search pads to the batch's longest list rounded
    // up to 16: a request's numbers must not depend on what its neighbours allow), or which
    // row of the batch it is. (The tiny fixture did not show the width dependence a
    // t5-small showed with one product per row; tools/train/listed_logits.py checks every
    // model it writes at 32, 48 and 1,024 ids.)
    let m = open("split", RuntimeOptions::default());
    assert!(m.lists_logits());
    let vocab = m.config().vocab_size as usize;
    let start = m.config().decoder_start_token_id;
    let inputs = [vec![5, 17, 300, 1], vec![9, 1]];
    // Row 0 lists 5 ids, row 1 lists 11 (ascending, as constraints give them).
    let lists: [Vec<u32>; 2] = [vec![3, 40, 41, 900, 1500], (0..11).map(|i| 7 + 130 * i).collect()];
    let run = |k: usize, swap: bool| -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let mut s = m.session().unwrap();
        let order: Vec<usize> = if swap { vec![1, 0] } else { vec![0, 1] };
        let enc = s.encode(&order.iter().map(|&i| inputs[i].clone()).collect::<Vec<_>>()).unwrap();
        let mut st = s.start(&enc, &[0, 1]).unwrap();
        s.step(&mut st, &[start, start]).unwrap();
        let mut full_state = s.start(&enc, &[0, 1]).unwrap();
        s.step(&mut full_state, &[start, start]).unwrap();
        let mut listed_ids = vec![0u32; 2 * k];
        for (row, &i) in order.iter().enumerate() {
            listed_ids[row * k..row * k + lists[i].len()].copy_from_slice(&lists[i]);
        }
        let got = s.step_listed(&mut st, &[42, 42], &listed_ids, k).unwrap().to_vec();
        let full = s.step(&mut full_state, &[42, 42]).unwrap().to_vec();
        let mut by_input = vec![Vec::new(); 2];
        let mut full_by_input = vec![Vec::new(); 2];
        for (row, &i) in order.iter().enumerate() {
            by_input[i] = got[row * k..row * k + lists[i].len()].to_vec();
            full_by_input[i] = lists[i].iter().map(|&t| full[row * vocab + t as usize]).collect();
        }
        (by_input, full_by_input)
    };
    let (base, full) = run(16, false);
    for i in 0..2 {
        assert!(max_diff(&base[i], &full[i]) < 1e-5, "input {i}: {:?} vs {:?}", base[i], full[i]);
    }
    for (k, swap) in [(32, false), (48, false), (1024, false), (16, true), (32, true)] {
        let (got, _) = run(k, swap);
        for i in 0..2 {
            assert!(got[i].iter().zip(&base[i]).all(|(a, b)| a.to_bits() == b.to_bits()), "width {k}, swapped {swap}: input {i} {:?} vs {:?}", got[i], base[i]);
        }
    }
    // Refused calls: before the first step, a count that is not rows x k, an id past the
    // vocabulary; a model opened without its listed step.
    let mut s = m.session().unwrap();
    let enc = s.encode(&[vec![5, 1]]).unwrap();
    let mut st = s.start(&enc, &[0]).unwrap();
    assert!(matches!(s.step_listed(&mut st, &[start], &[3; 16], 16), Err(Seq2SeqError::Call(CallError::ListedFirstStep))));
    s.step(&mut st, &[start]).unwrap();
    assert!(matches!(s.step_listed(&mut st, &[4], &[3; 15], 16), Err(Seq2SeqError::Call(CallError::ListedCount { got: 15, rows: 1, k: 16 }))));
    assert!(matches!(s.step_listed(&mut st, &[4], &[99_999; 16], 16), Err(Seq2SeqError::Call(CallError::TokenOutOfRange { .. }))));
    assert!(matches!(s.step_listed(&mut st, &[4], &[3; 20], 20), Err(Seq2SeqError::Call(CallError::ListedWidth { k: 20, multiple: 16 }))));
    drop(s);
    let dir = trellis::model::dir::ModelDir::open(&model_dir("split"), None).unwrap();
    let without = Seq2Seq::with_dir_listing(dir, &RuntimeOptions::default(), false).unwrap();
    assert!(!without.lists_logits());
    let mut s = without.session().unwrap();
    let enc = s.encode(&[vec![5, 1]]).unwrap();
    let mut st = s.start(&enc, &[0]).unwrap();
    s.step(&mut st, &[start]).unwrap();
    assert!(matches!(s.step_listed(&mut st, &[4], &[3; 16], 16), Err(Seq2SeqError::Call(CallError::NoListedGraph))));
}

#[test]
fn a_listed_step_cut_from_another_decoder_is_refused() {
    // decoder_listed_model.onnx records the decoder file it was cut from (size and CRC-32):
    // beside another decoder (here tiny-split's step beside tiny-merged's merged graph, or
    // beside a changed decoder file) it would score with other weights, so the model does
    // not open, naming both files; without the record, the same. Cut from the other
    // layout's decoder in a folder holding both, it is left unused.
    let merged = copy_model("merged");
    std::fs::copy(model_dir("split").join("decoder_listed_model.onnx"), merged.path().join("decoder_listed_model.onnx")).unwrap();
    match Seq2Seq::open(merged.path(), &RuntimeOptions::default()) {
        Err(e @ Seq2SeqError::ListedStale { problem: ListedProblem::Differs { .. }, .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("decoder_listed_model.onnx") && msg.contains("decoder_model_merged.onnx") && msg.contains("listed_logits.py"), "{msg}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // Opened for a decoding that does not use it, the file is not read at all.
    let dir = trellis::model::dir::ModelDir::open(merged.path(), None).unwrap();
    assert!(Seq2Seq::with_dir_listing(dir, &RuntimeOptions::default(), false).is_ok());
    // The split copy with its own listed step opens; with the decoder it records changed
    // (an empty unknown field appended: field 100, length 0, which protobuf readers skip, so
    // ONNX Runtime loads the same graph from other bytes), it does not.
    let split = copy_model("split");
    assert!(Seq2Seq::open(split.path(), &RuntimeOptions::default()).unwrap().lists_logits());
    let past = split.path().join("decoder_with_past_model.onnx");
    let mut bytes = std::fs::read(&past).unwrap();
    bytes.extend_from_slice(&[0xa2, 0x06, 0x00]);
    std::fs::write(&past, bytes).unwrap();
    match Seq2Seq::open(split.path(), &RuntimeOptions::default()) {
        Err(Seq2SeqError::ListedStale { problem: ListedProblem::Differs { recorded, found }, .. }) => {
            assert!(recorded.starts_with("decoder_with_past_model.onnx:") && found.starts_with("decoder_with_past_model.onnx:"), "{recorded} {found}");
            assert_ne!(recorded, found);
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    // The record's key renamed (same length, so the file stays valid ONNX): no record.
    let unmarked = copy_model("split");
    let listed = unmarked.path().join("decoder_listed_model.onnx");
    let mut bytes = std::fs::read(&listed).unwrap();
    let key = b"trellis.listed_source";
    let at = bytes.windows(key.len()).position(|w| w == key).expect("the tool's record");
    bytes[at + key.len() - 1] = b'X';
    std::fs::write(&listed, bytes).unwrap();
    assert!(matches!(Seq2Seq::open(unmarked.path(), &RuntimeOptions::default()), Err(Seq2SeqError::ListedStale { problem: ListedProblem::NoRecord, .. })));
    // Both layouts in one folder, the listed step cut from the split one's cached decoder:
    // used with the split layout, left unused (not refused) with the merged one forced.
    let both = copy_model("split");
    std::fs::copy(model_dir("merged").join("decoder_model_merged.onnx"), both.path().join("decoder_model_merged.onnx")).unwrap();
    assert!(Seq2Seq::open(both.path(), &RuntimeOptions::default()).unwrap().lists_logits());
    let mut forced = RuntimeOptions::default();
    forced.layout = Some(Layout::Merged);
    let merged_forced = Seq2Seq::open(both.path(), &forced).unwrap();
    assert!(!merged_forced.lists_logits());
}

#[test]
fn the_io_binding_path_runs_the_listed_step_as_the_plain_path() {
    // CUDA steps through an IoBinding (here on the CPU, as the_io_binding_path_matches_the_
    // plain_path does): the listed step must run there too, with the same numbers.
    let listed_logits = |io_binding: bool| -> Vec<f32> {
        let mut o = RuntimeOptions::default();
        o.io_binding = io_binding;
        let m = open("split", o);
        assert!(m.lists_logits());
        let start = m.config().decoder_start_token_id;
        let mut s = m.session().unwrap();
        let enc = s.encode(&[vec![5, 17, 300, 1], vec![9, 1]]).unwrap();
        let mut st = s.start(&enc, &[0, 1]).unwrap();
        s.step(&mut st, &[start, start]).unwrap();
        let ids: Vec<u32> = (0..32).map(|i| 3 + 47 * i).collect();
        let mut out = s.step_listed(&mut st, &[42, 42], &ids, 16).unwrap().to_vec();
        s.reorder(&mut st, &[1, 0, 0]).unwrap();
        out.extend_from_slice(s.step_listed(&mut st, &[7, 8, 9], &ids[..16].repeat(3), 16).unwrap());
        out
    };
    let (plain, bound) = (listed_logits(false), listed_logits(true));
    assert_eq!(plain.len(), 2 * 16 + 3 * 16);
    assert!(plain.iter().zip(&bound).all(|(a, b)| a.to_bits() == b.to_bits()), "{}", max_diff(&plain, &bound));
}
