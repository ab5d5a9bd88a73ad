//! `trellis eval pipeline`: the whole chain (link, retrieve, generate) on dialogs with
//! references, scored.

use super::dialogs::ActionsOption;
use super::respond::{open_pipeline, open_store, GeneratorOptions};
use super::retrieve::RetrieverOptions;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use trellis::limits;

#[derive(Args)]
pub struct EvalPipelineArgs {
    #[arg(long)]
    store: PathBuf,
    /// OpenDialKG dialogs csv.
    #[arg(long, alias = "dialogs")]
    input: PathBuf,
    #[command(flatten)]
    actions: ActionsOption,
    #[command(flatten)]
    retriever: RetrieverOptions,
    #[command(flatten)]
    generator: GeneratorOptions,
    /// The knowledge the generator reads: none, the gold path, or the retriever's best --top.
    #[arg(long, value_parser = super::named::<trellis::eval::pipeline::KnowledgeMode>(trellis::eval::pipeline::KnowledgeMode::NAMES), default_value_t = trellis::eval::pipeline::KnowledgeMode::Retrieved)]
    knowledge: trellis::eval::pipeline::KnowledgeMode,
    /// Score only the first N actions of the file (quick checks; figures use all).
    #[arg(long, value_parser = super::usize_in(&limits::MAX_TURNS), allow_hyphen_values = true)]
    max_turns: Option<usize>,
    /// Write every prediction (JSON lines: dialog, upto, response, reference, knowledge).
    #[arg(long)]
    predictions: Option<PathBuf>,
    /// Worker threads (default, or 0: all cores).
    #[arg(long, value_parser = super::usize_in(&limits::THREADS), allow_hyphen_values = true)]
    threads: Option<usize>,
    #[arg(long)]
    json: bool,
}

pub fn eval_pipeline(args: EvalPipelineArgs) -> Result<ExitCode> {
    let store = open_store(&args.store)?;
    let mut dialogs = trellis::dataset::opendialkg::read(&args.input)?;
    args.actions.apply(&mut dialogs);
    if let Some(n) = args.max_turns {
        super::dialogs::keep_first_samples(&mut dialogs, n);
    }
    let (pipeline, spec) = open_pipeline(store, &args.retriever, &args.generator)?;
    let bar = super::progress::Bar::new();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(args.threads.unwrap_or(0)).build()?;
    let (report, predictions) = pool.install(|| trellis::eval::pipeline::evaluate(&pipeline, &dialogs, args.knowledge, spec.batch, &bar.monitor()))?;
    bar.finish();
    if let Some(path) = &args.predictions {
        super::batch::write_replacing(path, |out| {
            for p in &predictions {
                serde_json::to_writer(&mut *out, p).with_context(|| format!("writing {}", path.display()))?;
                out.write_all(b"\n").with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(())
        })?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let s = &report.responses;
    let b = &s.bleu_sacrebleu;
    outln!("knowledge {:?}: {} replies ({} actions without a reply of their speaker left out)", report.knowledge, report.samples, report.without_reply);
    let d = &s.bleu_dialoggsr;
    let g = &s.grounding;
    let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.4}"));
    outln!(
        "| BLEU-1 | BLEU-2 | BLEU-3 | BLEU-4 | DialogGSR BLEU-1 | DialogGSR BLEU-4 | ROUGE-L | F1 | KF1 | names knowledge | entity recall | distinct replies |"
    );
    outln!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    outln!(
        "| {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {} | {} | {} | {} ({:.4}) |",
        b.bleu1,
        b.bleu2,
        b.bleu3,
        b.bleu4,
        d.bleu1,
        d.bleu4,
        s.rouge.rouge_l,
        s.f1,
        f(s.kf1),
        f(g.mention_rate),
        f(g.entity_recall),
        s.distinct_replies,
        s.distinct_replies_share
    );
    outln!("(BLEU-n as sacrebleu computes it, DialogGSR BLEU-n as the DialogGSR authors' code does, both on a 0..1 scale; --json has nltk's BLEU, ROUGE-1/2, stemmed ROUGE, distinct-n)");
    outln!("{}", super::eval_responses::grounding_line(g));
    if let Some(r) = &report.retrieval {
        outln!(
            "retrieval: path@1 {:.4}, path@{} {:.4}, triple recall@{} {:.4}, top path starts at the gold entity {:.4}",
            r.path_at_1,
            args.generator.top,
            r.path_at_top,
            args.generator.top,
            r.triple_recall_at_top,
            r.top_start_entity
        );
    }
    if let Some(c) = &report.fact_check {
        let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.4}"));
        for (what, t) in [("replies", &c.replies), ("references", &c.references)] {
            outln!(
                "fact check, {what}: fact score {}, NEIP {} ({} of {} with claims; claims: {} supported, {} refuted, {} not enough information)",
                f(t.fact_score),
                f(t.neip),
                t.replies_with_claims,
                t.replies,
                t.supported,
                t.refuted,
                t.not_enough_info
            );
        }
    }
    let t = &report.timings;
    outln!("per reply: link {:.2} ms, retrieve {:.2} ms, generate {:.2} ms; {:.2} replies/s", t.link_ms, t.retrieve_ms, t.generate_ms, report.replies_per_s);
    Ok(ExitCode::SUCCESS)
}
