"""EASE's Gram matrix (kernels/gram.pyx): the float64 sums of scipy's ``X' @ X``, bit for bit."""
import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.kernels.gram import gram_rows
from mrec_warp.models.ease import gram_matrix


def scipy_gram(csr, dtype):
    csc = sp.csc_matrix(csr, dtype=np.float64)
    return (sp.csr_matrix(csc.T) @ csc).toarray().astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_gram_matrix_is_scipys_product_bit_for_bit(seed, dtype):
    rng = np.random.default_rng(seed)
    x = sp.random(120, 70, density=0.15, format="csr", random_state=seed, dtype=np.float64)
    x.data = np.exp(rng.normal(size=x.nnz) * 4)  # values whose sums round: the order shows
    got = gram_matrix(x, dtype, rows_per_block=int(rng.integers(1, 30)))
    assert got.dtype == dtype
    assert np.array_equal(got.view(np.uint8), scipy_gram(x, dtype).view(np.uint8))


def test_gram_matrix_of_counts_and_empty_rows():
    x = sp.csr_matrix(np.array([[0, 2, 0, 1], [0, 0, 0, 0], [3, 1, 0, 0]], dtype=np.float32))
    assert np.array_equal(gram_matrix(x, np.float32), (x.T @ x).toarray())


def test_gram_rows_refuses_out_of_range_indices():
    x = sp.csr_matrix(np.eye(3))
    xt = sp.csr_matrix(x.T)
    args = [a.astype(t) for a, t in ((xt.indptr, np.int64), (xt.indices, np.int32), (xt.data, np.float64))]
    bad = x.indices.astype(np.int32).copy()
    bad[0] = 7
    with pytest.raises(ValueError):
        gram_rows(*args, x.indptr.astype(np.int64), bad, x.data, 0, np.empty((3, 3)))
    with pytest.raises(ValueError):  # rows past the items
        gram_rows(*args, x.indptr.astype(np.int64), x.indices.astype(np.int32), x.data, 2, np.empty((3, 3)))
