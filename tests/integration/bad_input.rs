//! Every kind of bad input: the message names file, line and problem, the exit code is 65,
//! and nothing of the failed load becomes visible.

use crate::common::*;
use predicates::prelude::*;
use std::io::Write;

const GOOD: &str = "Alice\tknows\tBob\nBob\tknows\tCarol\n";

/// Loads `good` first, then expects `bad` to fail with `message`, and the store unchanged.
fn expect_rejected(name: &str, bad: &[u8], message: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let good = write(dir.path(), "good.tsv", GOOD.as_bytes());
    ingest(&store, &[], &[&good]);
    let before = stats(&store);
    let bad = write(dir.path(), name, bad);
    trellis().arg("ingest").arg("--store").arg(&store).arg(&bad).assert().code(65).stderr(predicate::str::contains(message));
    let after = stats(&store);
    assert_eq!(before["facts"], after["facts"]);
    assert_eq!(before["entities"], after["entities"]);
    assert_eq!(before["loads"], after["loads"]);
    assert_valid(&store);
}

#[test]
fn wrong_column_count() {
    expect_rejected("bad.tsv", b"a\tb\tc\nd\te\n", "bad.tsv:2: wrong column count: expected 3 tab-separated columns, found 2\n  | d\u{2409}e");
}

#[test]
fn empty_name() {
    expect_rejected("bad.tsv", b"a\tb\tc\n\tr\tx\n", "bad.tsv:2: empty name: the subject is empty");
}

#[test]
fn invalid_utf8() {
    expect_rejected("bad.tsv", b"a\tb\tc\na\tb\t\xc3\x28\n", "bad.tsv:2: invalid UTF-8: invalid UTF-8 at byte 5 of the line");
}

#[test]
fn invalid_ntriples() {
    expect_rejected("bad.nt", b"<http://x/a> <http://x/r> <http://x/b> .\n<http://x/a> <http://x/r> .\n", "bad.nt:2: invalid N-Triples:");
}

#[test]
fn line_too_long() {
    let mut bad = b"a\tb\tc\n".to_vec();
    bad.extend(std::iter::repeat_n(b'x', (1 << 20) + 10));
    bad.extend_from_slice(b"\tr\to\nd\te\tf\n");
    expect_rejected("bad.tsv", &bad, "bad.tsv:2: line too long: line is 1048590 bytes, the limit is 1048576 bytes");
}

#[test]
fn very_long_line_is_never_buffered_whole() {
    // 5 MiB without a newline: rejected while streaming, not after reading it all.
    let mut bad = b"a\tb\tc\n".to_vec();
    bad.extend(std::iter::repeat_n(b'y', 5 << 20));
    expect_rejected("bad.tsv", &bad, "bad.tsv:2: line too long: line is 5242880 bytes");
}

#[test]
fn unknown_format() {
    expect_rejected("triples.xyz", b"a\tb\tc\n", "triples.xyz: cannot tell the input format from the file name; say which it is (tsv, pipe or ntriples)");
    // The library says what is missing; the command line adds which flag gives it.
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "t.xyz", b"a\tb\tc\n");
    trellis()
        .arg("ingest")
        .arg("--store")
        .arg(dir.path().join("s"))
        .arg(&bad)
        .assert()
        .code(65)
        .stderr(predicate::str::starts_with("error: use --format tsv|pipe|ntriples: "));
}

#[test]
fn truncated_gzip() {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..20_000 {
        writeln!(enc, "e{i}\tr\te{}", i + 1).unwrap();
    }
    let full = enc.finish().unwrap();
    let cut = &full[..full.len() / 2];
    expect_rejected("cut.tsv.gz", cut, "cut.tsv.gz: truncated or corrupt gzip stream after line");
}

#[test]
fn truncated_zstd_and_bzip2() {
    let data: String = (0..20_000).map(|i| format!("e{i}\tr\te{}\n", i + 1)).collect();
    let z = zstd::encode_all(data.as_bytes(), 3).unwrap();
    expect_rejected("cut.tsv.zst", &z[..z.len() / 2], "cut.tsv.zst: truncated or corrupt zstd stream");
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    enc.write_all(data.as_bytes()).unwrap();
    let b = enc.finish().unwrap();
    expect_rejected("cut.tsv.bz2", &b[..b.len() / 2], "cut.tsv.bz2: truncated or corrupt bzip2 stream");
}

#[test]
fn missing_file() {
    let dir = tempfile::tempdir().unwrap();
    trellis()
        .arg("ingest")
        .arg("--store")
        .arg(dir.path().join("s"))
        .arg(dir.path().join("nope.tsv"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("nope.tsv: No such file or directory"));
}

#[test]
fn skip_mode_counts_each_kind_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut data = b"a\tr\tb\nbad line\nx\t\ty\nc\tr\td\n\xff\tr\tz\n".to_vec();
    data.extend(std::iter::repeat_n(b'q', (1 << 20) + 1));
    data.extend_from_slice(b"\ne\tr\tf\n");
    let input = write(dir.path(), "mixed.tsv", &data);
    let out = stdout_of(trellis().arg("ingest").arg("--store").arg(&store).arg("--on-error").arg("skip").arg(&input));
    assert!(out.contains("rejected 4 lines:"), "{out}");
    assert!(out.contains("wrong column count: 1"), "{out}");
    assert!(out.contains("empty name: 1"), "{out}");
    assert!(out.contains("invalid UTF-8: 1"), "{out}");
    assert!(out.contains("line too long: 1"), "{out}");
    let s = stats(&store);
    assert_eq!(s["facts"], 3);
    assert_eq!(s["entities"], 6);
    let rejects = std::fs::read(store.join("rejected-gen-000001.tsv")).unwrap();
    let text = String::from_utf8_lossy(&rejects);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "file\tline\tkind\tdetail\ttext");
    assert!(lines[1].ends_with("\t2\twrong column count\texpected 3 tab-separated columns, found 1\tbad line"), "{}", lines[1]);
    assert!(lines[2].contains("\t3\tempty name\t"));
    assert!(lines[3].contains("\t5\tinvalid UTF-8\t"));
    assert!(lines[4].contains("\t6\tline too long\t"));
    assert_eq!(lines.len(), 5);
    assert_valid(&store);
}

#[test]
fn stdin_needs_a_format_and_then_works() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    trellis()
        .arg("ingest")
        .arg("--store")
        .arg(&store)
        .arg("-")
        .write_stdin(GOOD)
        .assert()
        .code(65)
        .stderr(predicate::str::contains("<stdin>: cannot tell the input format"));
    assert!(!store.join("CURRENT").exists(), "a failed first load creates no store");
    trellis().arg("ingest").arg("--store").arg(&store).arg("--format").arg("tsv").arg("-").write_stdin(GOOD).assert().success();
    assert_eq!(stats(&store)["facts"], 2);
}

#[test]
fn not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    trellis().arg("stats").arg("--store").arg(dir.path()).assert().code(1).stderr(predicate::str::contains("not a Trellis store (no CURRENT file)"));
}

/// Entity keys of a store, in id order.
fn entity_keys(store: &std::path::Path) -> Vec<String> {
    let s = trellis::Store::open_read_only(store).unwrap();
    (0..s.entity_count() as u32).map(|i| s.entity(trellis::EntityId(i)).unwrap().unwrap().key).collect()
}

#[test]
fn byte_order_marks_are_stripped_in_every_format_and_compression() {
    let bom = |text: &[u8]| [&b"\xef\xbb\xbf"[..], text].concat();
    let tsv = bom(b"Alice\tknows\tBob\n");
    let nt = bom(b"<http://x/Alice> <http://x/knows> <http://x/Bob> .\n");
    let gzip = {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&tsv).unwrap();
        enc.finish().unwrap()
    };
    let bzip = {
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        enc.write_all(&nt).unwrap();
        enc.finish().unwrap()
    };
    let plain = ["Alice", "Bob"];
    let iris = ["http://x/Alice", "http://x/Bob"];
    let cases: Vec<(&str, Vec<u8>, [&str; 2])> = vec![
        ("a.tsv", tsv.clone(), plain),
        ("a.psv", bom(b"Alice|knows|Bob\n"), plain),
        ("a.nt", nt.clone(), iris),
        // `.txt` is sniffed from the first line: the mark must not hide what follows it.
        ("tsv.txt", tsv.clone(), plain),
        ("nt.txt", nt.clone(), iris),
        ("a.tsv.gz", gzip, plain),
        ("a.nt.bz2", bzip, iris),
        ("a.tsv.zst", zstd::encode_all(&tsv[..], 3).unwrap(), plain),
    ];
    for (name, bytes, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let input = write(dir.path(), name, &bytes);
        ingest(&store, &[], &[&input]);
        assert_eq!(entity_keys(&store), expected, "{name}");
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    trellis().arg("ingest").arg("--store").arg(&store).arg("--format").arg("tsv").arg("-").write_stdin(tsv).assert().success();
    assert_eq!(entity_keys(&store), plain, "<stdin>");
}

#[test]
fn control_characters_in_names_are_rejected() {
    expect_rejected(
        "nul.tsv",
        b"a\tb\tc\nAl\0ice\tknows\tBob\n",
        "nul.tsv:2: control character: the subject contains U+0000 at byte 3 of the line\n  | Al\u{2400}ice\u{2409}knows\u{2409}Bob",
    );
    expect_rejected("cr.tsv", b"a\tb\tc\nAlice\tkn\rows\tBob\n", "cr.tsv:2: control character: the relation contains U+000D at byte 9 of the line");
    // C1 controls are control characters too (U+0085 is two bytes in UTF-8).
    expect_rejected(
        "c1.tsv",
        "a\tb\tc\nAlice\tknows\tBo\u{85}b\n".as_bytes(),
        "c1.tsv:2: control character: the object contains U+0085 at byte 15 of the line",
    );
    expect_rejected("del.tsv", b"a\tb\tc\nAlice\tknows\tBob\x7f\n", "del.tsv:2: control character: the object contains U+007F at byte 16 of the line");
    // A tab separates TSV fields, but inside a pipe-separated field it is a control character.
    expect_rejected("tab.psv", b"a|b|c\nAl\tice|knows|Bob\n", "tab.psv:2: control character: the subject contains U+0009 at byte 3 of the line");
    // N-Triples: an escaped or a raw control character in a literal.
    expect_rejected(
        "esc.nt",
        b"<http://x/a> <http://x/r> <http://x/b> .\n<http://x/a> <http://x/r> \"x\\u0000y\" .\n",
        "esc.nt:2: control character: the object contains U+0000",
    );
    expect_rejected(
        "raw.nt",
        b"<http://x/a> <http://x/r> <http://x/b> .\n<http://x/a> <http://x/r> \"x\x01y\" .\n",
        "raw.nt:2: control character: the object contains U+0001",
    );
    expect_rejected(
        "label.nt",
        b"<http://x/a> <http://x/r> <http://x/b> .\n<http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> \"x\\ny\"@en .\n",
        "label.nt:2: control character: the label contains U+000A",
    );
}

/// Reverses the rejects file's escaping: `\\`, `\t`, `\n`, `\r` and `\xHH` (one byte).
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b[i + 1] {
            b'\\' => out.push(b'\\'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'x' => {
                out.push(u8::from_str_radix(&field[i + 2..i + 4], 16).unwrap());
                i += 2;
            }
            other => panic!("unknown escape \\{} in {field:?}", other as char),
        }
        i += 2;
    }
    out
}

#[test]
fn rejects_file_is_tsv_with_each_line_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let lines: [&[u8]; 8] =
        [b"a\tr\tb", b"x\ty\tz\tw", b"n\0ul\tr\tb", b"back\\slash\tr", b"\xff\tr\tz", b"c\tr\x01\td", b"e\tr\tf\rg", "c\tr\t\u{9f}d".as_bytes()];
    let mut data = Vec::new();
    for l in lines {
        data.extend_from_slice(l);
        data.push(b'\n');
    }
    let input = write(dir.path(), "mixed\tname.tsv", &data);
    let out = stdout_of(trellis().arg("ingest").arg("--store").arg(&store).arg("--on-error").arg("skip").arg(&input));
    assert!(out.contains("rejected 7 lines:"), "{out}");
    assert!(out.contains("control character: 4"), "{out}");
    assert!(out.contains("wrong column count: 2"), "{out}");
    assert!(out.contains("invalid UTF-8: 1"), "{out}");
    let rejects = std::fs::read(store.join("rejected-gen-000001.tsv")).unwrap();
    let text = String::from_utf8(rejects).expect("the rejects file is UTF-8");
    let rows: Vec<&str> = text.strip_suffix('\n').unwrap().split('\n').collect();
    assert_eq!(rows[0], "file\tline\tkind\tdetail\ttext");
    assert_eq!(rows.len(), 8, "{rows:?}");
    for (row, line) in rows[1..].iter().zip(2u64..) {
        let fields: Vec<&str> = row.split('\t').collect();
        assert_eq!(fields.len(), 5, "row {row:?}");
        assert_eq!(unescape(fields[0]), input.display().to_string().into_bytes());
        assert_eq!(fields[1], line.to_string());
        assert_eq!(unescape(fields[4]), lines[line as usize - 1], "row {row:?}");
    }
    assert_eq!(rows[2].split('\t').nth(4), Some("n\\x00ul\\tr\\tb"));
    assert_eq!(rows[7].split('\t').nth(4), Some("c\\tr\\t\\xc2\\x9fd"));
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// A first load that fails leaves no debris: no `LOCK`, no rejects file, no staging
/// directory; a directory it created is gone, one that was there keeps what it held; a
/// rejects file the user named stays. The next load then works as a first load.
#[test]
fn a_failed_first_load_leaves_the_directory_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let bad_then_good = write(dir.path(), "mixed.tsv", b"bad line\na\tr\tb\n");
    let missing = dir.path().join("nope.tsv");
    // The first file's bad line goes to the rejects file, then the second file is missing.
    let fail = |store: &std::path::Path, extra: &[&str]| {
        trellis()
            .arg("ingest")
            .arg("--store")
            .arg(store)
            .args(["--on-error", "skip"])
            .args(extra)
            .arg(&bad_then_good)
            .arg(&missing)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("nope.tsv: No such file or directory"));
    };
    // A store directory (and its parent) the load created: gone.
    let new = dir.path().join("parent").join("store");
    fail(&new, &[]);
    assert!(!dir.path().join("parent").exists(), "{:?}", names(dir.path()));
    // A directory that was there with a file of its own: only that file is left.
    let existing = dir.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("notes.txt"), b"mine").unwrap();
    fail(&existing, &[]);
    assert_eq!(names(&existing), vec!["notes.txt"]);
    assert_eq!(std::fs::read(existing.join("notes.txt")).unwrap(), b"mine");
    // An empty directory stays, empty; a rejects file the user named stays, with the line.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let rejects = dir.path().join("rejects.tsv");
    fail(&empty, &["--rejects", rejects.to_str().unwrap()]);
    assert_eq!(names(&empty), Vec::<String>::new());
    assert!(std::fs::read_to_string(&rejects).unwrap().contains("\t1\twrong column count\t"));
    // The directory is taken for a new store by the next load.
    let report = ingest(&empty, &["--on-error", "skip"], &[&bad_then_good]);
    assert_eq!(report["new_facts"], 1, "{report}");
    assert_valid(&empty);
    assert!(empty.join("rejected-gen-000001.tsv").exists());
}
