//! log(sum(exp(row))) over a row of logits: the one piece of per-vocabulary work the beam
//! search does outside the model (with the vocabulary-wide softmax, every row of every step:
//! 32k values a row at the t5-small shape).
//!
//! One computation, three ways to run it: a max, then `exp(x - max)` by range reduction and
//! a polynomial with fused multiply-adds ([`exp_nonpositive`]), summed in 16 f32 lanes (lane
//! `i` takes the elements `i`, `i + 16`, ... of a block of 512 values; the block's tail goes
//! to lane 0 in order) and the blocks' lane sums in f64. The portable code is that arithmetic
//! written out (`mul_add` is one rounding, as the instruction); on x86-64 the same lanes run
//! as AVX-512 (one register of 16) or AVX2 with FMA (two of 8), operation for operation, so
//! every path gives the same bits (tested). The fused multiply-adds make the exponential 16
//! vector operations where separate multiplies and adds took 27; a CPU without FMA (x86-64
//! before 2013) runs the portable code, whose `mul_add` is then a library call: right, slow.

/// Values per block whose lane sums are added in f64.
const BLOCK: usize = 512;
/// Lanes of the sum.
const LANES: usize = 16;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits.
const ROUND: f32 = 12_582_912.0;
/// `bits(x + ROUND) + EXP_BIAS` is that integer plus the exponent bias, 127.
const EXP_BIAS: i32 = 127 - 0x4B40_0000;
const FLOOR: f32 = -87.0;
const C2: f32 = 0.5;
const C3: f32 = 1.0 / 6.0;
const C4: f32 = 1.0 / 24.0;
const C5: f32 = 1.0 / 120.0;
const C6: f32 = 1.0 / 720.0;
/// The polynomial's coefficients after the leading `C6`, for Horner's rule.
const HORNER: [f32; 6] = [C5, C4, C3, C2, 1.0, 1.0];

/// log(sum(exp(row))), or the index of a NaN. Against an f64 reference the result differs by
/// less than 1e-6 (tested).
pub(crate) fn log_sum_exp(row: &[f32]) -> Result<f64, usize> {
    let max = max_of(row).ok_or_else(|| row.iter().position(|x| x.is_nan()).unwrap_or(0))?;
    if max.is_infinite() {
        return Ok(max as f64);
    }
    Ok(max as f64 + sum_exp(row, max).ln())
}

/// The row's maximum (-inf when empty), or `None` when a value is NaN. A max is exact in any
/// order, so the paths agree without keeping one.
fn max_of(row: &[f32]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { x86::max_avx512(row) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { x86::max_avx2(row) };
        }
    }
    max_portable(row)
}

fn max_portable(row: &[f32]) -> Option<f32> {
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
    finish_max(m.iter().copied().fold(f32::NEG_INFINITY, f32::max), nan, tail)
}

/// The tail into a vector path's max (shared by every path).
#[inline(always)]
fn finish_max(mut max: f32, mut nan: bool, tail: &[f32]) -> Option<f32> {
    for &x in tail {
        nan |= x.is_nan();
        max = max.max(x);
    }
    (!nan).then_some(max)
}

/// sum(exp(x - max)) over a row without NaN whose maximum is `max` (finite).
fn sum_exp(row: &[f32], max: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked just above).
            return unsafe { x86::sum_exp_avx512(row, max) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { x86::sum_exp_avx2(row, max) };
        }
    }
    sum_exp_portable(row, max)
}

/// The arithmetic itself, lane by lane (run where there is no vector path, and the
/// reference the vector paths are tested against).
fn sum_exp_portable(row: &[f32], max: f32) -> f64 {
    let mut total = 0f64;
    for block in row.chunks(BLOCK) {
        let mut acc = [0f32; LANES];
        let chunks = block.chunks_exact(LANES);
        let tail = chunks.remainder();
        for c in chunks {
            for i in 0..LANES {
                acc[i] += exp_nonpositive(c[i] - max);
            }
        }
        total += finish_block(acc, tail, max);
    }
    total
}

/// A block's tail into lane 0, then the lanes summed in f64 (shared by every path).
#[inline(always)]
fn finish_block(mut acc: [f32; LANES], tail: &[f32], max: f32) -> f64 {
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
fn exp_nonpositive(x: f32) -> f32 {
    let x = x.max(FLOOR);
    let t = x.mul_add(LOG2E, ROUND);
    let n = t - ROUND;
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    let mut p = C6;
    for c in HORNER {
        p = p.mul_add(r, c);
    }
    let scale = f32::from_bits(((t.to_bits() as i32).wrapping_add(EXP_BIAS) << 23) as u32);
    p * scale
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// [`exp_nonpositive`] on 8 lanes, operation for operation.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp8(x: __m256) -> __m256 {
        let x = _mm256_max_ps(x, _mm256_set1_ps(FLOOR));
        let t = _mm256_fmadd_ps(x, _mm256_set1_ps(LOG2E), _mm256_set1_ps(ROUND));
        let n = _mm256_sub_ps(t, _mm256_set1_ps(ROUND));
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(C6);
        for c in HORNER {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let e = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(EXP_BIAS));
        _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e)))
    }

    /// The 16 lanes as two registers: `lo` takes each chunk's first 8 values, `hi` the rest.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn sum_exp_avx2(row: &[f32], max: f32) -> f64 {
        let mut total = 0f64;
        for block in row.chunks(BLOCK) {
            let chunks = block.chunks_exact(LANES);
            let tail = chunks.remainder();
            let mut acc = [0f32; LANES];
            let m = _mm256_set1_ps(max);
            let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for c in chunks {
                // SAFETY: the loads read the chunk's 16 values, 8 at a time.
                let (a, b) = unsafe { (_mm256_loadu_ps(c.as_ptr()), _mm256_loadu_ps(c.as_ptr().add(8))) };
                lo = _mm256_add_ps(lo, exp8(_mm256_sub_ps(a, m)));
                hi = _mm256_add_ps(hi, exp8(_mm256_sub_ps(b, m)));
            }
            // SAFETY: the stores write the 16 lanes of `acc`, 8 at a time.
            unsafe {
                _mm256_storeu_ps(acc.as_mut_ptr(), lo);
                _mm256_storeu_ps(acc.as_mut_ptr().add(8), hi);
            }
            total += finish_block(acc, tail, max);
        }
        total
    }

    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn max_avx2(row: &[f32]) -> Option<f32> {
        let chunks = row.chunks_exact(8);
        let tail = chunks.remainder();
        let (mut m, mut nan) = (_mm256_set1_ps(f32::NEG_INFINITY), _mm256_setzero_ps());
        for c in chunks {
            // SAFETY: the load reads the chunk's 8 values.
            let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
            nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            m = _mm256_max_ps(m, v);
        }
        let mut lanes = [0f32; 8];
        // SAFETY: the store writes the 8 lanes of `lanes`.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
        finish_max(lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max), _mm256_movemask_ps(nan) != 0, tail)
    }

    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn max_avx512(row: &[f32]) -> Option<f32> {
        let chunks = row.chunks_exact(LANES);
        let tail = chunks.remainder();
        let (mut m, mut nan) = (_mm512_set1_ps(f32::NEG_INFINITY), 0u16);
        for c in chunks {
            // SAFETY: the load reads the chunk's 16 values.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            m = _mm512_max_ps(m, v);
        }
        finish_max(_mm512_reduce_max_ps(m), nan != 0, tail)
    }

    /// [`exp_nonpositive`] on 16 lanes, operation for operation.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn exp16(x: __m512) -> __m512 {
        let x = _mm512_max_ps(x, _mm512_set1_ps(FLOOR));
        let t = _mm512_fmadd_ps(x, _mm512_set1_ps(LOG2E), _mm512_set1_ps(ROUND));
        let n = _mm512_sub_ps(t, _mm512_set1_ps(ROUND));
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let mut p = _mm512_set1_ps(C6);
        for c in HORNER {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        let e = _mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(EXP_BIAS));
        _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32::<23>(e)))
    }

    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sum_exp_avx512(row: &[f32], max: f32) -> f64 {
        let mut total = 0f64;
        for block in row.chunks(BLOCK) {
            let chunks = block.chunks_exact(LANES);
            let tail = chunks.remainder();
            let mut acc = [0f32; LANES];
            let m = _mm512_set1_ps(max);
            let mut lanes = _mm512_setzero_ps();
            for c in chunks {
                // SAFETY: the load reads the chunk's 16 values.
                lanes = _mm512_add_ps(lanes, exp16(_mm512_sub_ps(unsafe { _mm512_loadu_ps(c.as_ptr()) }, m)));
            }
            // SAFETY: the store writes the 16 lanes of `acc`.
            unsafe { _mm512_storeu_ps(acc.as_mut_ptr(), lanes) };
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
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: the CPU has AVX2 and FMA (checked just above).
                out.push(("avx2", unsafe { x86::sum_exp_avx2(row, max) }));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F (checked just above).
                out.push(("avx512", unsafe { x86::sum_exp_avx512(row, max) }));
            }
        }
        out
    }

    /// The max of every path this machine can run.
    fn every_max(row: &[f32]) -> Vec<(&'static str, Option<f32>)> {
        #[allow(unused_mut)]
        let mut out = vec![("portable", max_portable(row))];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                out.push(("avx2", unsafe { x86::max_avx2(row) }));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F (checked just above).
                out.push(("avx512", unsafe { x86::max_avx512(row) }));
            }
        }
        out
    }

    proptest! {
        /// Every path finds the same maximum, and a NaN anywhere (in a vector chunk or the
        /// tail) is reported with its index.
        #[test]
        fn every_path_finds_the_max_and_the_nan(row in proptest::collection::vec(prop_oneof![8 => -40.0f32..40.0, 1 => Just(f32::NEG_INFINITY)], 0..200), nan_at in proptest::option::of(0usize..200)) {
            let mut row = row;
            let want = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let nan_at = nan_at.filter(|&i| i < row.len());
            if let Some(i) = nan_at {
                row[i] = f32::NAN;
            }
            for (name, got) in every_max(&row) {
                prop_assert_eq!(got, nan_at.is_none().then_some(want), "{}", name);
            }
            if let Some(i) = nan_at {
                prop_assert_eq!(log_sum_exp(&row), Err(i));
            }
        }

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
