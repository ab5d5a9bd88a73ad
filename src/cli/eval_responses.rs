//! `trellis eval responses`: BLEU, ROUGE, F1, KF1, distinct-n and the grounding figures of
//! generated responses against gold responses (`trellis::eval::responses`).

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::eval::responses::{self, Bleu, Grounding, ResponsesError, Rouge};

#[derive(Args)]
pub struct ResponsesArgs {
    /// Predictions, JSON lines: {"id", "response"} ("reply" is accepted for "response"), and
    /// optionally "entities": the entity names of the knowledge the reply was given.
    #[arg(long)]
    pred: PathBuf,
    /// Gold responses, JSON lines: {"id", "response", "knowledge"}; "knowledge" (optional)
    /// is the text KF1 compares the prediction with; "entities" (optional, used when the
    /// prediction has none) the knowledge's entity names that the grounding figures look for
    /// in the prediction and the reference. Every id needs one prediction.
    #[arg(long)]
    gold: PathBuf,
    /// Print the scores as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ResponsesArgs) -> Result<ExitCode> {
    let pairs = responses::read_pairs(&args.pred, &args.gold).map_err(cli_error)?;
    let s = responses::score(&pairs).map_err(cli_error)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(ExitCode::SUCCESS);
    }
    let bleu = |b: &Bleu| format!("1 {:.4}  2 {:.4}  3 {:.4}  4 {:.4}", b.bleu1, b.bleu2, b.bleu3, b.bleu4);
    let rouge = |r: &Rouge| format!("1 {:.4}  2 {:.4}  L {:.4}", r.rouge1, r.rouge2, r.rouge_l);
    outln!("{} pairs (scores are fractions: sacrebleu's 0..100 BLEU is 100 times these)", s.pairs);
    outln!("BLEU sacrebleu (13a, exp smoothing)   {}", bleu(&s.bleu_sacrebleu));
    outln!("BLEU nltk corpus_bleu (lowercased)    {}", bleu(&s.bleu_nltk));
    outln!("BLEU DialogGSR's (nltk, method1)      {}", bleu(&s.bleu_dialoggsr));
    outln!("ROUGE F                               {}", rouge(&s.rouge));
    outln!("ROUGE F, Porter stems                 {}", rouge(&s.rouge_stemmed));
    let kf1 = match s.kf1 {
        Some(k) => format!("{k:.4} ({} pairs with knowledge)", s.kf1_pairs),
        None => "- (no pair has knowledge)".to_string(),
    };
    outln!("F1 {:.4}  KF1 {kf1}", s.f1);
    outln!(
        "distinct-1 {:.4}  distinct-2 {:.4}  distinct replies {} ({:.4} of the pairs)",
        s.distinct_1,
        s.distinct_2,
        s.distinct_replies,
        s.distinct_replies_share
    );
    outln!("{}", grounding_line(&s.grounding));
    Ok(ExitCode::SUCCESS)
}

/// The grounding figures in one line.
pub(crate) fn grounding_line(g: &Grounding) -> String {
    let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.4}"));
    if g.pairs == 0 {
        return "grounding: - (no pair has knowledge entities)".to_string();
    }
    format!(
        "grounding ({} pairs with knowledge entities): replies naming one {}, references naming one {}; entity recall {} (of {} entities the references name)",
        g.pairs,
        f(g.mention_rate),
        f(g.reference_mention_rate),
        f(g.entity_recall),
        g.reference_mentions
    )
}

/// A bad line of either file is bad input (exit 65); the rest (IO, nothing to score) exits 1.
fn cli_error(e: ResponsesError) -> anyhow::Error {
    match e {
        ResponsesError::Bad { path, line, problem } => super::BadInputLine { file: path.display().to_string(), line, what: problem.to_string() }.into(),
        ResponsesError::NoPairs => anyhow::anyhow!("nothing to score: the gold file has no lines"),
        e => e.into(),
    }
}
