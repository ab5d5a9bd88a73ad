//! The docs cannot drift silently: their lists are compared with the code. docs/cli.md names
//! every flag of every command's `--help` (and no flag that none has); README, ARCHITECTURE
//! and docs/README name every shipped model; the retriever kinds in docs/cli.md and the
//! Python stub are the library's; the store format version is the newest `schema/vN.md`; the
//! front door stays at most 250 lines.

use crate::common::trellis;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The `--flags` a text names.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        if i > 0 && !text[..i].ends_with(|c: char| c.is_whitespace() || "[(`|,/".contains(c)) {
            continue;
        }
        let name: String = text[i + 2..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-').collect();
        if name.len() > 1 && !name.ends_with('-') {
            out.insert(format!("--{name}"));
        }
    }
    out
}

fn help(args: &[&str]) -> String {
    let out = trellis().args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a `--help` lists.
fn subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("Commands:") else { return Vec::new() };
    text[start..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn docs_cli_names_every_flag_of_every_command_and_no_other() {
    let doc = read("docs/cli.md");
    let documented = flags_in(&doc);
    let mut all = BTreeSet::new();
    let mut missing = Vec::new();
    let mut commands: Vec<Vec<String>> = subcommands(&help(&[])).into_iter().map(|c| vec![c]).collect();
    let mut i = 0;
    while i < commands.len() {
        let current = commands[i].clone();
        let args: Vec<&str> = current.iter().map(String::as_str).collect();
        let text = help(&args);
        for sub in subcommands(&text) {
            let mut c = current.clone();
            c.push(sub);
            commands.push(c);
        }
        // Options only: the lines of the Options section.
        if let Some(start) = text.find("Options:") {
            for flag in flags_in(&text[start..]) {
                if flag == "--help" || flag == "--version" {
                    continue;
                }
                if !documented.contains(&flag) {
                    missing.push(format!("{}: {flag}", args.join(" ")));
                }
                all.insert(flag);
            }
        }
        i += 1;
    }
    assert!(commands.len() >= 15, "{commands:?}");
    assert!(missing.is_empty(), "flags docs/cli.md does not name:\n{}", missing.join("\n"));
    // The other way: a documented flag no command has (trellis-pcst's are its own).
    let pcst = ["--input", "--output", "--repeat", "--store", "--dataset", "--pcst-variant", "--limit"];
    // Old names still accepted (clap aliases, which --help does not list).
    let aliases = ["--dialogs"];
    let stale: Vec<&String> = documented.iter().filter(|f| !all.contains(*f) && !pcst.contains(&f.as_str()) && !aliases.contains(&f.as_str())).collect();
    assert!(stale.is_empty(), "docs/cli.md names flags no command has: {stale:?}");
}

#[test]
fn every_shipped_model_is_named_where_the_models_are_listed() {
    let models: Vec<String> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("trellis.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(models.len() >= 5, "{models:?}");
    for doc in ["README.md", "ARCHITECTURE.md", "docs/README.md", "docs/training.md"] {
        let text = read(doc);
        for m in &models {
            assert!(text.contains(m.as_str()), "{doc} does not name the shipped model {m}");
        }
    }
}

#[test]
fn the_retriever_kinds_are_the_library_s_everywhere() {
    let names = trellis::retrieve::RetrieverKind::NAMES;
    let synopsis = names.join("|");
    assert!(read("docs/cli.md").contains(&synopsis), "docs/cli.md's synopsis should list the retrievers as {synopsis}");
    let stub = read("python/trellis/_trellis.pyi");
    for n in names {
        assert!(stub.contains(&format!("``\"{n}\"``")), "the Python stub's Retriever does not name {n}");
    }
    // The command line's list, in the library's order: `- NAME:` lines under --retriever.
    let help = help(&["retrieve"]);
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--retriever <"))
        .filter_map(|l| l.trim_start().strip_prefix("- ").and_then(|r| r.split(':').next()))
        .take(names.len())
        .collect();
    assert_eq!(listed, names, "retrieve --help lists the retrievers as the library names them");
}

#[test]
fn the_store_format_version_is_the_newest_schema() {
    let newest = std::fs::read_dir(root().join("schema"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().strip_prefix('v').and_then(|r| r.strip_suffix(".md")).and_then(|n| n.parse::<u32>().ok()))
        .max()
        .unwrap();
    assert_eq!(newest, trellis::store::FORMAT_VERSION, "schema/v{newest}.md against the code's format version");
    let current = format!("schema/v{newest}.md");
    for doc in ["README.md", "docs/store.md", "ARCHITECTURE.md"] {
        assert!(read(doc).contains(&current), "{doc} does not point at {current}");
    }
    assert!(read("docs/testing.md").contains(&format!("migrated to v{newest}")), "docs/testing.md: the frozen v1 store migrates to v{newest}");
}

#[test]
fn the_front_door_stays_short() {
    let lines = read("README.md").lines().count();
    assert!(lines <= 250, "README.md is {lines} lines (at most 250: details go to docs/)");
}
