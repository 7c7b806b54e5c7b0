//! Dot-product kernels for unit vectors (cosine = dot product).
//!
//! A portable kernel with 16 independent accumulators (LLVM turns it into
//! packed SSE/NEON code) and, on x86-64 CPUs that have them, an AVX2 + FMA
//! kernel and an AVX-512 (F + BW) kernel, the widest selected once at run
//! time. Each level also has an integer kernel for int8 codes
//! ([`Kernel::dot_i8`], the quantised graph walk of `quant.rs`).
//! [`Kernel`] is the handle the indexes hold: it can only be obtained through
//! [`Kernel::detect`] (or the narrower constructors, which also check the
//! CPU), which is what makes calling the vector code sound.

/// The instruction sets a [`Kernel`] can use, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KernelLevel {
    /// Plain Rust (auto-vectorised by the compiler).
    Portable,
    /// AVX2 + FMA, 8 lanes.
    Avx2,
    /// AVX-512F (16 f32 lanes) with AVX-512BW (32 i16 lanes for int8 codes).
    Avx512,
}

/// Work for [`Kernel::compiled_for`]. Implementations mark `run`
/// `#[inline(always)]` (a closure would not do: the compiler need not
/// inline it, and then its loops keep the baseline instruction set).
pub trait VectorWork {
    /// What the work returns.
    type Output;
    /// Does the work.
    fn run(self) -> Self::Output;
}

/// A selected dot-product implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    level: KernelLevel,
}

#[cfg(target_arch = "x86_64")]
fn cpu_has(level: KernelLevel) -> bool {
    match level {
        KernelLevel::Portable => true,
        KernelLevel::Avx2 => {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        KernelLevel::Avx512 => {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_has(level: KernelLevel) -> bool {
    level == KernelLevel::Portable
}

impl Kernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        for level in [KernelLevel::Avx512, KernelLevel::Avx2] {
            if cpu_has(level) {
                return Kernel { level };
            }
        }
        Kernel::portable()
    }

    /// The portable kernel (for tests and comparison).
    pub fn portable() -> Self {
        Kernel {
            level: KernelLevel::Portable,
        }
    }

    /// The kernel of exactly `level`, when this CPU supports it (for tests
    /// and benchmarks that compare kernels).
    pub fn with_level(level: KernelLevel) -> Option<Self> {
        cpu_has(level).then_some(Kernel { level })
    }

    /// The instruction set in use.
    pub fn level(&self) -> KernelLevel {
        self.level
    }

    /// Whether a vector kernel (AVX2 + FMA or wider) is in use.
    pub fn is_avx2(&self) -> bool {
        self.level >= KernelLevel::Avx2
    }

    /// A short name of the kernel in use (`avx512`, `avx2+fma`, `portable`).
    pub fn name(&self) -> &'static str {
        match self.level {
            KernelLevel::Portable => "portable",
            KernelLevel::Avx2 => "avx2+fma",
            KernelLevel::Avx512 => "avx512",
        }
    }

    /// Runs `work` compiled for this kernel's instruction set: its
    /// `#[inline(always)]` [`VectorWork::run`] is inlined into a function
    /// with the level's target features, so its loops are vectorised for
    /// AVX-512 or AVX2 + FMA instead of the baseline SSE2 of a default
    /// x86-64 build. For element-wise code (the MiniLM forward's fused
    /// steps) whose result does not depend on the level beyond rounding.
    #[inline(always)]
    pub fn compiled_for<W: VectorWork>(&self, work: W) -> W::Output {
        #[cfg(target_arch = "x86_64")]
        {
            match self.level {
                // SAFETY: a `Kernel` holds `Avx512` only when `cpu_has` saw
                // the CPU report AVX-512F and AVX-512BW, the features
                // `run_avx512` enables (AVX-512F implies AVX2 and FMA).
                KernelLevel::Avx512 => return unsafe { run_avx512(work) },
                // SAFETY: `Avx2` only when the CPU reported AVX2 and FMA, the
                // features `run_avx2` enables.
                KernelLevel::Avx2 => return unsafe { run_avx2(work) },
                _ => {}
            }
        }
        work.run()
    }

    /// Dot product of two slices of equal length (extra elements of the
    /// longer slice are ignored).
    #[inline]
    pub fn dot(&self, a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        {
            match self.level {
                // SAFETY: a `Kernel` holds `Avx512` only when `cpu_has` saw
                // the CPU report AVX-512F, the feature `dot_avx512` enables;
                // `a` and `b` have the same length.
                KernelLevel::Avx512 => return unsafe { dot_avx512(a, b) },
                // SAFETY: `Avx2` only when the CPU reported AVX2 and FMA, the
                // features `dot_avx2` enables; equal lengths as above.
                KernelLevel::Avx2 => return unsafe { dot_avx2(a, b) },
                KernelLevel::Portable => {}
            }
        }
        dot_portable(a, b)
    }

    /// Integer dot product of two int8 codes of equal length (extra
    /// elements of the longer slice are ignored). Exact: every product and
    /// sum is in `i32` range for codes up to 65,000 elements long.
    #[inline]
    pub fn dot_i8(&self, a: &[i8], b: &[i8]) -> i32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        {
            match self.level {
                // SAFETY: a `Kernel` holds `Avx512` only when `cpu_has` saw
                // AVX-512F and AVX-512BW, the features `dot_i8_avx512`
                // enables; `a` and `b` have the same length.
                KernelLevel::Avx512 => return unsafe { dot_i8_avx512(a, b) },
                // SAFETY: `Avx2` only when the CPU reported AVX2 (and FMA),
                // the feature `dot_i8_avx2` enables; equal lengths as above.
                KernelLevel::Avx2 => return unsafe { dot_i8_avx2(a, b) },
                KernelLevel::Portable => {}
            }
        }
        dot_i8_portable(a, b)
    }

    /// `out[i] = dot(query, rows[i])` for the `dims`-wide rows of `matrix`.
    pub fn scores(&self, query: &[f32], matrix: &[f32], dims: usize, out: &mut Vec<f32>) {
        out.clear();
        if dims == 0 || query.len() != dims {
            return;
        }
        out.reserve(matrix.len() / dims);
        #[cfg(target_arch = "x86_64")]
        {
            match self.level {
                KernelLevel::Avx512 => {
                    // SAFETY: as in `dot`: AVX-512F was detected at run time.
                    unsafe { scores_avx512(query, matrix, dims, out) };
                    return;
                }
                KernelLevel::Avx2 => {
                    // SAFETY: as in `dot`: AVX2 and FMA were detected at run time.
                    unsafe { scores_avx2(query, matrix, dims, out) };
                    return;
                }
                KernelLevel::Portable => {}
            }
        }
        out.extend(
            matrix
                .chunks_exact(dims)
                .map(|row| dot_portable(query, row)),
        );
    }
}

/// Measured peak f32 multiply-add rate of one thread with `level`'s
/// instructions, in GFLOP/s (2 FLOPs per lane per FMA): `rounds` × 1,024
/// dependent-free FMAs over 16 registers, no memory traffic. The FLOP bound
/// the embedding benchmark compares MiniLM with. `None` when the CPU lacks
/// the level; the portable level measures plain (auto-vectorised) code.
pub fn fma_peak_gflops(level: KernelLevel, rounds: u32) -> Option<f64> {
    let kernel = Kernel::with_level(level)?;
    let start = std::time::Instant::now();
    let (sum, flops) = match kernel.level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `with_level` returned a kernel only because the CPU has
        // AVX-512F, the feature `fma_loop_avx512` enables.
        KernelLevel::Avx512 => (unsafe { fma_loop_avx512(rounds) }, 16.0),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2 + FMA and `fma_loop_avx2`.
        KernelLevel::Avx2 => (unsafe { fma_loop_avx2(rounds) }, 8.0),
        _ => (fma_loop_portable(rounds), 1.0),
    };
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    // 16 accumulators × 64 steps per 1,024-FMA block, `flops` lanes, 2 FLOPs.
    let total = rounds as f64 * 1024.0 * flops * 2.0;
    Some(total / secs.max(1e-9) / 1e9)
}

fn fma_loop_portable(rounds: u32) -> f32 {
    let mut acc = [1.0f32; 16];
    let (x, y) = (
        std::hint::black_box(0.999_999f32),
        std::hint::black_box(1e-7f32),
    );
    for _ in 0..rounds {
        for _ in 0..64 {
            for a in acc.iter_mut() {
                *a = a.mul_add(x, y);
            }
        }
    }
    acc.iter().sum()
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_loop_avx2(rounds: u32) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm256_set1_ps(std::hint::black_box(0.999_999));
    let y = _mm256_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm256_set1_ps(1.0); 16];
    for _ in 0..rounds {
        for _ in 0..64 {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
    }
    let mut s = _mm256_setzero_ps();
    for a in acc {
        s = _mm256_add_ps(s, a);
    }
    _mm256_cvtss_f32(s)
}

/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_loop_avx512(rounds: u32) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm512_set1_ps(std::hint::black_box(0.999_999));
    let y = _mm512_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm512_set1_ps(1.0); 16];
    for _ in 0..rounds {
        for _ in 0..64 {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
    }
    let mut s = _mm512_setzero_ps();
    for a in acc {
        s = _mm512_add_ps(s, a);
    }
    _mm512_reduce_add_ps(s)
}

/// # Safety
/// The CPU must support AVX-512F and AVX-512BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn run_avx512<W: VectorWork>(work: W) -> W::Output {
    work.run()
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn run_avx2<W: VectorWork>(work: W) -> W::Output {
    work.run()
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

/// Portable int8 dot product (the compiler widens and vectorises it).
#[inline]
pub fn dot_i8_portable(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let tail: i32 = ra
        .iter()
        .zip(rb)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    acc.iter().sum::<i32>() + tail
}

/// AVX2 int8 dot product: 16 codes per step, sign-extended to `i16` and
/// multiplied pairwise into `i32` lanes (`vpmaddwd`).
///
/// # Safety
/// The CPU must support AVX2, and `a.len() == b.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_i8_avx2(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let pa = a.as_ptr();
    let pb = b.as_ptr();
    let mut acc0 = _mm256_setzero_si256();
    let mut acc1 = _mm256_setzero_si256();
    let mut i = 0;
    // SAFETY (all loads below): each reads 16 bytes at offsets i..i+16 with
    // i + 16 <= n, inside both slices; unaligned loads need no alignment.
    while i + 32 <= n {
        unsafe {
            let x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(pa.add(i) as *const __m128i));
            let y0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(pb.add(i) as *const __m128i));
            let x1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(pa.add(i + 16) as *const __m128i));
            let y1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(pb.add(i + 16) as *const __m128i));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(x0, y0));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(x1, y1));
        }
        i += 32;
    }
    while i + 16 <= n {
        unsafe {
            let x = _mm256_cvtepi8_epi16(_mm_loadu_si128(pa.add(i) as *const __m128i));
            let y = _mm256_cvtepi8_epi16(_mm_loadu_si128(pb.add(i) as *const __m128i));
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(x, y));
        }
        i += 16;
    }
    let sum = _mm256_add_epi32(acc0, acc1);
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` is 32 writable bytes; unaligned stores need no alignment.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, sum) };
    lanes.iter().sum::<i32>() + dot_i8_portable(&a[i..], &b[i..])
}

/// AVX-512BW int8 dot product: 64 codes per step in two 32-code halves,
/// sign-extended to `i16` and multiplied pairwise into `i32` lanes.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW, and `a.len() == b.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn dot_i8_avx512(a: &[i8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let pa = a.as_ptr();
    let pb = b.as_ptr();
    let mut acc0 = _mm512_setzero_si512();
    let mut acc1 = _mm512_setzero_si512();
    let mut i = 0;
    // SAFETY (all loads below): each reads 32 bytes at offsets i..i+32 with
    // i + 32 <= n, inside both slices; unaligned loads need no alignment.
    while i + 64 <= n {
        unsafe {
            let x0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pa.add(i) as *const __m256i));
            let y0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pb.add(i) as *const __m256i));
            let x1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pa.add(i + 32) as *const __m256i));
            let y1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pb.add(i + 32) as *const __m256i));
            acc0 = _mm512_add_epi32(acc0, _mm512_madd_epi16(x0, y0));
            acc1 = _mm512_add_epi32(acc1, _mm512_madd_epi16(x1, y1));
        }
        i += 64;
    }
    while i + 32 <= n {
        unsafe {
            let x = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pa.add(i) as *const __m256i));
            let y = _mm512_cvtepi8_epi16(_mm256_loadu_si256(pb.add(i) as *const __m256i));
            acc0 = _mm512_add_epi32(acc0, _mm512_madd_epi16(x, y));
        }
        i += 32;
    }
    _mm512_reduce_add_epi32(_mm512_add_epi32(acc0, acc1)) + dot_i8_portable(&a[i..], &b[i..])
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
    for row in matrix.chunks_exact(dims) {
        // SAFETY: same features; `row.len() == dims == query.len()`.
        out.push(unsafe { dot_avx2(query, row) });
    }
}

/// AVX-512F dot product: four 16-lane accumulators (64 floats per step),
/// then a masked load for the last `n % 16` elements (no scalar tail).
///
/// # Safety
/// The CPU must support AVX-512F, and `a.len() == b.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len();
    let pa = a.as_ptr();
    let pb = b.as_ptr();
    let mut acc0 = _mm512_setzero_ps();
    let mut acc1 = _mm512_setzero_ps();
    let mut acc2 = _mm512_setzero_ps();
    let mut acc3 = _mm512_setzero_ps();
    let mut i = 0;
    // SAFETY (all loads below): every full load reads offsets i..i+16 with
    // i + 16 <= n, inside both slices (of length n); unaligned loads have no
    // alignment requirement.
    while i + 64 <= n {
        unsafe {
            acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)), acc0);
            acc1 = _mm512_fmadd_ps(
                _mm512_loadu_ps(pa.add(i + 16)),
                _mm512_loadu_ps(pb.add(i + 16)),
                acc1,
            );
            acc2 = _mm512_fmadd_ps(
                _mm512_loadu_ps(pa.add(i + 32)),
                _mm512_loadu_ps(pb.add(i + 32)),
                acc2,
            );
            acc3 = _mm512_fmadd_ps(
                _mm512_loadu_ps(pa.add(i + 48)),
                _mm512_loadu_ps(pb.add(i + 48)),
                acc3,
            );
        }
        i += 64;
    }
    while i + 16 <= n {
        unsafe {
            acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(pa.add(i)), _mm512_loadu_ps(pb.add(i)), acc0);
        }
        i += 16;
    }
    let rest = n - i;
    if rest > 0 {
        // The low `rest` (< 16) lanes: masked-off lanes are neither read nor
        // able to fault, so only offsets i..n (inside both slices) are touched.
        let mask: __mmask16 = (1u16 << rest) - 1;
        // SAFETY: see the comment above; `pa.add(i)` is at most one past the
        // end of the slice, a valid pointer to form.
        unsafe {
            acc1 = _mm512_fmadd_ps(
                _mm512_maskz_loadu_ps(mask, pa.add(i)),
                _mm512_maskz_loadu_ps(mask, pb.add(i)),
                acc1,
            );
        }
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
    _mm512_reduce_add_ps(sum)
}

/// AVX-512F scoring of every row of a matrix (the exact-scan inner loop).
///
/// # Safety
/// The CPU must support AVX-512F; `query.len() == dims`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn scores_avx512(query: &[f32], matrix: &[f32], dims: usize, out: &mut Vec<f32>) {
    for row in matrix.chunks_exact(dims) {
        // SAFETY: same feature; `row.len() == dims == query.len()`.
        out.push(unsafe { dot_avx512(query, row) });
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

    /// Every kernel this CPU can run (the vector ones are skipped, with a
    /// notice, on CPUs without them).
    fn every_kernel() -> Vec<Kernel> {
        let all = [
            KernelLevel::Portable,
            KernelLevel::Avx2,
            KernelLevel::Avx512,
        ];
        let ks: Vec<Kernel> = all.iter().filter_map(|&l| Kernel::with_level(l)).collect();
        if ks.len() < all.len() {
            eprintln!(
                "note: this CPU runs only {:?}",
                ks.iter().map(|k| k.name()).collect::<Vec<_>>()
            );
        }
        ks
    }

    /// `out[i] = a[i]·b[i] + c`, returning Σ out: work for `compiled_for`.
    struct MulAddSum<'a> {
        out: &'a mut [f32],
        a: &'a [f32],
        b: &'a [f32],
        c: f32,
    }

    impl VectorWork for MulAddSum<'_> {
        type Output = f64;
        #[inline(always)]
        fn run(self) -> f64 {
            for ((o, &a), &b) in self.out.iter_mut().zip(self.a).zip(self.b) {
                *o = a * b + self.c;
            }
            self.out.iter().map(|&v| v as f64).sum()
        }
    }

    #[test]
    fn compiled_for_gives_every_level_the_portable_result() {
        let mut seed = 7;
        let a: Vec<f32> = (0..1001).map(|_| lcg(&mut seed)).collect();
        let b: Vec<f32> = (0..1001).map(|_| lcg(&mut seed)).collect();
        let mut want = vec![0f32; a.len()];
        let want_sum = Kernel::portable().compiled_for(MulAddSum {
            out: &mut want,
            a: &a,
            b: &b,
            c: 0.25,
        });
        assert!(want
            .iter()
            .zip(&a)
            .zip(&b)
            .all(|((&o, &a), &b)| o == a * b + 0.25));
        for k in every_kernel() {
            let mut got = vec![0f32; a.len()];
            let sum = k.compiled_for(MulAddSum {
                out: &mut got,
                a: &a,
                b: &b,
                c: 0.25,
            });
            // No FMA contraction in Rust: each element rounds the same way.
            assert_eq!(got, want, "{}", k.name());
            assert_eq!(sum, want_sum, "{}", k.name());
        }
    }

    #[test]
    fn detect_picks_the_widest_supported_level() {
        let widest = every_kernel().iter().map(|k| k.level()).max();
        assert_eq!(Some(Kernel::detect().level()), widest);
        assert_eq!(Kernel::portable().level(), KernelLevel::Portable);
        assert!(!Kernel::portable().is_avx2());
    }

    #[test]
    fn kernels_read_only_their_slices() {
        // Slices cut from the middle of a buffer of huge values: any read
        // past either end would swamp the sum.
        let buf = vec![1.0e30f32; 256];
        let mut a = buf.clone();
        let mut b = buf.clone();
        for n in 0..100 {
            for i in 0..n {
                a[64 + i] = 1.0;
                b[64 + i] = 0.5;
            }
            for k in every_kernel() {
                let got = k.dot(&a[64..64 + n], &b[64..64 + n]);
                assert_eq!(got, n as f32 * 0.5, "n={n} {}", k.name());
            }
        }
    }

    fn naive(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
    }

    #[test]
    fn kernels_agree_with_a_naive_sum_for_every_length() {
        let mut seed = 7;
        for n in 0..200 {
            let a: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let b: Vec<f32> = (0..n).map(|_| lcg(&mut seed)).collect();
            let want = naive(&a, &b);
            for k in every_kernel() {
                let got = k.dot(&a, &b) as f64;
                assert!(
                    (got - want).abs() < 1e-4,
                    "n={n} {} {got} vs {want}",
                    k.name()
                );
                // Against the scalar kernel too (the reference the vector
                // kernels must reproduce up to summation order).
                let scalar = dot_portable(&a, &b) as f64;
                assert!((got - scalar).abs() < 1e-4, "n={n} {}", k.name());
            }
        }
    }

    #[test]
    fn int8_kernels_agree_with_a_naive_sum_for_every_length() {
        let mut seed = 11u64;
        for n in 0..200 {
            let a: Vec<i8> = (0..n).map(|_| (lcg(&mut seed) * 254.0) as i8).collect();
            let mut b: Vec<i8> = (0..n).map(|_| (lcg(&mut seed) * 254.0) as i8).collect();
            // The extremes too: every product at its largest magnitude.
            if n % 7 == 0 {
                b.iter_mut().for_each(|x| *x = -127);
            }
            let want: i64 = a.iter().zip(&b).map(|(&x, &y)| x as i64 * y as i64).sum();
            for k in every_kernel() {
                assert_eq!(k.dot_i8(&a, &b) as i64, want, "{} at n = {n}", k.name());
            }
        }
        // Slices cut from the middle of a buffer of large codes: a read past
        // either end would change the sum.
        let mut buf_a = vec![127i8; 512];
        let mut buf_b = vec![127i8; 512];
        for n in 0..200 {
            buf_a[64..64 + n].fill(1);
            buf_b[64..64 + n].fill(2);
            for k in every_kernel() {
                let got = k.dot_i8(&buf_a[64..64 + n], &buf_b[64..64 + n]);
                assert_eq!(got, 2 * n as i32, "n={n} {}", k.name());
            }
        }
        let a = vec![127i8; 384];
        let b = vec![-127i8; 384];
        for k in every_kernel() {
            assert_eq!(k.dot_i8(&a, &b), -127 * 127 * 384, "{}", k.name());
            assert_eq!(k.dot_i8(&a[..383], &b), -127 * 127 * 383, "{}", k.name());
        }
    }

    #[test]
    fn scores_match_dot_row_by_row() {
        let mut seed = 11;
        let dims = 37;
        let m: Vec<f32> = (0..dims * 9).map(|_| lcg(&mut seed)).collect();
        let q: Vec<f32> = (0..dims).map(|_| lcg(&mut seed)).collect();
        for k in every_kernel() {
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
    fn fma_peak_is_measured_for_every_supported_level() {
        for k in every_kernel() {
            let g = fma_peak_gflops(k.level(), 200).unwrap();
            assert!(g.is_finite() && g > 0.0, "{}: {g}", k.name());
        }
        if Kernel::with_level(KernelLevel::Avx512).is_none() {
            assert_eq!(fma_peak_gflops(KernelLevel::Avx512, 1), None);
        }
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
