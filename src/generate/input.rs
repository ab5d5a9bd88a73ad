//! The encoder input of a request: the history window and the knowledge, written by the
//! input encoding, cut to `input.max_tokens` (the module docs of `generate` say how), and
//! delexicalized when the model says so.

use super::delex;
use super::encoding::{self, InputEncoding, KnowledgePath};
use super::{EncoderInput, GenerateError, GenerationInput};
use crate::dialog::Message;
use crate::ingest::tokenizer::TokenizerError;
use crate::linearize::Linearization;
use crate::model::dir::{truncate_left, InputConfig, ModelDir};
use tokenizers::Tokenizer;

/// The history text of `messages` (oldest first, each `text` or `speaker: text`, joined by
/// the separator) and the byte offset where each message starts in it.
fn history_text(messages: &[Message], input: &InputConfig) -> (String, Vec<usize>) {
    let mut text = String::new();
    let mut starts = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            text.push_str(&input.separator);
        }
        starts.push(text.len());
        if input.speaker_prefix {
            text.push_str(&m.speaker);
            text.push_str(": ");
        }
        text.push_str(&m.text);
    }
    (text, starts)
}

/// The encoder input of a request for a generator's model directory (a spec-only one
/// will do: no session is needed); `index` is the request's position, for errors.
pub fn encoder_input_of(
    dir: &ModelDir,
    delexicalize: Option<&delex::DelexConfig>,
    index: usize,
    input: &GenerationInput<'_>,
    encoding: &InputEncoding,
) -> Result<EncoderInput, GenerateError> {
    for (path, p) in input.knowledge.iter().enumerate() {
        encoding::check_path(p).map_err(|problem| GenerateError::Knowledge { input: index, path, problem })?;
    }
    let maker = InputMaker { tokenizer: dir.tokenizer(), lin: dir.linearization(), cfg: &dir.trellis().input, eos: dir.config().eos_token_id };
    match delexicalize {
        None => Ok(maker.make(input.history, input.knowledge, encoding)?.0),
        Some(cfg) => {
            let d = delex::Delexicalizer::new(cfg, input.knowledge).request(input.history, input.knowledge);
            let mut out = maker.make(&d.history, &d.knowledge, encoding)?.0;
            out.names = d.names;
            Ok(out)
        }
    }
}

/// How an encoder input was found (tests check that the one-pass count is what runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// The whole window fits, or is one message.
    Whole,
    /// Messages dropped by counting the tokens of one tokenization.
    Counted,
    /// The count did not match the tokenizer: messages dropped one at a time.
    OneByOne,
}

/// What an encoder input is made with: a model directory's tokenizer and input settings.
struct InputMaker<'a> {
    tokenizer: &'a Tokenizer,
    lin: &'a Linearization,
    cfg: &'a InputConfig,
    eos: u32,
}

impl InputMaker<'_> {
    fn encode(&self, text: &str) -> Result<tokenizers::Encoding, GenerateError> {
        Ok(self.tokenizer.encode(text, true).map_err(|source| TokenizerError::Encode { text: text.to_owned(), source: crate::backend::tokenizers(source) })?)
    }

    /// The text and tokens of the window without its first `dropped` messages.
    fn encode_from(
        &self,
        window: &[Message],
        dropped: usize,
        knowledge: &[KnowledgePath],
        encoding: &InputEncoding,
    ) -> Result<(String, Vec<u32>), GenerateError> {
        let text = encoding.text(self.lin, &history_text(&window[dropped..], self.cfg).0, knowledge)?;
        let ids = self.encode(&text)?.get_ids().to_vec();
        Ok((text, ids))
    }

    fn done(&self, text: String, ids: &[u32], dropped_messages: usize) -> EncoderInput {
        let max = self.cfg.max_tokens;
        EncoderInput { text, ids: truncate_left(ids, max, Some(self.eos)), dropped_messages, cut: ids.len() > max, names: Vec::new() }
    }

    /// The module's rule: drop the oldest message while the ids are longer than
    /// `max_tokens` and more than one message is left, then cut from the left. Each text
    /// tokenized anew, this is quadratic in the window (a 10,000-message window took
    /// minutes); instead the whole window is tokenized once, each token goes with the
    /// message its last byte is in (`▁word` at a message's start goes with that message), and
    /// the number of messages to drop is read off the counts. That count assumes the
    /// tokenizer splits at a message boundary the same way with or without the messages
    /// before it (Metaspace and whitespace pre-tokenizers do where the separator or the
    /// message starts with a space); it is checked on the text kept and on the one with one
    /// message more, both tokenized for real and compared id for id with what the count
    /// predicted. A mismatch falls back to the rule itself, bisecting on the number of
    /// messages dropped.
    fn make(&self, history: &[Message], knowledge: &[KnowledgePath], encoding: &InputEncoding) -> Result<(EncoderInput, Found), GenerateError> {
        let cfg = self.cfg;
        let first = if cfg.turns == 0 { 0 } else { history.len().saturating_sub(cfg.turns) };
        let window = &history[first..];
        let (htext, starts) = history_text(window, cfg);
        let (text, marks) = encoding.text_marked(self.lin, &htext, knowledge)?;
        let whole = self.encode(&text)?;
        let n = window.len();
        if whole.get_ids().len() <= cfg.max_tokens || n <= 1 {
            return Ok((self.done(text, whole.get_ids(), 0), Found::Whole));
        }
        // level[k]: token k is gone once `level[k]` messages are dropped (n: never). A token
        // ending at byte `rel` of a history place ends in message i when starts[i] < rel <=
        // starts[i + 1] (the separator before a message goes with it); it goes with
        // `i + 1` dropped messages. A token of spaces alone (Metaspace's `▁` where the
        // vocabulary has no `▁` + the next word's start) goes with what follows it: the
        // space before the history is written again before the first message kept.
        let level: Vec<usize> = whole
            .get_offsets()
            .iter()
            .map(|&(start, end)| {
                let spaces = text.get(start..end).is_some_and(|t| !t.is_empty() && t.chars().all(char::is_whitespace));
                let end = end + usize::from(spaces);
                let place = marks.partition_point(|&m| m < end);
                match place.checked_sub(1).map(|j| end - marks[j]) {
                    Some(rel) if rel <= htext.len() => starts.partition_point(|&s| s < rel).min(n),
                    _ => n,
                }
            })
            .collect();
        let mut gone_at = vec![0usize; n + 1];
        for &l in &level {
            gone_at[l] += 1;
        }
        let total = whole.get_ids().len();
        let mut gone = 0;
        let mut drop = n - 1;
        for (s, &g) in gone_at.iter().enumerate().take(n).skip(1) {
            gone += g;
            if total - gone <= cfg.max_tokens {
                drop = s;
                break;
            }
        }
        let predicted = |s: usize| -> Vec<u32> { whole.get_ids().iter().zip(&level).filter(|&(_, &l)| l > s).map(|(&id, _)| id).collect() };
        let (kept_text, kept_ids) = self.encode_from(window, drop, knowledge, encoding)?;
        let mut agrees = kept_ids == predicted(drop);
        if agrees && drop > 1 {
            agrees = self.encode_from(window, drop - 1, knowledge, encoding)?.1 == predicted(drop - 1);
        }
        if agrees {
            return Ok((self.done(kept_text, &kept_ids, drop), Found::Counted));
        }
        // The rule's answer is the fewest dropped messages whose text fits (n - 1 when none
        // does). Assuming dropping a message never makes the rest's tokenization longer, that
        // is found by bisection: log n tokenizations of the window instead of up to n (the
        // property tests compare it with the one-at-a-time rule, "\n" separators included).
        let (mut lo, mut hi) = (1, n - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.encode_from(window, mid, knowledge, encoding)?.1.len() <= cfg.max_tokens {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let (text, ids) = self.encode_from(window, lo, knowledge, encoding)?;
        Ok((self.done(text, &ids, lo), Found::OneByOne))
    }
}

#[cfg(test)]
mod tests {
    use super::super::encoding::{Template, Triple};
    use super::*;
    use std::path::Path;

    #[test]
    fn history_text_takes_the_input_settings() {
        let m = |s: &str, t: &str| Message { speaker: s.into(), text: t.into() };
        let msgs = [m("user", "hi"), m("assistant", "hello there")];
        let mut cfg = InputConfig::default();
        assert_eq!(history_text(&msgs, &cfg), ("hi hello there".to_owned(), vec![0, 3]));
        cfg.speaker_prefix = true;
        cfg.separator = " | ".into();
        assert_eq!(history_text(&msgs, &cfg), ("user: hi | assistant: hello there".to_owned(), vec![0, 11]));
        assert_eq!(history_text(&[], &cfg), (String::new(), vec![]));
    }

    /// The rule as it was first written (the reference for the one-pass count): each
    /// shorter window written and tokenized anew, one message dropped at a time.
    fn one_by_one(m: &InputMaker<'_>, history: &[Message], knowledge: &[KnowledgePath], encoding: &InputEncoding) -> EncoderInput {
        let cfg = m.cfg;
        let mut start = if cfg.turns == 0 { 0 } else { history.len().saturating_sub(cfg.turns) };
        let mut dropped = 0;
        loop {
            let text = encoding.text(m.lin, &history_text(&history[start..], cfg).0, knowledge).unwrap();
            let ids = m.tokenizer.encode(text.as_str(), true).unwrap();
            let ids = ids.get_ids();
            if ids.len() <= cfg.max_tokens || history.len() - start <= 1 {
                let cut = ids.len() > cfg.max_tokens;
                return EncoderInput { text, ids: truncate_left(ids, cfg.max_tokens, Some(m.eos)), dropped_messages: dropped, cut, names: Vec::new() };
            }
            start += 1;
            dropped += 1;
        }
    }

    /// The shipped generator (trellis linearization, lowercasing tokenizer) and the test
    /// fixture's (dialoggsr linearization, case kept).
    fn dirs() -> &'static [ModelDir; 2] {
        static DIRS: std::sync::OnceLock<[ModelDir; 2]> = std::sync::OnceLock::new();
        DIRS.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            ["models/generator-opendialkg", "tests/fixtures/generate/tiny-merged"].map(|d| ModelDir::open_spec(&root.join(d)).unwrap())
        })
    }

    /// Whether the tokenizer's Metaspace prepends its space to every piece of text, not
    /// only to the first.
    fn prepends_always(dir: &ModelDir) -> bool {
        !dir.tokenizer().to_string(false).unwrap().contains("\"prepend_scheme\":\"first\"")
    }

    fn maker<'a>(dir: &'a ModelDir, cfg: &'a InputConfig) -> InputMaker<'a> {
        InputMaker { tokenizer: dir.tokenizer(), lin: dir.linearization(), cfg, eos: dir.config().eos_token_id }
    }

    fn encodings() -> Vec<InputEncoding> {
        let t = |s: &str| InputEncoding::Template(Template::new(s).unwrap());
        vec![
            InputEncoding::DialogGsr,
            InputEncoding::Surge,
            InputEncoding::Invariant,
            InputEncoding::Efficient,
            t("{history}"),
            t("{entities}</s>{history} [SEP] {history}!"),
            t("{paths}"),
        ]
    }

    fn knowledge() -> Vec<KnowledgePath> {
        vec![
            vec![Triple::new("Christopher Nolan", "~Directed by", "Inception"), Triple::new("Inception", "Starred actors", "Leonardo DiCaprio")],
            vec![Triple::new("Inception", "Release date", "2010")],
        ]
    }

    fn msg(speaker: &str, text: &str) -> Message {
        Message { speaker: speaker.into(), text: text.into() }
    }

    /// A dialog as users write them: every window size and every `max_tokens` from 2 to past
    /// the whole text, both tokenizers, every encoding: the same input as the reference,
    /// found by the count wherever messages are dropped.
    #[test]
    fn counted_drops_match_the_one_by_one_rule_at_every_max_tokens() {
        let lines = [
            "Do you like Christopher Nolan?",
            "Yes, Inception is great. Have you seen it?",
            "I have! Leonardo DiCaprio was in it, released 2010.",
            "",
            "Café au lait, naïve Σίσυφος 東京 — 42 times?!",
            "ok",
        ];
        let history: Vec<Message> = (0..14).map(|i| msg(if i % 2 == 0 { "user" } else { "assistant" }, lines[i % lines.len()])).collect();
        let mut counted = 0;
        for dir in dirs() {
            for encoding in encodings() {
                // A newline is no word boundary to these tokenizers (Metaspace splits at
                // spaces): the last word of a message and the first of the next are one word
                // there, and the count cannot hold.
                for (separator, speaker_prefix, counts) in [(" ", false, true), (" | ", true, true), ("\n", false, false)] {
                    let mut cfg = InputConfig { turns: 0, speaker_prefix, separator: separator.into(), max_tokens: usize::MAX, entities: None };
                    let full = one_by_one(&maker(dir, &cfg), &history, &knowledge(), &encoding).ids.len();
                    for max_tokens in 2..=full + 1 {
                        cfg.max_tokens = max_tokens;
                        let m = maker(dir, &cfg);
                        let (got, found) = m.make(&history, &knowledge(), &encoding).unwrap();
                        let want = one_by_one(&m, &history, &knowledge(), &encoding);
                        assert_eq!(got, want, "{encoding} {separator:?} max_tokens {max_tokens}");
                        // A Metaspace that prepends its space to the text's first piece only
                        // (the shipped generator's cased tokenizer) writes a message right after
                        // an added token (`</s>{history}`) without it, and with it after a
                        // separator: there the count cannot hold and bisection answers.
                        let after_added_token = encoding.to_string().contains("</s>{history}") && !prepends_always(dir);
                        if want.dropped_messages > 0 && counts && !after_added_token {
                            assert_eq!(found, Found::Counted, "{encoding} {separator:?} max_tokens {max_tokens}");
                            counted += 1;
                        }
                    }
                }
            }
        }
        assert!(counted > 1000, "{counted}");
    }

    /// A separator that is not a space glues the messages into one word: the count does not
    /// hold, and the rule is followed one message at a time.
    #[test]
    fn a_mismatched_count_falls_back_to_one_by_one() {
        let history: Vec<Message> = ["ab", "cd", "ef", "gh", "ij"].iter().map(|t| msg("u", t)).collect();
        let mut found = Vec::new();
        for max_tokens in 2..12 {
            let cfg = InputConfig { turns: 0, speaker_prefix: false, separator: String::new(), max_tokens, entities: None };
            let m = maker(&dirs()[1], &cfg);
            let (got, how) = m.make(&history, &[], &InputEncoding::Surge).unwrap();
            assert_eq!(got, one_by_one(&m, &history, &[], &InputEncoding::Surge), "max_tokens {max_tokens}");
            found.push(how);
        }
        assert!(found.contains(&Found::OneByOne), "{found:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Any history, separator, speaker prefix, window and encoding: the same input as the
        /// reference rule (texts with special tokens, empty messages, runs of spaces,
        /// combining marks and glued separators included).
        #[test]
        fn any_history_gives_the_one_by_one_input(
            texts in proptest::collection::vec(proptest::collection::vec(proptest::sample::select(vec![
                "the", "Movie", "Inception", "nolan?", "", " ", "  ", "[SEP]", "</s>", "[Head]", "[HEAD]", "café", "e\u{301}", "\u{301}",
                "東京", "Σίσυφος", "42", "!", "a|b", "\t", "ﬁ", "🎬",
            ]), 0..6), 0..30),
            glue in proptest::collection::vec(proptest::sample::select(vec![" ", "", "  "]), 6),
            separator in proptest::sample::select(vec![" ", " | ", "", "\n", "  ", "|", "\u{301}"]),
            speaker_prefix in proptest::bool::ANY,
            turns in proptest::sample::select(vec![0usize, 1, 2, 5, 12]),
            max_tokens in 2usize..90,
            which in 0usize..2,
            encoding in 0usize..7,
            paths in 0usize..3,
        ) {
            let history: Vec<Message> = texts
                .iter()
                .enumerate()
                .map(|(i, words)| {
                    let mut t = String::new();
                    for (k, w) in words.iter().enumerate() {
                        if k > 0 {
                            t.push_str(glue[k % glue.len()]);
                        }
                        t.push_str(w);
                    }
                    msg(if i % 2 == 0 { "user" } else { "" }, &t)
                })
                .collect();
            let cfg = InputConfig { turns, speaker_prefix, separator: separator.into(), max_tokens, entities: None };
            let m = maker(&dirs()[which], &cfg);
            let encoding = &encodings()[encoding];
            let knowledge = &knowledge()[..paths];
            let (got, _) = m.make(&history, knowledge, encoding).unwrap();
            proptest::prop_assert_eq!(got, one_by_one(&m, &history, knowledge, encoding));
        }
    }
}
