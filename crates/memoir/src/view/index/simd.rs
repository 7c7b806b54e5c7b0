//! Dot-product kernels for unit vectors (cosine = dot product).
//!
//! A portable kernel with 16 independent accumulators (LLVM turns it into
//! packed SSE/NEON code) and, on x86-64 CPUs that have them, an AVX2 + FMA
//! kernel selected once at run time. [`Kernel`] is the handle the indexes
//! hold: it can only be obtained through [`Kernel::detect`] (or
//! [`Kernel::portable`]), which is what makes calling the AVX2 code sound.

/// A selected dot-product implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    avx2: bool,
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Kernel { avx2: true };
            }
        }
        Kernel { avx2: false }
    }

    /// The portable kernel (for tests and comparison).
    pub fn portable() -> Self {
        Kernel { avx2: false }
    }

    /// Whether the AVX2 + FMA kernel is in use.
    pub fn is_avx2(&self) -> bool {
        self.avx2
    }

    /// Dot product of two slices of equal length (extra elements of the
    /// longer slice are ignored).
    #[inline]
    pub fn dot(&self, a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        {
            if self.avx2 {
                // SAFETY: `avx2` is true only when `Kernel::detect` saw the CPU
                // report both AVX2 and FMA, the features `dot_avx2` enables;
                // `a` and `b` have the same length.
                return unsafe { dot_avx2(a, b) };
            }
        }
        dot_portable(a, b)
    }

    /// `out[i] = dot(query, rows[i])` for the `dims`-wide rows of `matrix`.
    pub fn scores(&self, query: &[f32], matrix: &[f32], dims: usize, out: &mut Vec<f32>) {
        out.clear();
        if dims == 0 || query.len() != dims {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if self.avx2 {
                // SAFETY: as in `dot`: the features were detected at run time.
                unsafe { scores_avx2(query, matrix, dims, out) };
                return;
            }
        }
        out.extend(
            matrix
                .chunks_exact(dims)
                .map(|row| dot_portable(query, row)),
        );
    }
}

/// Hint the CPU to start loading the cache lines at `ptr` (the first
/// `lines` × 64 bytes). Never faults, whatever the address.
#[inline(always)]
pub fn prefetch(ptr: *const f32, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for i in 0..lines {
            let p = ptr.wrapping_add(i * 16) as *const i8;
            // SAFETY: a prefetch is only a hint; it performs no access that
            // can fault and has no effect on program state, for any address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (ptr, lines);
    }
}

/// Portable dot product: 16 accumulators so the compiler can keep several
/// vector registers busy without reassociating floating-point sums itself.
#[inline]
pub fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    let mut s = [0.0f32; 4];
    for i in 0..4 {
        s[i] = (acc[i] + acc[i + 4]) + (acc[i + 8] + acc[i + 12]);
    }
    (s[0] + s[1]) + (s[2] + s[3]) + tail
}

/// AVX2 + FMA dot product, four 8-lane accumulators (32 floats per step).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and `a.len() == b.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let pa = a.as_ptr();
    let pb = b.as_ptr();
    let mut acc0 = _mm256_setzero_ps();
    let mut acc1 = _mm256_setzero_ps();
    let mut acc2 = _mm256_setzero_ps();
    let mut acc3 = _mm256_setzero_ps();
    let mut i = 0;
    // SAFETY (all loads below): every offset read is < n, the length of both
    // slices; unaligned loads have no alignment requirement.
    while i + 32 <= n {
        unsafe {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i + 8)),
                _mm256_loadu_ps(pb.add(i + 8)),
                acc1,
            );
            acc2 = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i + 16)),
                _mm256_loadu_ps(pb.add(i + 16)),
                acc2,
            );
            acc3 = _mm256_fmadd_ps(
                _mm256_loadu_ps(pa.add(i + 24)),
                _mm256_loadu_ps(pb.add(i + 24)),
                acc3,
            );
        }
        i += 32;
    }
    while i + 8 <= n {
        unsafe {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
        }
        i += 8;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
    let hi = _mm256_extractf128_ps::<1>(sum);
    let lo = _mm256_castps256_ps128(sum);
    let s4 = _mm_add_ps(hi, lo);
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let s1 = _mm_add_ss(s2, _mm_shuffle_ps::<0b01>(s2, s2));
    let mut total = _mm_cvtss_f32(s1);
    while i < n {
        total += a[i] * b[i];
        i += 1;
    }
    total
}

/// AVX2 scoring of every row of a matrix (the exact-scan inner loop).
///
/// # Safety
/// The CPU must support AVX2 and FMA; `query.len() == dims`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scores_avx2(query: &[f32], matrix: &[f32], dims: usize, out: &mut Vec<f32>) {
    out.reserve(matrix.len() / dims);
    for row in matrix.chunks_exact(dims) {
        // SAFETY: same features; `row.len() == dims == query.len()`.
        out.push(unsafe { dot_avx2(query, row) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    fn naive(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
    }

    #[test]
    fn kernels_agree_with_a_naive_sum_for_every_length() {
        let mut seed = 7;
        let detected = Kernel::detect();
        for n in 0..200 {
            let a: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let want = naive(&a, &b);
            for k in [Kernel::portable(), detected] {
                let got = k.dot(&a, &b) as f64;
                assert!(
                    (got - want).abs() < 1e-4,
                    "n={n} avx2={} {got} vs {want}",
                    k.is_avx2()
                );
            }
        }
    }

    #[test]
    fn scores_match_dot_row_by_row() {
        let mut seed = 11;
        let dims = 37;
        let m: Vec<f32> = (0..dims * 9).map(|_| lcg(&mut seed)).collect();
        let q: Vec<f32> = (0..dims).map(|_| lcg(&mut seed)).collect();
        for k in [Kernel::portable(), Kernel::detect()] {
            let mut out = Vec::new();
            k.scores(&q, &m, dims, &mut out);
            assert_eq!(out.len(), 9);
            for (i, row) in m.chunks_exact(dims).enumerate() {
                assert!((out[i] - k.dot(&q, row)).abs() < 1e-6);
            }
        }
        let mut out = vec![1.0];
        Kernel::detect().scores(&q[..3], &m, dims, &mut out);
        assert!(out.is_empty(), "a wrong-width query scores nothing");
    }

    #[test]
    fn prefetch_is_harmless_for_any_address() {
        let v = vec![1.0f32; 64];
        prefetch(v.as_ptr(), 4);
        prefetch(std::ptr::null(), 2);
        prefetch(usize::MAX as *const f32, 2);
        assert_eq!(v.iter().sum::<f32>(), 64.0);
    }
}
