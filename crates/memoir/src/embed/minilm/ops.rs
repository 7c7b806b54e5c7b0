//! The steps of the BERT forward pass, over plain row-major `f32` buffers.
//!
//! The products ([`dense`], and those inside [`Attention`]) go through
//! [`strided_matmul`]; the steps between two products are fused into one
//! pass each, in place, with branch-free approximations the compiler
//! vectorises (no `libm` `erff`/`expf` per element):
//!
//! - [`embed_tokens`]: `layer_norm(word + position + type)`;
//! - [`bias_gelu`]: `gelu(x + bias)` with a rational `erf` (|error| < 1e-6);
//! - [`BiasResidualNorm`]: `layer_norm(a + bias + residual)`;
//! - [`Attention`]: the fused `(n, 3h)` QKV product → the merged heads'
//!   contexts `(n, h)`, each batch row's heads in one task whose scores stay
//!   in cache (its small products call gemm on strided views directly).
//!
//! Rows are spread over rayon's current pool (the model's own pool when
//! [`super::MiniLmOptions::threads`] is set), and each task's loops run
//! compiled for the widest vector unit the CPU has
//! ([`Kernel::compiled_for`]: AVX-512 or AVX2 + FMA rather than a default
//! build's SSE2).

use candle_core::{bail, Result};
use rayon::prelude::*;

use super::strided::strided_matmul;
use crate::simd::{Kernel, VectorWork};

/// Rows per rayon task: enough work to amortise scheduling.
const MIN_ROWS: usize = 16;

// ---------------------------------------------------------------------------
// Scalar approximations (branch-free, so loops over them vectorise)
// ---------------------------------------------------------------------------

/// `erf(x)` as an odd rational function on [-4, 4] (clamped outside, where
/// erf is ±1 in f32); absolute error below 1e-6.
#[inline(always)]
pub(super) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_600_2e-3;
    p = p * x2 - 1.609_603_3e-2;
    p *= x;
    let mut q = -1.456_607_2e-5f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    p * recip_negative(q)
}

/// `1 / q` for `q < 0` without a division (a vector division is several
/// times slower than the rest of `erf` together): an initial guess from
/// the bit pattern (about 4 correct bits) and three Newton steps
/// `r ← r·(2 − |q|·r)`, each doubling the correct bits (about 1e-7
/// relative error left, a rounding or two of f32).
#[inline(always)]
fn recip_negative(q: f32) -> f32 {
    let a = -q;
    let mut r = f32::from_bits(0x7EF3_11C7u32.wrapping_sub(a.to_bits()));
    r *= 2.0 - a * r;
    r *= 2.0 - a * r;
    r *= 2.0 - a * r;
    -r
}

/// `gelu(x) = x · (1 + erf(x/√2)) / 2`, BERT's activation.
#[inline(always)]
pub(super) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// `exp(x)` for x ≤ 88: 2ⁿ · p(r) with r = x − n·ln 2, |r| ≤ ln2/2 and a
/// degree-6 polynomial; relative error below 3e-7. Inputs below -87 give a
/// tiny positive number (used for masked logits only after the max is taken).
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const ROUND: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to an integer
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2E + ROUND; // n in its low mantissa bits
    let n = shifted - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.0 / 720.0f32;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // 2ⁿ from the integer in `shifted`'s mantissa (|n| ≤ 126 keeps its
    // exponent that of ROUND), in integer ops only: a float-to-int `as`
    // saturates, which keeps the loop from vectorising.
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
    p * scale
}

/// Independent accumulators of the reductions below: one AVX-512 register
/// (two AVX2 ones), so the loops vectorise (a plain `sum()` does not).
const LANES: usize = 16;

/// `Σ f(x)` over `xs`, in `LANES` accumulators.
#[inline(always)]
fn sum_lanes(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for c in chunks {
        for i in 0..LANES {
            acc[i] += f(c[i]);
        }
    }
    acc.iter().sum::<f32>() + rest
}

/// The largest element (−∞ for none), by compare-and-select: `f32::max`'s
/// NaN rule costs a compare and a blend per vector.
#[inline(always)]
fn max_lanes(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    acc.iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m })
}

/// A layer norm's parameters: `(x − mean) / √(var + eps) · gamma + beta`.
pub(super) struct LayerNorm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
    pub eps: f32,
}

/// Layer-normalise one row in place: `(x − mean) / √(var + eps) · gamma + beta`.
#[inline(always)]
fn norm_row(o: &mut [f32], LayerNorm { gamma, beta, eps }: &LayerNorm) {
    let inv_h = 1.0 / o.len() as f32;
    let mean = sum_lanes(o, |x| x) * inv_h;
    for v in o.iter_mut() {
        *v -= mean;
    }
    let var = sum_lanes(o, |x| x * x) * inv_h;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, &g), &b) in o.iter_mut().zip(gamma).zip(beta) {
        *v = *v * inv * g + b;
    }
}

/// `o = layer_norm(o + a + b) · gamma + beta`: the embedding sum (`o`
/// zeroed, word row, position row) and the residual steps (`o` the
/// product, bias, residual).
struct SumNormRow<'a> {
    o: &'a mut [f32],
    a: &'a [f32],
    b: &'a [f32],
    norm: &'a LayerNorm,
}

impl VectorWork for SumNormRow<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        for ((o, &a), &b) in self.o.iter_mut().zip(self.a).zip(self.b) {
            *o += a + b;
        }
        norm_row(self.o, self.norm);
    }
}

/// `x = gelu(x + bias)` over one row.
struct BiasGeluRow<'a> {
    x: &'a mut [f32],
    bias: &'a [f32],
}

impl VectorWork for BiasGeluRow<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        for (x, &b) in self.x.iter_mut().zip(self.bias) {
            *x = gelu(*x + b);
        }
    }
}

/// The unnormalised softmax of one row of logits, in place: `exp(x − max)`;
/// returns `1 / Σ`, the factor that normalises it (applied by the caller to
/// the fewer elements of the product it feeds).
struct SoftmaxRow<'a>(&'a mut [f32]);

impl VectorWork for SoftmaxRow<'_> {
    type Output = f32;
    #[inline(always)]
    fn run(self) -> f32 {
        let keys = self.0;
        let m = max_lanes(keys);
        for v in keys.iter_mut() {
            *v = exp(*v - m);
        }
        1.0 / sum_lanes(keys, |x| x)
    }
}

/// BERT's embedding layer for a padded `(b, l)` batch of token ids:
/// `layer_norm(word[id] + position[t] + token_type[0])`, as `(b·l, h)`.
/// `pos_type` holds the position rows with the type-0 row already added.
pub(super) fn embed_tokens(
    ids: &[u32],
    len: usize,
    word: &[f32],
    pos_type: &[f32],
    norm: &LayerNorm,
) -> Vec<f32> {
    let h = norm.gamma.len();
    let kernel = Kernel::detect();
    let mut out = vec![0f32; ids.len() * h];
    out.par_chunks_mut(h)
        .with_min_len(MIN_ROWS)
        .zip(ids.par_iter())
        .enumerate()
        .for_each(|(row, (o, &id))| {
            let w = &word[id as usize * h..][..h];
            let p = &pos_type[(row % len) * h..][..h];
            kernel.compiled_for(SumNormRow {
                o,
                a: w,
                b: p,
                norm,
            })
        });
    out
}

// ---------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------

/// `x = gelu(x + bias)` over the rows of `x` (`bias.len()` wide).
pub(super) fn bias_gelu(x: &mut [f32], bias: &[f32]) -> Result<()> {
    let w = bias.len();
    if w == 0 || !x.len().is_multiple_of(w) {
        bail!("bias-gelu: {} values in rows of {w}", x.len());
    }
    let kernel = Kernel::detect();
    x.par_chunks_mut(w)
        .with_min_len(MIN_ROWS)
        .for_each(|x| kernel.compiled_for(BiasGeluRow { x, bias }));
    Ok(())
}

/// `layer_norm(a + bias + residual)` over rows of `h`.
pub(super) struct BiasResidualNorm {
    pub bias: Vec<f32>,
    pub norm: LayerNorm,
}

impl BiasResidualNorm {
    /// `a = layer_norm(a + bias + residual) · gamma + beta`, row by row.
    pub(super) fn apply(&self, a: &mut [f32], residual: &[f32]) -> Result<()> {
        let h = self.norm.gamma.len();
        if h == 0 || a.len() != residual.len() || !a.len().is_multiple_of(h) {
            bail!(
                "residual-norm: {} and {} values in rows of {h}",
                a.len(),
                residual.len()
            );
        }
        let kernel = Kernel::detect();
        a.par_chunks_mut(h)
            .with_min_len(MIN_ROWS)
            .zip(residual.par_chunks(h))
            .for_each(|(o, r)| {
                kernel.compiled_for(SumNormRow {
                    o,
                    a: &self.bias,
                    b: r,
                    norm: &self.norm,
                })
            });
        Ok(())
    }
}

/// Self-attention of a padded batch, straight from the fused QKV product:
/// `qkv` `(b·l, 3h)` without its bias → `out`, the heads' contexts merged,
/// `(b·l, h)` (every element written).
///
/// Per batch row and head, with `n` real tokens: `scores = (Q + b_Q)·Kᵀ`
/// over the `n` real keys only (the scale is folded into the Q weights),
/// a softmax per row, then `ctx = P·V + b_V`. The key bias adds the same
/// `(q + b_Q)·b_K` to every logit of a row, which the softmax cancels, and
/// the value bias passes through `P` unchanged because each row of `P` sums
/// to 1; so only Q is copied (with its bias, into a small buffer), and K, V
/// are read in place. Padding rows get a zero context: no real token
/// attends to them, and pooling skips them.
///
/// One task per batch row: its scores (`n × n`) stay in cache, instead of
/// a `(b, heads, l, l)` tensor and the two head reshuffles of the plain
/// formulation.
pub(super) struct Attention<'a> {
    /// The Q, K, V biases, `3h` (the Q part already scaled).
    pub bias: &'a [f32],
    pub heads: usize,
    /// Real tokens per batch row (a prefix of each row, at least 1).
    pub lengths: &'a [usize],
    /// The padded length of every row.
    pub len: usize,
    /// An additive bias of the logits, `(heads, len, len)`, the same for
    /// every batch row (MPNet's relative-position bias); `None` for BERT.
    pub pos_bias: Option<&'a [f32]>,
}

impl Attention<'_> {
    pub(super) fn apply(&self, qkv: &[f32], out: &mut [f32]) -> Result<()> {
        let (b, t, nh) = (self.lengths.len(), self.len, self.heads);
        let h3 = self.bias.len();
        let h = h3 / 3;
        let d = h / nh.max(1);
        if qkv.len() != b * t * h3 || out.len() != b * t * h || d * nh != h || h == 0 {
            bail!(
                "attention: {} and {} values for ({}, {h3}) → ({0}, {h})",
                qkv.len(),
                out.len(),
                b * t
            );
        }
        if let Some(n) = self.lengths.iter().find(|&&n| n == 0 || n > t) {
            bail!("attention: a row of {n} tokens in a batch padded to {t}");
        }
        if let Some(pb) = self.pos_bias {
            if pb.len() != nh * t * t {
                bail!(
                    "attention: a position bias of {} values for ({nh}, {t}, {t})",
                    pb.len()
                );
            }
        }
        let kernel = Kernel::detect();
        out.par_chunks_mut(t * h)
            .zip(qkv.par_chunks(t * h3))
            .zip(self.lengths.par_iter())
            .for_each(|((out, x), &n)| {
                out[n * h..].fill(0.0);
                let mut q = vec![0f32; n * d];
                let mut scores = vec![0f32; n * n];
                let mut norms = vec![0f32; n];
                for head in 0..nh {
                    let (qc, kc, vc) = (head * d, h + head * d, 2 * h + head * d);
                    let bq = &self.bias[qc..qc + d];
                    for (q, row) in q.chunks_exact_mut(d).zip(x.chunks_exact(h3)) {
                        for ((q, &v), &bb) in q.iter_mut().zip(&row[qc..qc + d]).zip(bq) {
                            *q = v + bb;
                        }
                    }
                    // scores (n × n) = q (n × d) · Kᵀ, K row j at x[j·3h + kc..].
                    strided_matmul(
                        (&mut scores, n),
                        (&q, d, 1),
                        (&x[kc..], 1, h3),
                        (n, n, d),
                        1,
                    );
                    if let Some(pb) = self.pos_bias {
                        let pb = &pb[head * t * t..(head + 1) * t * t];
                        for (row, brow) in scores.chunks_exact_mut(n).zip(pb.chunks_exact(t)) {
                            for (s, &bb) in row.iter_mut().zip(&brow[..n]) {
                                *s += bb;
                            }
                        }
                    }
                    for (row, norm) in scores.chunks_exact_mut(n).zip(&mut norms) {
                        *norm = kernel.compiled_for(SoftmaxRow(row));
                    }
                    // ctx (n × d) = P (n × n) · V, written into the merged
                    // row layout (row stride h), then normalised and + b_V.
                    strided_matmul(
                        (&mut out[qc..], h),
                        (&scores, n, 1),
                        (&x[vc..], h3, 1),
                        (n, d, n),
                        1,
                    );
                    let bv = &self.bias[vc..vc + d];
                    for (row, &norm) in out.chunks_exact_mut(h).zip(&norms) {
                        for (o, &bb) in row[qc..qc + d].iter_mut().zip(bv) {
                            *o = *o * norm + bb;
                        }
                    }
                }
            });
        Ok(())
    }
}

/// `out (rows × w.cols) = x (rows × inp) · w (inp × cols)`, all row-major,
/// `out` overwritten, on the current rayon pool's threads.
pub(super) fn dense(x: &[f32], w: &[f32], inp: usize, out: &mut [f32]) -> Result<()> {
    let cols = w.len().checked_div(inp).unwrap_or(0);
    let rows = x.len().checked_div(inp).unwrap_or(0);
    if inp == 0 || cols * inp != w.len() || rows * inp != x.len() || out.len() != rows * cols {
        bail!(
            "dense: {} × {inp} · {} values into {}",
            rows,
            w.len(),
            out.len()
        );
    }
    strided_matmul(
        (out, cols),
        (x, inp, 1),
        (w, cols, 1),
        (rows, cols, inp),
        rayon::current_num_threads(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    /// erf by its Maclaurin series in f64 (accurate to ~1e-10 on [-4, 4]).
    fn erf_ref(x: f64) -> f64 {
        if x.abs() > 5.0 {
            return x.signum();
        }
        let mut sum = 0.0;
        let mut term = x; // (-1)^n x^(2n+1) / n!
        for n in 0..200 {
            sum += term / (2 * n + 1) as f64;
            term *= -x * x / (n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn erf_is_accurate() {
        let mut worst = 0f64;
        for i in -6000..=6000 {
            let x = i as f32 / 1000.0;
            let err = (erf(x) as f64 - erf_ref(x as f64)).abs();
            worst = worst.max(err);
        }
        assert!(worst < 1e-6, "max |erf error| {worst}");
        assert_eq!(erf(0.0), 0.0);
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
    }

    #[test]
    fn exp_is_accurate() {
        let mut worst = 0f64;
        for i in -8700..=8000 {
            let x = i as f32 / 100.0;
            let want = (x as f64).exp();
            let rel = ((exp(x) as f64 - want) / want).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 3e-7, "max relative exp error {worst}");
        assert!(exp(-1e9) >= 0.0 && exp(-1e9) < 1e-37);
    }

    /// The plain formulation, in candle ops: bias, split heads, masked
    /// softmax of `q·kᵀ`, `p·v`, merged heads.
    fn plain_attention(
        x: &Tensor,
        bias: &[f32],
        lengths: &[usize],
        t: usize,
        nh: usize,
        pos_bias: Option<&[f32]>,
    ) -> candle_core::Result<Tensor> {
        let dev = x.device();
        let b = lengths.len();
        let h = bias.len() / 3;
        let d = h / nh;
        let qkv = x
            .broadcast_add(&Tensor::new(bias, dev)?)?
            .reshape((b, t, 3, nh, d))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        let mut mask = vec![0f32; b * t];
        for (r, &n) in lengths.iter().enumerate() {
            mask[r * t + n..(r + 1) * t].fill(-1e9);
        }
        let mask = Tensor::from_vec(mask, (b, 1, 1, t), dev)?;
        let scores = q.contiguous()?.matmul(&k.t()?.contiguous()?)?;
        let mut logits = scores.broadcast_add(&mask)?;
        if let Some(pb) = pos_bias {
            logits = logits.broadcast_add(&Tensor::from_slice(pb, (1, nh, t, t), dev)?)?;
        }
        let e = logits.broadcast_sub(&logits.max_keepdim(3)?)?.exp()?;
        let p = e.broadcast_div(&e.sum_keepdim(3)?)?;
        p.matmul(&v.contiguous()?)?
            .transpose(1, 2)?
            .reshape((b * t, h))
    }

    #[test]
    fn fused_attention_matches_the_plain_formulation_on_real_rows() -> candle_core::Result<()> {
        fused_attention_case(false)?;
        // With an additive (heads, t, t) logit bias (MPNet's position bias).
        fused_attention_case(true)
    }

    fn fused_attention_case(with_bias: bool) -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (t, nh, d) = (7usize, 3usize, 4usize);
        let h = nh * d;
        let lengths = [7usize, 4, 1];
        let b = lengths.len();
        let x = Tensor::randn(0f32, 1.0, (b * t, 3 * h), &dev)?;
        let bias: Vec<f32> = (0..3 * h).map(|i| (i as f32 * 0.37).sin()).collect();
        let pos: Vec<f32> = (0..nh * t * t).map(|i| (i as f32 * 0.11).cos()).collect();
        let pos_bias = with_bias.then_some(pos.as_slice());
        let input = x.flatten_all()?.to_vec1::<f32>()?;
        // Garbage in the output buffer first: every element must be written.
        let mut out = vec![f32::NAN; b * t * h];
        Attention {
            bias: &bias,
            heads: nh,
            lengths: &lengths,
            len: t,
            pos_bias,
        }
        .apply(&input, &mut out)?;
        let got: Vec<&[f32]> = out.chunks(h).collect();
        let want = plain_attention(&x, &bias, &lengths, t, nh, pos_bias)?.to_vec2::<f32>()?;
        let mut worst = 0f32;
        for (r, &n) in lengths.iter().enumerate() {
            for row in r * t..(r + 1) * t {
                if row - r * t < n {
                    for (g, w) in got[row].iter().zip(&want[row]) {
                        worst = worst.max((g - w).abs());
                    }
                } else {
                    assert!(got[row].iter().all(|&v| v == 0.0), "padding row {row}");
                }
            }
        }
        assert!(worst < 1e-5, "attention differs by {worst}");

        // A row longer than the padded length, or empty, is refused, and so
        // is an output of the wrong size.
        for bad in [[8usize, 4, 1], [7, 0, 1]] {
            let err = Attention {
                bias: &bias,
                heads: nh,
                lengths: &bad,
                len: t,
                pos_bias: None,
            }
            .apply(&input, &mut out);
            assert!(err.is_err(), "{bad:?}");
        }
        let short = Attention {
            bias: &bias,
            heads: nh,
            lengths: &lengths,
            len: t,
            pos_bias: None,
        }
        .apply(&input, &mut out[1..]);
        assert!(short.is_err());
        let bad_bias = Attention {
            bias: &bias,
            heads: nh,
            lengths: &lengths,
            len: t,
            pos_bias: Some(&pos[1..]),
        }
        .apply(&input, &mut out);
        assert!(bad_bias.is_err());
        Ok(())
    }

    #[test]
    fn fused_ops_match_plain_candle() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (b, t, h) = (2usize, 5usize, 12usize);
        let a = Tensor::randn(0f32, 1.0, (b * t, h), &dev)?;
        let r = Tensor::randn(0f32, 1.0, (b * t, h), &dev)?;
        let hb: Vec<f32> = (0..h).map(|i| i as f32 * -0.02).collect();
        let g: Vec<f32> = (0..h).map(|i| 1.0 + i as f32 * 0.05).collect();
        let be: Vec<f32> = (0..h).map(|i| i as f32 * 0.03).collect();
        let mut got = a.flatten_all()?.to_vec1::<f32>()?;
        BiasResidualNorm {
            bias: hb.clone(),
            norm: LayerNorm {
                gamma: g.clone(),
                beta: be.clone(),
                eps: 1e-12,
            },
        }
        .apply(&mut got, &r.flatten_all()?.to_vec1::<f32>()?)?;
        let got = Tensor::from_vec(got, (b * t, h), &dev)?;
        let sum = (a.broadcast_add(&Tensor::new(hb.as_slice(), &dev)?)? + &r)?;
        let centred = sum.broadcast_sub(&sum.mean_keepdim(1)?)?;
        let var = centred.sqr()?.mean_keepdim(1)?;
        let want = centred
            .broadcast_div(&(var + 1e-12)?.sqrt()?)?
            .broadcast_mul(&Tensor::new(g.as_slice(), &dev)?)?
            .broadcast_add(&Tensor::new(be.as_slice(), &dev)?)?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-5, "norm {diff}");

        let mut got = a.flatten_all()?.to_vec1::<f32>()?;
        bias_gelu(&mut got, &hb)?;
        let got = Tensor::from_vec(got, (b * t, h), &dev)?;
        let want = a
            .broadcast_add(&Tensor::new(hb.as_slice(), &dev)?)?
            .gelu_erf()?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-5, "gelu {diff}");

        // dense: x · w against candle's product, into a dirty buffer.
        let w = Tensor::randn(0f32, 1.0, (h, 7), &dev)?;
        let mut out = vec![f32::NAN; b * t * 7];
        dense(
            &a.flatten_all()?.to_vec1::<f32>()?,
            &w.flatten_all()?.to_vec1::<f32>()?,
            h,
            &mut out,
        )?;
        let want = a.matmul(&w)?.flatten_all()?.to_vec1::<f32>()?;
        let diff = out
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, f32::max);
        assert!(diff < 1e-4, "dense {diff}");
        assert!(dense(&[1.0; 5], &[1.0; 4], 2, &mut out).is_err());
        Ok(())
    }
}
