//! Three of transformers' logits processors (4.57, `generation/logits_process.py`), for the
//! generator's decoding; the retriever's search never sets them.
//!
//! A row's sequence is what transformers passes them as `input_ids`: for an encoder-decoder
//! model the decoder's ids, the start token (T5: `decoder_start_token_id`, the pad id)
//! included, then the tokens generated so far. transformers' order, each only when set:
//!
//! - `repetition_penalty` (`RepetitionPenaltyLogitsProcessor`, on when not 1): every token
//!   of the sequence, once however often it occurs, scores `s * p` where `s < 0`, else
//!   `s / p`;
//! - `no_repeat_ngram_size` n (`NoRepeatNGramLogitsProcessor`, on when > 0): once the
//!   sequence has at least n - 1 tokens, every token that would complete an n-gram already
//!   in the sequence (its n - 1 last tokens followed by it) scores -inf;
//! - `min_new_tokens` m (`MinNewTokensLengthLogitsProcessor`, on when > 0): while fewer than
//!   m tokens have been generated, every end token scores -inf (transformers: each id of
//!   `eos_token_id`; the generator passes EOS and its stop ids).
//!
//! What they process is the caller's: greedy search and sampling process the raw logits
//! (before the sampling warpers), beam search the log-softmax (`log_softmax(logits)`, then
//! the processors), as transformers does.

/// The processors' settings; the default is all off.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Processors {
    /// 0: off.
    pub no_repeat_ngram_size: usize,
    /// 0: off.
    pub min_new_tokens: usize,
    /// > 0; 1: off.
    pub repetition_penalty: f64,
    /// The tokens `min_new_tokens` holds back.
    pub ends: Vec<u32>,
}

impl Default for Processors {
    fn default() -> Self {
        Processors { no_repeat_ngram_size: 0, min_new_tokens: 0, repetition_penalty: 1.0, ends: Vec::new() }
    }
}

/// What the processors do to one token's score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The repetition penalty.
    Penalize,
    /// -inf (a repeated n-gram, or an end token before `min_new_tokens`).
    Ban,
}

impl Processors {
    /// Whether every processor is off (nothing to compute).
    pub fn is_off(&self) -> bool {
        self.no_repeat_ngram_size == 0 && self.min_new_tokens == 0 && self.repetition_penalty == 1.0
    }

    /// The tokens whose score the processors change at the next step of a row that started
    /// with `start` and generated `generated`, ascending, each once (a ban wins: a penalized
    /// -inf stays -inf).
    pub fn changes(&self, start: u32, generated: &[u32], out: &mut Vec<(u32, Change)>) {
        out.clear();
        if self.is_off() {
            return;
        }
        let at = |i: usize| if i == 0 { start } else { generated[i - 1] };
        let len = generated.len() + 1;
        if self.repetition_penalty != 1.0 {
            out.extend((0..len).map(|i| (at(i), Change::Penalize)));
        }
        let n = self.no_repeat_ngram_size;
        if n > 0 && len + 1 >= n {
            // The n - 1 last tokens, and every earlier n-gram that starts with them.
            let prefix = len + 1 - n;
            for i in 0..prefix {
                if (0..n - 1).all(|k| at(i + k) == at(prefix + k)) {
                    out.push((at(i + n - 1), Change::Ban));
                }
            }
        }
        if generated.len() < self.min_new_tokens {
            out.extend(self.ends.iter().map(|&t| (t, Change::Ban)));
        }
        // Ban sorts after Penalize: of a token's changes the last one is kept.
        out.sort_unstable_by_key(|&(t, c)| (t, c == Change::Ban));
        out.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
    }

    /// A score after `change`, in f32 (greedy search and sampling: transformers processes
    /// float32 logits).
    pub fn apply_f32(&self, change: Change, s: f32) -> f32 {
        match change {
            Change::Ban => f32::NEG_INFINITY,
            Change::Penalize => {
                let p = self.repetition_penalty as f32;
                if s < 0.0 {
                    s * p
                } else {
                    s / p
                }
            }
        }
    }

    /// A log-probability after `change` (beam search).
    pub fn apply_f64(&self, change: Change, s: f64) -> f64 {
        match change {
            Change::Ban => f64::NEG_INFINITY,
            Change::Penalize if s < 0.0 => s * self.repetition_penalty,
            Change::Penalize => s / self.repetition_penalty,
        }
    }

    /// Processes one row of scores in place (its tokens in range: others are ignored).
    pub fn process_f32(&self, start: u32, generated: &[u32], row: &mut [f32], changes: &mut Vec<(u32, Change)>) {
        self.changes(start, generated, changes);
        for &(t, c) in changes.iter() {
            if let Some(s) = row.get_mut(t as usize) {
                *s = self.apply_f32(c, *s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Change::{Ban, Penalize};

    fn changes(p: &Processors, start: u32, generated: &[u32]) -> Vec<(u32, Change)> {
        let mut out = vec![(99, Ban)];
        p.changes(start, generated, &mut out);
        out
    }

    fn ngram(n: usize) -> Processors {
        Processors { no_repeat_ngram_size: n, ..Default::default() }
    }

    /// The definitions written out token by token: every n-gram of the sequence (start token
    /// included) whose first n - 1 tokens are the sequence's last n - 1 bans its last token.
    fn brute_force_bans(n: usize, seq: &[u32]) -> Vec<u32> {
        let mut banned: Vec<u32> = Vec::new();
        if seq.len() + 1 < n {
            return banned;
        }
        let last = &seq[seq.len() + 1 - n..];
        for w in seq.windows(n) {
            if &w[..n - 1] == last {
                banned.push(w[n - 1]);
            }
        }
        banned.sort_unstable();
        banned.dedup();
        banned
    }

    #[test]
    fn hand_worked_ngrams_count_the_start_token() {
        // Sequence 0 5 6 5 (start 0): the bigrams 0-5, 5-6, 6-5; the last token is 5, so 6
        // (from 5-6) is banned.
        assert_eq!(changes(&ngram(2), 0, &[5, 6, 5]), vec![(6, Ban)]);
        // Trigrams of 0 5 6 5 6: 0-5-6, 5-6-5, 6-5-6; the last two are 5 6, so 5 is banned.
        assert_eq!(changes(&ngram(3), 0, &[5, 6, 5, 6]), vec![(5, Ban)]);
        // The start token is part of the sequence: after 0 7 ... 0, the bigram 0-7 bans 7.
        assert_eq!(changes(&ngram(2), 0, &[7, 3, 0]), vec![(7, Ban)]);
        // n = 1: every token of the sequence, the start token included.
        assert_eq!(changes(&ngram(1), 0, &[4, 2, 4]), vec![(0, Ban), (2, Ban), (4, Ban)]);
        // Too short for an n-gram: transformers bans nothing until cur_len + 1 >= n.
        assert_eq!(changes(&ngram(3), 0, &[]), vec![]);
        assert_eq!(changes(&ngram(3), 0, &[0]), vec![], "0 0: no trigram yet to repeat");
        assert_eq!(changes(&ngram(3), 0, &[0, 0]), vec![(0, Ban)], "0 0 0: a fourth 0 would repeat 0 0 0");
    }

    #[test]
    fn min_new_tokens_holds_back_every_end_until_enough_are_generated() {
        let p = Processors { min_new_tokens: 2, ends: vec![1, 7], ..Default::default() };
        assert_eq!(changes(&p, 0, &[]), vec![(1, Ban), (7, Ban)]);
        assert_eq!(changes(&p, 0, &[4]), vec![(1, Ban), (7, Ban)]);
        assert_eq!(changes(&p, 0, &[4, 4]), vec![]);
    }

    #[test]
    fn the_repetition_penalty_follows_the_sign_once_per_token() {
        let p = Processors { repetition_penalty: 2.0, ..Default::default() };
        // The start token 0 counts; 3 occurs twice and is penalized once.
        assert_eq!(changes(&p, 0, &[3, 5, 3]), vec![(0, Penalize), (3, Penalize), (5, Penalize)]);
        let mut row = vec![-1.0f32, 4.0, 2.5, 3.0, 0.0, -0.5];
        let mut scratch = Vec::new();
        p.process_f32(0, &[3, 5, 3, 4], &mut row, &mut scratch);
        assert_eq!(row, vec![-2.0, 4.0, 2.5, 1.5, 0.0, -1.0]);
        assert_eq!(p.apply_f64(Penalize, -0.25), -0.5);
        assert_eq!(p.apply_f64(Penalize, 0.0), 0.0);
        assert_eq!(p.apply_f64(Penalize, f64::NEG_INFINITY), f64::NEG_INFINITY);
        // Below 1 it rewards: s / p for a positive score.
        let q = Processors { repetition_penalty: 0.5, ..Default::default() };
        assert_eq!(q.apply_f32(Penalize, 3.0), 6.0);
        assert_eq!(q.apply_f32(Penalize, -3.0), -1.5);
    }

    #[test]
    fn all_three_together_a_ban_wins() {
        let p = Processors { no_repeat_ngram_size: 2, min_new_tokens: 5, repetition_penalty: 1.5, ends: vec![1] };
        // Sequence 0 5 6 5: penalize 0, 5, 6; ban 6 (the bigram 5-6) and 1 (3 of 5 tokens generated).
        assert_eq!(changes(&p, 0, &[5, 6, 5]), vec![(0, Penalize), (1, Ban), (5, Penalize), (6, Ban)]);
        let mut row = vec![1.0f32; 8];
        let mut scratch = Vec::new();
        p.process_f32(0, &[5, 6, 5], &mut row, &mut scratch);
        let third = 1.0f32 / 1.5f32;
        assert_eq!(row, vec![third, f32::NEG_INFINITY, 1.0, 1.0, 1.0, third, f32::NEG_INFINITY, 1.0]);
        assert!(Processors::default().is_off());
        assert_eq!(changes(&Processors::default(), 0, &[1, 1, 1]), vec![]);
    }

    proptest::proptest! {
        /// Any sequence over a small alphabet (many repeats) and any n: the bans are the
        /// brute-force ones.
        #[test]
        fn ngram_bans_match_brute_force(seq in proptest::collection::vec(0u32..4, 0..30), n in 1usize..6) {
            let got: Vec<u32> = changes(&ngram(n), seq.first().copied().unwrap_or(0), seq.get(1..).unwrap_or(&[])).into_iter().map(|(t, _)| t).collect();
            let full = if seq.is_empty() { vec![0] } else { seq.clone() };
            proptest::prop_assert_eq!(got, brute_force_bans(n, &full));
        }
    }
}
