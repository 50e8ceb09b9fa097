"""attnlib's core: softmax, attention, heads, weights and the concat form."""
import numpy as np
import pytest

import attnlib
from attnlib import Weights, attention, attention_pattern, random_weights, softmax

from reference import ref_multihead


def _X(T, d_model, seed=1, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal((T, d_model)).astype(dtype)


# --- agreement with the independent loop ------------------------------------

@pytest.mark.parametrize("T, d_model, n_heads", [(1, 4, 1), (1, 8, 2), (5, 6, 1), (7, 12, 3),
                                                 (16, 32, 8), (3, 64, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_multihead_matches_per_head_loop(T, d_model, n_heads, causal):
    w = random_weights(d_model, n_heads, seed=T + n_heads)
    X = _X(T, d_model)
    got = attnlib.multihead_attention(X, w, causal=causal)
    want = ref_multihead(X, w.W_Q, w.W_K, w.W_V, w.W_O, n_heads, causal=causal)
    assert got.shape == (T, d_model)
    assert np.abs(got - want).max() <= 1e-12


def test_d_head_independent_of_d_model():
    w = random_weights(10, 3, seed=0, d_head=7)  # h * d_head = 21 != d_model
    X = _X(4, 10)
    want = ref_multihead(X, w.W_Q, w.W_K, w.W_V, w.W_O, 3)
    assert np.abs(attnlib.multihead_attention(X, w) - want).max() <= 1e-12


def test_batched_input_equals_one_sequence_at_a_time():
    w = random_weights(8, 2, seed=0)
    Xb = np.random.default_rng(0).standard_normal((3, 5, 8))
    got = attnlib.multihead_attention(Xb, w, causal=True)
    for b in range(3):
        assert np.abs(got[b] - attnlib.multihead_attention(Xb[b], w, causal=True)).max() <= 1e-12


def test_single_token_attends_to_itself_only():
    # With T = 1 the pattern is [[1]], so each head returns its own value.
    w = random_weights(6, 3, seed=2)
    X = _X(1, 6)
    want = (X @ w.W_V) @ w.W_O
    assert np.abs(attnlib.multihead_attention(X, w) - want).max() <= 1e-12


# --- softmax -------------------------------------------------------------------

def test_softmax_huge_logits_are_finite_and_correct():
    z = np.array([[1e4, 1e4 - 2.0, -1e4], [-1e4, -1e4, -1e4]])
    p = softmax(z)
    assert np.isfinite(p).all()
    want0 = np.array([1.0, np.exp(-2.0), 0.0]) / (1.0 + np.exp(-2.0))
    assert np.abs(p[0] - want0).max() <= 1e-15
    assert np.abs(p[1] - 1 / 3).max() <= 1e-15


def test_attention_with_logits_of_1e4():
    # d_k = 1 and unit keys: scores are +-1e4 exactly.
    Q = np.array([[1e4]])
    K = np.array([[1.0], [-1.0]])
    V = np.array([[2.0], [3.0]])
    assert np.array_equal(attention_pattern(Q, K), [[1.0, 0.0]])
    assert np.array_equal(attention(-Q, K, V), [[3.0]])


def test_fully_masked_row_is_zero_not_nan():
    p = softmax(np.ones((3, 4)), where=np.array([[True] * 4, [False] * 4, [True, False] * 2]))
    assert not np.isnan(p).any()
    assert np.array_equal(p[1], np.zeros(4))
    assert np.allclose(p[[0, 2]].sum(axis=1), 1)
    assert np.array_equal(p[2], [0.5, 0, 0.5, 0])
    # -inf scores count as masked too
    assert np.array_equal(softmax([-np.inf, -np.inf]), [0.0, 0.0])


def test_softmax_axis_and_no_mutation():
    x = np.array([[0.0, 1.0], [2.0, 3.0]])
    before = x.copy()
    p = softmax(x, axis=0)
    assert np.allclose(p.sum(axis=0), 1)
    assert np.array_equal(x, before)


def test_causal_pattern_is_lower_triangular_and_rows_sum_to_one():
    rng = np.random.default_rng(0)
    Q, K = rng.standard_normal((2, 3, 5, 4))  # 3 heads
    A = attention_pattern(Q, K, causal=True)
    assert A.shape == (3, 5, 5)
    assert np.array_equal(np.triu(A, 1), np.zeros_like(A))
    assert np.allclose(A.sum(-1), 1)
    assert np.allclose(A[:, 0, 0], 1)


def test_causal_single_query_sees_every_cached_key():
    rng = np.random.default_rng(0)
    Q, K, V = rng.standard_normal((1, 4)), rng.standard_normal((6, 4)), rng.standard_normal((6, 3))
    assert np.array_equal(attention(Q, K, V, causal=True), attention(Q, K, V))


def test_heads_broadcast_over_leading_axes():
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((2, 3, 5, 4))
    K = rng.standard_normal((3, 6, 4))  # broadcast over the first axis
    V = rng.standard_normal((3, 6, 2))
    out = attention(Q, K, V)
    assert out.shape == (2, 3, 5, 2)
    assert np.allclose(out[1, 2], attention(Q[1, 2], K[2], V[2]), rtol=0, atol=1e-15)


# --- dtypes ---------------------------------------------------------------------

def test_float32_stays_float32_everywhere():
    w32 = random_weights(16, 4, seed=0, dtype=np.float32)
    X = _X(5, 16, dtype=np.float32)
    assert w32.dtype == np.float32 and w32.W_QKV.dtype == np.float32
    assert attnlib.multihead_attention(X, w32).dtype == np.float32
    assert attnlib.multihead_attention(X, w32, causal=True).dtype == np.float32
    Q = X[:, :4]
    assert attention_pattern(Q, Q).dtype == np.float32
    assert attention(Q, Q, Q).dtype == np.float32
    assert softmax(Q).dtype == np.float32
    assert softmax(Q, where=Q > 0).dtype == np.float32
    assert attnlib.split_heads(X, 4).dtype == np.float32
    # and the float32 result is close to the float64 one
    want = attnlib.multihead_attention(X.astype(np.float64), w32.astype(np.float64))
    assert np.abs(attnlib.multihead_attention(X, w32) - want).max() < 1e-5


def test_mixed_precision_promotes_to_float64():
    w32 = random_weights(8, 2, seed=0, dtype=np.float32)
    assert attnlib.multihead_attention(_X(3, 8), w32).dtype == np.float64


def test_integer_input_is_accepted_as_float64():
    w = random_weights(4, 2, seed=0)
    assert attnlib.multihead_attention(np.ones((2, 4), dtype=int), w).dtype == np.float64


# --- heads and weights ----------------------------------------------------------

def test_split_merge_roundtrip_and_per_head_views():
    w = random_weights(12, 3, seed=0)
    X = _X(4, 12)
    Qh = attnlib.split_heads(X @ w.W_Q, 3)
    assert Qh.shape == (3, 4, 4)
    for i in range(3):
        assert np.array_equal(Qh[i], X @ w.W_Q[:, 4 * i:4 * (i + 1)])
        assert np.array_equal(w.per_head.W_Q[i], w.W_Q[:, 4 * i:4 * (i + 1)])
        assert np.array_equal(w.per_head.W_O[i], w.W_O[4 * i:4 * (i + 1)])
    assert np.array_equal(attnlib.merge_heads(Qh), X @ w.W_Q)


def test_weights_are_private_read_only_copies():
    W = np.eye(4)
    w = Weights(W, W, W, W, n_heads=2)
    W[0, 0] = 5.0  # the caller's array is not shared
    assert w.W_Q[0, 0] == 1.0
    with pytest.raises(ValueError):
        w.W_Q[0, 0] = 3.0


def test_random_weights_is_seeded():
    a, b = random_weights(8, 2, seed=3), random_weights(8, 2, seed=3)
    c = random_weights(8, 2, seed=4)
    assert np.array_equal(a.W_O, b.W_O) and not np.array_equal(a.W_O, c.W_O)


# --- bad input: every error names the argument and the shapes ------------------

W4 = random_weights(4, 2, seed=0)
X4 = np.ones((3, 4))
BAD = [
    # (callable, exception, words that must appear in the message)
    (lambda: softmax("abc"), TypeError, ["x", "dtype"]),
    (lambda: softmax([1.0, np.nan]), ValueError, ["x", "finite"]),
    (lambda: softmax([1.0, np.inf]), ValueError, ["x", "finite"]),
    (lambda: softmax([1.0, 2.0], axis=3), ValueError, ["axis", "(2,)"]),
    (lambda: softmax(np.ones((2, 3)), where=np.ones((2, 2), bool)), ValueError, ["where", "(2, 2)", "(2, 3)"]),
    (lambda: softmax([1.0, 2.0], where=[1, 0]), TypeError, ["where", "boolean"]),
    (lambda: attention(np.ones((3, 4)), np.ones((3, 5)), np.ones((3, 2))), ValueError, ["Q", "K", "(3, 4)", "(3, 5)"]),
    (lambda: attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((2, 2))), ValueError, ["V", "(3, 4)", "(2, 2)"]),
    (lambda: attention(np.ones(4), np.ones((3, 4)), np.ones((3, 2))), ValueError, ["Q", "(4,)"]),
    (lambda: attention_pattern(np.ones((2, 3, 4)), np.ones((5, 3, 4))), ValueError, ["Q", "K", "(2, 3, 4)", "(5, 3, 4)"]),
    (lambda: attention_pattern(np.ones((5, 2)), np.ones((3, 2)), causal=True), ValueError, ["T_q=5", "T_k=3"]),
    (lambda: attention_pattern(np.ones((2, 2)), np.ones((2, 2)), causal="yes"), TypeError, ["causal"]),
    (lambda: attention(np.ones((2, 2)), np.ones((2, 2)), np.full((2, 2), np.nan)), ValueError, ["V", "finite"]),
    (lambda: attention([[1, 2], [3]], np.ones((2, 2)), np.ones((2, 2))), TypeError, ["Q"]),
    (lambda: attention(np.ones((2, 2), complex), np.ones((2, 2)), np.ones((2, 2))), TypeError, ["Q", "complex"]),
    (lambda: attnlib.split_heads(np.ones((3, 10)), 4), ValueError, ["10", "n_heads = 4", "(3, 10)"]),
    (lambda: attnlib.split_heads(np.ones((3, 8)), 0), ValueError, ["n_heads", "0"]),
    (lambda: attnlib.merge_heads(np.ones((3, 8))), ValueError, ["H", "(3, 8)"]),
    (lambda: Weights(np.ones((4, 6)), np.ones((4, 6)), np.ones((4, 6)), np.ones((6, 4)), 4), ValueError, ["W_Q", "6 columns", "n_heads = 4"]),
    (lambda: Weights(np.ones((4, 4)), np.ones((4, 6)), np.ones((4, 4)), np.ones((4, 4)), 2), ValueError, ["W_K", "(4, 6)", "(4, 4)"]),
    (lambda: Weights(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), np.ones((6, 4)), 2), ValueError, ["W_O has 6 rows", "2 * 2 = 4"]),
    (lambda: Weights(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 5)), 2), ValueError, ["W_O", "5 columns", "d_model = 4"]),
    (lambda: Weights(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), np.ones(4), 2), ValueError, ["W_O", "(4,)"]),
    (lambda: Weights(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), 2.0), TypeError, ["n_heads", "2.0"]),
    (lambda: random_weights(10, 3), ValueError, ["d_model = 10", "n_heads = 3", "d_head"]),
    (lambda: random_weights(8, -1), ValueError, ["n_heads", "-1"]),
    (lambda: random_weights(8, 2, dtype=np.int64), TypeError, ["dtype", "int64"]),
    (lambda: attnlib.multihead_attention(np.ones((3, 5)), W4), ValueError, ["X", "(3, 5)", "d_model = 4"]),
    (lambda: attnlib.multihead_attention(np.ones((0, 4)), W4), ValueError, ["X", "(0, 4)", "token"]),
    (lambda: attnlib.multihead_attention(np.ones(4), W4), ValueError, ["X", "(4,)"]),
    (lambda: attnlib.multihead_attention(X4, {"W_Q": 1}), TypeError, ["weights", "dict"]),
    (lambda: attnlib.causal_mask(4, 2), ValueError, ["T_q=4", "T_k=2"]),
]


@pytest.mark.parametrize("call, exc, words", BAD, ids=[f"bad{i:02d}" for i in range(len(BAD))])
def test_bad_input_raises_clear_error(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"

