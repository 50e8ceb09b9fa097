"""LowRank against its .full() product, operation by operation."""
import numpy as np
import pytest

import attnlib
from attnlib import LowRank, ov_circuit, qk_circuit

rng = np.random.default_rng(0)


def _lr(lead=(3,), m=6, r=2, n=5):
    return LowRank(rng.standard_normal((*lead, m, r)), rng.standard_normal((*lead, r, n)))


def close(a, b, tol=1e-12):
    return np.abs(np.asarray(a) - np.asarray(b)).max() <= tol * max(1.0, np.abs(b).max())


def test_full_shape_and_transpose():
    W = _lr()
    assert W.shape == (3, 6, 5) == W.full().shape
    assert W.T.shape == (3, 5, 6)
    assert close(W.T.full(), np.swapaxes(W.full(), -1, -2))


def test_matmul_with_arrays_both_ways():
    W = _lr()
    M = rng.standard_normal((5, 4))
    X = rng.standard_normal((7, 6))
    assert isinstance(W @ M, LowRank) and isinstance(X @ W, LowRank)
    assert close((W @ M).full(), W.full() @ M)
    assert close((X @ W).full(), X @ W.full())
    v, u = rng.standard_normal(5), rng.standard_normal(6)
    assert close(W @ v, W.full() @ v)
    assert close(u @ W, u @ W.full())


@pytest.mark.parametrize("lead_A, lead_B", [((), ()), ((3,), (3,)), ((2, 3), (2, 3)), ((), (4,)), ((4,), ()), ((1, 3), (2, 1))])
def test_matmul_with_a_matrix_matches_the_full_product_for_any_head_axes(lead_A, lead_B):
    # A matrix times a stack is done as one wide product: check every layout of head axes.
    W = LowRank(rng.standard_normal((*lead_A, 6, 2)), rng.standard_normal((*lead_B, 2, 5)))
    X, M = rng.standard_normal((7, 6)), rng.standard_normal((5, 4))
    assert (X @ W).shape == (*W.shape[:-2], 7, 5) and close((X @ W).full(), X @ W.full())
    assert (W @ M).shape == (*W.shape[:-2], 6, 4) and close((W @ M).full(), W.full() @ M)


def test_stacks_cut_from_one_matrix_are_multiplied_without_copying_the_weights():
    w = attnlib.random_weights(d_model=12, n_heads=3, seed=0)
    W_P = qk_circuit(w)
    X = rng.standard_normal((5, 12))
    assert np.shares_memory(np.moveaxis(W_P.A, -2, 0).reshape(12, -1), w.W_Q)  # side by side is a view
    assert close((X @ W_P @ X.T).full(), np.einsum("sd,hde,te->hst", X, W_P.full(), X))


def test_matmul_of_two_lowranks_keeps_the_small_inner_size():
    W1, W2 = _lr(r=2, n=5), _lr(m=5, r=4, n=3)
    P = W1 @ W2
    assert close(P.full(), W1.full() @ W2.full())
    assert P.rank_bound == 2
    Q = W2.T @ W1.T
    assert Q.rank_bound == 2 and close(Q.full(), W2.full().swapaxes(-1, -2) @ W1.full().swapaxes(-1, -2))


def test_scaling_indexing_and_sum_over_heads():
    W = _lr()
    assert close((W * 2.5).full(), 2.5 * W.full())
    assert close((0.5 * W).full(), 0.5 * W.full())
    assert close(W[1].full(), W.full()[1])
    assert close(W[1:].full(), W.full()[1:])
    S = W.sum_heads()
    assert S.rank_bound == 3 * 2 and close(S.full(), W.full().sum(axis=0))


def test_broadcast_head_axes():
    W = LowRank(rng.standard_normal((6, 2)), rng.standard_normal((4, 2, 5)))
    assert W.shape == (4, 6, 5)
    assert close(W[2].full(), W.full()[2])
    assert close(W.sum_heads().full(), W.full().sum(axis=0))


def test_singular_values_match_full_svd():
    for m, r, n in [(6, 2, 5), (3, 4, 5), (8, 8, 8)]:
        W = _lr(m=m, r=r, n=n)
        k = min(m, n, r)
        want = np.linalg.svd(W.full(), compute_uv=False)[..., :k]
        assert W.singular_values().shape == (3, k)
        assert close(W.singular_values(), want, 1e-10)


def test_eigenvalues_trace_norm_match_full():
    W = _lr(m=6, r=2, n=6)
    full = W.full()
    ev = np.linalg.eigvals(full)
    ev = np.take_along_axis(ev, np.argsort(-np.abs(ev), axis=-1), axis=-1)[..., :2]
    assert close(W.eigenvalues(), ev, 1e-10)
    assert close(W.trace(), np.trace(full, axis1=-2, axis2=-1))
    assert close(W.norm(), np.linalg.norm(full, axis=(-2, -1)))
    big = _lr(m=3, r=5, n=3)  # r > m: all of AB's eigenvalues
    assert big.eigenvalues().shape == (3, 3)


def test_frobenius_norm_is_not_cyclic_but_trace_and_eigenvalues_are():
    W = _lr(lead=(), m=6, r=3, n=6)
    swapped = LowRank(W.B, W.A)  # BA instead of AB
    assert not np.isclose(W.norm(), swapped.norm())
    assert np.isclose(W.trace(), swapped.trace())
    assert np.allclose(np.sort_complex(W.eigenvalues()), np.sort_complex(np.linalg.eigvals(swapped.full())))


def test_circuits_are_the_per_head_products():
    w = attnlib.random_weights(12, 3, seed=1)
    W_Q, W_K, W_V, W_O = w.per_head
    assert close(qk_circuit(w).full(), W_Q @ W_K.swapaxes(-1, -2))
    assert close(ov_circuit(w).full(), W_V @ W_O)
    assert qk_circuit(w).rank_bound == 4
    assert np.linalg.matrix_rank(qk_circuit(w).full()[0]) == 4


@pytest.mark.parametrize("call, words", [
    (lambda: LowRank(np.ones((4, 2)), np.ones((3, 4))), ["inner sizes differ", "(4, 2)", "(3, 4)"]),
    (lambda: LowRank(np.ones(4), np.ones((4, 4))), ["A", "(4,)"]),
    (lambda: LowRank(np.ones((2, 4, 2)), np.ones((3, 2, 4))), ["leading axes", "(2, 4, 2)", "(3, 2, 4)"]),
    (lambda: _lr() @ np.ones((4, 4)), ["(3, 6, 5)", "(4, 4)", "5 columns"]),
    (lambda: np.ones((2, 4)) @ _lr(), ["(2, 4)", "(3, 6, 5)"]),
    (lambda: _lr() @ _lr(), ["(3, 6, 5)", "5 columns against 6 rows"]),
    (lambda: _lr().eigenvalues(), ["square", "(3, 6, 5)"]),
    (lambda: _lr().trace(), ["square"]),
])
def test_mismatched_sizes_raise_clear_errors(call, words):
    with pytest.raises(ValueError) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_bad_index_and_scale():
    with pytest.raises(IndexError, match="head axes"):
        _lr()[0, 1]
    with pytest.raises(IndexError, match="no head axis"):
        _lr(lead=())[0]
    with pytest.raises(TypeError, match="real number"):
        _lr() * np.ones(3)
