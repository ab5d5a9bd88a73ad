//! log(sum(exp(row))) over a row of logits: the one piece of per-vocabulary work the beam
//! search does outside the model (with the vocabulary-wide softmax, every row of every step:
//! 32k values a row at the t5-small shape).
//!
//! One computation, three ways to run it: a max over 8 lanes, then `exp(x - max)` by range
//! reduction and a polynomial ([`exp_nonpositive`]), summed in 8 f32 lanes (lane `i` takes
//! the elements `i`, `i + 8`, ... of a block of 512 values; the block's tail goes to lane 0
//! in order) and the blocks' lane sums in f64. The portable code is that arithmetic written
//! out; on x86-64 the same lanes run as SSE2 (part of x86-64) or AVX2 (when the CPU has it)
//! instructions, operation for operation (IEEE add, sub, mul, max; no fused multiply-add),
//! so every path gives the same bits (tested). The compiler did not vectorize the portable
//! loop well: its float-to-int conversion for 2^n went lane by lane.

/// Values per block whose lane sums are added in f64.
const BLOCK: usize = 512;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
const ROUND: f32 = 12_582_912.0;
/// The bits of `ROUND`: `bits(x + ROUND) - ROUND_BITS` is that integer.
const ROUND_BITS: i32 = 0x4B40_0000;
const FLOOR: f32 = -87.0;
const C2: f32 = 0.5;
const C3: f32 = 1.0 / 6.0;
const C4: f32 = 1.0 / 24.0;
const C5: f32 = 1.0 / 120.0;
const C6: f32 = 1.0 / 720.0;

/// log(sum(exp(row))), or the index of a NaN. Against an f64 reference the result differs by
/// less than 1e-6 (tested).
pub(crate) fn log_sum_exp(row: &[f32]) -> Result<f64, usize> {
    let mut m = [f32::NEG_INFINITY; 8];
    let mut nan = false;
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            nan |= c[i].is_nan();
            m[i] = m[i].max(c[i]);
        }
    }
    for &x in tail {
        nan |= x.is_nan();
        m[0] = m[0].max(x);
    }
    if nan {
        return Err(row.iter().position(|x| x.is_nan()).unwrap_or(0));
    }
    let max = m.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max.is_infinite() {
        return Ok(max as f64);
    }
    Ok(max as f64 + sum_exp(row, max).ln())
}

/// sum(exp(x - max)) over a row without NaN whose maximum is `max` (finite).
fn sum_exp(row: &[f32], max: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { x86::sum_exp_avx2(row, max) };
        }
        x86::sum_exp_sse2(row, max)
    }
    #[cfg(not(target_arch = "x86_64"))]
    sum_exp_portable(row, max)
}

/// The arithmetic itself, lane by lane (run where there is no x86-64, and the reference the
/// vector paths are tested against).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn sum_exp_portable(row: &[f32], max: f32) -> f64 {
    let mut total = 0f64;
    for block in row.chunks(BLOCK) {
        let mut acc = [0f32; 8];
        let chunks = block.chunks_exact(8);
        let tail = chunks.remainder();
        for c in chunks {
            for i in 0..8 {
                acc[i] += exp_nonpositive(c[i] - max);
            }
        }
        total += finish_block(acc, tail, max);
    }
    total
}

/// A block's tail into lane 0, then the lanes summed in f64 (shared by every path).
#[inline(always)]
fn finish_block(mut acc: [f32; 8], tail: &[f32], max: f32) -> f64 {
    for &x in tail {
        acc[0] += exp_nonpositive(x - max);
    }
    acc.iter().map(|&a| a as f64).sum::<f64>()
}

/// e^x for x <= 0 (x - max of a row), without branches: x = n ln2 + r, |r| <= ln2 / 2,
/// e^r by a degree-6 polynomial (Taylor: truncation error below 3e-8 on that interval),
/// 2^n built in the exponent bits. Below -87 it returns a denormal-free tiny value, which
/// adds nothing a f32 sum can see.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    let x = x.max(FLOOR);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0 + r * (1.0 + r * (C2 + r * (C3 + r * (C4 + r * (C5 + r * C6)))));
    let scale = f32::from_bits(((t.to_bits() as i32 - ROUND_BITS + 127) << 23) as u32);
    p * scale
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// [`exp_nonpositive`] on 4 lanes, operation for operation.
    #[inline(always)]
    fn exp4(x: __m128) -> __m128 {
        // SAFETY (whole body): SSE2 is part of x86-64.
        unsafe {
            let x = _mm_max_ps(x, _mm_set1_ps(FLOOR));
            let t = _mm_add_ps(_mm_mul_ps(x, _mm_set1_ps(LOG2E)), _mm_set1_ps(ROUND));
            let n = _mm_sub_ps(t, _mm_set1_ps(ROUND));
            let r = _mm_sub_ps(_mm_sub_ps(x, _mm_mul_ps(n, _mm_set1_ps(LN2_HI))), _mm_mul_ps(n, _mm_set1_ps(LN2_LO)));
            let mut q = _mm_set1_ps(C6);
            for c in [C5, C4, C3, C2, 1.0, 1.0] {
                q = _mm_add_ps(_mm_set1_ps(c), _mm_mul_ps(r, q));
            }
            let e = _mm_add_epi32(_mm_sub_epi32(_mm_castps_si128(t), _mm_set1_epi32(ROUND_BITS)), _mm_set1_epi32(127));
            _mm_mul_ps(q, _mm_castsi128_ps(_mm_slli_epi32::<23>(e)))
        }
    }

    pub(super) fn sum_exp_sse2(row: &[f32], max: f32) -> f64 {
        let mut total = 0f64;
        for block in row.chunks(BLOCK) {
            let chunks = block.chunks_exact(8);
            let tail = chunks.remainder();
            let mut acc = [0f32; 8];
            // SAFETY: SSE2 is part of x86-64; every load reads 4 values inside a chunk of 8
            // and the store writes the 8 lanes of `acc`.
            unsafe {
                let m = _mm_set1_ps(max);
                let (mut lo, mut hi) = (_mm_setzero_ps(), _mm_setzero_ps());
                for c in chunks {
                    lo = _mm_add_ps(lo, exp4(_mm_sub_ps(_mm_loadu_ps(c.as_ptr()), m)));
                    hi = _mm_add_ps(hi, exp4(_mm_sub_ps(_mm_loadu_ps(c.as_ptr().add(4)), m)));
                }
                _mm_storeu_ps(acc.as_mut_ptr(), lo);
                _mm_storeu_ps(acc.as_mut_ptr().add(4), hi);
            }
            total += finish_block(acc, tail, max);
        }
        total
    }

    /// [`exp_nonpositive`] on 8 lanes, operation for operation.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn exp8(x: __m256) -> __m256 {
        let x = _mm256_max_ps(x, _mm256_set1_ps(FLOOR));
        let t = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _mm256_set1_ps(ROUND));
        let n = _mm256_sub_ps(t, _mm256_set1_ps(ROUND));
        let r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(LN2_HI))), _mm256_mul_ps(n, _mm256_set1_ps(LN2_LO)));
        let mut q = _mm256_set1_ps(C6);
        for c in [C5, C4, C3, C2, 1.0, 1.0] {
            q = _mm256_add_ps(_mm256_set1_ps(c), _mm256_mul_ps(r, q));
        }
        let e = _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(ROUND_BITS)), _mm256_set1_epi32(127));
        _mm256_mul_ps(q, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e)))
    }

    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_exp_avx2(row: &[f32], max: f32) -> f64 {
        let mut total = 0f64;
        for block in row.chunks(BLOCK) {
            let chunks = block.chunks_exact(8);
            let tail = chunks.remainder();
            let mut acc = [0f32; 8];
            let m = _mm256_set1_ps(max);
            let mut lanes = _mm256_setzero_ps();
            for c in chunks {
                // SAFETY: the load reads the chunk's 8 values.
                lanes = _mm256_add_ps(lanes, exp8(_mm256_sub_ps(unsafe { _mm256_loadu_ps(c.as_ptr()) }, m)));
            }
            // SAFETY: the store writes the 8 lanes of `acc`.
            unsafe { _mm256_storeu_ps(acc.as_mut_ptr(), lanes) };
            total += finish_block(acc, tail, max);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exact_lse(row: &[f32]) -> f64 {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        max + row.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln()
    }

    #[test]
    fn exp_is_accurate_over_its_range() {
        let mut x = 0.0f32;
        while x > -87.0 {
            let (got, want) = (exp_nonpositive(x) as f64, (x as f64).exp());
            assert!(((got - want) / want).abs() < 4e-7, "{x}: {got} vs {want}");
            x -= 0.0137;
        }
        assert!(exp_nonpositive(-1000.0) < 1e-37);
        assert!(exp_nonpositive(f32::NEG_INFINITY) < 1e-37);
    }

    #[test]
    fn nan_and_all_minus_infinity() {
        assert_eq!(log_sum_exp(&[1.0, f32::NAN, 2.0]), Err(1));
        assert_eq!(log_sum_exp(&[f32::NEG_INFINITY; 3]), Ok(f64::NEG_INFINITY));
        // -inf entries beside finite ones add nothing.
        let got = log_sum_exp(&[0.0, f32::NEG_INFINITY, 0.0]).unwrap();
        assert!((got - 2f64.ln()).abs() < 1e-7, "{got}");
    }

    /// The paths this machine can run, each against the portable arithmetic.
    fn every_path(row: &[f32], max: f32) -> Vec<(&'static str, f64)> {
        #[allow(unused_mut)]
        let mut out = vec![("portable", sum_exp_portable(row, max))];
        #[cfg(target_arch = "x86_64")]
        {
            out.push(("sse2", x86::sum_exp_sse2(row, max)));
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                out.push(("avx2", unsafe { x86::sum_exp_avx2(row, max) }));
            }
        }
        out
    }

    proptest! {
        #[test]
        fn log_sum_exp_matches_f64(row in proptest::collection::vec(-30.0f32..30.0, 1..40_000), scale in 0.01f32..10.0) {
            let row: Vec<f32> = row.iter().map(|x| x * scale).collect();
            let got = log_sum_exp(&row).unwrap();
            prop_assert!((got - exact_lse(&row)).abs() < 1e-6, "{} vs {}", got, exact_lse(&row));
        }

        /// Every path gives the portable arithmetic's bits: lengths across block and chunk
        /// boundaries, values far below the maximum (the floor) and -inf among them.
        #[test]
        fn every_path_gives_the_same_bits(row in proptest::collection::vec(prop_oneof![8 => -40.0f32..40.0, 1 => Just(f32::NEG_INFINITY), 1 => -200.0f32..-80.0], 1..2_100)) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            prop_assume!(max.is_finite());
            let paths = every_path(&row, max);
            for &(name, got) in &paths[1..] {
                prop_assert_eq!(got.to_bits(), paths[0].1.to_bits(), "{} differs from portable", name);
            }
        }
    }
}
