//! Seeded sampling with transformers' warpers, in its order: temperature, then top-k, then
//! top-p (`TemperatureLogitsWarper`, `TopKLogitsWarper`, `TopPLogitsWarper`, each keeping at
//! least one token), then a draw from the softmax of what is left.
//!
//! - temperature: every logit divided by it (in f32, as transformers does in float32);
//! - top-k (`top_k > 0`): the tokens scoring below the k-th best score are removed (ties
//!   with the k-th are kept, so more than k tokens may stay);
//! - top-p (`top_p < 1`): the tokens sorted by ascending score (equal scores: lower id
//!   first; torch's sort leaves their order open), probabilities the softmax of the scores
//!   left; a token is removed when the cumulative probability up to and including it is
//!   `<= 1 - top_p`; the best token always stays;
//! - the draw: `u` uniform in [0, 1) from the request's generator, the first token in
//!   ascending id order whose cumulative probability exceeds `u` (probabilities in f64).
//!
//! The random numbers are this module's own (splitmix64, one draw per generated token), not
//! torch's: the same seed gives the same tokens here on every run, every thread count and
//! every batch composition, but not the tokens torch's `multinomial` would draw.

/// How to sample (transformers' defaults: temperature 1, top-k 50, top-p 1).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sampling {
    /// > 0.
    pub temperature: f64,
    /// 0: no top-k filtering.
    pub top_k: usize,
    /// In (0, 1]; 1: no top-p filtering.
    pub top_p: f64,
    /// The seed of a request that brings none of its own.
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling { temperature: 1.0, top_k: 50, top_p: 1.0, seed: 0 }
    }
}

/// splitmix64 (Steele, Lea, Flood 2014): 64 bits of state, one multiply-xorshift output per
/// call; every seed is a good one.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The warped scores of one row: temperature, top-k, top-p applied; removed tokens are
/// `-inf`. `scores` is overwritten; `order` is scratch space.
pub fn warp(logits: &[f32], cfg: &Sampling, scores: &mut Vec<f32>, order: &mut Vec<u32>) {
    scores.clear();
    if cfg.temperature == 1.0 {
        scores.extend_from_slice(logits);
    } else {
        let t = cfg.temperature as f32;
        scores.extend(logits.iter().map(|&x| x / t));
    }
    let v = scores.len();
    if cfg.top_k > 0 && cfg.top_k < v {
        let mut sorted = scores.clone();
        let (_, kth, _) = sorted.select_nth_unstable_by(cfg.top_k - 1, |a, b| b.total_cmp(a));
        let threshold = *kth;
        for s in scores.iter_mut() {
            if *s < threshold {
                *s = f32::NEG_INFINITY;
            }
        }
    }
    if cfg.top_p < 1.0 {
        order.clear();
        order.extend((0..v as u32).filter(|&i| scores[i as usize] > f32::NEG_INFINITY));
        order.sort_by(|&a, &b| scores[a as usize].total_cmp(&scores[b as usize]).then(a.cmp(&b)));
        if let Some(&best) = order.last() {
            let max = f64::from(scores[best as usize]);
            let total: f64 = order.iter().map(|&i| (f64::from(scores[i as usize]) - max).exp()).sum();
            let mut cum = 0.0;
            let limit = 1.0 - cfg.top_p;
            for &i in &order[..order.len() - 1] {
                cum += (f64::from(scores[i as usize]) - max).exp() / total;
                if cum <= limit {
                    scores[i as usize] = f32::NEG_INFINITY;
                } else {
                    break;
                }
            }
        }
    }
}

/// Draws a token from warped scores (at least one finite), with `u` uniform in [0, 1).
pub fn draw(scores: &[f32], u: f64) -> Option<u32> {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return None;
    }
    let max = f64::from(max);
    let weight = |s: f32| if s == f32::NEG_INFINITY { 0.0 } else { (f64::from(s) - max).exp() };
    let total: f64 = scores.iter().map(|&s| weight(s)).sum();
    let target = u * total;
    let mut cum = 0.0;
    let mut last = None;
    for (i, &s) in scores.iter().enumerate() {
        let w = weight(s);
        if w == 0.0 {
            continue;
        }
        cum += w;
        last = Some(i as u32);
        if cum > target {
            return last;
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The kept set by the definitions, token by token (quadratic).
    fn brute_force(logits: &[f32], cfg: &Sampling) -> Vec<bool> {
        let v = logits.len();
        let s: Vec<f32> = logits.iter().map(|&x| if cfg.temperature == 1.0 { x } else { x / cfg.temperature as f32 }).collect();
        // top-k: fewer than k tokens score strictly higher.
        let mut keep: Vec<bool> = (0..v).map(|i| cfg.top_k == 0 || cfg.top_k >= v || s.iter().filter(|&&y| y > s[i]).count() < cfg.top_k).collect();
        if cfg.top_p < 1.0 {
            let before = |j: usize, i: usize| s[j] < s[i] || (s[j] == s[i] && j < i);
            let max = (0..v).filter(|&i| keep[i]).map(|i| f64::from(s[i])).fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = (0..v).filter(|&i| keep[i]).map(|i| (f64::from(s[i]) - max).exp()).sum();
            let best = (0..v).filter(|&i| keep[i]).max_by(|&a, &b| s[a].total_cmp(&s[b]).then(a.cmp(&b))).unwrap();
            let kept_before = keep.clone();
            for i in 0..v {
                if !kept_before[i] || i == best {
                    continue;
                }
                let cum: f64 = (0..v).filter(|&j| kept_before[j] && (j == i || before(j, i))).map(|j| (f64::from(s[j]) - max).exp() / total).sum();
                if cum <= 1.0 - cfg.top_p {
                    keep[i] = false;
                }
            }
        }
        keep
    }

    fn kept(logits: &[f32], cfg: &Sampling) -> Vec<bool> {
        let (mut scores, mut order) = (Vec::new(), Vec::new());
        warp(logits, cfg, &mut scores, &mut order);
        scores.iter().map(|&x| x > f32::NEG_INFINITY).collect()
    }

    #[test]
    fn hand_worked_filters() {
        let logits = [1.0f32, 3.0, 2.0, 3.0, 0.0];
        let cfg = |top_k, top_p| Sampling { temperature: 1.0, top_k, top_p, seed: 0 };
        assert_eq!(kept(&logits, &cfg(1, 1.0)), [false, true, false, true, false], "ties with the k-th stay");
        assert_eq!(kept(&logits, &cfg(3, 1.0)), [false, true, true, true, false]);
        assert_eq!(kept(&logits, &cfg(0, 1.0)), [true; 5]);
        // Probabilities of [1, 3, 2, 3, 0]: e^x / 51.28: 0.0530, 0.3917, 0.1441, 0.3917, 0.0195.
        // Cumulative, ascending: 4 (0.0195), 0 (0.0725), 2 (0.2166), 1 (0.6083), 3 (1.0).
        assert_eq!(kept(&logits, &cfg(0, 0.9)), [false, true, true, true, false], "cum 0.0725 <= 0.1 goes, 0.2166 stays");
        assert_eq!(kept(&logits, &cfg(0, 0.7)), [false, true, false, true, false], "cum 0.2166 <= 0.3 goes, 0.6083 stays");
        assert_eq!(kept(&logits, &cfg(0, 0.2)), [false, false, false, true, false], "the best always stays; of equal scores the lower id goes first");
        // Temperature 0.5 doubles the gaps before top-p sees them.
        let t = Sampling { temperature: 0.5, top_k: 0, top_p: 0.9, seed: 0 };
        assert_eq!(kept(&logits, &t), [false, true, false, true, false]);
    }

    #[test]
    fn the_draw_follows_the_cumulative_probabilities() {
        let s = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0];
        assert_eq!(draw(&s, 0.0), Some(1));
        assert_eq!(draw(&s, 0.49), Some(1));
        assert_eq!(draw(&s, 0.51), Some(3));
        assert_eq!(draw(&s, 0.999_999), Some(3));
        assert_eq!(draw(&[f32::NEG_INFINITY; 3], 0.5), None);
        let mut rng = SplitMix64::new(7);
        let mut counts = [0u32; 4];
        let s = [0.0f32, (2.0f32).ln(), f32::NEG_INFINITY, 0.0];
        for _ in 0..40_000 {
            counts[draw(&s, rng.next_f64()).unwrap() as usize] += 1;
        }
        assert_eq!(counts[2], 0);
        assert!((counts[1] as f64 / 40_000.0 - 0.5).abs() < 0.02, "{counts:?}");
    }

    #[test]
    fn splitmix_is_the_reference_sequence() {
        // The first outputs of splitmix64 from seed 0 (Vigna's reference implementation).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let x = SplitMix64::new(1).next_f64();
        assert!((0.0..1.0).contains(&x));
    }

    proptest! {
        #[test]
        fn filters_match_brute_force(
            logits in proptest::collection::vec(-4i8..4, 1..40),
            top_k in 0usize..12,
            top_p in prop_oneof![Just(1.0f64), 0.05f64..1.0],
            temperature in prop_oneof![Just(1.0f64), 0.3f64..3.0],
        ) {
            // Small integers: many ties, the hard case for both filters.
            let logits: Vec<f32> = logits.iter().map(|&x| f32::from(x) * 0.5).collect();
            let cfg = Sampling { temperature, top_k, top_p, seed: 0 };
            prop_assert_eq!(kept(&logits, &cfg), brute_force(&logits, &cfg));
        }
    }
}
