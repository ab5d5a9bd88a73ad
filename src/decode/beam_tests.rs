//! Beam search's tests (beside it: `beam.rs` is the search).
use super::*;
use proptest::prelude::*;

/// Logits that are a fixed function of the whole sequence fed so far: a row's history
/// is kept as the model's "cache", so wrong reordering shows up as wrong scores.
struct ToyModel {
    vocab: usize,
    seed: u64,
    rows: Vec<Vec<u32>>,
    out: Vec<f32>,
    calls: usize,
}

fn toy_logits(seed: u64, seq: &[u32], vocab: usize) -> Vec<f32> {
    (0..vocab)
        .map(|t| {
            // splitmix64 over the sequence: distinct sequences get unrelated values.
            let mut h = seed;
            for &x in seq.iter().chain([t as u32].iter()) {
                h = h.wrapping_add(u64::from(x)).wrapping_add(0x9e37_79b9_7f4a_7c15);
                h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                h ^= h >> 31;
            }
            ((h >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0
        })
        .collect()
}

impl ToyModel {
    fn new(inputs: usize, vocab: usize, seed: u64) -> ToyModel {
        ToyModel { vocab, seed, rows: (0..inputs).map(|i| vec![1000 + i as u32]).collect(), out: Vec::new(), calls: 0 }
    }
}

impl StepModel for ToyModel {
    type Error = std::convert::Infallible;
    fn vocab_size(&self) -> usize {
        self.vocab
    }
    fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error> {
        assert_eq!(tokens.len(), self.rows.len(), "one token per row");
        self.calls += 1;
        self.out.clear();
        for (row, &t) in self.rows.iter_mut().zip(tokens) {
            row.push(t);
            self.out.extend(toy_logits(self.seed, row, self.vocab));
        }
        Ok(&self.out)
    }
    fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error> {
        self.rows = parents.iter().map(|&p| self.rows[p].clone()).collect();
        Ok(())
    }
}

fn log_softmax(l: &[f32]) -> Vec<f64> {
    let lse = log_sum_exp(l).unwrap();
    l.iter().map(|&x| x as f64 - lse).collect()
}

/// A constraint over an explicit set of token strings (each ending in EOS), with a
/// prior uniform over the allowed tokens: the brute force enumerates the same set.
#[derive(Clone)]
struct SetConstraint {
    strings: Vec<Vec<u32>>,
}

impl Constraint for SetConstraint {
    type State = Vec<u32>;
    type Error = std::convert::Infallible;
    fn start(&mut self) -> Result<Vec<u32>, Self::Error> {
        Ok(Vec::new())
    }
    fn allowed(&mut self, s: &Vec<u32>, out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error> {
        let mut next: Vec<u32> = self.strings.iter().filter(|x| x.starts_with(s) && x.len() > s.len()).map(|x| x[s.len()]).collect();
        next.sort_unstable();
        next.dedup();
        let p = -(next.len() as f64).ln();
        out.clear();
        out.extend(next.into_iter().map(|t| (t, p)));
        Ok(Allowed::Listed)
    }
    fn advance(&mut self, s: &Vec<u32>, t: u32) -> Result<Vec<u32>, Self::Error> {
        let mut s = s.clone();
        s.push(t);
        Ok(s)
    }
}

fn cfg(beams: usize, max_new_tokens: usize, alpha: Option<f64>) -> SearchConfig {
    SearchConfig {
        beams,
        return_sequences: beams,
        length_penalty: 0.0,
        max_new_tokens,
        early_stopping: false,
        alpha,
        model_norm: ModelNorm::Vocabulary,
        start_token: 0,
        eos_token: 1,
    }
}

/// Every sequence of at most `max` tokens that ends in EOS or has `max` tokens, with its
/// summed score, computed straight from the logits function.
fn brute_force(seed: u64, input: usize, vocab: usize, max: usize, alpha: Option<f64>, set: Option<&SetConstraint>) -> Vec<(Vec<u32>, f64)> {
    brute_force_normed(seed, input, vocab, max, alpha, set, ModelNorm::Vocabulary)
}

/// The same, with the model's log-softmax over the allowed tokens when `norm` says so
/// (computed here as a softmax of the allowed logits, in f64).
fn brute_force_normed(
    seed: u64,
    input: usize,
    vocab: usize,
    max: usize,
    alpha: Option<f64>,
    set: Option<&SetConstraint>,
    norm: ModelNorm,
) -> Vec<(Vec<u32>, f64)> {
    let mut out = Vec::new();
    let mut stack = vec![(Vec::<u32>::new(), 0.0f64)];
    while let Some((seq, sum)) = stack.pop() {
        let mut fed = vec![1000 + input as u32, 0];
        fed.extend(&seq);
        let lp = log_softmax(&toy_logits(seed, &fed, vocab));
        let options: Vec<(u32, f64)> = match set {
            None => (0..vocab as u32).map(|t| (t, 0.0)).collect(),
            Some(c) => {
                let mut c = c.clone();
                let mut buf = Vec::new();
                c.allowed(&seq, &mut buf).unwrap();
                buf
            }
        };
        let lp = match (norm, set) {
            (ModelNorm::Allowed, Some(_)) => {
                let logits = toy_logits(seed, &fed, vocab);
                let z: f64 = options.iter().map(|&(t, _)| (logits[t as usize] as f64).exp()).sum();
                let mut lp = vec![f64::NEG_INFINITY; vocab];
                for &(t, _) in &options {
                    lp[t as usize] = logits[t as usize] as f64 - z.ln();
                }
                lp
            }
            _ => lp,
        };
        for (t, prior) in options {
            let s = sum + alpha.map_or(lp[t as usize], |a| a * lp[t as usize] + (1.0 - a) * prior);
            let mut next = seq.clone();
            next.push(t);
            if t == 1 || next.len() == max {
                out.push((next, s));
            } else {
                stack.push((next, s));
            }
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

#[test]
fn a_beam_wider_than_the_tree_finds_the_exact_best_sequences() {
    // vocab 4 (EOS = 1), 3 steps: 40 sequences, fewer than 64 beams, so nothing is
    // pruned and (length penalty 0) the result is the exhaustive ranking.
    for seed in 0..20 {
        let mut model = ToyModel::new(2, 4, seed);
        let out = beam_search(&mut model, &mut [Unconstrained, Unconstrained], &cfg(64, 3, None)).unwrap();
        for (input, hyps) in out.iter().enumerate() {
            let want = brute_force(seed, input, 4, 3, None, None);
            assert_eq!(hyps.len(), want.len());
            for (h, (seq, sum)) in hyps.iter().zip(&want) {
                assert_eq!(&h.tokens, seq, "seed {seed} input {input}");
                assert!((h.sum - sum).abs() < 1e-9 && (h.score - sum).abs() < 1e-9);
            }
        }
    }
}

/// The processors' definitions written out over every sequence of a small tree: the
/// beam search (wide enough to prune nothing) ranks exactly these sums. Token 0 is the
/// start token, so it is penalized from the first step and opens a bigram.
#[test]
fn processed_log_softmax_matches_the_brute_force() {
    let p = Processors { no_repeat_ngram_size: 2, min_new_tokens: 2, repetition_penalty: 1.7, ends: vec![1] };
    let (vocab, max) = (4usize, 3usize);
    for seed in 0..20 {
        let mut model = ToyModel::new(1, vocab, seed);
        let out = beam_search_processed(&mut model, &mut [Unconstrained], &cfg(64, max, None), &p).unwrap();
        let mut want: Vec<(Vec<u32>, f64)> = Vec::new();
        let mut stack = vec![(Vec::<u32>::new(), 0.0f64)];
        while let Some((seq, sum)) = stack.pop() {
            let mut fed = vec![1000, 0];
            fed.extend(&seq);
            let lp = log_softmax(&toy_logits(seed, &fed, vocab));
            let ids = &fed[1..]; // the decoder's ids: the start token, then the sequence
            for t in 0..vocab as u32 {
                let mut s = lp[t as usize];
                if ids.contains(&t) {
                    s = if s < 0.0 { s * 1.7 } else { s / 1.7 };
                }
                if ids.windows(2).any(|w| w[0] == ids[ids.len() - 1] && w[1] == t) || (t == 1 && seq.len() < 2) {
                    continue; // -inf: never a candidate
                }
                let mut next = seq.clone();
                next.push(t);
                if t == 1 || next.len() == max {
                    want.push((next, sum + s));
                } else {
                    stack.push((next, sum + s));
                }
            }
        }
        want.sort_by(|a, b| b.1.total_cmp(&a.1));
        let got: Vec<(&Vec<u32>, f64)> = out[0].iter().map(|h| (&h.tokens, h.sum)).collect();
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), want.iter().map(|w| &w.0).collect::<Vec<_>>(), "seed {seed}");
        for ((_, g), (_, w)) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-9, "seed {seed}: {g} vs {w}");
        }
        for h in &out[0] {
            assert!((h.token_scores.iter().map(|x| x.0).sum::<f64>() - h.sum).abs() < 1e-9, "the processed values add up");
        }
        // Without processors, another ranking (and EOS allowed at once).
        let plain = beam_search(&mut ToyModel::new(1, vocab, seed), &mut [Unconstrained], &cfg(64, max, None)).unwrap();
        assert_ne!(plain[0].iter().map(|h| &h.tokens).collect::<Vec<_>>(), got.iter().map(|g| g.0).collect::<Vec<_>>());
    }
}

#[test]
fn constrained_search_with_a_prior_matches_the_brute_force_over_the_allowed_set() {
    let set = SetConstraint { strings: vec![vec![2, 3, 1], vec![2, 4, 1], vec![2, 4, 5, 1], vec![5, 1], vec![3, 3, 3, 1]] };
    for seed in 0..20 {
        let mut model = ToyModel::new(1, 6, seed);
        let mut cs = [set.clone()];
        let out = beam_search(&mut model, &mut cs, &cfg(16, 6, Some(0.8))).unwrap();
        let want = brute_force(seed, 0, 6, 6, Some(0.8), Some(&set));
        assert_eq!(want.len(), 5);
        let got: Vec<(Vec<u32>, f64)> = out[0].iter().map(|h| (h.tokens.clone(), h.sum)).collect();
        assert_eq!(got.iter().map(|g| &g.0).collect::<Vec<_>>(), want.iter().map(|w| &w.0).collect::<Vec<_>>(), "seed {seed}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g.1 - w.1).abs() < 1e-9);
        }
        // Every token score is alpha * lp + (1 - alpha) * prior, and they add up.
        for h in &out[0] {
            let total: f64 = h.token_scores.iter().map(|(lp, p)| 0.8 * lp + 0.2 * p).sum();
            assert!((total - h.sum).abs() < 1e-9);
            assert!(set.strings.contains(&h.tokens));
        }
    }
}

#[test]
fn allowed_normalization_matches_the_brute_force_and_a_forced_token_scores_zero() {
    let set = SetConstraint { strings: vec![vec![2, 3, 1], vec![2, 4, 1], vec![2, 4, 5, 1], vec![5, 1], vec![3, 3, 3, 1]] };
    for seed in 0..20 {
        for alpha in [None, Some(0.7)] {
            let mut model = ToyModel::new(1, 6, seed);
            let mut c = cfg(16, 6, alpha);
            c.model_norm = ModelNorm::Allowed;
            let out = beam_search(&mut model, &mut [set.clone()], &c).unwrap();
            let want = brute_force_normed(seed, 0, 6, 6, alpha, Some(&set), ModelNorm::Allowed);
            let got: Vec<&Vec<u32>> = out[0].iter().map(|h| &h.tokens).collect();
            assert_eq!(got, want.iter().map(|w| &w.0).collect::<Vec<_>>(), "seed {seed} alpha {alpha:?}");
            for (h, w) in out[0].iter().zip(&want) {
                assert!((h.sum - w.1).abs() < 1e-9, "seed {seed}: {} vs {}", h.sum, w.1);
            }
            // The per-step model probabilities of the allowed tokens sum to 1, so a token
            // with no alternative (3 after 3, the EOS ending [5, 1]) costs nothing.
            let h = out[0].iter().find(|h| h.tokens == [3, 3, 3, 1]).unwrap();
            assert_eq!(h.token_scores[1].0, 0.0);
            assert_eq!(h.token_scores[2].0, 0.0);
        }
    }
}

#[test]
fn allowed_normalization_reports_a_nan_among_the_allowed_logits_only() {
    // vocab 4: token 3 is NaN but never allowed, so the search goes on; token 2 NaN and
    // allowed is an error naming it.
    let set = SetConstraint { strings: vec![vec![2, 1], vec![0, 1]] };
    for (nan_at, ok) in [(3usize, true), (2, false)] {
        let mut row = vec![0.5f32, -0.1, 1.0, 0.3];
        row[nan_at] = f32::NAN;
        let mut model = Scripted { steps: vec![vec![row.clone()], vec![row.clone(); 2]], at: 0, out: Vec::new(), reorders: Vec::new() };
        let mut c = cfg(2, 2, None);
        c.model_norm = ModelNorm::Allowed;
        let r = beam_search(&mut model, &mut [set.clone()], &c);
        match (ok, r) {
            (true, Ok(_)) => {}
            (false, Err(SearchError::NaN { token, .. })) => assert_eq!(token, 2),
            (_, other) => panic!("NaN at {nan_at}: {:?}", other.map(|_| ()).map_err(|e| e.to_string())),
        }
    }
}

/// A model whose logits are given per step and row: for hand-worked cases.
struct Scripted {
    steps: Vec<Vec<Vec<f32>>>,
    at: usize,
    out: Vec<f32>,
    reorders: Vec<Vec<usize>>,
}

impl StepModel for Scripted {
    type Error = std::convert::Infallible;
    fn vocab_size(&self) -> usize {
        self.steps[0][0].len()
    }
    fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error> {
        let rows = &self.steps[self.at];
        self.at += 1;
        self.out = (0..tokens.len()).flat_map(|r| rows[r.min(rows.len() - 1)].clone()).collect();
        Ok(&self.out)
    }
    fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error> {
        self.reorders.push(parents.to_vec());
        Ok(())
    }
}

#[test]
fn an_eos_ranked_past_the_beam_count_is_dropped_and_early_stopping_ends_the_input() {
    // Tokens: 0 start, 1 EOS, 2, 3; two beams, so four candidates per step; length
    // penalty 1. Probabilities are chosen so every product below is distinct.
    // Step 0: 2 (.6), 3 (.3): the running beams [2], [3].
    // Step 1: [2,EOS] .30 (rank 0: finishes), [2,2] .21 (runs), [3,EOS] .18 (rank 2 >=
    //   2 beams: dropped), [3,2] .105 (runs).
    // Step 2: [2,2,2] .0945 (runs), [2,2,EOS] .063 (rank 1: finishes), [2,2,3] .0525
    //   (runs; the beams are full). Two finished: early stopping ends the input.
    // Result: [2,EOS] ln(.30)/2 = -0.602, [2,2,EOS] ln(.063)/3 = -0.921. Had [3,EOS]
    // been kept, its ln(.18)/2 = -0.857 would be second.
    let ln = |p: f64| p.ln() as f32;
    let row = |eos: f64, two: f64, three: f64| vec![-60.0, ln(eos), ln(two), ln(three)];
    let step0 = vec![row(0.1, 0.6, 0.3)];
    let step1 = vec![row(0.5, 0.35, 0.15), row(0.6, 0.35, 0.05)];
    let step2 = vec![row(0.3, 0.45, 0.25)];
    let mut m = Scripted { steps: vec![step0, step1, step2], at: 0, out: Vec::new(), reorders: Vec::new() };
    let c = SearchConfig {
        beams: 2,
        return_sequences: 2,
        length_penalty: 1.0,
        max_new_tokens: 10,
        early_stopping: true,
        alpha: None,
        model_norm: ModelNorm::Vocabulary,
        start_token: 0,
        eos_token: 1,
    };
    let out = beam_search(&mut m, &mut [Unconstrained], &c).unwrap();
    assert_eq!(m.at, 3, "done after three steps");
    // Step 1 continues row 0 twice; step 2 continues [2] (row 0) and [3] (row 1).
    assert_eq!(m.reorders, vec![vec![0, 0], vec![0, 1]]);
    let h = &out[0];
    assert_eq!(h.iter().map(|x| x.tokens.clone()).collect::<Vec<_>>(), vec![vec![2, 1], vec![2, 2, 1]]);
    assert!((h[0].score - 0.30f64.ln() / 2.0).abs() < 1e-6, "{}", h[0].score);
    assert!((h[1].score - 0.063f64.ln() / 3.0).abs() < 1e-6, "{}", h[1].score);
}

/// One step allows tokens 2 and 3, token 3 with a prior of 0 probability (log -inf).
struct BannedByPrior;

impl Constraint for BannedByPrior {
    type State = usize;
    type Error = std::convert::Infallible;
    fn start(&mut self) -> Result<usize, Self::Error> {
        Ok(0)
    }
    fn allowed(&mut self, state: &usize, out: &mut Vec<(u32, f64)>) -> Result<Allowed, Self::Error> {
        out.clear();
        if *state == 0 {
            out.extend([(2, 0.0), (3, f64::NEG_INFINITY)]);
        } else {
            out.push((1, 0.0));
        }
        Ok(Allowed::Listed)
    }
    fn advance(&mut self, state: &usize, _: u32) -> Result<usize, Self::Error> {
        Ok(state + 1)
    }
}

#[test]
fn alpha_one_ignores_even_a_zero_prior() {
    // Token 3 is the model's favourite (p .6 against .3 for 2) and the prior's impossible
    // one. At alpha 1 the prior does not count: [3, EOS] first, scored ln(.6 / .9) (the
    // model's softmax over the allowed 2 and 3; EOS is then forced: log 1). At alpha 0.5
    // the prior rules 3 out.
    let ln = |p: f64| p.ln() as f32;
    let step0 = vec![vec![-60.0, ln(0.1), ln(0.3), ln(0.6)]];
    let step1 = vec![vec![-60.0, 0.0, -60.0, -60.0]];
    let run = |alpha| {
        let mut m = Scripted { steps: vec![step0.clone(), step1.clone()], at: 0, out: Vec::new(), reorders: Vec::new() };
        let c = SearchConfig {
            beams: 2,
            return_sequences: 2,
            length_penalty: 0.0,
            max_new_tokens: 5,
            early_stopping: true,
            alpha: Some(alpha),
            model_norm: ModelNorm::Allowed,
            start_token: 0,
            eos_token: 1,
        };
        beam_search(&mut m, &mut [BannedByPrior], &c).unwrap().remove(0)
    };
    let h = run(1.0);
    assert_eq!(h.iter().map(|x| x.tokens.clone()).collect::<Vec<_>>(), vec![vec![3, 1], vec![2, 1]]);
    assert!((h[0].score - (0.6f64 / 0.9).ln()).abs() < 1e-6, "{}", h[0].score);
    let h = run(0.5);
    assert_eq!(h.iter().map(|x| x.tokens.clone()).collect::<Vec<_>>(), vec![vec![2, 1]]);
}

#[test]
fn beams_keep_their_parents_slots() {
    // Beams 0, 1, 2 sit in slots 2, 0, 1 of a block starting at row 6. The next beams
    // continue beams 0, 0, 1: the first keeps slot 2, its sibling takes the free slot 1,
    // the third takes beam 1's slot 0. Only row 7 changes (to a copy of row 8).
    let (rows, slots) = place(&[0, 0, 1], &[2, 0, 1], 6, 3, 3);
    assert_eq!(slots, vec![2, 1, 0]);
    assert_eq!(rows, vec![6, 8, 8]);
    // Opening the beams from a one-row block: slots in rank order, every row a copy of it.
    let (rows, slots) = place(&[0, 0], &[0], 4, 1, 3);
    assert_eq!(slots, vec![0, 1]);
    assert_eq!(rows, vec![4, 4, 4]);
    // Fewer beams than slots: an empty slot continues its own row.
    let (rows, slots) = place(&[1], &[0, 1, 2], 0, 3, 3);
    assert_eq!(slots, vec![1]);
    assert_eq!(rows, vec![0, 1, 2]);
}

#[test]
fn bad_logits_are_errors() {
    let mut m = Scripted { steps: vec![vec![vec![0.0, f32::NAN, 0.0]]], at: 0, out: Vec::new(), reorders: Vec::new() };
    let c = cfg(2, 3, None);
    assert!(matches!(beam_search(&mut m, &mut [Unconstrained], &c), Err(SearchError::NaN { row: 0, token: 1 })));
    struct Short;
    impl StepModel for Short {
        type Error = std::convert::Infallible;
        fn vocab_size(&self) -> usize {
            5
        }
        fn step(&mut self, _: &[u32]) -> Result<&[f32], Self::Error> {
            Ok(&[0.0; 3])
        }
        fn reorder(&mut self, _: &[usize]) -> Result<(), Self::Error> {
            Ok(())
        }
    }
    assert!(matches!(beam_search(&mut Short, &mut [Unconstrained], &c), Err(SearchError::LogitsShape { got: 3, rows: 1, vocab: 5 })));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Deciding inputs together or one at a time gives the same hypotheses: rows of
    /// finished inputs leave the batch without disturbing the others.
    #[test]
    fn batching_inputs_does_not_change_results(seed in 0u64..1000, beams in 1usize..5, inputs in 1usize..4, early: bool, lp in 0.0f64..2.0) {
        let c = SearchConfig { beams, return_sequences: beams, length_penalty: lp, max_new_tokens: 5, early_stopping: early, alpha: None, model_norm: ModelNorm::Vocabulary, start_token: 0, eos_token: 1 };
        let mut model = ToyModel::new(inputs, 5, seed);
        let mut cs = vec![Unconstrained; inputs];
        let together = beam_search(&mut model, &mut cs, &c).unwrap();
        for (i, got) in together.iter().enumerate() {
            let mut alone = ToyModel::new(1, 5, seed);
            alone.rows[0] = vec![1000 + i as u32];
            let want = beam_search(&mut alone, &mut [Unconstrained], &c).unwrap();
            prop_assert_eq!(got, &want[0]);
        }
    }
}

/// The generator's ban, against an enumeration written out here: no sequence takes a banned
/// token or ends right after the space token, and every other sequence scores exactly what
/// it scores unconstrained (the model's log-softmax over the whole vocabulary).
#[test]
fn banned_tokens_match_the_brute_force_over_the_sequences_they_leave() {
    let (vocab, max, space, banned) = (5usize, 3usize, 3u32, 4u32);
    for seed in 0..20 {
        let mut model = ToyModel::new(1, vocab, seed);
        let mut ban = [BannedTokens::new(vec![banned, banned], Some(space), 1)];
        let out = beam_search(&mut model, &mut ban, &cfg(64, max, None)).unwrap();
        let mut want: Vec<(Vec<u32>, f64)> = Vec::new();
        let mut stack = vec![(Vec::<u32>::new(), 0.0f64)];
        while let Some((seq, sum)) = stack.pop() {
            let mut fed = vec![1000, 0];
            fed.extend(&seq);
            let lp = log_softmax(&toy_logits(seed, &fed, vocab));
            for t in 0..vocab as u32 {
                if t == banned || (t == 1 && seq.last() == Some(&space)) {
                    continue;
                }
                let mut next = seq.clone();
                next.push(t);
                let s = sum + lp[t as usize];
                if t == 1 || next.len() == max {
                    want.push((next, s));
                } else {
                    stack.push((next, s));
                }
            }
        }
        want.sort_by(|a, b| b.1.total_cmp(&a.1));
        let got = &out[0];
        assert_eq!(got.len(), want.len(), "seed {seed}");
        for (h, (seq, sum)) in got.iter().zip(&want) {
            assert_eq!(&h.tokens, seq, "seed {seed}");
            assert!((h.sum - sum).abs() < 1e-9, "seed {seed}");
        }
    }
    // Nothing to ban: every token, as unconstrained decoding.
    let mut none = BannedTokens::new(Vec::new(), Some(space), 1);
    let mut buf = Vec::new();
    assert_eq!(none.allowed(&Some(space), &mut buf).unwrap(), Allowed::Everything);
}

/// A [`ToyModel`] with a listed-logits step: after its first step, it hands out only the
/// listed tokens' logits (the same values), and records what each listed step was given.
struct Listing {
    toy: ToyModel,
    listed_out: Vec<f32>,
    /// Per listed step: tokens per row.
    widths: Vec<usize>,
    /// Listed ids past the end of a list (or a row without a beam) that were not 0.
    stray: usize,
}

impl StepModel for Listing {
    type Error = std::convert::Infallible;
    fn vocab_size(&self) -> usize {
        self.toy.vocab
    }
    fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error> {
        self.toy.step(tokens)
    }
    fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error> {
        self.toy.reorder(parents)
    }
    fn lists_logits(&self) -> bool {
        self.toy.calls > 0
    }
    fn step_listed(&mut self, tokens: &[u32], listed: &[u32], k: usize) -> Result<&[f32], Self::Error> {
        assert_eq!(listed.len(), tokens.len() * k, "k ids per row");
        self.widths.push(k);
        let vocab = self.toy.vocab;
        let full = self.toy.step(tokens)?.to_vec();
        self.listed_out.clear();
        for (r, ids) in listed.chunks(k).enumerate() {
            // Lists are ascending: padding is the first id not above its predecessor.
            let real = ids.windows(2).position(|w| w[1] <= w[0]).map_or(ids.len(), |p| p + 1);
            self.stray += ids[real..].iter().filter(|&&t| t != 0).count();
            self.listed_out.extend(ids.iter().map(|&t| full[r * vocab + t as usize]));
        }
        Ok(&self.listed_out)
    }
}

#[test]
fn a_listed_step_decodes_exactly_as_the_whole_vocabulary_step() {
    // Allowed normalization reads only the allowed tokens' logits: a model that computes
    // only those (listed ids per row, padded to a multiple of 16) must give the same
    // hypotheses with the same scores, bit for bit, as the full step, for several inputs
    // decoded together (rows without a beam included).
    let sets = [
        SetConstraint { strings: vec![vec![2, 3, 1], vec![2, 4, 1], vec![2, 4, 5, 1], vec![5, 1], vec![3, 3, 3, 1]] },
        SetConstraint { strings: vec![vec![4, 1], vec![4, 2, 1], vec![6, 6, 1], vec![7, 2, 3, 1]] },
        SetConstraint { strings: vec![vec![3, 1]] },
    ];
    for seed in 0..10 {
        for alpha in [None, Some(0.8)] {
            let mut c = cfg(3, 6, alpha);
            c.model_norm = ModelNorm::Allowed;
            let mut plain = ToyModel::new(sets.len(), 9, seed);
            let want = beam_search(&mut plain, &mut sets.clone(), &c).unwrap();
            let mut listing = Listing { toy: ToyModel::new(sets.len(), 9, seed), listed_out: Vec::new(), widths: Vec::new(), stray: 0 };
            let got = beam_search(&mut listing, &mut sets.clone(), &c).unwrap();
            assert_eq!(got, want, "seed {seed} alpha {alpha:?}");
            assert_eq!(listing.toy.calls, plain.calls, "the same number of steps");
            assert_eq!(listing.widths.len(), plain.calls - 1, "every step after the first listed");
            assert!(listing.widths.iter().all(|&k| k == LISTED_MULTIPLE), "{:?}", listing.widths);
            assert_eq!(listing.stray, 0, "padding and beamless rows list token 0");
        }
    }
    // Vocabulary normalization needs every logit: never a listed step.
    let mut c = cfg(3, 6, None);
    c.model_norm = ModelNorm::Vocabulary;
    let mut listing = Listing { toy: ToyModel::new(1, 9, 3), listed_out: Vec::new(), widths: Vec::new(), stray: 0 };
    let mut plain = ToyModel::new(1, 9, 3);
    assert_eq!(beam_search(&mut listing, &mut [sets[0].clone()], &c).unwrap(), beam_search(&mut plain, &mut [sets[0].clone()], &c).unwrap());
    assert!(listing.widths.is_empty());
}

#[test]
fn a_step_with_an_unlisted_allowed_set_reads_the_whole_vocabulary() {
    // A banned-token constraint allows everything but a few: its steps cannot be listed,
    // so they run on the whole vocabulary, with the same result as a model without listing.
    let ban = || BannedTokens::new(vec![2, 5], None, 1);
    let mut c = cfg(2, 4, None);
    c.model_norm = ModelNorm::Allowed;
    let mut listing = Listing { toy: ToyModel::new(1, 7, 11), listed_out: Vec::new(), widths: Vec::new(), stray: 0 };
    let mut plain = ToyModel::new(1, 7, 11);
    let got = beam_search(&mut listing, &mut [ban()], &c).unwrap();
    assert_eq!(got, beam_search(&mut plain, &mut [ban()], &c).unwrap());
    assert!(listing.widths.is_empty(), "{:?}", listing.widths);
    assert!(got[0].iter().all(|h| !h.tokens.contains(&2) && !h.tokens.contains(&5)));
}

#[test]
fn a_listed_step_of_the_wrong_length_is_an_error() {
    // A model whose listed step returns the whole vocabulary (the trait's default) is
    // refused by the shape check, never read out of place.
    struct Claims(ToyModel);
    impl StepModel for Claims {
        type Error = std::convert::Infallible;
        fn vocab_size(&self) -> usize {
            self.0.vocab
        }
        fn step(&mut self, tokens: &[u32]) -> Result<&[f32], Self::Error> {
            self.0.step(tokens)
        }
        fn reorder(&mut self, parents: &[usize]) -> Result<(), Self::Error> {
            self.0.reorder(parents)
        }
        fn lists_logits(&self) -> bool {
            self.0.calls > 0
        }
    }
    let set = SetConstraint { strings: vec![vec![2, 3, 1], vec![2, 4, 1]] };
    let mut c = cfg(2, 4, None);
    c.model_norm = ModelNorm::Allowed;
    match beam_search(&mut Claims(ToyModel::new(1, 40, 1)), &mut [set], &c) {
        Err(SearchError::LogitsShape { got, rows, vocab }) => assert_eq!((got, rows, vocab), (80, 2, LISTED_MULTIPLE)),
        other => panic!("{:?}", other.map(|_| ()).map_err(|e| e.to_string())),
    }
}
