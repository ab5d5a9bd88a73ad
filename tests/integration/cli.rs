//! The command line's contract, command by command: exit code 2 for usage errors, 65 for
//! a malformed input file (naming file and line), 1 for everything else (a store that
//! cannot be opened or read, a file that cannot be read or written); `--json` reports.

use crate::common::*;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

/// A three-fact store: "Alpha" links, and its facts are all in one adjacency data block.
fn small_store(dir: &Path) -> PathBuf {
    let kg = write(dir, "g.tsv", b"Alpha\tr\tBravo\nAlpha\ts\tCharlie\nBravo\tt\tDelta\n");
    let s = dir.join("s");
    ingest(&s, &[], &[&kg]);
    s
}

/// Garbles the start of every SST file of column family `cf` in the store's current
/// generation: the first data block no longer matches its checksum, while the footer,
/// index and properties (read when the store opens) stay intact.
fn garble_column_family(store: &Path, cf: &str) {
    let gen = store.join(std::fs::read_to_string(store.join("CURRENT")).unwrap().trim());
    let files = {
        let opts = rocksdb::Options::default();
        let cfs = rocksdb::DB::list_cf(&opts, &gen).unwrap();
        let db = rocksdb::DB::open_cf_for_read_only(&opts, &gen, &cfs, false).unwrap();
        db.live_files().unwrap().into_iter().filter(|f| f.column_family_name == cf).map(|f| f.name).collect::<Vec<_>>()
    };
    assert!(!files.is_empty(), "no SST file of column family {cf}");
    for name in files {
        let path = gen.join(name.trim_start_matches('/'));
        let mut bytes = std::fs::read(&path).unwrap();
        for b in &mut bytes[..8] {
            *b ^= 0xa5;
        }
        std::fs::write(&path, bytes).unwrap();
    }
}

fn retrieve(store: &Path, input: &Path, output: &Path, extra: &[&str]) -> assert_cmd::assert::Assert {
    trellis().arg("retrieve").arg("--store").arg(store).arg("--retriever").arg("all").arg("--input").arg(input).arg("--output").arg(output).args(extra).assert()
}

/// Defect 4: a store that cannot be read is not a bad input line. The run stops with exit
/// 1 saying the store failed, in both `--on-error` modes; no line is skipped for it.
#[test]
fn retrieve_on_a_corrupt_store_exits_1_not_65() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    let input =
        write(dir.path(), "in.jsonl", b"{\"id\": 1, \"history\": [\"Tell me about Alpha\"]}\n{\"id\": 2, \"entities\": [\"Alpha\"], \"history\": []}\n");
    let out = dir.path().join("out.jsonl");
    // Intact, both lines are answered.
    retrieve(&s, &input, &out, &[]).success();
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);
    garble_column_family(&s, "adjacency");
    for mode in ["stop", "skip"] {
        retrieve(&s, &input, &out, &["--on-error", mode])
            .code(1)
            .stderr(predicate::str::contains(format!("reading store {}", s.display())))
            .stderr(predicate::str::contains("Corruption"))
            .stderr(predicate::str::contains("(skipped)").not());
    }
    // A bad line before the first read of the store is still bad input: 65 in stop mode.
    let bad_first = write(dir.path(), "bad.jsonl", b"{oops\n{\"id\": 2, \"entities\": [\"Alpha\"], \"history\": []}\n");
    retrieve(&s, &bad_first, &out, &[]).code(65).stderr(predicate::str::contains("bad.jsonl:1: invalid JSON"));
    // In skip mode it is skipped, and the store's failure on the next line still stops the run.
    retrieve(&s, &bad_first, &out, &["--on-error", "skip"])
        .code(1)
        .stderr(predicate::str::contains("bad.jsonl:1: invalid JSON").and(predicate::str::contains("(skipped)")))
        .stderr(predicate::str::contains("Corruption"));
    // The failed runs left the intact run's output as it was.
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 2);
}

/// Names are read while linking, before any adjacency: a corrupt name index is the store's
/// fault too.
#[test]
fn retrieve_with_corrupt_names_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    garble_column_family(&s, "names");
    let input = write(dir.path(), "in.jsonl", b"{\"id\": 1, \"history\": [\"Tell me about Alpha\"]}\n");
    retrieve(&s, &input, &dir.path().join("o.jsonl"), &["--on-error", "skip"]).code(1).stderr(predicate::str::contains("Corruption"));
}

/// An output that cannot be written stops the run with exit 1, naming the file.
#[test]
fn retrieve_output_write_failure_exits_1() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    let input = write(dir.path(), "in.jsonl", b"{\"id\": 1, \"history\": [\"Tell me about Alpha\"]}\n");
    retrieve(&s, &input, full, &["--on-error", "skip"]).code(1).stderr(predicate::str::contains("writing /dev/full"));
}

fn run(args: &[&str]) -> assert_cmd::assert::Assert {
    trellis().args(args).assert()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// An OpenDialKG csv of one dialog: `messages_json` is the Messages column.
fn dialogs_csv(dir: &Path, name: &str, messages_json: &str) -> PathBuf {
    let csv = format!("Messages,User Rating,Assistant Rating\n\"{}\",5,5\n", messages_json.replace('"', "\"\""));
    write(dir, name, csv.as_bytes())
}

/// Usage errors exit 2, for every command.
#[test]
fn usage_errors_exit_2_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    let s = p(&s);
    for cmd in [
        &["ingest", "--store", s, "--no-such-flag", "x.tsv"][..],
        &["ingest", "--store", s],
        &["stats", "--store", s, "--no-such-flag"],
        &["stats"],
        &["entity", "--store", s],
        &["neighbors", "--store", s, "Alpha", "--hops", "3"],
        &["validate", "--store", s, "--no-such-flag"],
        &["migrate", "--store", s, "--no-such-flag"],
        &["index-tokens", "--store", s],
        &["link", "--store", s],
        &["link", "--store", s, "--input", "d.json", "Alpha"],
        &["retrieve", "--store", s, "--retriever", "nope", "--input", "i", "--output", "o"],
        &["retrieve", "--store", s, "--retriever", "all", "--input", "i", "--output", "o", "--on-error", "ignore"],
        &["eval", "retrieval", "--store", s, "--retriever", "all", "--input", "i", "--dataset", "nope"],
        &["eval", "retrieval", "--store", s, "--retriever", "all", "--input", "i", "--actions", "nobody"],
        &["eval", "linking", "--store", s],
        &["no-such-command"],
    ] {
        run(cmd).code(2);
    }
}

/// A directory that is not a store, or an input file that does not exist: exit 1 (not the
/// input's contents at fault), for every command.
#[test]
fn no_store_or_missing_files_exit_1_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (s, e) = (p(&s), p(&empty));
    let missing = p(dir.path()).to_owned() + "/missing.file";
    let ok_input = write(dir.path(), "ok.jsonl", b"{\"history\": [\"Alpha\"]}\n");
    let out = dir.path().join("o.jsonl");
    let tokenizer = fixture("tokenizer.json");
    // The library says what is wrong; the command line adds the command that fixes it.
    let no_store = format!("not a Trellis store (no CURRENT file); create one with `trellis ingest --store {e} FILE`");
    let no_store = no_store.as_str();
    for (cmd, says) in [
        (&["stats", "--store", e][..], no_store),
        (&["entity", "--store", e, "Alpha"], no_store),
        (&["neighbors", "--store", e, "Alpha"], no_store),
        (&["validate", "--store", e], no_store),
        (&["migrate", "--store", e], no_store),
        (&["index-tokens", "--store", e, "--tokenizer", p(&tokenizer)], no_store),
        (&["link", "--store", e, "Alpha"], no_store),
        (&["retrieve", "--store", e, "--retriever", "all", "--input", p(&ok_input), "--output", p(&out)], no_store),
        (&["eval", "retrieval", "--store", e, "--retriever", "all", "--input", p(&ok_input)], no_store),
        (&["eval", "linking", "--store", e, "--input", p(&ok_input)], no_store),
        (&["ingest", "--store", s, &missing], "missing.file"),
        (&["link", "--store", s, "--input", &missing], "missing.file"),
        (&["retrieve", "--store", s, "--retriever", "all", "--input", &missing, "--output", p(&out)], "missing.file"),
        (&["eval", "retrieval", "--store", s, "--retriever", "all", "--input", &missing], "missing.file"),
        (&["eval", "retrieval", "--store", s, "--retriever", "all", "--dataset", "metaqa", "--input", &missing], "missing.file"),
        (&["eval", "linking", "--store", s, "--input", &missing], "missing.file"),
    ] {
        run(cmd).code(1).stderr(predicate::str::contains(says));
    }
}

/// A malformed line of any input file exits 65 naming the file and the line, for every
/// command that reads one (`ingest`'s kinds are in bad_input.rs).
#[test]
fn malformed_input_files_exit_65_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    let s = p(&s);
    let d = dir.path();
    let bad_tsv = write(d, "bad.tsv", b"a\tb\tc\nd\te\n");
    let dialog_syntax = write(d, "syntax.json", b"[\"I like Alpha\",\n  \"and Bravo\",,\n]\n");
    let dialog_shape = write(d, "shape.json", b"[\"I like Alpha\",\n  {\"speaker\": \"user\"}\n]\n");
    let dialog_object = write(d, "object.json", b"{\"text\": \"Alpha\"}\n");
    let dialog_utf8 = write(d, "utf8.json", b"[\"Alpha\",\n\"caf\xc3\"]\n");
    let requests = write(d, "req.jsonl", b"{\"history\": [\"Alpha\"]}\n{\"history\": [\"caf\xc3\"]}\n");
    let metaqa = write(d, "qa.json", b"{\"question\": \"[Alpha]\", \"triples\": [{\"h\": \"Alpha\", \"r\": \"r\", \"t\": \"Bravo\"}]}\n{\"question\": 3}\n");
    let metaqa_utf8 = write(d, "qa8.json", b"{\"question\": \"[Alpha]\", \"triples\": []}\n{\"question\": \"caf\xc3\", \"triples\": []}\n");
    let good = r#"[{"type": "chat", "sender": "user", "message": "Alpha?"}]"#;
    let csv_json = write(d, "json.csv", format!("Messages,User Rating,Assistant Rating\n\"{}\",5,5\n\"[oops\",5,5\n", good.replace('"', "\"\"")).as_bytes());
    let csv_columns = write(d, "columns.csv", b"Messages,User Rating,Assistant Rating\n\"[]\",5,5\n\"[]\",5\n");
    let csv_header = write(d, "header.csv", b"Dialog,Rating\n\"[]\",5\n");
    let out = p(&d.join("o.jsonl")).to_owned();
    let retrieval = |input: &Path| -> Vec<String> {
        ["eval", "retrieval", "--store", s, "--retriever", "all", "--input", p(input)].iter().map(|x| x.to_string()).collect()
    };
    let mut metaqa_args = retrieval(&metaqa);
    metaqa_args.extend(["--dataset".to_string(), "metaqa".to_string()]);
    let mut metaqa_utf8_args = retrieval(&metaqa_utf8);
    metaqa_utf8_args.extend(["--dataset".to_string(), "metaqa".to_string()]);
    let owned = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for (cmd, says) in [
        (owned(&["ingest", "--store", s, p(&bad_tsv)]), "bad.tsv:2: wrong column count".to_string()),
        (owned(&["link", "--store", s, "--input", p(&dialog_syntax)]), "syntax.json:2: expected value (column".into()),
        (owned(&["link", "--store", s, "--input", p(&dialog_shape)]), "shape.json:2: message 2 needs a \"text\" (or \"message\") string".into()),
        (owned(&["link", "--store", s, "--input", p(&dialog_object)]), "object.json:1: invalid type: map, expected a JSON list of messages".into()),
        (owned(&["link", "--store", s, "--input", p(&dialog_utf8)]), "utf8.json:2: invalid UTF-8".into()),
        (
            owned(&["retrieve", "--store", s, "--retriever", "all", "--input", p(&requests), "--output", &out]),
            "req.jsonl:2: invalid UTF-8 at byte 17 of the line".into(),
        ),
        (metaqa_args, "qa.json:2: not a MetaQA question".into()),
        (metaqa_utf8_args, "qa8.json:2: invalid UTF-8 at byte 17 of the line".into()),
        (retrieval(&csv_json), "json.csv:3: Messages is not the expected JSON".into()),
        (retrieval(&csv_columns), "columns.csv:3: ".into()),
        (retrieval(&csv_header), "header.csv:1: no `Messages` column".into()),
        (owned(&["eval", "linking", "--store", s, "--no-substring", "--input", p(&csv_json)]), "json.csv:3: Messages is not the expected JSON".into()),
    ] {
        run(&cmd.iter().map(String::as_str).collect::<Vec<_>>()).code(65).stderr(predicate::str::contains(says));
    }
    // --on-error skip skips a line of invalid UTF-8 like any other bad line (continuing the
    // run that stopped at it).
    run(&["retrieve", "--store", s, "--retriever", "all", "--input", p(&requests), "--output", &out, "--on-error", "skip", "--resume"])
        .success()
        .stderr(predicate::str::contains("req.jsonl:2: invalid UTF-8 at byte 17 of the line (skipped)"));
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
}

/// Every command that reports has `--json`; `stats` lists the token indexes; the renamed
/// flags still take their old spellings.
#[test]
fn every_reporting_command_speaks_json() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = small_store(d);
    let s = p(&store);
    let json = |args: &[&str]| json_of(trellis().args(args));
    let lines = |args: &[&str]| -> Vec<serde_json::Value> { stdout_of(trellis().args(args)).lines().map(|l| serde_json::from_str(l).unwrap()).collect() };
    assert_eq!(json(&["stats", "--store", s, "--json"])["token_indexes"], serde_json::json!([]));
    stdout_of(trellis().args(["index-tokens", "--store", s, "--tokenizer", p(&fixture("tokenizer.json")), "--name", "t5-small"]));
    let st = json(&["stats", "--store", s, "--json"]);
    assert_eq!(st["token_indexes"].as_array().unwrap().len(), 1, "{st}");
    assert_eq!(st["token_indexes"][0]["name"], "t5-small");
    assert_eq!(st["token_indexes"][0]["entities"], 4);
    let m = json(&["migrate", "--store", s, "--json"]);
    assert_eq!(m["steps"], serde_json::json!([]));
    assert_eq!(m["from_version"], st["format_version"]);
    assert_eq!(m["to_version"], st["format_version"]);
    assert_eq!(json(&["validate", "--store", s, "--json"])["facts_out"], 3);
    assert_eq!(json(&["entity", "--store", s, "Alpha", "--json"])["out_degree"], 2);
    assert_eq!(lines(&["neighbors", "--store", s, "Alpha", "--json"]).len(), 2);
    let dialog = write(d, "d.json", br#"["Tell me about Alpha"]"#);
    for flag in ["--input", "--dialog"] {
        let l = lines(&["link", "--store", s, flag, p(&dialog), "--json"]);
        assert_eq!(l.last().unwrap()["turn_entities"][0]["name"], "Alpha");
    }
    let req = write(d, "req.jsonl", b"{\"history\": [\"Alpha\"]}\n{oops\n");
    let out = d.join("o.jsonl");
    let summary = json(&["retrieve", "--store", s, "--retriever", "all", "--input", p(&req), "--output", p(&out), "--on-error", "skip", "--json"]);
    assert_eq!(summary["answered"], 1);
    assert_eq!(summary["skipped"], 1);
    // Eval reports: plain keys, k -> score.
    let csv = dialogs_csv(
        d,
        "d.csv",
        r#"[{"type": "chat", "sender": "user", "message": "Tell me about Alpha"}, {"type": "action", "sender": "assistant", "metadata": {"path": [1, [["Alpha", "r", "Bravo"]], "x"]}}]"#,
    );
    let r = json(&["eval", "retrieval", "--store", s, "--retriever", "all", "--input", p(&csv), "--k", "1,3", "--json"]);
    assert_eq!(r["path_at"], serde_json::json!({"1": 1.0, "3": 1.0}));
    assert_eq!(r["triple_recall_at"], serde_json::json!({"1": 1.0, "3": 1.0}));
    assert_eq!(r["hits_at"], serde_json::json!({"1": 1.0, "3": 1.0, "10": 1.0}));
    for flag in ["--input", "--dialogs"] {
        let l = json(&["eval", "linking", "--store", s, flag, p(&csv), "--json"]);
        assert_eq!(l["turns"], 1);
        assert_eq!(l["trellis"]["recall_all"], 1.0);
    }
}

/// One dialog over `small_store`'s graph with three path actions: the user walks
/// r(Alpha, Bravo) after `first` (the first message), the assistant s(Alpha, Charlie), then
/// t(Bravo, `last`).
fn three_actions_csv(d: &Path, first: &str, last: &str) -> PathBuf {
    let dialog = serde_json::json!([
        {"type": "chat", "sender": "user", "message": first},
        {"type": "action", "sender": "user", "metadata": {"path": [1, [["Alpha", "r", "Bravo"]], "x"]}},
        {"type": "chat", "sender": "assistant", "message": "Alpha and Bravo"},
        {"type": "action", "sender": "assistant", "metadata": {"path": [1, [["Alpha", "s", "Charlie"]], "x"]}},
        {"type": "action", "sender": "assistant", "metadata": {"path": [1, [["Bravo", "t", last]], "x"]}},
    ]);
    dialogs_csv(d, "d.csv", &dialog.to_string())
}

/// `--actions` picks whose path actions are the samples; the default is every action.
#[test]
fn eval_actions_select_the_assistants_or_the_users() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = small_store(d);
    let s = p(&store);
    let csv = three_actions_csv(d, "Tell me about Alpha", "Delta");
    let turns = |actions: Option<&str>| {
        let mut args = vec!["eval", "retrieval", "--store", s, "--retriever", "all", "--input", p(&csv), "--json"];
        args.extend(actions.map(|a| ["--actions", a]).iter().flatten());
        json_of(trellis().args(&args))["turns"].as_u64().unwrap()
    };
    assert_eq!((turns(None), turns(Some("all")), turns(Some("assistant")), turns(Some("user"))), (3, 3, 2, 1));
    let linking = json_of(trellis().args(["eval", "linking", "--store", s, "--input", p(&csv), "--actions", "assistant", "--json"]));
    assert_eq!(linking["turns"], 2);
}

/// `eval retrieval --turns FILE`: one line per evaluated turn, in order, with the ranked
/// paths by name and which of them are gold; the lines agree with the report.
#[test]
fn eval_retrieval_writes_each_turn() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = small_store(d);
    let s = p(&store);
    // Echo is no entity of the store: the last turn's gold cannot be found.
    let csv = three_actions_csv(d, "Tell me about Alpha and Bravo", "Echo");
    let out = d.join("turns.jsonl");
    let r = json_of(trellis().args(["eval", "retrieval", "--store", s, "--retriever", "bm25", "--input", p(&csv), "--json", "--turns", p(&out)]));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().map(|l| (l["turn"].as_u64().unwrap(), l["upto"].as_u64().unwrap())).collect::<Vec<_>>(), vec![(0, 1), (1, 2), (2, 2)]);
    assert!(lines.iter().all(|l| l["dialog"] == 0));
    assert_eq!(lines[0]["gold"], serde_json::json!([["Alpha", "r", "Bravo"]]));
    assert_eq!(lines[1]["right_paths"], serde_json::json!([[["Alpha", "s", "Charlie"]]]));
    assert_eq!(lines.iter().map(|l| l["gold_in_store"].as_bool().unwrap()).collect::<Vec<_>>(), vec![true, true, false]);
    let mut firsts = 0;
    for l in &lines {
        let gold: Vec<serde_json::Value> = l["gold"].as_array().unwrap().clone();
        let paths = l["paths"].as_array().unwrap();
        assert!(!paths.is_empty(), "{l}");
        for path in paths {
            let facts = path["facts"].as_array().unwrap();
            assert_eq!(path["right"].as_bool().unwrap(), facts == &gold, "{path}");
            assert_eq!(path["gold_facts"].as_u64().unwrap() as usize, facts.iter().filter(|f| gold.contains(f)).count(), "{path}");
            assert!(path["explanation"].as_str().unwrap().starts_with("bm25"), "{path}");
        }
        let right_at = paths.iter().position(|p| p["right"] == true).map(|i| i as u64 + 1);
        assert_eq!(l["right_at"].as_u64(), right_at);
        firsts += u64::from(right_at == Some(1));
    }
    assert!(lines[0]["paths"].as_array().unwrap().iter().any(|p| p["facts"] == serde_json::json!([["Alpha", "r", "Bravo"]])));
    assert!(firsts > 0, "bm25 puts some gold first here: the check must bite");
    assert_eq!(r["path_at"]["1"].as_f64().unwrap(), firsts as f64 / 3.0);
    // An output that cannot be written fails the run and names the file; no stray file is left.
    for (target, named) in [("/nonexistent-dir/t.jsonl", "/nonexistent-dir/"), ("/dev/full", "/dev/full")] {
        let bad = trellis().args(["eval", "retrieval", "--store", s, "--retriever", "bm25", "--input", p(&csv), "--turns", target]).output().unwrap();
        assert_ne!(bad.status.code(), Some(0), "{target}");
        assert!(String::from_utf8_lossy(&bad.stderr).contains(named), "{target}: {}", String::from_utf8_lossy(&bad.stderr));
    }
    let names: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
}

/// A reader that goes away (`trellis stats --json | head -c 10`) ends every command that
/// prints quietly, with the status a shell gives a process ended by SIGPIPE (141), never
/// a panic (exit 101, "failed printing to stdout").
#[test]
fn a_closed_pipe_ends_every_printing_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_store(dir.path());
    let s = p(&s);
    let dialogs = dialogs_csv(dir.path(), "d.csv", r#"[{"type": "chat", "sender": "user", "message": "Alpha"}]"#);
    let commands: Vec<Vec<&str>> = vec![
        vec!["stats", "--store", s, "--json"],
        vec!["stats", "--store", s],
        vec!["entity", "--store", s, "Alpha"],
        vec!["neighbors", "--store", s, "Alpha"],
        vec!["validate", "--store", s],
        vec!["link", "--store", s, "Alpha and Bravo"],
        vec!["doctor"],
        vec!["eval", "linking", "--store", s, "--input", p(&dialogs), "--no-substring"],
        vec!["eval", "retrieval", "--store", s, "--input", p(&dialogs), "--retriever", "bm25", "--json"],
        vec!["migrate", "--store", s, "--json"],
        vec!["--help"],
    ];
    for args in commands {
        let mut child =
            std::process::Command::new(bin_path()).args(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        // The reader leaves before the command has written anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // clap prints --help itself and ignores the write error; every command of ours ends
        // with the SIGPIPE status.
        let expected = if args == ["--help"] { Some(0) } else { Some(141) };
        assert_eq!(out.status.code(), expected, "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

/// Opening, indexing or migrating a path that holds no store creates nothing there (no
/// `LOCK` file, no directory), and a path that is a file is named as one.
#[test]
fn a_missing_or_file_store_path_is_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let tokenizer = fixture("tokenizer.json");
    for args in [
        vec!["index-tokens", "--store", p(&missing), "--tokenizer", p(&tokenizer)],
        vec!["migrate", "--store", p(&missing)],
        vec!["stats", "--store", p(&missing)],
    ] {
        run(&args).code(1).stderr(predicate::str::contains("missing: no such store directory"));
        assert!(!missing.exists(), "{args:?} left {}", missing.display());
    }
    let file = write(dir.path(), "a-file", b"x");
    let kg = write(dir.path(), "g.tsv", b"A\tr\tB\n");
    for args in [
        vec!["stats", "--store", p(&file)],
        vec!["index-tokens", "--store", p(&file), "--tokenizer", p(&tokenizer)],
        vec!["ingest", "--store", p(&file), p(&kg)],
    ] {
        run(&args).code(1).stderr(predicate::str::contains("a-file: is a file, not a store directory"));
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }
}
