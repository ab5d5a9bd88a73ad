//! The fact check (`trellis check`, `trellis::check::FactChecker`): replies split into claims
//! and each judged against a graph worked by hand, through the library and the command line.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use trellis::check::{CheckTotals, CheckerModel, FactChecker, ReplyCheck, Verdict};
use trellis::link::{LinkConfig, Message};
use trellis::Store;

const GRAPH: &[u8] = b"Mystic River\tdirected_by\tClint Eastwood
Gran Torino\tdirected_by\tClint Eastwood
Into the Wild\tdirected_by\tSean Penn
Milk\tdirected_by\tGus Van Sant
Gran Torino\tstarred_actors\tClint Eastwood
Mystic River\tstarred_actors\tSean Penn
Milk\tstarred_actors\tSean Penn
Mystic River\trelease_year\t2003
Milk\trelease_year\t2008
Clint Eastwood\tGender\tMale
Sean Penn\tGender\tMale
Adam Sandler\tis-a\tWriter
Happy Gilmore\tstarred_actors\tAdam Sandler
Happy Gilmore\thas_genre\tComedy
Big Daddy\thas_genre\tComedy
The Box\trelease_year\t2009
Iron Man 2\tdirected_by\tJon Favreau
Zathura\tdirected_by\tJon Favreau filmography
Drama\trelease_year\t2012
";

/// directed_by and release_year functional (every subject one object), starred_actors not;
/// "starred in" and "stars" learned cues of starred_actors.
const CHECKER: &str = r#"{"format": 1, "task": "fact-check",
  "cues": {"starred_actors": ["starred in", "stars"]},
  "relations": {
    "directed_by": {"subjects": 40, "single_object": 40, "objects": 30, "single_subject": 10},
    "release_year": {"subjects": 40, "single_object": 39, "objects": 20, "single_subject": 2},
    "starred_actors": {"subjects": 40, "single_object": 5, "objects": 60, "single_subject": 30}}}"#;

fn store(dir: &Path) -> PathBuf {
    let input = write(dir, "g.tsv", GRAPH);
    let store = dir.join("kg");
    ingest(&store, &[], &[&input]);
    store
}

fn checker(store: &Path, model: Option<&CheckerModel>) -> FactChecker {
    FactChecker::new(Arc::new(Store::open_read_only(store).unwrap()), model, LinkConfig::default()).unwrap()
}

fn says(text: &str) -> Message {
    Message { speaker: String::new(), text: text.into() }
}

type Row = (String, String, String, Verdict, Vec<Vec<[String; 3]>>);

fn rows(r: &ReplyCheck) -> Vec<Row> {
    r.claims.iter().map(|c| (c.subject.name.clone(), c.phrase.clone(), c.object.name.clone(), c.verdict, c.evidence.clone())).collect()
}

fn fact(s: &str, r: &str, o: &str) -> [String; 3] {
    [s.to_owned(), r.to_owned(), o.to_owned()]
}

fn row(s: &str, phrase: &str, o: &str, v: Verdict, evidence: Vec<Vec<[String; 3]>>) -> Row {
    (s.to_owned(), phrase.to_owned(), o.to_owned(), v, evidence)
}

#[test]
fn claims_are_judged_by_the_facts_between_their_entities() {
    use Verdict::*;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let model = CheckerModel::from_json(CHECKER).unwrap();
    let c = checker(&store, Some(&model));
    let check = |reply: &str| rows(&c.check(&[says("Tell me about movies.")], reply).unwrap());

    // A stored fact whose relation the phrase names (directed_by's own word, stemmed).
    assert_eq!(
        check("Mystic River was directed by Clint Eastwood."),
        [row("Mystic River", "was directed by", "Clint Eastwood", Supported, vec![vec![fact("Mystic River", "directed_by", "Clint Eastwood")]])]
    );
    // directed_by is functional and Sean Penn directs something: refuted by the stored director.
    assert_eq!(
        check("Mystic River was directed by Sean Penn."),
        [row("Mystic River", "was directed by", "Sean Penn", Refuted, vec![vec![fact("Mystic River", "directed_by", "Clint Eastwood")]])]
    );
    // A coordinated object: one claim per member, by a learned cue.
    assert_eq!(
        check("Sean Penn starred in Milk and Mystic River."),
        [
            row("Sean Penn", "starred in", "Milk", Supported, vec![vec![fact("Milk", "starred_actors", "Sean Penn")]]),
            row("Sean Penn", "starred in", "Mystic River", Supported, vec![vec![fact("Mystic River", "starred_actors", "Sean Penn")]]),
        ]
    );
    // A phrase of function words names no relation: any stored fact between the two supports
    // it, and none leaves not enough information (no two-fact path is enough for it).
    assert_eq!(check("Adam Sandler is a Writer."), [row("Adam Sandler", "is a", "Writer", Supported, vec![vec![fact("Adam Sandler", "is-a", "Writer")]])]);
    assert_eq!(check("Writer is a Happy Gilmore."), [row("Writer", "is a", "Happy Gilmore", NotEnoughInfo, vec![])]);
    // A named relation along a two-fact path.
    assert_eq!(
        check("Happy Gilmore shares a genre with Big Daddy."),
        [row(
            "Happy Gilmore",
            "shares a genre with",
            "Big Daddy",
            Supported,
            vec![vec![fact("Happy Gilmore", "has_genre", "Comedy"), fact("Big Daddy", "has_genre", "Comedy")]]
        )]
    );
    // A functional relation whose other end is no entity that relation reaches ("2003" is a
    // year some film was released in; Gus Van Sant is not): refuted, then not enough.
    assert_eq!(check("Milk was released in 2003."), [row("Milk", "was released in", "2003", Refuted, vec![vec![fact("Milk", "release_year", "2008")]])]);
    assert_eq!(check("Milk was released in Gus Van Sant."), [row("Milk", "was released in", "Gus Van Sant", NotEnoughInfo, vec![])]);
    // A refutation needs both mentions to name their entities in full ("box" is not the
    // film The Box), and no stored end whose name holds the claimed one's words (or the
    // other way round: the graph's "Jon Favreau filmography" for the director Jon Favreau).
    assert_eq!(
        check("The Box was released in 2003."),
        [row("The Box", "was released in", "2003", Refuted, vec![vec![fact("The Box", "release_year", "2009")]])]
    );
    assert_eq!(check("It is a box set released in 2003."), [row("The Box", "set released in", "2003", NotEnoughInfo, vec![])]);
    assert_eq!(
        check("Iron Man 2 was directed by Jon Favreau filmography."),
        [row("Iron Man 2", "was directed by", "Jon Favreau filmography", NotEnoughInfo, vec![])]
    );
    // A common word in lower case is no name, whatever entity it links to.
    assert_eq!(check("It is a great drama released in 2003."), [row("Drama", "released in", "2003", NotEnoughInfo, vec![])]);
    assert_eq!(check("Drama was released in 2003."), [row("Drama", "was released in", "2003", Refuted, vec![vec![fact("Drama", "release_year", "2012")]])]);
    // Names that share no whole words still refute.
    assert_eq!(
        check("Zathura was directed by Clint Eastwood."),
        [row("Zathura", "was directed by", "Clint Eastwood", Refuted, vec![vec![fact("Zathura", "directed_by", "Jon Favreau filmography")]])]
    );
    // Questions assert nothing.
    assert!(check("Did Clint Eastwood direct Milk?").is_empty());
    // Another clause ("I") between two mentions: no claim between them.
    assert!(check("Milk is great and I love Mystic River.").is_empty());

    // Denied: the stored fact refutes it; hedged: no claim.
    assert_eq!(
        check("Mystic River was not directed by Clint Eastwood."),
        [row("Mystic River", "was not directed by", "Clint Eastwood", Refuted, vec![vec![fact("Mystic River", "directed_by", "Clint Eastwood")]])]
    );
    assert_eq!(check("Mystic River wasn't directed by Sean Penn."), [row("Mystic River", "wasn't directed by", "Sean Penn", NotEnoughInfo, vec![])]);
    assert!(check("Mystic River was maybe directed by Sean Penn.").is_empty());
    // A two-fact path supports only when both its facts are of the relation named: Milk's
    // director is not a director of Mystic River through Sean Penn.
    assert_eq!(
        check("Gus Van Sant directed Mystic River."),
        [row("Gus Van Sant", "directed", "Mystic River", Refuted, vec![vec![fact("Mystic River", "directed_by", "Clint Eastwood")]])]
    );
    // Thousands of coordinated mentions in one sentence: at most MAX_CLAIMS claims, made
    // without building the rest.
    let many = format!("{}Sean Penn starred in Milk.", "Sean Penn, ".repeat(5000));
    let r = c.check(&[], &many).unwrap();
    assert_eq!(r.claims.len(), trellis::check::MAX_CLAIMS);

    // Without a checker file: only names as cues and nothing functional, so no refutation.
    let plain = checker(&store, None);
    let r = plain.check(&[], "Mystic River was directed by Sean Penn.").unwrap();
    assert_eq!(rows(&r), [row("Mystic River", "was directed by", "Sean Penn", NotEnoughInfo, vec![])]);
}

#[test]
fn a_one_mention_sentence_claims_with_the_dialog_and_scores_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let model = CheckerModel::from_json(CHECKER).unwrap();
    let c = checker(&store, Some(&model));
    let dialog = [says("Do you know Clint Eastwood?")];
    let r = c.check(&dialog, "Yes, he directed Gran Torino. He is great.").unwrap();
    assert_eq!(r.claims.len(), 1);
    let claim = &r.claims[0];
    assert!(claim.subject.from_dialog && !claim.object.from_dialog);
    assert_eq!((claim.subject.name.as_str(), claim.object.name.as_str(), claim.verdict), ("Clint Eastwood", "Gran Torino", Verdict::Supported));
    assert_eq!(claim.relations, ["directed_by"]);
    // Several replies to one dialog (a pipeline's N best): each judged as if alone, whatever
    // comes before it in the list.
    let replies = ["Gran Torino was directed by Sean Penn.", "Yes, he directed Gran Torino."];
    let together = c.check_each(&dialog, &replies).unwrap();
    let alone: Vec<ReplyCheck> = replies.iter().map(|r| c.check(&dialog, r).unwrap()).collect();
    assert_eq!(together, alone);
    assert_eq!((together[0].refuted, together[1].supported), (1, 1));
    // A one-mention sentence that names no relation claims nothing.
    assert!(c.check(&dialog, "I loved Gran Torino.").unwrap().claims.is_empty());

    // Fact score: supported over judged; NEIP: not enough over all claims; runs average replies.
    let r = c.check(&[], "Mystic River was directed by Clint Eastwood. Milk was released in 2003. Writer is a Happy Gilmore.").unwrap();
    assert_eq!((r.supported, r.refuted, r.not_enough_info), (1, 1, 1));
    assert_eq!((r.fact_score, r.neip), (Some(0.5), Some(1.0 / 3.0)));
    let mut totals = CheckTotals::default();
    totals.add(&r);
    totals.add(&c.check(&[], "Sean Penn starred in Milk.").unwrap());
    totals.add(&c.check(&[], "No entity here.").unwrap());
    assert_eq!((totals.replies, totals.replies_with_claims, totals.replies_judged, totals.claims), (3, 2, 2, 4));
    assert_eq!(totals.fact_score, Some(0.75));
    assert_eq!(totals.neip, Some((1.0 / 3.0 + 0.0) / 2.0));
}

#[test]
fn the_command_line_checks_replies_and_names_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let checker = write(dir.path(), "checker.json", CHECKER.as_bytes());
    let out = stdout_of(trellis().args(["check", "--store"]).arg(&store).arg("--checker").arg(&checker).args([
        "--reply",
        "Yes, he directed Gran Torino.",
        "Do you know Clint Eastwood?",
    ]));
    assert!(out.contains("fact score 1.0000, NEIP 0.0000 (1 supported, 0 refuted, 0 not enough information)"), "{out}");
    assert!(out.contains("Clint Eastwood (from the dialog) | Yes, he directed _. | Gran Torino"), "{out}");
    assert!(out.contains("by Gran Torino -directed_by-> Clint Eastwood"), "{out}");

    let input = write(
        dir.path(),
        "replies.jsonl",
        b"{\"id\": 7, \"history\": [\"Who made Mystic River?\"], \"reply\": \"Mystic River was directed by Sean Penn.\"}\n\
          {\"id\": 8, \"history\": [], \"response\": \"Sean Penn starred in Milk.\"}\n\
          {\"id\": 9, \"history\": []}\n",
    );
    let bad = trellis().args(["check", "--store"]).arg(&store).arg("--input").arg(&input).output().unwrap();
    assert_eq!(bad.status.code(), Some(65));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("replies.jsonl:3: needs one \"reply\" (or \"response\") string"), "{err}");

    let out = stdout_of(trellis().args(["check", "--store"]).arg(&store).arg("--checker").arg(&checker).arg("--input").arg(&input).args([
        "--json",
        "--on-error",
        "skip",
    ]));
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!((lines[0]["id"].as_i64(), lines[0]["line"].as_i64(), lines[0]["refuted"].as_i64()), (Some(7), Some(1), Some(1)));
    assert_eq!(lines[0]["claims"][0]["verdict"], "refuted");
    assert_eq!(lines[0]["claims"][0]["evidence"][0][0], serde_json::json!(["Mystic River", "directed_by", "Clint Eastwood"]));
    assert_eq!((lines[1]["id"].as_i64(), lines[1]["fact_score"].as_f64()), (Some(8), Some(1.0)));
    assert_eq!(lines[2]["totals"]["replies"], 2);
    assert_eq!(lines[2]["totals"]["fact_score"], 0.5);
    assert_eq!(lines[2]["skipped"], 1);

    // A checker file that is not one is named.
    let wrong = write(dir.path(), "wrong.json", br#"{"format": 1, "task": "query-producer"}"#);
    let bad = trellis().args(["check", "--store"]).arg(&store).arg("--checker").arg(&wrong).args(["--reply", "x"]).output().unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("wrong.json: not a fact checker file: format 1 task \"query-producer\""), "{err}");
}
