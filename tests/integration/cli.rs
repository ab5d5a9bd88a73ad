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
