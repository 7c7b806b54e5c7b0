//! One matrix product on strided views of slices, for the MiniLM forward
//! pass ([`super::ops`]): the dense layers' products into buffers reused by
//! every layer, and the attention's, where gemm reads the heads' Q, K and V
//! straight out of the fused QKV rows and writes each head's context into
//! its columns of the merged rows, so no step copies them into separate
//! tensors first. The one `unsafe` call (gemm's raw-pointer interface) sits
//! behind a check of every operand's span against its slice.

/// The elements an `rows × cols` operand with these strides spans.
fn span(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * row_stride + (cols - 1) * col_stride + 1
    }
}

/// `dst (m × n) = lhs (m × k) · rhs (k × n)` with gemm, on `threads`
/// threads of the current rayon pool (1: this thread only, when the
/// caller's tasks are the parallelism). `dst` is row-major with
/// `dst_row_stride` (≥ n) between rows; `lhs` and `rhs` are a slice with
/// its row and column strides, in elements. Every operand's span is checked
/// against its slice: a mismatch is a bug in the caller and panics rather
/// than touch memory outside the slices.
pub(super) fn strided_matmul(
    (dst, dst_row_stride): (&mut [f32], usize),
    (lhs, lhs_rs, lhs_cs): (&[f32], usize, usize),
    (rhs, rhs_rs, rhs_cs): (&[f32], usize, usize),
    (m, n, k): (usize, usize, usize),
    threads: usize,
) {
    assert!(
        dst_row_stride >= n
            && span(m, n, dst_row_stride, 1) <= dst.len()
            && span(m, k, lhs_rs, lhs_cs) <= lhs.len()
            && span(k, n, rhs_rs, rhs_cs) <= rhs.len(),
        "attention: a product outside its buffers"
    );
    if m == 0 || n == 0 || k == 0 {
        for row in dst.chunks_mut(dst_row_stride).take(m) {
            row[..n].fill(0.0);
        }
        return;
    }
    let parallelism = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the assertion above puts every element gemm reads or writes
    // (row i < m or k at its row stride plus column j < n or k at its
    // column stride) inside the slice it belongs to, all of them borrowed
    // for this call (`dst` exclusively, so nothing else reads or writes it
    // meanwhile); the destination's rows (stride ≥ n) do not overlap; and
    // with `read_dst = false` gemm only writes `dst`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_row_stride as isize,
            false,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_matmul_checks_its_spans() {
        // 2×3 · 3×2 with the rhs read transposed from a 2×3 buffer.
        let lhs = [1f32, 2., 3., 4., 5., 6.];
        let rhs_t = [1f32, 0., 1., 0., 1., 1.]; // rows of rhsᵀ
        let mut dst = [0f32; 2 * 4]; // row stride 4
        strided_matmul((&mut dst, 4), (&lhs, 3, 1), (&rhs_t, 1, 3), (2, 2, 3), 1);
        assert_eq!(dst, [4., 5., 0., 0., 10., 11., 0., 0.]);
        let short = std::panic::catch_unwind(|| {
            let mut dst = [0f32; 3];
            strided_matmul((&mut dst, 2), (&lhs, 3, 1), (&rhs_t, 1, 3), (2, 2, 3), 1);
        });
        assert!(
            short.is_err(),
            "a destination too short for its block must panic"
        );
    }
}
