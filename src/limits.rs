//! The range of every numeric setting, in one table: the command line's parsers, the
//! library's option checks (`validate` on each options type) and `trellis.json`'s reader
//! (so `trellis doctor`) all refuse a value outside it with the same sentence.
//!
//! The ranges come from what the machine can do, not from taste:
//! - beams at most 64: each beam is a decoder row holding its own attention cache and a
//!   vocabulary-wide logits row (t5-small: about 8 MB per row for a 256-token input), and
//!   the searches the models were trained for use 4 to 10; 64 is already 6 times that.
//! - tokens written at most 1024: a path is tens of tokens, a reply under a hundred; the
//!   cache grows with every token.
//! - threads at most 256: each is an OS thread with its own stack; more than that only
//!   waits (and 100 000 exhausted the process).
//! - length penalty within [-100, 100]: the score divides by length^penalty, and
//!   1024^100 is still a finite f64 (1024^103 is not).
//! - what a decoding call holds at once (beams x batch rows of cache and logits) is
//!   estimated before the first allocation ([`decode_bytes`]); above
//!   [`DECODE_MEMORY_BUDGET`] the batch is cut to what fits, and a single request that does
//!   not fit is refused.

use std::fmt;

/// A setting given by name (a retriever, a prior, a file format) that names none of its
/// choices: what was given and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?} ({})", .allowed.join(", "))]
#[non_exhaustive]
pub struct UnknownName {
    /// What the setting is ("layout", "prior", ...).
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The names it takes.
    pub allowed: &'static [&'static str],
}

/// Names for a setting's enum: `NAMES`, `name()`, `Display` and `FromStr` (with
/// [`UnknownName`]), one table per enum, so the command line, `trellis.json` and messages
/// agree without the library knowing any command-line parser.
macro_rules! named_choices {
    ($ty:ident, $what:literal, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The names this setting takes, in the order of its variants.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// This choice's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::limits::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::limits::UnknownName { what: $what, value: s.to_owned(), allowed: Self::NAMES }),
                }
            }
        }
    };
}
pub(crate) use named_choices;

/// A range of whole numbers, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntRange {
    /// The setting's name in the library (`trellis.json` fields and errors use it).
    pub name: &'static str,
    /// The smallest allowed value.
    pub min: u64,
    /// The largest allowed value.
    pub max: u64,
}

/// A range of finite numbers; `min_open` leaves `min` itself out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatRange {
    /// The setting's name in the library (`trellis.json` fields and errors use it).
    pub name: &'static str,
    /// The lower end.
    pub min: f64,
    /// Whether `min` itself is left out.
    pub min_open: bool,
    /// The upper end (included).
    pub max: f64,
}

/// A setting outside its range: names the setting, the range and the value. One pointer
/// wide, so the error enums that carry it stay small.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} must be {}, not {}", .0.name, .0.range, .0.value)]
#[non_exhaustive]
pub struct OutOfRange(Box<Refusal>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Refusal {
    name: String,
    range: String,
    value: String,
}

impl OutOfRange {
    fn new(name: impl Into<String>, range: impl Into<String>, value: impl Into<String>) -> OutOfRange {
        OutOfRange(Box::new(Refusal { name: name.into(), range: range.into(), value: value.into() }))
    }

    /// The setting (`beams`, `top_p`).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// `within 1..=64`, `a finite number within (0, 1]`.
    pub fn range(&self) -> &str {
        &self.0.range
    }

    /// The value as given.
    pub fn value(&self) -> &str {
        &self.0.value
    }

    /// The same problem under another name (a setting read with a prefix: `gen_beams`).
    pub fn renamed(mut self, name: &str) -> OutOfRange {
        name.clone_into(&mut self.0.name);
        self
    }

    /// The same problem with a narrower range than the table's (one that depends on the
    /// model: `at least 8 with ...`).
    pub fn with_range(mut self, range: impl Into<String>) -> OutOfRange {
        self.0.range = range.into();
        self
    }
}

impl fmt::Display for IntRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "within {}..={}", self.min, self.max)
    }
}

impl fmt::Display for FloatRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a finite number within {}{}, {}]", if self.min_open { "(" } else { "[" }, self.min, self.max)
    }
}

impl IntRange {
    /// The range `min..=max` of the setting `name`.
    pub const fn new(name: &'static str, min: u64, max: u64) -> IntRange {
        IntRange { name, min, max }
    }

    /// Whether `v` is within the range.
    pub fn contains(&self, v: u64) -> bool {
        (self.min..=self.max).contains(&v)
    }

    /// The value, or why it is refused.
    pub fn check(&self, v: u64) -> Result<u64, OutOfRange> {
        if self.contains(v) {
            Ok(v)
        } else {
            Err(self.refuse(v))
        }
    }

    /// [`IntRange::check`] for a `usize`.
    pub fn check_usize(&self, v: usize) -> Result<usize, OutOfRange> {
        self.check(v as u64).map(|v| v as usize)
    }

    /// The same range with a lower top (`return_sequences` at most `beams`).
    pub fn up_to(&self, max: u64) -> IntRange {
        IntRange { max: self.max.min(max), ..*self }
    }

    /// The refusal of `value` (shown as given) with this range.
    pub fn refuse(&self, value: impl fmt::Display) -> OutOfRange {
        OutOfRange::new(self.name, self.to_string(), value.to_string())
    }

    /// Parses a command-line value: a whole number in range. A negative number, or one
    /// past u64, is refused with the range like any other value outside it.
    pub fn parse(&self, text: &str) -> Result<u64, OutOfRange> {
        let t = text.trim();
        let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(OutOfRange::new(self.name, format!("a whole number {self}"), format!("{text:?}")));
        }
        match t.parse::<u64>() {
            Ok(v) => self.check(v),
            Err(_) => Err(self.refuse(t)),
        }
    }
}

impl FloatRange {
    /// The range `[min, max]` of the setting `name`.
    pub const fn closed(name: &'static str, min: f64, max: f64) -> FloatRange {
        FloatRange { name, min, min_open: false, max }
    }

    /// The range `(min, max]` of the setting `name`: `min` itself left out.
    pub const fn above(name: &'static str, min: f64, max: f64) -> FloatRange {
        FloatRange { name, min, min_open: true, max }
    }

    /// Whether `v` is finite and within the range.
    pub fn contains(&self, v: f64) -> bool {
        v.is_finite() && (if self.min_open { v > self.min } else { v >= self.min }) && v <= self.max
    }

    /// The value, or why it is refused (NaN and infinities are).
    pub fn check(&self, v: f64) -> Result<f64, OutOfRange> {
        if self.contains(v) {
            Ok(v)
        } else {
            Err(self.refuse(show(v)))
        }
    }

    /// The refusal of `value` (shown as given) with this range.
    pub fn refuse(&self, value: impl fmt::Display) -> OutOfRange {
        OutOfRange::new(self.name, self.to_string(), value.to_string())
    }

    /// Parses a command-line value: a finite number in range (`NaN` and `inf` are refused).
    pub fn parse(&self, text: &str) -> Result<f64, OutOfRange> {
        match text.trim().parse::<f64>() {
            Ok(v) if self.contains(v) => Ok(v),
            Ok(_) => Err(self.refuse(text.trim())),
            Err(_) => Err(self.refuse(format!("{text:?}"))),
        }
    }
}

/// A number as a person writes it: `1e300`, not three hundred digits.
fn show(v: f64) -> String {
    if v.is_finite() && v != 0.0 && (v.abs() >= 1e16 || v.abs() < 1e-4) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

// --- Decoding (the retriever's `decoding`, the generator's `generation`) ---

/// Beams of a beam search.
pub const BEAMS: IntRange = IntRange::new("beams", 1, 64);
/// Also at most `beams` (checked with [`IntRange::up_to`]).
pub const RETURN_SEQUENCES: IntRange = IntRange::new("return_sequences", 1, 64);
/// Generated sequences a pipeline checks against the store (0: none).
pub const GEN_CHECK: IntRange = IntRange::new("gen_check", 0, 64);
/// Tokens a decoding writes at most.
pub const MAX_NEW_TOKENS: IntRange = IntRange::new("max_new_tokens", 1, 1024);
/// Beam search's length penalty: scores are divided by length^penalty.
pub const LENGTH_PENALTY: FloatRange = FloatRange::closed("length_penalty", -100.0, 100.0);
/// Requests decoded together (their rows share decoder calls); memory is checked apart.
pub const BATCH: IntRange = IntRange::new("batch", 1, 4096);
/// Retrieval steps: each re-encodes the dialog with the paths found so far.
pub const STEPS: IntRange = IntRange::new("steps", 1, 16);
/// The retriever's weight of the model's log-probability against the graph prior's (1: the model alone).
pub const ALPHA: FloatRange = FloatRange::closed("alpha", 0.0, 1.0);
/// Added to each entity's informativeness under the proportional prior (a zero score is not a ban).
pub const PRIOR_EPSILON: FloatRange = FloatRange::closed("prior_epsilon", 0.0, 1e6);
/// gamma of the prior's start recency: a first entity mentioned `age` messages ago is scaled by exp(-gamma * age) (0: off).
pub const START_RECENCY: FloatRange = FloatRange::closed("start_recency", 0.0, 1e6);
/// Below 1e-3 the scaled logits of a real model overflow f32.
pub const TEMPERATURE: FloatRange = FloatRange::closed("temperature", 1e-3, 1e3);
/// Sampling's top-p: the probability mass kept (1: no filtering).
pub const TOP_P: FloatRange = FloatRange::above("top_p", 0.0, 1.0);
/// 0 turns top-k off; past the largest vocabulary a model directory may have it is off too.
pub const TOP_K: IntRange = IntRange::new("top_k", 0, 1 << 24);
/// Sampling seed.
pub const SEED: IntRange = IntRange::new("seed", 0, u64::MAX);
/// transformers' logits processors (the generator's): 0 turns the first two off, 1 the
/// penalty. No longer n-gram fits twice in the longest reply.
pub const NO_REPEAT_NGRAM_SIZE: IntRange = IntRange::new("no_repeat_ngram_size", 0, 1024);
/// Past `max_new_tokens` EOS is never written (transformers allows it too).
pub const MIN_NEW_TOKENS: IntRange = IntRange::new("min_new_tokens", 0, 1024);
/// Below 1 it rewards repeats; kept off 0 (transformers refuses 0, and a penalty of a
/// few f32 ulps would turn logits infinite), as the temperature is.
pub const REPETITION_PENALTY: FloatRange = FloatRange::closed("repetition_penalty", 1e-3, 1e3);

// --- The model's input (`trellis.json` `input`) ---

/// Messages of history the encoder reads (0: all).
pub const INPUT_TURNS: IntRange = IntRange::new("turns", 0, 1024);
/// Encoder input ids: attention is quadratic in them.
pub const INPUT_MAX_TOKENS: IntRange = IntRange::new("max_tokens", 2, 4096);
/// Entity markers of a retriever's input (`input.entities.markers`).
pub const ENTITY_MARKERS: IntRange = IntRange::new("markers", 1, 64);
/// Linked entities a retriever's input shows at most (`input.entities.max`).
pub const ENTITY_MAX: IntRange = IntRange::new("max", 1, 1024);

// --- Runtime ---

/// ONNX Runtime's intra-op threads per session (0: one per core).
pub const MODEL_THREADS: IntRange = IntRange::new("model_threads", 0, 256);
/// Worker threads of a command (0: one per core).
pub const THREADS: IntRange = IntRange::new("threads", 0, 256);
/// Sessions per model: each holds its own copy of the weights' working memory.
/// Sessions of a model pool (0: one per core).
pub const SESSIONS: IntRange = IntRange::new("sessions", 0, 64);

// --- Linking ---

/// Messages of history whose mentions form a turn's entity set (0 would link nothing).
pub const WINDOW: IntRange = IntRange::new("window", 1, 1024);
/// Longest mention tried, in words (0 would link nothing).
pub const MAX_NGRAM: IntRange = IntRange::new("max_ngram", 1, 256);
/// Entities per mention at most (`--max-entities`).
pub const MAX_ENTITIES: IntRange = IntRange::new("max_entities", 1, 64);
/// Characters a one-word mention needs at least (`--min-word-chars`).
pub const MIN_WORD_CHARS: IntRange = IntRange::new("min_word_chars", 0, 64);
/// Weight of a mention one message further back.
pub const LINK_DECAY: FloatRange = FloatRange::closed("decay", 0.0, 1.0);

// --- Retrieval and evaluation ---

/// Hits per search (and ranks scored, `--k`).
pub const TOP: IntRange = IntRange::new("top", 1, 1000);
/// Paths per retrieval request: enough for every candidate of a request (a capped candidate
/// set holds up to 200 paths per mentioned entity, and a dialog may mention hundreds), so
/// `--retriever all` can list them all.
pub const PATHS_TOP: IntRange = IntRange::new("top", 1, 100_000);
/// Retrieved paths the generator reads.
pub const KNOWLEDGE_TOP: IntRange = IntRange::new("top", 1, 64);
/// BM25: the messages (the last 1..=L) its score averages over.
pub const BM25_TURNS: IntRange = IntRange::new("bm25_turns", 1, 1024);
/// Cut-offs of path@k and recall@k.
pub const EVAL_K: IntRange = IntRange::new("k", 1, 1000);
/// Samples scored (quick checks); any count a file can hold.
pub const MAX_TURNS: IntRange = IntRange::new("max_turns", 1, u64::MAX);

/// Tokens of an encoder model's input (`dense.max_length`, `rerank.max_length`): BERT-style
/// models have 512 positions, long-context ones 8192.
pub const ENCODER_MAX_LENGTH: IntRange = IntRange::new("max_length", 2, 8192);
/// Tokens a subgraph model keeps of each entity or relation name.
pub const NAME_LENGTH: IntRange = IntRange::new("name_length", 1, 1024);
/// Messages an encoder's query is made of (0: all).
pub const ENCODER_TURNS: IntRange = IntRange::new("turns", 0, 1024);
/// Path vectors a dense retriever keeps between calls (each a few hundred floats to a few
/// thousand: 1M of 384 floats is 1.5 GB).
pub const DENSE_CACHE: IntRange = IntRange::new("cache", 0, 1 << 24);
/// Paths each pooled retriever hands the reranker.
pub const RERANK_TOP: IntRange = IntRange::new("rerank_top", 1, 1000);
/// The weight of the pooled retrievers' reciprocal ranks beside the cross-encoder's score
/// (0: the cross-encoder alone).
pub const RERANK_FUSION: FloatRange = FloatRange::closed("rerank_fusion", 0.0, 1000.0);
/// Queries the search retriever searches per turn.
pub const SEARCH_QUERIES: IntRange = IntRange::new("search_queries", 1, 64);

// --- Store commands ---

/// `neighbors --hops`: facts touching the entity, or also its neighbours'.
pub const HOPS: IntRange = IntRange::new("hops", 1, 2);
/// Facts per matching entity (`neighbors --limit`).
pub const LIMIT: IntRange = IntRange::new("limit", 1, u64::MAX);
/// The load's memory budget in MB: below 16 no sort buffer fits, above 1 TiB no machine.
pub const MEMORY_MB: IntRange = IntRange::new("memory_mb", 16, 1 << 20);
/// Fact lines per sorted run of a load, whatever the memory budget (a hidden flag for tests).
pub const SORT_RUN_TRIPLES: IntRange = IntRange::new("sort_run_triples", 1, u64::MAX);

/// The runtime's threads per session and sessions per model.
pub fn check_runtime(threads: usize, sessions: usize) -> Result<(), OutOfRange> {
    MODEL_THREADS.check_usize(threads)?;
    SESSIONS.check_usize(sessions)?;
    Ok(())
}

/// What one decoding call may hold in attention caches and logits before its batch is cut.
pub const DECODE_MEMORY_BUDGET: u64 = 2 << 30;

/// The most text one request's dialog may hold (every message's bytes together, UTF-8):
/// 1 MiB, some 250k tokens, past any model's input. Linking is linear in the text, but a
/// request is answered in one piece (its candidates, its model inputs) and must stay small;
/// a longer dialog is refused with [`crate::dialog::DialogTooLong`], not truncated.
pub const DIALOG_BYTES: usize = 1 << 20;

/// The shape of a decoder, as far as its memory goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderShape {
    /// Decoder layers.
    pub layers: usize,
    /// Attention heads per layer.
    pub heads: usize,
    /// Size of one head's keys and values.
    pub d_kv: usize,
    /// Vocabulary size: the width of one logits row.
    pub vocab: usize,
}

/// Bytes one decoding call holds for `rows` decoder rows (beams x requests): per row, the
/// self- and cross-attention keys and values of every layer (f32, `input_tokens +
/// max_new_tokens` positions), and the logits row and its log-softmax (f32 each, a vocabulary
/// wide). Saturates rather than overflows.
pub fn decode_bytes(shape: DecoderShape, rows: usize, input_tokens: usize, max_new_tokens: usize) -> u64 {
    let kv_per_position = (shape.layers as u64).saturating_mul(2).saturating_mul(shape.heads as u64).saturating_mul(shape.d_kv as u64).saturating_mul(4);
    let positions = (input_tokens as u64).saturating_add(max_new_tokens as u64);
    let per_row = kv_per_position.saturating_mul(positions).saturating_add((shape.vocab as u64).saturating_mul(8));
    per_row.saturating_mul(rows as u64)
}

/// Bytes one request of a decoding call holds: its `beams` decoder rows ([`decode_bytes`])
/// and its encoder's attention weights (heads x input x input f32, one layer at a time).
pub fn request_bytes(shape: DecoderShape, beams: usize, input_tokens: usize, max_new_tokens: usize) -> u64 {
    let n = input_tokens as u64;
    let attention = (shape.heads as u64).saturating_mul(n.saturating_mul(n)).saturating_mul(4);
    decode_bytes(shape, beams, input_tokens, max_new_tokens).saturating_add(attention)
}

/// Memory of one decoding call that no batch size fits in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{beams} beams of {max_new_tokens} new tokens over a {input_tokens}-token input need about {} MiB for one request's attention cache and logits, more than the {} MiB a decoding call may hold: lower beams or max_new_tokens",
    .bytes >> 20, DECODE_MEMORY_BUDGET >> 20
)]
pub struct TooMuchMemory {
    /// Beams per request.
    pub beams: usize,
    /// The tokens each beam may write.
    pub max_new_tokens: usize,
    /// The encoder input's length in tokens.
    pub input_tokens: usize,
    /// Bytes one request needs (estimated).
    pub bytes: u64,
}

/// The largest batch (at most `batch`) whose decoding call stays within
/// [`DECODE_MEMORY_BUDGET`], or why not even one request does.
pub fn batch_that_fits(shape: DecoderShape, batch: usize, beams: usize, input_tokens: usize, max_new_tokens: usize) -> Result<usize, TooMuchMemory> {
    let one = request_bytes(shape, beams, input_tokens, max_new_tokens);
    if one > DECODE_MEMORY_BUDGET {
        return Err(TooMuchMemory { beams, max_new_tokens, input_tokens, bytes: one });
    }
    Ok(batch.min((DECODE_MEMORY_BUDGET / one.max(1)) as usize).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_are_refused_with_the_range() {
        assert_eq!(BEAMS.parse("64"), Ok(64));
        assert_eq!(BEAMS.parse("0").unwrap_err().to_string(), "beams must be within 1..=64, not 0");
        assert_eq!(BEAMS.parse("-1").unwrap_err().to_string(), "beams must be within 1..=64, not -1");
        assert_eq!(BEAMS.parse("18446744073709551615").unwrap_err().to_string(), "beams must be within 1..=64, not 18446744073709551615");
        assert_eq!(SEED.parse("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(SEED.parse("18446744073709551616").unwrap_err().to_string(), "seed must be within 0..=18446744073709551615, not 18446744073709551616");
        assert_eq!(BEAMS.parse("NaN").unwrap_err().to_string(), "beams must be a whole number within 1..=64, not \"NaN\"");
        assert_eq!(BEAMS.parse("2.5").unwrap_err().to_string(), "beams must be a whole number within 1..=64, not \"2.5\"");
        assert_eq!(RETURN_SEQUENCES.up_to(4).check(5).unwrap_err().to_string(), "return_sequences must be within 1..=4, not 5");
    }

    #[test]
    fn numbers_must_be_finite_and_in_range() {
        assert_eq!(TOP_P.parse("1"), Ok(1.0));
        assert_eq!(TOP_P.parse("0").unwrap_err().to_string(), "top_p must be a finite number within (0, 1], not 0");
        assert_eq!(LENGTH_PENALTY.parse("-1.5"), Ok(-1.5));
        for bad in ["NaN", "inf", "-inf", "101"] {
            let e = LENGTH_PENALTY.parse(bad).unwrap_err();
            assert_eq!(e.range(), "a finite number within [-100, 100]", "{bad}");
        }
        assert_eq!(ALPHA.parse("x").unwrap_err().to_string(), "alpha must be a finite number within [0, 1], not \"x\"");
        // The bound on length penalties keeps the longest path's length^penalty finite.
        assert!((MAX_NEW_TOKENS.max as f64).powf(LENGTH_PENALTY.max).is_finite());
        assert!((MAX_NEW_TOKENS.max as f64).powf(LENGTH_PENALTY.min) > 0.0);
    }

    const INTS: [IntRange; 6] = [BEAMS, SEED, TOP_K, MODEL_THREADS, WINDOW, MAX_TURNS];
    const FLOATS: [FloatRange; 5] = [ALPHA, TOP_P, TEMPERATURE, LENGTH_PENALTY, REPETITION_PENALTY];

    proptest::proptest! {
        /// Any whole number, negative or past u64 included, parses exactly when it is in
        /// range; a refusal names the range and the value as written.
        #[test]
        fn any_whole_number_parses_iff_in_range(v in proptest::num::i128::ANY, which in 0..6usize) {
            let r = INTS[which];
            let text = v.to_string();
            let inside = u64::try_from(v).is_ok_and(|u| r.contains(u));
            match r.parse(&text) {
                Ok(u) => proptest::prop_assert!(inside && i128::from(u) == v),
                Err(e) => {
                    proptest::prop_assert!(!inside);
                    proptest::prop_assert_eq!(e.to_string(), format!("{} must be {r}, not {text}", r.name));
                }
            }
        }

        /// Any f64 (NaN and the infinities included) written out parses exactly when it is
        /// finite and in range, to itself.
        #[test]
        fn any_number_parses_iff_finite_and_in_range(v in proptest::prop_oneof![proptest::num::f64::ANY, -200.0f64..200.0, 0.0f64..2.0], which in 0..5usize) {
            let r = FLOATS[which];
            match r.parse(&v.to_string()) {
                Ok(x) => proptest::prop_assert!(r.contains(v) && x == v),
                Err(e) => {
                    proptest::prop_assert!(!r.contains(v));
                    proptest::prop_assert_eq!(e.range(), r.to_string());
                }
            }
        }
    }

    #[test]
    fn the_batch_is_cut_to_the_memory_budget() {
        // t5-small: 6 layers, 8 heads of 64, 32128 tokens.
        let t5 = DecoderShape { layers: 6, heads: 8, d_kv: 64, vocab: 32128 };
        // Per row: 6*2*8*64*4 = 24576 bytes per position, 320 positions, 8 bytes per token.
        assert_eq!(decode_bytes(t5, 1, 256, 64), 24576 * 320 + 32128 * 8);
        let one_request = decode_bytes(t5, 64, 256, 64) + 8 * 256 * 256 * 4;
        assert_eq!(request_bytes(t5, 64, 256, 64), one_request);
        assert_eq!(batch_that_fits(t5, 8, 64, 256, 64), Ok((DECODE_MEMORY_BUDGET / one_request) as usize));
        assert_eq!(batch_that_fits(t5, 8, 64, 256, 64), Ok(4));
        assert_eq!(batch_that_fits(t5, 8, 5, 256, 64), Ok(8), "the shipped settings fit");
        let e = batch_that_fits(t5, 8, 64, 4096, 1024).unwrap_err();
        assert_eq!(e.bytes, request_bytes(t5, 64, 4096, 1024));
        assert!(e.to_string().starts_with("64 beams of 1024 new tokens over a 4096-token input need about 8207 MiB"), "{e}");
        assert_eq!(decode_bytes(DecoderShape { layers: usize::MAX, heads: 2, d_kv: 2, vocab: 2 }, 2, 2, 2), u64::MAX);
    }
}
