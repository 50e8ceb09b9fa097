"""Every step of the refactor computes the same layer (property-based)."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnlib
from attnlib.forms import FORMS

from reference import ref_multihead


@st.composite
def layers(draw):
    n_heads = draw(st.integers(1, 8))
    d_head = draw(st.integers(1, 16))
    d_model = n_heads * d_head + draw(st.sampled_from([0, 0, 1, 7, 20]))  # equal, and larger
    T = draw(st.integers(1, 32))
    seed = draw(st.integers(0, 2**32 - 1))
    w = attnlib.random_weights(d_model, n_heads, seed=seed, d_head=d_head)
    X = np.random.default_rng(seed + 1).standard_normal((T, d_model))
    return X, w


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers(), st.booleans())
def test_every_form_agrees_with_concat(layer, causal):
    X, w = layer
    want = FORMS["concat"](X, w, causal=causal)
    scale = max(1.0, np.abs(want).max())
    for name, f in FORMS.items():
        got = f(X, w, causal=causal)
        assert got.shape == X.shape, name
        assert np.abs(got - want).max() <= 1e-12 * scale, name


def test_forms_are_in_chapter_order():
    assert list(FORMS) == ["concat", "sum_of_heads", "values", "messages",
                           "patterns_and_messages", "factored"]


def test_concat_agrees_with_independent_reference():
    w = attnlib.random_weights(24, 3, seed=5)
    X = np.random.default_rng(0).standard_normal((9, 24))
    for causal in (False, True):
        want = ref_multihead(X, w.W_Q, w.W_K, w.W_V, w.W_O, 3, causal=causal)
        for name, f in FORMS.items():
            assert np.abs(f(X, w, causal=causal) - want).max() <= 1e-12, name


@pytest.mark.parametrize("name", list(FORMS))
def test_float32_in_float32_out(name):
    w = attnlib.random_weights(16, 4, seed=0, dtype=np.float32)
    X = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32)
    for causal in (False, True):
        out = FORMS[name](X, w, causal=causal)
        assert out.dtype == np.float32, name
        want = FORMS["concat"](X.astype(np.float64), w.astype(np.float64), causal=causal)
        assert np.abs(out - want).max() < 1e-5


@pytest.mark.parametrize("name", list(FORMS))
def test_forms_reject_bad_input(name):
    w = attnlib.random_weights(8, 2, seed=0)
    with pytest.raises(ValueError, match=r"d_model = 8"):
        FORMS[name](np.ones((3, 7)), w)
    with pytest.raises(TypeError, match="weights"):
        FORMS[name](np.ones((3, 8)), "weights")
    with pytest.raises(TypeError, match="causal"):
        FORMS[name](np.ones((3, 8)), w, causal=None)


def test_factored_never_allocates_a_d_model_squared_array_per_head():
    d_model, n_heads, T = 512, 8, 16
    w = attnlib.random_weights(d_model, n_heads, seed=0)
    X = np.random.default_rng(0).standard_normal((T, d_model))
    one_array = n_heads * d_model**2 * X.itemsize  # 16 MiB: every W^P_i at once
    for name, expect_below in [("factored", True), ("patterns_and_messages", False)]:
        FORMS[name](X, w)  # warm caches (fused weights, per-head views)
        tracemalloc.start()
        FORMS[name](X, w, causal=True)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        # the materialised form is the control: it must trip the same measurement
        assert (peak < one_array) == expect_below, (name, peak, one_array)
    tracemalloc.start()
    FORMS["factored"](X, w)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < one_array / 8, f"factored form peaked at {peak} bytes, one W^P_i is {one_array // 8}"


# --- cross-attention: queries from X, keys and values from X_kv ----------------

@pytest.mark.parametrize("T_q, T_kv", [(1, 1), (3, 7), (7, 3), (5, 5), (1, 9)])
@pytest.mark.parametrize("causal", [False, True])
def test_every_form_does_cross_attention(T_q, T_kv, causal):
    if causal and T_kv < T_q:
        pytest.skip("causal cross-attention needs T_kv >= T_q (tested in test_bad_input)")
    w = attnlib.random_weights(12, 3, seed=T_q * 10 + T_kv)
    rng = np.random.default_rng(T_q + T_kv)
    X, X_kv = rng.standard_normal((T_q, 12)), rng.standard_normal((T_kv, 12))
    want = ref_multihead(X, w.W_Q, w.W_K, w.W_V, w.W_O, 3, causal=causal, X_kv=X_kv)
    for name, f in FORMS.items():
        got = f(X, w, causal=causal, X_kv=X_kv)
        assert got.shape == (T_q, 12), name  # one row per query: T_q, not T_kv
        assert np.abs(got - want).max() <= 1e-12, name
    batched = attnlib.multihead_attention(np.stack([X, X]), w, causal, X_kv=X_kv)  # X_kv broadcasts
    assert np.abs(batched - want).max() <= 1e-12


def test_cross_attention_with_X_kv_equal_to_X_is_self_attention():
    w = attnlib.random_weights(8, 2, seed=3)
    X = np.random.default_rng(3).standard_normal((6, 8))
    for name, f in FORMS.items():
        for causal in (False, True):
            assert np.abs(f(X, w, causal, X_kv=X.copy()) - f(X, w, causal)).max() <= 1e-12, name


def test_cross_attention_reads_only_the_source():
    # Changing X_kv changes the output; each query row depends on its own row of X only.
    w = attnlib.random_weights(8, 2, seed=4)
    rng = np.random.default_rng(4)
    X, X_kv = rng.standard_normal((4, 8)), rng.standard_normal((9, 8))
    out = attnlib.multihead_attention(X, w, X_kv=X_kv)
    assert np.abs(attnlib.multihead_attention(X, w, X_kv=X_kv + 1.0) - out).max() > 1e-3
    assert np.abs(attnlib.multihead_attention(X[:2], w, X_kv=X_kv) - out[:2]).max() <= 1e-12
