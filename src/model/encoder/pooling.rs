//! A bi-encoder's token vectors to one vector per input, as sentence-transformers'
//! `Pooling` and `Normalize` modules compute them (float32 there; summed in f64 here, then
//! rounded, so the order of the sum does not matter).

use super::config::Pooling;

/// One vector per row of `hidden` (`[rows, seq, width]`, row-major), over the tokens whose
/// `mask` (`[rows, seq]`) is 1. Mean: the sum over the masked tokens divided by their count
/// (at least 1e-9, as sentence-transformers clamps it); cls: token 0; max: the elementwise
/// maximum over the masked tokens (-1e9 when none, sentence-transformers' fill value).
pub fn pool(hidden: &[f32], mask: &[i64], rows: usize, seq: usize, width: usize, pooling: Pooling) -> Vec<Vec<f32>> {
    (0..rows)
        .map(|r| {
            let row = &hidden[r * seq * width..(r + 1) * seq * width];
            let m = &mask[r * seq..(r + 1) * seq];
            let token = |t: usize| &row[t * width..(t + 1) * width];
            match pooling {
                Pooling::Cls => token(0).to_vec(),
                Pooling::Mean => {
                    let mut sum = vec![0f64; width];
                    let mut count = 0f64;
                    for t in (0..seq).filter(|&t| m[t] != 0) {
                        count += 1.0;
                        for (s, &x) in sum.iter_mut().zip(token(t)) {
                            *s += f64::from(x);
                        }
                    }
                    let count = count.max(1e-9);
                    sum.into_iter().map(|s| (s / count) as f32).collect()
                }
                Pooling::Max => {
                    let mut out = vec![-1e9f32; width];
                    for t in (0..seq).filter(|&t| m[t] != 0) {
                        for (o, &x) in out.iter_mut().zip(token(t)) {
                            *o = o.max(x);
                        }
                    }
                    out
                }
            }
        })
        .collect()
}

/// Scales a vector to unit length (`torch.nn.functional.normalize`: divided by the norm,
/// at least 1e-12).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt().max(1e-12);
    for x in v.iter_mut() {
        *x = (f64::from(*x) / norm) as f32;
    }
}

/// The inner product, summed in f64.
pub fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two rows of three tokens, width 2; row 0 has its last token masked, row 1 all three.
    const HIDDEN: [f32; 12] = [1.0, 2.0, 3.0, -4.0, 100.0, 100.0, /* row 1 */ 0.5, 0.5, -1.0, 2.0, 4.0, -3.0];
    const MASK: [i64; 6] = [1, 1, 0, 1, 1, 1];

    #[test]
    fn mean_counts_only_masked_tokens() {
        // Row 0: ((1 + 3) / 2, (2 - 4) / 2); the padded (100, 100) is left out.
        // Row 1: ((0.5 - 1 + 4) / 3, (0.5 + 2 - 3) / 3).
        let got = pool(&HIDDEN, &MASK, 2, 3, 2, Pooling::Mean);
        assert_eq!(got, vec![vec![2.0, -1.0], vec![3.5f32 / 3.0, -0.5f32 / 3.0]]);
    }

    #[test]
    fn cls_is_the_first_token_and_max_skips_padding() {
        assert_eq!(pool(&HIDDEN, &MASK, 2, 3, 2, Pooling::Cls), vec![vec![1.0, 2.0], vec![0.5, 0.5]]);
        assert_eq!(pool(&HIDDEN, &MASK, 2, 3, 2, Pooling::Max), vec![vec![3.0, 2.0], vec![4.0, 2.0]]);
    }

    #[test]
    fn a_row_without_tokens_pools_to_the_reference_fill() {
        let got = pool(&[7.0, 7.0], &[0], 1, 1, 2, Pooling::Mean);
        assert_eq!(got, vec![vec![0.0, 0.0]]);
        assert_eq!(pool(&[7.0, 7.0], &[0], 1, 1, 2, Pooling::Max), vec![vec![-1e9, -1e9]]);
    }

    #[test]
    fn normalize_gives_unit_length_and_keeps_zero() {
        let mut v = [3.0f32, 4.0];
        normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut z = [0.0f32, 0.0];
        normalize(&mut z);
        assert_eq!(z, [0.0, 0.0]);
        assert_eq!(dot(&[0.6, 0.8], &[0.6, 0.8]), f64::from(0.6f32) * f64::from(0.6f32) + f64::from(0.8f32) * f64::from(0.8f32));
    }
}
