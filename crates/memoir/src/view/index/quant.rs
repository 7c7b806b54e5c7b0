//! Int8 codes of an index's unit vectors, for the graph walk.
//!
//! Each row is stored a second time as `dims` signed bytes plus one scale:
//! `x[j] ≈ code[j] × scale`, with `scale = max|x| / 127` of that row (so
//! the largest component is exactly ±127 and none overflows). A dot product
//! of two codes is an exact integer sum ([`Kernel::dot_i8`]) times the two
//! scales. The error per component is at most half a step, so for unit
//! vectors the approximate cosine is off by a few thousandths: enough to
//! walk the graph (a quarter of the bytes per visited node of the f32 rows),
//! never used for a final score. The graph search re-scores its candidate
//! list with the f32 rows before it answers (`hnsw.rs`).
//!
//! The codes are derived from the f32 rows and rebuilt with them: nothing
//! about them is stored on disk.

use crate::simd::Kernel;

/// The int8 codes of a matrix of unit vectors, one row per slot.
#[derive(Debug, Clone, Default)]
pub struct Codes {
    dims: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
}

impl Codes {
    /// No rows yet, for `dims`-wide vectors.
    pub fn new(dims: usize) -> Self {
        Codes {
            dims,
            codes: Vec::new(),
            scales: Vec::new(),
        }
    }

    /// The codes of every row of a row-major `dims`-wide matrix.
    pub fn of_matrix(data: &[f32], dims: usize) -> Self {
        let mut out = Codes::new(dims);
        if let Some(rows) = data.len().checked_div(dims) {
            out.codes.reserve(data.len());
            out.scales.reserve(rows);
            for row in data.chunks_exact(dims) {
                out.push(row);
            }
        }
        out
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// True when no row is held.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Append the codes of `row` (its width must be the matrix's).
    pub fn push(&mut self, row: &[f32]) {
        debug_assert_eq!(row.len(), self.dims);
        let start = self.codes.len();
        self.codes.resize(start + self.dims, 0);
        let scale = encode(row, &mut self.codes[start..]);
        self.scales.push(scale);
    }

    /// The codes of row `i`.
    #[inline]
    pub fn row(&self, i: u32) -> &[i8] {
        let start = i as usize * self.dims;
        &self.codes[start..start + self.dims]
    }

    /// The scale of row `i`.
    #[inline]
    pub fn scale(&self, i: u32) -> f32 {
        self.scales[i as usize]
    }

    /// Start loading row `i`'s codes into cache.
    #[inline]
    pub fn prefetch(&self, i: u32) {
        let p = self.codes.as_ptr().wrapping_add(i as usize * self.dims);
        crate::simd::prefetch(p as *const f32, self.dims.div_ceil(64));
    }

    /// The approximate dot product of an encoded query with row `i`.
    #[inline]
    pub fn dot(&self, kernel: Kernel, query: &Query, i: u32) -> f32 {
        kernel.dot_i8(&query.codes, self.row(i)) as f32 * (query.scale * self.scale(i))
    }
}

/// A query vector encoded like the rows.
#[derive(Debug, Clone)]
pub struct Query {
    codes: Vec<i8>,
    scale: f32,
}

impl Query {
    /// Encode `v` (any length; normally a unit vector of the index's width).
    pub fn new(v: &[f32]) -> Self {
        let mut codes = vec![0; v.len()];
        let scale = encode(v, &mut codes);
        Query { codes, scale }
    }
}

/// Write `row`'s codes into `out` (same length) and return its scale. A zero
/// (or non-finite) row gets zero codes and scale 0.
fn encode(row: &[f32], out: &mut [i8]) -> f32 {
    let max = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        out.iter_mut().for_each(|c| *c = 0);
        return 0.0;
    }
    let inv = 127.0 / max;
    for (c, x) in out.iter_mut().zip(row) {
        *c = (x * inv).round().clamp(-127.0, 127.0) as i8;
    }
    max / 127.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: &mut u64, dims: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dims)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect();
        super::super::normalize(&mut v);
        v
    }

    #[test]
    fn coded_dot_products_are_close_to_the_exact_ones() {
        let dims = 384;
        let mut seed = 5;
        let rows: Vec<f32> = (0..200).flat_map(|_| unit(&mut seed, dims)).collect();
        let codes = Codes::of_matrix(&rows, dims);
        assert_eq!(codes.len(), 200);
        let kernel = Kernel::detect();
        let mut worst = 0.0f32;
        for _ in 0..20 {
            let q = unit(&mut seed, dims);
            let coded = Query::new(&q);
            for i in 0..200u32 {
                let exact = kernel.dot(&q, &rows[i as usize * dims..(i as usize + 1) * dims]);
                worst = worst.max((codes.dot(kernel, &coded, i) - exact).abs());
            }
        }
        assert!(worst < 0.01, "worst cosine error {worst}");
        assert!(worst > 0.0, "int8 codes are an approximation");
    }

    #[test]
    fn the_largest_component_is_exactly_127_and_zero_rows_stay_zero() {
        let codes = Codes::of_matrix(&[0.6, -0.8, 0.0, 0.0, 0.0, 0.0], 3);
        assert_eq!(codes.row(0), &[95, -127, 0]);
        assert!((codes.scale(0) - 0.8 / 127.0).abs() < 1e-9);
        assert_eq!(codes.row(1), &[0, 0, 0]);
        assert_eq!(codes.scale(1), 0.0);
        let q = Query::new(&[0.6, -0.8, 0.0]);
        let d = codes.dot(Kernel::detect(), &q, 0);
        assert!((d - 1.0).abs() < 0.01, "{d}");
        assert_eq!(codes.dot(Kernel::detect(), &q, 1), 0.0);
    }
}
