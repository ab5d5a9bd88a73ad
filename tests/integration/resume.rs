//! Batch output a kill cannot destroy: `retrieve` and `run` killed (SIGKILL) at several
//! moments, fresh and while resuming, then `--resume`d, give the uninterrupted run's output
//! byte for byte; an existing OUTPUT is untouched until the run completes; a resume of other
//! options or another input is refused; and the small input rules (byte-order mark, blank
//! lines, line numbers, a bad speaker).

use crate::common::*;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `n` request lines about the sample graph's entities, all different (so each costs real
/// work), half of them without an id; a blank line every 97 lines and an invalid one every
/// 331 (runs use `--on-error skip`, so skipped lines are behind every checkpoint too).
fn requests(n: usize) -> String {
    let tsv = std::fs::read_to_string(fixture("opendialkg-sample.tsv")).unwrap();
    let mut names: Vec<&str> = tsv.lines().filter_map(|l| l.split('\t').next()).collect();
    names.sort_unstable();
    names.dedup();
    let mut out = String::new();
    for i in 0..n {
        let history = [format!("I like {}", names[i * 7 % names.len()]), format!("What about {}?", names[i * 13 % names.len()])];
        let line = if i % 2 == 0 { json!({"id": i, "history": history}) } else { json!({"history": history}) };
        out.push_str(&line.to_string());
        out.push('\n');
        if i % 97 == 50 {
            out.push('\n');
        }
        if i % 331 == 100 {
            out.push_str("{oops\n");
        }
    }
    out
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Starts trellis with `args`, waits (polling, bounded) until `watch` holds at least `bytes`
/// bytes, and kills it with SIGKILL. False when the process ended before.
fn kill_when_written(args: &[OsString], watch: &Path, bytes: u64) -> bool {
    let mut child = std::process::Command::new(bin_path()).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("trellis starts");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if std::fs::metadata(watch).map_or(0, |m| m.len()) >= bytes {
            child.kill().expect("SIGKILL");
            let status = child.wait().unwrap();
            // It may have finished between the size check and the kill.
            return status.signal() == Some(9);
        }
        assert!(Instant::now() < deadline, "{} never reached {bytes} bytes", watch.display());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Kills `args` (the first time as given, then with --resume) when OUTPUT.partial reaches
/// each fraction of `full` bytes, checking after each kill that OUTPUT still holds
/// `before`; then resumes to the end and returns the final run's summary.
fn kill_and_resume(args: &[OsString], output: &Path, full: u64, fractions: &[f64], before: &[u8]) -> Value {
    let partial = with_suffix(output, ".partial");
    for (k, f) in fractions.iter().enumerate() {
        let mut a = args.to_vec();
        if k > 0 {
            a.push("--resume".into());
        }
        let at = (full as f64 * f) as u64;
        assert!(kill_when_written(&a, &partial, at), "kill {k} (at {at} of {full} bytes): the run ended first; the input is too small to test kills");
        assert_eq!(std::fs::read(output).unwrap(), before, "kill {k}: OUTPUT changed before the run completed");
        assert!(with_suffix(output, ".checkpoint").exists(), "kill {k}: no checkpoint");
    }
    let mut a = args.to_vec();
    a.extend(os(&["--resume", "--json"]));
    let summary = json_of(trellis().args(&a));
    assert!(!partial.exists() && !with_suffix(output, ".checkpoint").exists(), "the partial file and the checkpoint are left behind");
    summary
}

#[test]
fn retrieve_killed_at_five_moments_resumes_to_the_uninterrupted_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("s");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let input = write(d, "in.jsonl", requests(4000).as_bytes());
    let common = |output: &Path| -> Vec<OsString> {
        let mut a = os(&["retrieve", "--retriever", "bm25", "--on-error", "skip", "--store"]);
        a.extend([store.clone().into(), "--input".into(), input.clone().into(), "--output".into(), output.into()]);
        a
    };
    let reference = d.join("reference.jsonl");
    let uninterrupted = json_of(trellis().args(common(&reference)).arg("--json"));
    assert_eq!((uninterrupted["answered"].as_u64(), uninterrupted["skipped"].as_u64()), (Some(4000), Some(12)), "{uninterrupted}");
    let expected = std::fs::read(&reference).unwrap();
    // Killed runs use one thread, so they run long enough to be killed at each moment.
    let output = write(d, "out.jsonl", b"an earlier run's output\n");
    let mut args = common(&output);
    args.extend(os(&["--threads", "1"]));
    let summary = kill_and_resume(&args, &output, expected.len() as u64, &[0.15, 0.35, 0.55, 0.75, 0.92], b"an earlier run's output\n");
    assert_eq!((summary["answered"].as_u64(), summary["skipped"].as_u64()), (Some(4000), Some(12)), "{summary}");
    let resumed_at = summary["resumed_at_line"].as_u64().unwrap();
    assert!(resumed_at > 1 && summary["answered_now"].as_u64().unwrap() < 4000, "the last resume started over: {summary}");
    let got = std::fs::read(&output).unwrap();
    assert!(got == expected, "the resumed output differs from the uninterrupted one ({} and {} bytes)", got.len(), expected.len());
    // Every request, with or without an id, is answered once, by line number.
    let lines: Vec<u64> =
        got.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice::<Value>(l).unwrap()["line"].as_u64().unwrap()).collect();
    assert_eq!(lines.len(), 4000);
    assert!(lines.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn run_killed_at_three_moments_resumes_to_the_uninterrupted_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("s");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let input = write(d, "in.jsonl", requests(1200).as_bytes());
    let common = |output: &Path| -> Vec<OsString> {
        let mut a = os(&["run", "--retriever", "bm25", "--model-threads", "1", "--on-error", "skip", "--generator"]);
        a.extend([fixture("generate/tiny-merged").into(), "--store".into(), store.clone().into()]);
        a.extend(["--input".into(), input.clone().into(), "--output".into(), output.into()]);
        a
    };
    // The replies without their timings (milliseconds differ from run to run).
    let replies = |path: &Path| -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("timings").expect("timings");
                v
            })
            .collect()
    };
    let reference = d.join("reference.jsonl");
    stdout_of(trellis().args(common(&reference)));
    let expected = replies(&reference);
    assert_eq!(expected.len(), 1200);
    let output = d.join("out.jsonl");
    let mut args = common(&output);
    args.extend(os(&["--threads", "1"]));
    let full = std::fs::metadata(&reference).unwrap().len();
    std::fs::write(&output, b"").unwrap();
    let summary = kill_and_resume(&args, &output, full, &[0.3, 0.6, 0.85], b"");
    assert_eq!((summary["answered"].as_u64(), summary["skipped"].as_u64()), (Some(1200), Some(4)), "{summary}");
    assert!(summary["resumed_at_line"].as_u64().unwrap() > 1, "{summary}");
    assert!(replies(&output) == expected, "the resumed replies differ from the uninterrupted ones");
}

/// A run stopped by a bad line keeps its answers in OUTPUT.partial and leaves OUTPUT alone;
/// continuing needs --resume and the same store, options and input (the lines after the
/// stop may change: that is how a bad line is fixed).
#[test]
fn resume_refuses_other_options_or_input_and_continues_after_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("s");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let good = requests(350).lines().filter(|l| l.starts_with('{') && *l != "{oops").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(good.len(), 350);
    let mut lines = good.clone();
    lines[300] = "{\"history\": 3}".into();
    let input = write(d, "in.jsonl", (lines.join("\n") + "\n").as_bytes());
    let output = write(d, "out.jsonl", b"old\n");
    let (partial, checkpoint) = (with_suffix(&output, ".partial"), with_suffix(&output, ".checkpoint"));
    let retrieve = |extra: &[&str]| {
        let mut c = trellis();
        c.args(["retrieve", "--retriever", "bm25", "--store"]).arg(&store).arg("--input").arg(&input).arg("--output").arg(&output).args(extra);
        c
    };
    let stderr = |a: &assert_cmd::assert::Assert| String::from_utf8_lossy(&a.get_output().stderr).to_string();
    let a = retrieve(&[]).assert().code(65);
    let err = stderr(&a);
    assert!(err.contains("in.jsonl:301: no \"history\" list"), "{err}");
    assert!(err.contains("300 answers and 0 skipped lines (lines 1-300 of") && err.contains("rerun with --resume to continue at line 301"), "{err}");
    assert_eq!(std::fs::read(&output).unwrap(), b"old\n");
    let kept = std::fs::read(&partial).unwrap();
    assert_eq!(kept.iter().filter(|&&b| b == b'\n').count(), 300);

    // Without --resume the kept answers are not thrown away.
    let a = retrieve(&[]).assert().code(2);
    assert!(stderr(&a).contains("holds an interrupted run (300 answered, 0 skipped, up to line 300 of"), "{}", stderr(&a));
    // Other options, another retriever, another input, stdout: refused, nothing changed.
    let a = retrieve(&["--resume", "--top", "3"]).assert().code(2);
    assert!(stderr(&a).contains("its top was 10, now 3"), "{}", stderr(&a));
    let a = retrieve(&["--resume", "--bm25-turns", "2"]).assert().code(2);
    assert!(stderr(&a).contains("its retriever was"), "{}", stderr(&a));
    let mut changed = lines.clone();
    changed[6] = good[7].clone();
    std::fs::write(&input, changed.join("\n") + "\n").unwrap();
    let a = retrieve(&["--resume"]).assert().code(2);
    assert!(stderr(&a).contains("in.jsonl does not start with the 300 lines"), "{}", stderr(&a));
    let a = trellis()
        .args(["retrieve", "--retriever", "bm25", "--resume", "--output", "/dev/stdout", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(&input)
        .assert()
        .code(2);
    assert!(stderr(&a).contains("--resume needs --output to name a file"), "{}", stderr(&a));
    // A partial file changed by hand is not continued.
    let mut edited = kept.clone();
    edited[20] ^= 1;
    std::fs::write(&partial, &edited).unwrap();
    let a = retrieve(&["--resume"]).assert().code(1);
    assert!(stderr(&a).contains("are not the answers its checkpoint records"), "{}", stderr(&a));
    // Bytes after the checkpoint (a torn write: here longer than all the answers still to
    // come) are cut off.
    let mut torn = kept.clone();
    torn.extend(std::iter::repeat_n(b'{', 1 << 20));
    std::fs::write(&partial, &torn).unwrap();
    assert_eq!(std::fs::read(&output).unwrap(), b"old\n");

    // The bad line fixed (after the checkpoint: allowed), the run continues at line 301 and
    // ends where a clean run ends.
    std::fs::write(&input, good.join("\n") + "\n").unwrap();
    let summary = json_of(&mut retrieve(&["--resume", "--json"]));
    assert_eq!((summary["answered"].as_u64(), summary["resumed_at_line"].as_u64(), summary["answered_now"].as_u64()), (Some(350), Some(301), Some(50)));
    assert!(!partial.exists() && !checkpoint.exists());
    let clean = d.join("clean.jsonl");
    stdout_of(trellis().args(["retrieve", "--retriever", "bm25", "--store"]).arg(&store).arg("--input").arg(&input).arg("--output").arg(&clean));
    assert!(std::fs::read(&output).unwrap() == std::fs::read(&clean).unwrap());
    // Nothing left to resume: a note, and the whole input answered again.
    let a = retrieve(&["--resume"]).assert().success();
    assert!(stderr(&a).contains("note: nothing to resume"), "{}", stderr(&a));
    assert!(std::fs::read(&output).unwrap() == std::fs::read(&clean).unwrap());
}

/// A byte-order mark on line 1 is dropped; blank lines get no answer but keep the numbering
/// (each answer's "line"); a speaker that is not a string is reported as such.
#[test]
fn byte_order_mark_blank_lines_and_a_bad_speaker() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("s");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let input = write(
        d,
        "in.jsonl",
        b"\xef\xbb\xbf{\"history\": [\"Tell me about Jordan Spieth\"]}\n\n{\"id\": \"x\", \"history\": [\"Golf?\"]}\n  \t\r\n{\"history\": [{\"speaker\": 3, \"text\": \"Golf\"}]}\n",
    );
    let output = d.join("out.jsonl");
    let retrieve = |extra: &[&str]| {
        let mut c = trellis();
        c.args(["retrieve", "--retriever", "bm25", "--top", "1", "--store"]).arg(&store).arg("--input").arg(&input).arg("--output").arg(&output).args(extra);
        c
    };
    retrieve(&[]).assert().code(65).stderr(predicates::str::contains("in.jsonl:5: history[0] has a \"speaker\" (or \"sender\") that is not a string"));
    let summary = json_of(&mut retrieve(&["--resume", "--on-error", "skip", "--json"]));
    assert_eq!((summary["answered"].as_u64(), summary["skipped"].as_u64()), (Some(2), Some(1)), "{summary}");
    let out: Vec<Value> = std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let got: Vec<(Value, Value, Value)> = out.iter().map(|v| (v["line"].clone(), v["id"].clone(), v["mentioned"].clone())).collect();
    assert_eq!(got, [(json!(1), Value::Null, json!(["Jordan Spieth"])), (json!(3), json!("x"), json!(["Golf"]))]);
    // `link --input` drops a byte-order mark too, and reports a bad speaker as such.
    let dialog = write(d, "dialog.json", b"\xef\xbb\xbf[\"Tell me about Jordan Spieth\"]\n");
    let linked = stdout_of(trellis().args(["link", "--json", "--store"]).arg(&store).arg("--input").arg(&dialog));
    assert!(linked.contains("\"Jordan Spieth\""), "{linked}");
    let dialog = write(d, "speaker.json", b"[\"Golf\",\n {\"sender\": false, \"message\": \"Golf\"}]\n");
    trellis()
        .args(["link", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(&dialog)
        .assert()
        .code(65)
        .stderr(predicates::str::contains("speaker.json:2: message 2 has a \"speaker\" (or \"sender\") that is not a string"));
}

/// What a resume must not mistake for the interrupted run's: a store deleted and loaded
/// again at the same path (same generation name); and what a run must not write over: its
/// own input, or a symbolic link (the file it points to is written). A directory given as
/// the input leaves no output files behind.
#[test]
fn resume_knows_a_rebuilt_store_and_outputs_keep_inputs_and_links() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("s");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let mut lines: Vec<String> = requests(300).lines().filter(|l| l.starts_with('{') && *l != "{oops").map(str::to_owned).collect();
    lines[200] = "{\"history\": 3}".into();
    let input = write(d, "in.jsonl", (lines.join("\n") + "\n").as_bytes());
    let output = d.join("out.jsonl");
    let retrieve = |input: &Path, output: &Path, extra: &[&str]| {
        let mut c = trellis();
        c.args(["retrieve", "--retriever", "bm25", "--store"]).arg(&store).arg("--input").arg(input).arg("--output").arg(output).args(extra);
        c.output().unwrap()
    };
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(retrieve(&input, &output, &[]).status.code(), Some(65));
    // The same path, the same generation name, other facts.
    std::fs::remove_dir_all(&store).unwrap();
    let small =
        write(d, "small.tsv", std::fs::read_to_string(fixture("opendialkg-sample.tsv")).unwrap().lines().take(200).collect::<Vec<_>>().join("\n").as_bytes());
    ingest(&store, &[], &[&small]);
    let o = retrieve(&input, &output, &["--resume"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("its store was"), "{}", err(&o));

    // --output naming the input (directly or through a link) is refused; the input stays.
    let before = std::fs::read(&input).unwrap();
    let o = retrieve(&input, &input, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("is the input file"), "{}", err(&o));
    let link_to_input = d.join("link-in.jsonl");
    std::os::unix::fs::symlink(&input, &link_to_input).unwrap();
    assert_eq!(retrieve(&input, &link_to_input, &[]).status.code(), Some(2));
    assert_eq!(std::fs::read(&input).unwrap(), before);

    // A link as --output: the answers land in the file it points to; the link stays a link.
    let good = write(d, "good.jsonl", (lines[..5].join("\n") + "\n").as_bytes());
    std::fs::create_dir(d.join("real")).unwrap();
    let target = write(&d.join("real"), "answers.jsonl", b"old\n");
    let link = d.join("answers.jsonl");
    std::os::unix::fs::symlink("real/answers.jsonl", &link).unwrap();
    let o = retrieve(&good, &link, &[]);
    assert!(o.status.success(), "{}", err(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap().lines().count(), 5);

    // A directory as --input: refused before any output file exists.
    let o = retrieve(&d.join("real"), &d.join("o4.jsonl"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("is a directory"), "{}", err(&o));
    for name in ["o4.jsonl", "o4.jsonl.partial", "o4.jsonl.checkpoint"] {
        assert!(!d.join(name).exists(), "{name} left behind");
    }
}

/// FNV-1a, 64 bits, written out here from its published constants (the checkpoint's hash).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A run killed after renaming its partial file onto OUTPUT but before removing its
/// checkpoint: `--resume` with the same input and options finishes it (nothing rewritten),
/// and with another input or other options refuses, exit 2, instead of starting over. The
/// leftover checkpoint is made from a real one (a run stopped by a bad line after the same
/// requests), marked complete, with the finished OUTPUT's length and hash.
#[test]
fn resume_after_the_final_rename_checks_input_and_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("s");
    ingest(&store, &[], &[&fixture("opendialkg-sample.tsv")]);
    let good: Vec<String> = requests(40).lines().filter(|l| l.starts_with('{') && *l != "{oops").map(str::to_owned).collect();
    let text = good.join("\n") + "\n";
    let input = write(d, "in.jsonl", text.as_bytes());
    let stopped_input = write(d, "in-bad.jsonl", (text.clone() + "{\"history\": 3}\n").as_bytes());
    let retrieve = |input: &Path, output: &Path, extra: &[&str]| {
        let mut c = trellis();
        c.args(["retrieve", "--retriever", "bm25", "--store"]).arg(&store).arg("--input").arg(input).arg("--output").arg(output).args(extra);
        c.output().unwrap()
    };
    let output = d.join("out.jsonl");
    assert!(retrieve(&input, &output, &[]).status.success());
    let finished = std::fs::read(&output).unwrap();
    let stopped = d.join("stopped.jsonl");
    assert_eq!(retrieve(&stopped_input, &stopped, &[]).status.code(), Some(65));
    let mut c: Value = serde_json::from_slice(&std::fs::read(with_suffix(&stopped, ".checkpoint")).unwrap()).unwrap();
    // The stop came after exactly the good lines: the position is the end of `in.jsonl`.
    assert_eq!(c["next"], json!({"line": good.len() + 1, "offset": text.len(), "hash": fnv1a(text.as_bytes())}));
    c["complete"] = json!(true);
    c["output_bytes"] = json!(finished.len());
    c["output_hash"] = json!(fnv1a(&finished));
    let forged = serde_json::to_vec(&c).unwrap();
    let checkpoint = with_suffix(&output, ".checkpoint");
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).to_string();

    std::fs::write(&checkpoint, &forged).unwrap();
    let one = write(d, "one.jsonl", (good[0].clone() + "\n").as_bytes());
    let o = retrieve(&one, &output, &["--resume"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("is not the input the finished run answered"), "{}", err(&o));
    let o = retrieve(&input, &output, &["--resume", "--top", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("its top was 10, now 3"), "{}", err(&o));
    assert_eq!(std::fs::read(&output).unwrap(), finished);

    let o = retrieve(&input, &output, &["--resume", "--json"]);
    assert!(o.status.success(), "{}", err(&o));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["answered_now"], 0, "{summary}");
    assert_eq!(std::fs::read(&output).unwrap(), finished);
    assert!(!checkpoint.exists());
}
