//! Fused CPU kernels for the BERT forward pass, as candle custom ops.
//!
//! candle's generic element-wise ops allocate a tensor per step and call the
//! scalar `libm` `erff`/`expf`. These kernels fuse the steps between two
//! matrix products into one pass each, with branch-free approximations the
//! compiler vectorises:
//!
//! - [`BiasGelu`]: `gelu(x + bias)` with a rational `erf` (|error| < 1e-6);
//! - [`BiasResidualNorm`]: `layer_norm(a + bias + residual)`;
//! - [`SplitHeads`]: `(n, 3h)` QKV + bias → `(3, b, heads, l, d)`;
//! - [`MaskedSoftmax`]: softmax over keys, padding keys get exactly 0;
//! - [`MergeHeads`]: `(b, heads, l, d)` → `(b·l, h)`.
//!
//! `BiasGelu`, `BiasResidualNorm` and `MaskedSoftmax` run in place on the
//! fresh output of the matrix product before them (candle in-place ops), so
//! no step allocates and zeroes a buffer; the two reshuffles write new ones.
//!
//! Rows are spread over rayon's current pool (the model's own pool when
//! [`super::MiniLmOptions::threads`] is set).

use candle_core::{bail, CpuStorage, CustomOp1, InplaceOp1, InplaceOp2, Layout, Result, Shape};
use rayon::prelude::*;

/// Rows per rayon task: enough work to amortise scheduling.
const MIN_ROWS: usize = 16;

fn f32_slice<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        bail!("{what}: f32 input expected")
    };
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => bail!("{what}: contiguous input expected"),
    }
}

fn f32_slice_mut<'a>(s: &'a mut CpuStorage, l: &Layout, what: &str) -> Result<&'a mut [f32]> {
    let CpuStorage::F32(v) = s else {
        bail!("{what}: f32 input expected")
    };
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&mut v[a..b]),
        None => bail!("{what}: contiguous input expected"),
    }
}

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
    p / q
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
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.0 / 720.0f32;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// Sum with 8 independent accumulators (vectorises; plain `sum()` does not).
#[inline(always)]
fn sum8(xs: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

fn max8(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = acc[i].max(c[i]);
        }
    }
    acc.iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// Layer-normalise one row in place: `(x − mean) / √(var + eps) · gamma + beta`.
pub(super) fn norm_row(o: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let inv_h = 1.0 / o.len() as f32;
    let mean = sum8(o) * inv_h;
    for v in o.iter_mut() {
        *v -= mean;
    }
    let mut sq = [0f32; 8];
    let chunks = o.chunks_exact(8);
    let rest: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    for c in chunks {
        for i in 0..8 {
            sq[i] += c[i] * c[i];
        }
    }
    let var = (sq.iter().sum::<f32>() + rest) * inv_h;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, &g), &b) in o.iter_mut().zip(gamma).zip(beta) {
        *v = *v * inv * g + b;
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
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) -> Vec<f32> {
    let h = gamma.len();
    let mut out = vec![0f32; ids.len() * h];
    out.par_chunks_mut(h)
        .with_min_len(MIN_ROWS)
        .zip(ids.par_iter())
        .enumerate()
        .for_each(|(row, (o, &id))| {
            let w = &word[id as usize * h..][..h];
            let p = &pos_type[(row % len) * h..][..h];
            for ((o, &w), &p) in o.iter_mut().zip(w).zip(p) {
                *o = w + p;
            }
            norm_row(o, gamma, beta, eps);
        });
    out
}

// ---------------------------------------------------------------------------
// Ops
// ---------------------------------------------------------------------------

/// `gelu(x + bias)` over rows of `(n, width)`.
pub(super) struct BiasGelu {
    pub bias: Vec<f32>,
}

impl InplaceOp1 for BiasGelu {
    fn name(&self) -> &'static str {
        "memoir-bias-gelu"
    }

    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> Result<()> {
        let w = self.bias.len();
        if l.dims().last() != Some(&w) {
            bail!("bias-gelu: width {:?} vs bias {w}", l.dims());
        }
        let x = f32_slice_mut(s, l, self.name())?;
        x.par_chunks_mut(w).with_min_len(MIN_ROWS).for_each(|x| {
            for (x, &b) in x.iter_mut().zip(&self.bias) {
                *x = gelu(*x + b);
            }
        });
        Ok(())
    }
}

/// `layer_norm(a + bias + residual) · gamma + beta` over rows of `(n, h)`;
/// `a` is the op's first input, `residual` the second.
pub(super) struct BiasResidualNorm {
    pub bias: Vec<f32>,
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
    pub eps: f32,
}

impl InplaceOp2 for BiasResidualNorm {
    fn name(&self) -> &'static str {
        "memoir-bias-residual-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        let h = self.gamma.len();
        if l1.shape() != l2.shape() || l1.dims().last() != Some(&h) {
            bail!("residual-norm: shapes {:?} and {:?}", l1.dims(), l2.dims());
        }
        let r = f32_slice(s2, l2, self.name())?;
        let a = f32_slice_mut(s1, l1, self.name())?;
        a.par_chunks_mut(h)
            .with_min_len(MIN_ROWS)
            .zip(r.par_chunks(h))
            .for_each(|(o, r)| {
                for i in 0..h {
                    o[i] += self.bias[i] + r[i];
                }
                norm_row(o, &self.gamma, &self.beta, self.eps);
            });
        Ok(())
    }
}

/// `(b·l, 3h)` fused QKV projection plus bias → `(3, b, heads, l, d)`.
pub(super) struct SplitHeads {
    pub bias: Vec<f32>,
    pub batch: usize,
    pub len: usize,
    pub heads: usize,
}

impl CustomOp1 for SplitHeads {
    fn name(&self) -> &'static str {
        "memoir-split-heads"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l, self.name())?;
        let (b, t, nh) = (self.batch, self.len, self.heads);
        let h3 = self.bias.len();
        let h = h3 / 3;
        let d = h / nh;
        if l.dims() != [b * t, h3] || d * nh != h {
            bail!(
                "split-heads: input {:?}, expected ({}, {h3})",
                l.dims(),
                b * t
            );
        }
        let mut out = vec![0f32; x.len()];
        // One block per (part, batch row, head): t·d contiguous outputs.
        out.par_chunks_mut(t * d).enumerate().for_each(|(blk, o)| {
            let part = blk / (b * nh);
            let bi = (blk / nh) % b;
            let j = blk % nh;
            let col = part * h + j * d;
            let bias = &self.bias[col..col + d];
            for ti in 0..t {
                let src = &x[(bi * t + ti) * h3 + col..][..d];
                let dst = &mut o[ti * d..(ti + 1) * d];
                for ((o, &v), &bb) in dst.iter_mut().zip(src).zip(bias) {
                    *o = v + bb;
                }
            }
        });
        Ok((CpuStorage::F32(out), Shape::from_dims(&[3, b, nh, t, d])))
    }
}

/// Softmax over the last axis of `(b, heads, l, l)` scores; the second input
/// is the `(b, l)` attention mask (1 = token, 0 = padding). Padding keys get
/// probability 0.
pub(super) struct MaskedSoftmax;

impl InplaceOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "memoir-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> Result<()> {
        let mask = f32_slice(s2, l2, self.name())?;
        let &[b, nh, t, t2] = l1.dims() else {
            bail!(
                "masked-softmax: rank-4 scores expected, got {:?}",
                l1.dims()
            )
        };
        if t != t2 || l2.dims() != [b, t] {
            bail!(
                "masked-softmax: scores {:?}, mask {:?}",
                l1.dims(),
                l2.dims()
            );
        }
        // Keys are padded at the end: each batch row has `valid` real keys.
        let valid: Vec<usize> = (0..b)
            .map(|bi| {
                mask[bi * t..(bi + 1) * t]
                    .iter()
                    .filter(|&&m| m > 0.5)
                    .count()
                    .max(1)
            })
            .collect();
        let x = f32_slice_mut(s1, l1, self.name())?;
        x.par_chunks_mut(t)
            .with_min_len(MIN_ROWS)
            .enumerate()
            .for_each(|(row, x)| {
                let n = valid[row / (nh * t)];
                let (keys, padding) = x.split_at_mut(n);
                padding.fill(0.0);
                let m = max8(keys);
                for v in keys.iter_mut() {
                    *v = exp(*v - m);
                }
                let inv = 1.0 / sum8(keys);
                for v in keys.iter_mut() {
                    *v *= inv;
                }
            });
        Ok(())
    }
}

/// `(b, heads, l, d)` → `(b·l, heads·d)`.
pub(super) struct MergeHeads;

impl CustomOp1 for MergeHeads {
    fn name(&self) -> &'static str {
        "memoir-merge-heads"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s, l, self.name())?;
        let &[b, nh, t, d] = l.dims() else {
            bail!("merge-heads: rank-4 input expected, got {:?}", l.dims())
        };
        let h = nh * d;
        let mut out = vec![0f32; x.len()];
        out.par_chunks_mut(h)
            .with_min_len(MIN_ROWS)
            .enumerate()
            .for_each(|(row, o)| {
                let (bi, ti) = (row / t, row % t);
                for j in 0..nh {
                    let src = &x[((bi * nh + j) * t + ti) * d..][..d];
                    o[j * d..(j + 1) * d].copy_from_slice(src);
                }
            });
        Ok((CpuStorage::F32(out), Shape::from_dims(&[b * t, h])))
    }
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

    #[test]
    fn fused_ops_match_plain_candle() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let (b, t, nh, d) = (2usize, 5usize, 3usize, 4usize);
        let h = nh * d;
        let x = Tensor::randn(0f32, 1.0, (b * t, 3 * h), &dev)?;
        let bias: Vec<f32> = (0..3 * h).map(|i| i as f32 * 0.01).collect();
        let heads = x.apply_op1_no_bwd(&SplitHeads {
            bias: bias.clone(),
            batch: b,
            len: t,
            heads: nh,
        })?;
        let plain = x
            .broadcast_add(&Tensor::new(bias.as_slice(), &dev)?)?
            .reshape((b, t, 3, nh, d))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let diff = (heads - &plain)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-6, "split {diff}");

        let q = plain.get(0)?;
        let merged = q.apply_op1_no_bwd(&MergeHeads)?;
        let plain_m = q.transpose(1, 2)?.reshape((b * t, h))?;
        let diff = (merged - plain_m)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert_eq!(diff, 0.0);

        let scores = Tensor::randn(0f32, 2.0, (b, nh, t, t), &dev)?;
        let mask = Tensor::new(&[[1f32, 1., 1., 1., 1.], [1., 1., 1., 0., 0.]], &dev)?;
        let bias_m = ((&mask - 1.0)? * 1e9)?.reshape((b, 1, 1, t))?;
        let want = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(&bias_m)?)?;
        let got = scores.copy()?;
        got.inplace_op2(&mask, &MaskedSoftmax)?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-6, "softmax {diff}");

        let a = Tensor::randn(0f32, 1.0, (b * t, h), &dev)?;
        let r = Tensor::randn(0f32, 1.0, (b * t, h), &dev)?;
        let hb: Vec<f32> = (0..h).map(|i| i as f32 * -0.02).collect();
        let g: Vec<f32> = (0..h).map(|i| 1.0 + i as f32 * 0.05).collect();
        let be: Vec<f32> = (0..h).map(|i| i as f32 * 0.03).collect();
        let got = a.copy()?;
        got.inplace_op2(
            &r,
            &BiasResidualNorm {
                bias: hb.clone(),
                gamma: g.clone(),
                beta: be.clone(),
                eps: 1e-12,
            },
        )?;
        let sum = (a.broadcast_add(&Tensor::new(hb.as_slice(), &dev)?)? + &r)?;
        let want = candle_nn::ops::layer_norm(
            &sum,
            &Tensor::new(g.as_slice(), &dev)?,
            &Tensor::new(be.as_slice(), &dev)?,
            1e-12,
        )?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-5, "norm {diff}");

        let got = a.copy()?;
        got.inplace_op1(&BiasGelu { bias: hb.clone() })?;
        let want = a
            .broadcast_add(&Tensor::new(hb.as_slice(), &dev)?)?
            .gelu_erf()?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert!(diff < 1e-5, "gelu {diff}");
        Ok(())
    }
}
