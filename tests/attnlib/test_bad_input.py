"""Every public attnlib function on a table of bad inputs.

Each row either expects an error that attnlib itself raises (not numpy's or
Python's, found by where the exception comes from) whose message names the
argument, and its shape where a shape is the problem; or a result that is
finite and right. Numpy warnings are errors here: an overflow must be
reported by name, not printed as a RuntimeWarning.
"""
import math
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest

import attnlib
from attnlib import LowRank, Weights, cost, random_weights
from attnlib import circuits as C
from attnlib.forms import FORMS

LIB = Path(attnlib.__file__).resolve().parent
RNG = np.random.default_rng(0)
W = random_weights(8, 2, seed=0)  # d_model 8, 2 heads of 4
X = RNG.standard_normal((5, 8))
Q4 = RNG.standard_normal((3, 4))
K4 = RNG.standard_normal((6, 4))
V4 = RNG.standard_normal((6, 2))
LR = C.qk_circuit(W)  # LowRank (2, 8, 8)
BIG32 = np.full((2, 2), 1e20, np.float32)  # finite, but Q Kᵀ overflows float32


def raises(*words):
    """The row must raise an attnlib error whose message contains every word."""
    return ("raises", words)


def gives(check):
    """The row must return a finite result for which ``check(result)`` holds."""
    return ("gives", check)


def _softmax_ref(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


ROWS = {
    # --- softmax / causal_mask -------------------------------------------------
    "softmax: zero-size": (lambda: attnlib.softmax(np.zeros(0)), gives(lambda r: r.shape == (0,))),
    "softmax: zero-size rows": (lambda: attnlib.softmax(np.zeros((3, 0))), gives(lambda r: r.shape == (3, 0))),
    "softmax: NaN": (lambda: attnlib.softmax([0.0, np.nan]), raises("x", "finite")),
    "softmax: +inf": (lambda: attnlib.softmax([0.0, np.inf]), raises("x", "finite")),
    "softmax: -inf everywhere": (lambda: attnlib.softmax([-np.inf, -np.inf]), gives(lambda r: (r == 0).all())),
    "softmax: 1e308": (lambda: attnlib.softmax([1e308, -1e308]), gives(lambda r: np.array_equal(r, [1.0, 0.0]))),
    "softmax: axis=True": (lambda: attnlib.softmax([1.0, 2.0], axis=True), raises("axis", "True")),
    "softmax: axis=1.0": (lambda: attnlib.softmax([1.0, 2.0], axis=1.0), raises("axis")),
    "softmax: axis out of range": (lambda: attnlib.softmax(np.zeros((2, 3)), axis=2), raises("axis", "(2, 3)")),
    "softmax: complex": (lambda: attnlib.softmax(np.ones(3, complex)), raises("x", "complex")),
    "softmax: str": (lambda: attnlib.softmax("abc"), raises("x")),
    "softmax: object": (lambda: attnlib.softmax(np.array([1.0, None])), raises("x", "object")),
    "softmax: bool": (lambda: attnlib.softmax(np.array([True, False])), raises("x", "boolean")),
    "softmax: scalar": (lambda: attnlib.softmax(3.0), raises("x", "axes")),
    "softmax: ragged": (lambda: attnlib.softmax([[1.0], [1.0, 2.0]]), raises("x")),
    "softmax: float16 gives float64": (lambda: attnlib.softmax(np.ones(2, np.float16)),
                                       gives(lambda r: r.dtype == np.float64 and np.allclose(r, 0.5))),
    "softmax: where not bool": (lambda: attnlib.softmax([1.0, 2.0], where=[1, 0]), raises("where", "bool")),
    "softmax: where wrong shape": (lambda: attnlib.softmax([1.0, 2.0], where=[True] * 3), raises("where", "(3,)", "(2,)")),
    "causal_mask: 0": (lambda: attnlib.causal_mask(0), raises("T_q", "0")),
    "causal_mask: -1": (lambda: attnlib.causal_mask(-1), raises("T_q", "-1")),
    "causal_mask: 2.5": (lambda: attnlib.causal_mask(2.5), raises("T_q", "2.5")),
    "causal_mask: T_k < T_q": (lambda: attnlib.causal_mask(3, 2), raises("T_q=3", "T_k=2")),
    # --- attention -------------------------------------------------------------
    "attention: float32 scores overflow": (lambda: attnlib.attention(BIG32, BIG32, np.ones((2, 2))),
                                           raises("Q and K", "float32")),
    "attention_weights: float32 scores overflow": (lambda: attnlib.attention_weights(BIG32, BIG32),
                                                   raises("Q and K", "float32")),
    "attention_pattern (the old name): float32 scores overflow": (lambda: _old_name(BIG32, BIG32),
                                                                  raises("Q and K", "float32")),
    "attention_weights: keys of another size": (lambda: attnlib.attention_weights(Q4, np.ones((3, 5))),
                                                raises("Q", "K")),
    "attention: 1e160 in float64": (lambda: attnlib.attention(Q4 * 1e160, K4 * 1e160, V4), raises("Q and K", "float64")),
    "attention: large but safe scores": (lambda: attnlib.attention(Q4 * 1e150, K4 * 1e150, V4),
                                         gives(lambda r: r.shape == (3, 2))),
    "attention: values near the float64 limit": (
        lambda: attnlib.attention(np.zeros((1, 1)), np.zeros((2, 1)), np.full((2, 1), 1.5e308)),
        gives(lambda r: np.allclose(r, 1.5e308))),
    "attention: d_k = 0": (lambda: attnlib.attention(np.zeros((2, 0)), np.zeros((3, 0)), np.ones((3, 2))),
                           raises("d_k = 0", "(2, 0)", "(3, 0)")),
    "attention: no keys": (lambda: attnlib.attention(Q4, np.zeros((0, 4)), np.zeros((0, 2))), raises("K", "(0, 4)")),
    "attention: no queries": (lambda: attnlib.attention(np.zeros((0, 4)), K4, V4), gives(lambda r: r.shape == (0, 2))),
    "attention: NaN in V": (lambda: attnlib.attention(Q4, K4, np.full((6, 2), np.nan)), raises("V", "finite")),
    "attention: -inf in Q": (lambda: attnlib.attention(-np.inf * Q4, K4, V4), raises("Q", "finite")),
    "attention: head sizes differ": (lambda: attnlib.attention(Q4, K4[:, :3], V4), raises("Q", "K", "(3, 4)", "(6, 3)")),
    "attention: V rows": (lambda: attnlib.attention(Q4, K4, V4[:5]), raises("V", "(6, 4)", "(5, 2)")),
    "attention: Q one axis": (lambda: attnlib.attention(Q4[0], K4, V4), raises("Q", "(4,)")),
    "attention: head axes": (lambda: attnlib.attention(np.zeros((2, 3, 4)), np.zeros((3, 6, 4)), np.zeros((3, 6, 2))),
                             raises("Q", "K", "(2, 3, 4)", "(3, 6, 4)")),
    "attention: complex K": (lambda: attnlib.attention(Q4, K4.astype(complex), V4), raises("K", "complex")),
    "attention: causal='yes'": (lambda: attnlib.attention(Q4, K4, V4, causal="yes"), raises("causal")),
    "attention: causal, more queries than keys": (lambda: attnlib.attention(K4, Q4, V4[:3], causal=True),
                                                  raises("T_q=6", "T_k=3")),
    "attention: float16 gives float64": (lambda: attnlib.attention(Q4.astype(np.float16), K4.astype(np.float16), V4),
                                         gives(lambda r: r.dtype == np.float64)),
    # --- heads ------------------------------------------------------------------
    "split_heads: indivisible": (lambda: attnlib.split_heads(X, 3), raises("n_heads = 3", "(5, 8)")),
    "split_heads: n_heads 0": (lambda: attnlib.split_heads(X, 0), raises("n_heads")),
    "split_heads: n_heads 2.0": (lambda: attnlib.split_heads(X, 2.0), raises("n_heads", "2.0")),
    "merge_heads: two axes": (lambda: attnlib.merge_heads(X), raises("H", "(5, 8)")),
    "merge_heads: str": (lambda: attnlib.merge_heads("abc"), raises("H")),
    # --- Weights / random_weights ------------------------------------------------
    "Weights: d_head = 0": (lambda: Weights(np.zeros((8, 0)), np.zeros((8, 0)), np.zeros((8, 0)), np.zeros((0, 8)), 2),
                            raises("zero size", "(8, 0)")),
    "Weights: transposed W_Q": (lambda: Weights(np.zeros((6, 8)), np.zeros((8, 6)), np.zeros((8, 6)), np.zeros((6, 8)), 2),
                                raises("W_Q", "(6, 8)", "(8, 6)", "transposed")),
    "Weights: transposed W_O": (lambda: Weights(np.zeros((8, 6)), np.zeros((8, 6)), np.zeros((8, 6)), np.zeros((8, 6)), 2),
                                raises("W_O", "transposed")),
    "Weights: n_heads does not divide": (lambda: Weights(W.W_Q, W.W_K, W.W_V, W.W_O, 3), raises("n_heads = 3", "8 columns")),
    "Weights: n_heads -1": (lambda: Weights(W.W_Q, W.W_K, W.W_V, W.W_O, -1), raises("n_heads", "-1")),
    "Weights: n_heads True": (lambda: Weights(W.W_Q, W.W_K, W.W_V, W.W_O, True), raises("n_heads", "True")),
    "Weights: NaN in W_V": (lambda: Weights(W.W_Q, W.W_K, W.W_V * np.nan, W.W_O, 2), raises("W_V", "finite")),
    "Weights: W_K three axes": (lambda: Weights(W.W_Q, W.W_K[None], W.W_V, W.W_O, 2), raises("W_K", "(1, 8, 8)")),
    "Weights: object W_O": (lambda: Weights(W.W_Q, W.W_K, W.W_V, W.W_O.astype(object), 2), raises("W_O", "object")),
    "Weights: float16 gives float64": (lambda: W.astype(np.float16), gives(lambda r: r.dtype == np.float64)),
    "random_weights: seed 'abc'": (lambda: random_weights(8, 2, seed="abc"), raises("seed", "'abc'")),
    "random_weights: seed -1": (lambda: random_weights(8, 2, seed=-1), raises("seed", "-1")),
    "random_weights: seed 1.5": (lambda: random_weights(8, 2, seed=1.5), raises("seed", "1.5")),
    "random_weights: d_model 0": (lambda: random_weights(0, 2), raises("d_model", "0")),
    "random_weights: d_model '8'": (lambda: random_weights("8", 2), raises("d_model", "'8'")),
    "random_weights: indivisible": (lambda: random_weights(10, 3), raises("d_model = 10", "n_heads = 3")),
    "random_weights: d_head 0": (lambda: random_weights(8, 2, d_head=0), raises("d_head", "0")),
    "random_weights: dtype int": (lambda: random_weights(8, 2, dtype=int), raises("dtype")),
    "random_weights: dtype 'banana'": (lambda: random_weights(8, 2, dtype="banana"), raises("dtype", "banana")),
    # --- the layer -----------------------------------------------------------------
    "multihead: X * 1e160": (lambda: attnlib.multihead_attention(X * 1e160, W), raises("X and weights", "float64")),
    "multihead: X * 1e300 (projection)": (lambda: attnlib.multihead_attention(X * 1e300, W), raises("X and weights")),
    "multihead: weights not Weights": (lambda: attnlib.multihead_attention(X, "w"), raises("weights", "str")),
    "multihead: X width": (lambda: attnlib.multihead_attention(X[:, :7], W), raises("X", "(5, 7)", "d_model = 8")),
    "multihead: X no tokens": (lambda: attnlib.multihead_attention(np.zeros((0, 8)), W), raises("X", "(0, 8)")),
    "multihead: X one axis": (lambda: attnlib.multihead_attention(X[0], W), raises("X", "(8,)")),
    "multihead: X bool": (lambda: attnlib.multihead_attention(X > 0, W), raises("X", "boolean")),
    "multihead: X_kv width": (lambda: attnlib.multihead_attention(X, W, X_kv=X[:, :6]), raises("X_kv", "(5, 6)")),
    "multihead: X_kv NaN": (lambda: attnlib.multihead_attention(X, W, X_kv=X * np.nan), raises("X_kv", "finite")),
    "multihead: causal cross, T_kv < T_q": (lambda: attnlib.multihead_attention(X, W, True, X_kv=X[:2]),
                                            raises("X", "(5, 8)", "X_kv", "(2, 8)")),
    "multihead: batches do not broadcast": (lambda: attnlib.multihead_attention(np.zeros((2, 5, 8)), W,
                                                                                X_kv=np.zeros((3, 4, 8))),
                                            raises("X", "X_kv", "(2, 5, 8)", "(3, 4, 8)")),
    "multihead: float32 X and weights stay float32": (lambda: attnlib.multihead_attention(X.astype(np.float32),
                                                                                         W.astype(np.float32)),
                                                      gives(lambda r: r.dtype == np.float32)),
    # --- LowRank and circuits -------------------------------------------------------
    "LowRank: NaN": (lambda: LowRank(np.full((4, 2), np.nan), np.ones((2, 4))), raises("A", "finite")),
    "LowRank: inf in B": (lambda: LowRank(np.ones((4, 2)), np.full((2, 4), np.inf)), raises("B", "finite")),
    "LowRank: inner sizes": (lambda: LowRank(np.ones((4, 2)), np.ones((3, 4))), raises("A", "B", "(4, 2)", "(3, 4)")),
    "LowRank: one axis": (lambda: LowRank(np.ones(4), np.ones((1, 4))), raises("A", "(4,)")),
    "LowRank: str": (lambda: LowRank("ab", np.ones((2, 2))), raises("A")),
    "LowRank[5] of 2 heads": (lambda: LR[5], raises("5", "2 heads", "(2, 8, 8)")),
    "LowRank[-3] of 2 heads": (lambda: LR[-3], raises("-3", "2 heads")),
    "LowRank['a']": (lambda: LR["a"], raises("'a'")),
    "LowRank[0, 0] past the heads": (lambda: LR[0, 0], raises("head axes", "(2,)")),
    "LowRank @ wrong rows": (lambda: LR @ np.ones((7, 3)), raises("(2, 8, 8)", "(7, 3)")),
    "wrong columns @ LowRank": (lambda: np.ones((3, 7)) @ LR, raises("(3, 7)", "(2, 8, 8)")),
    "LowRank * complex": (lambda: LR * 1j, raises("real number", "complex")),
    "LowRank * nan": (lambda: LR * float("nan"), raises("finite number", "nan")),
    "LowRank eigenvalues, not square": (lambda: LowRank(np.ones((4, 2)), np.ones((2, 3))).eigenvalues(),
                                        raises("square", "(4, 3)")),
    "LowRank norm of 1e100 factors": (lambda: LowRank(np.eye(3, 1) * 1e100, np.eye(1, 3) * 1e100).norm(),
                                      gives(lambda r: np.isclose(r, 1e200))),
    "LowRank norm that overflows": (lambda: LowRank(np.eye(3, 1) * 1e200, np.eye(1, 3) * 1e200).norm(),
                                    raises("norm", "A and B")),
    "qk_circuit: not Weights": (lambda: C.qk_circuit(np.eye(4)), raises("weights", "ndarray")),
    "ov_circuit: not Weights": (lambda: C.ov_circuit(None), raises("weights", "NoneType")),
    "full_ov_circuit: W_U transposed": (lambda: C.full_ov_circuit(np.eye(5, 8), W, np.eye(5, 8)),
                                        raises("W_U", "(5, 8)", "d_model = 8")),
    "full_qk_circuit: W_E NaN": (lambda: C.full_qk_circuit(np.full((3, 8), np.nan), W), raises("W_E", "finite")),
    "copying_score: zero circuit": (lambda: C.copying_score(np.zeros((3, 3))), raises("zero")),
    "copying_score: not square": (lambda: C.copying_score(np.ones((3, 2))), raises("circuit", "(3, 2)")),
    "composition_score: kind": (lambda: C.composition_score("x", W, W), raises("kind", "'x'")),
    "composition_score: d_model": (lambda: C.composition_score("k", W, random_weights(4, 2)), raises("d_model")),
    "composition_baseline: samples 0": (lambda: C.composition_baseline("k", 8, 4, samples=0), raises("samples")),
    "composition_baseline: seed -1": (lambda: C.composition_baseline("k", 8, 4, seed=-1), raises("seed", "-1")),
    # --- cost ---------------------------------------------------------------------
    "cost.parameters: unknown form": (lambda: cost.parameters("concatt", 8, 2), raises("concatt")),
    "cost.flops: T 0": (lambda: cost.flops("concat", 0, 8, 2), raises("T", "0")),
    "cost.flops: d_model 8.0": (lambda: cost.flops("concat", 4, 8.0, 2), raises("d_model", "8.0")),
    "cost.decode_cost: cache": (lambda: cost.decode_cost(4, 8, 2, cache="k"), raises("cache", "'k'")),
}

# Every FORMS entry, self- and cross-attention, on overflowing and malformed input.
for _name, _f in FORMS.items():
    ROWS[f"{_name}: X * 1e160"] = (lambda f=_f: f(X * 1e160, W), raises("X and weights"))
    ROWS[f"{_name}: X, X_kv * 1e160"] = (lambda f=_f: f(X * 1e160, W, X_kv=X[:3] * 1e160), raises("X, X_kv and weights"))
    ROWS[f"{_name}: only X_kv * 1e160 is safe"] = (lambda f=_f: f(X, W, X_kv=X[:3] * 1e160),
                                                  gives(lambda r: r.shape == (5, 8) and np.abs(r).max() > 1e158))
    ROWS[f"{_name}: X batched"] = (lambda f=_f: f(X[None], W), raises("X", "(1, 5, 8)"))
    ROWS[f"{_name}: X_kv complex"] = (lambda f=_f: f(X, W, X_kv=X.astype(complex)), raises("X_kv", "complex"))
    ROWS[f"{_name}: causal 1"] = (lambda f=_f: f(X, W, causal=1), raises("causal"))


def _check_row(thunk, expect):
    kind, arg = expect
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (overflow, invalid value) fails the row
        try:
            with np.errstate(over="raise", invalid="raise", divide="raise"):
                result = thunk()
        except (ValueError, TypeError, IndexError, KeyError) as err:
            if kind != "raises":
                raise AssertionError(f"expected a result, got {type(err).__name__}: {err}") from err
            origin = Path(traceback.extract_tb(err.__traceback__)[-1].filename).resolve()
            assert LIB in origin.parents, (
                f"the error comes from {origin}, not from attnlib's own checks: {type(err).__name__}: {err}")
            message = str(err)
            missing = [w for w in arg if w not in message]
            assert not missing, f"the message does not name {missing}: {message!r}"
            return
    assert kind == "gives", f"expected an error naming {arg}, got a result: {result!r}"
    values = [result] if not isinstance(result, (list, tuple, Weights)) else []
    for v in values:
        arr = np.asarray(v.full() if isinstance(v, LowRank) else v)
        assert not np.isnan(arr).any(), "NaN out of finite input"
    assert arg(result), f"wrong result: {result!r}"


def test_the_table_is_large_and_covers_every_public_function():
    assert len(ROWS) >= 30
    public = [*attnlib.__all__, *FORMS, "full_ov_circuit", "full_qk_circuit", "copying_score",
              "composition_score", "composition_baseline", "cost.parameters", "cost.flops", "cost.decode_cost"]
    missing = [name for name in public if name != "PerHead" and
               not any(row.split(":")[0].split("[")[0].startswith(name.replace("multihead_attention", "multihead"))
                       or row.startswith(name) for row in ROWS)]
    assert not missing, f"no bad-input row for {missing}"


def _old_name(*args):
    """attention_pattern's errors, without its PendingDeprecationWarning (which the rows turn into errors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return attnlib.attention_pattern(*args)


@pytest.mark.parametrize("row", list(ROWS))
def test_bad_input(row):
    thunk, expect = ROWS[row]
    _check_row(thunk, expect)


def test_the_check_catches_a_raw_numpy_error():
    # The harness itself must fail on numpy's own message and on a silent NaN.
    with pytest.raises(AssertionError, match="not from attnlib"):
        _check_row(lambda: np.zeros(0).max(), raises("zero-size"))
    with pytest.raises(AssertionError, match="NaN out of finite input|expected an error"):
        _check_row(lambda: np.array([np.nan]), gives(lambda r: True))


def test_overflow_is_reported_not_warned_in_every_form():
    # The same X * 1e160 that overflows: each form names X, not a numpy warning.
    for name, f in FORMS.items():
        with pytest.raises(ValueError, match="X and weights"):
            f(X * 1e160, W)
    assert math.isfinite(float(np.abs(FORMS["factored"](X * 1e20, W)).max()))
