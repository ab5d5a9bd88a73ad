//! `trellis.json` `generation`: a generator's input encoding and decoding defaults, read
//! from the model directory by this module (the directory knows only that the section is
//! the generator's: `model::dir::TaskSection`).

use super::delex::{self, DelexConfig, PlaceholderProblem};
use super::encoding::InputEncoding;
use super::StrategyKind;
use crate::model::dir::{FieldProblem, ModelDir, TaskSection};
use serde::Deserialize;

/// `trellis.json` `generation` (task `"generator"`, src/generate/): the input encoding and
/// the decoding defaults a caller's settings start from.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct GenerationConfig {
    /// How the encoder input is written (default `dialoggsr`).
    pub encoding: InputEncoding,
    /// Greedy, beam search or sampling (default beam).
    pub strategy: StrategyKind,
    /// Beams, 1..=64 (default 5).
    pub beams: usize,
    /// Sequences returned per request, 1..=`beams` (default 1).
    pub return_sequences: usize,
    /// Beam search's length penalty, -100..=100 (default 1.5).
    pub length_penalty: f64,
    /// Beam search: a request is done once it has `beams` finished hypotheses (default true).
    pub early_stopping: bool,
    /// Tokens written at most, 1..=1024 (default 64).
    pub max_new_tokens: usize,
    /// Sampling temperature, 0.001..=1000 (default 1).
    pub temperature: f64,
    /// Sampling: top-k filtering, 0..=2^24 (0: off; default 50).
    pub top_k: usize,
    /// Sampling: top-p filtering as transformers does it, in (0, 1] (1: off, the default).
    pub top_p: f64,
    /// Sampling seed of a request that brings none (default 0).
    pub seed: u64,
    /// Token ids that end a sequence as EOS does.
    pub stop_ids: Vec<u32>,
    /// Texts that end a sequence once the decoded text contains one.
    pub stop: Vec<String>,
    /// transformers' logits processors (`crate::decode::processors`): 0, 0 and 1 are off.
    pub no_repeat_ngram_size: usize,
    /// transformers' `min_new_tokens`: EOS and stop ids held back until this many tokens are written (default 0).
    pub min_new_tokens: usize,
    /// transformers' `repetition_penalty`, 0.001..=1000 (default 1).
    pub repetition_penalty: f64,
    /// Entity names replaced by placeholders (`crate::generate::delex`); absent, names are
    /// written as they are.
    pub delexicalize: Option<DelexConfig>,
}

impl Default for GenerationConfig {
    /// The DialogGSR authors' generator decoding: beam search, 5 beams, length penalty 1.5.
    fn default() -> Self {
        GenerationConfig {
            encoding: InputEncoding::DialogGsr,
            strategy: StrategyKind::Beam,
            beams: 5,
            return_sequences: 1,
            length_penalty: 1.5,
            early_stopping: true,
            max_new_tokens: 64,
            temperature: 1.0,
            top_k: 50,
            top_p: 1.0,
            seed: 0,
            stop_ids: Vec::new(),
            stop: Vec::new(),
            no_repeat_ngram_size: 0,
            min_new_tokens: 0,
            repetition_penalty: 1.0,
            delexicalize: None,
        }
    }
}

impl TaskSection for GenerationConfig {
    const FIELD: &'static str = "generation";
    const TASK: &'static str = "generator";

    fn check(&self) -> Result<(), (String, FieldProblem)> {
        use crate::limits::*;
        let range = |e: OutOfRange| (e.name().to_owned(), FieldProblem::OutOfRange { range: e.range().into(), value: e.value().into() });
        BEAMS.check_usize(self.beams).map_err(range)?;
        RETURN_SEQUENCES.up_to(self.beams as u64).check_usize(self.return_sequences).map_err(range)?;
        LENGTH_PENALTY.check(self.length_penalty).map_err(range)?;
        MAX_NEW_TOKENS.check_usize(self.max_new_tokens).map_err(range)?;
        TEMPERATURE.check(self.temperature).map_err(range)?;
        TOP_K.check_usize(self.top_k).map_err(range)?;
        TOP_P.check(self.top_p).map_err(range)?;
        NO_REPEAT_NGRAM_SIZE.check_usize(self.no_repeat_ngram_size).map_err(range)?;
        MIN_NEW_TOKENS.check_usize(self.min_new_tokens).map_err(range)?;
        REPETITION_PENALTY.check(self.repetition_penalty).map_err(range)?;
        if let Some(i) = self.stop.iter().position(String::is_empty) {
            return Err((format!("stop[{i}]"), FieldProblem::Type { expected: "a non-empty text" }));
        }
        if let Some(d) = &self.delexicalize {
            if d.placeholders.is_empty() {
                return Err(("delexicalize.placeholders".into(), FieldProblem::Type { expected: "a non-empty list" }));
            }
            delex::check_placeholders(&d.placeholders).map_err(|e| ("delexicalize.placeholders".into(), FieldProblem::Invalid(Box::new(e))))?;
        }
        Ok(())
    }

    /// Stop ids inside the vocabulary (`run` refuses them too: GenerateError::StopIdOutOfRange;
    /// doctor reads this); each placeholder one token that decoding writes back.
    fn check_with(&self, dir: &ModelDir) -> Result<(), (String, FieldProblem)> {
        let vocab = dir.config().vocab_size;
        if let Some((i, &id)) = self.stop_ids.iter().enumerate().find(|(_, &id)| id >= vocab) {
            let range = format!("a token id within 0..={} (config.json's vocab_size is {vocab})", vocab - 1);
            return Err((format!("stop_ids[{i}]"), FieldProblem::OutOfRange { range, value: id.to_string() }));
        }
        let tokenizer = dir.tokenizer();
        for (index, p) in self.delexicalize.iter().flat_map(|d| d.placeholders.iter()).enumerate() {
            // Decoding skips special tokens: a special placeholder would vanish from the reply.
            let back = match tokenizer.token_to_id(p) {
                Some(id) => {
                    tokenizer.encode(p.as_str(), false).map(|e| e.get_ids() == [id]).unwrap_or(false)
                        && tokenizer.decode(&[id], true).map(|t| t.trim() == p).unwrap_or(false)
                }
                None => false,
            };
            if !back {
                let problem = PlaceholderProblem::NotAToken { index, text: p.clone() };
                return Err(("delexicalize.placeholders".into(), FieldProblem::Invalid(Box::new(problem))));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dir::{ModelDirError, TrellisConfig};
    use serde_json::json;
    use std::path::Path;

    fn parse(v: serde_json::Value) -> Result<GenerationConfig, ModelDirError> {
        let p = Path::new("m/trellis.json");
        TrellisConfig::from_value(p, v)?.section(p)
    }

    #[test]
    fn the_generation_section() {
        assert!(parse(json!({})).is_err(), "a retriever has no generation section");
        assert_eq!(parse(json!({"task": "generator"})).unwrap(), GenerationConfig::default());
        let g = GenerationConfig::default();
        assert_eq!((g.encoding, g.strategy, g.beams, g.return_sequences, g.length_penalty), (InputEncoding::DialogGsr, StrategyKind::Beam, 5, 1, 1.5));
        let g = parse(json!({"task": "generator", "generation": {"encoding": {"template": "{triples} | {history}"}, "strategy": "sample",
                   "top_k": 0, "top_p": 0.9, "seed": 7, "stop": ["\n"], "stop_ids": [5]}}))
        .unwrap();
        assert_eq!(g.encoding, "template:{triples} | {history}".parse::<InputEncoding>().unwrap());
        assert_eq!((g.strategy, g.top_k, g.top_p, g.seed, g.beams), (StrategyKind::Sample, 0, 0.9, 7, 5));
        assert_eq!((g.stop, g.stop_ids), (vec!["\n".to_string()], vec![5]));
        let d = GenerationConfig::default();
        assert_eq!((d.no_repeat_ngram_size, d.min_new_tokens, d.repetition_penalty), (0, 0, 1.0), "off unless asked for");
        let g = parse(json!({"task": "generator", "generation": {"no_repeat_ngram_size": 3, "min_new_tokens": 5, "repetition_penalty": 1.2}})).unwrap();
        assert_eq!((g.no_repeat_ngram_size, g.min_new_tokens, g.repetition_penalty), (3, 5, 1.2));
        for name in ["surge", "invariant", "efficient", "dialoggsr"] {
            assert_eq!(parse(json!({"task": "generator", "generation": {"encoding": name}})).unwrap().encoding.to_string(), name);
        }
        let e = parse(json!({"task": "generator", "generation": {"beam": 3}})).unwrap_err();
        assert!(matches!(e, ModelDirError::Json { .. }) && e.to_string().contains("unknown field `beam`"), "{e}");
        let e = parse(json!({"task": "generator", "generation": {"encoding": {"template": "{turns}"}}})).unwrap_err();
        assert!(matches!(e, ModelDirError::Json { .. }) && e.to_string().contains("unknown slot {turns}"), "{e}");
        let e = parse(json!({"task": "generator", "generation": {"strategy": "nucleus"}})).unwrap_err();
        assert!(matches!(e, ModelDirError::Json { .. }), "{e:?}");
        for (field, value) in
            [("beams", json!(0)), ("return_sequences", json!(6)), ("temperature", json!(0.0)), ("top_p", json!(1.5)), ("max_new_tokens", json!(0))]
                .into_iter()
                .chain([("no_repeat_ngram_size", json!(1025)), ("min_new_tokens", json!(1025)), ("repetition_penalty", json!(0.0))])
        {
            let e = parse(json!({"task": "generator", "generation": { field: value }})).unwrap_err();
            assert!(
                matches!(&e, ModelDirError::Field { field: f, problem: FieldProblem::OutOfRange { .. }, .. } if *f == format!("generation.{field}")),
                "{field}: {e:?}"
            );
        }
        let e = parse(json!({"task": "generator", "generation": {"length_penalty": 1e300}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `generation.length_penalty`: must be a finite number within [-100, 100], not 1e300");
        let e = parse(json!({"task": "generator", "generation": {"max_new_tokens": 1000001}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `generation.max_new_tokens`: must be within 1..=1024, not 1000001");
        let e = parse(json!({"task": "generator", "generation": {"stop": ["x", ""]}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `generation.stop[1]`: not a non-empty text");
        let e = parse(json!({"task": "generator", "generation": {"delexicalize": {"placeholders": []}}})).unwrap_err();
        assert_eq!(e.to_string(), "m/trellis.json: field `generation.delexicalize.placeholders`: not a non-empty list");
        let e = parse(json!({"task": "generator", "generation": {"delexicalize": {"placeholders": ["[E1]", "[E1]x"]}}})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "m/trellis.json: field `generation.delexicalize.placeholders`: placeholder 0 (\"[E1]\") is part of placeholder 1 (\"[E1]x\")"
        );
        let d = parse(json!({"task": "generator", "generation": {"delexicalize": {"placeholders": ["[E1]", "[E2]"]}}})).unwrap().delexicalize;
        assert_eq!(d, Some(DelexConfig { placeholders: vec!["[E1]".into(), "[E2]".into()] }));
    }
}
