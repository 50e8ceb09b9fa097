"""What random or untrained weights give: the nulls that trained scores are compared with (numpy only)."""
import numpy as np
import pytest

import attnlib
from attnlib import circuits, incontext, metrics
from attnlib.circuits import composition_baseline, composition_null, composition_score, copying_null, copying_score
from attnlib.model import load


@pytest.mark.parametrize("kind", "qkv")
def test_the_composition_null_is_the_baselines_sample(kind):
    null = composition_null(kind, 32, 8, samples=40, seed=3)
    assert null.shape == (40,)
    assert null.mean() == pytest.approx(composition_baseline(kind, 32, 8, samples=40, seed=3), abs=1e-15)
    # each sample is composition_score of one pair of random heads, recomputed here from scratch
    rng = np.random.default_rng(3)
    later = attnlib.random_weights(32, 40, seed=rng, d_head=8)
    earlier = attnlib.random_weights(32, 40, seed=rng, d_head=8)
    pairs = composition_score(kind, later, earlier)  # (40, 40): every pair
    np.testing.assert_allclose(null, np.diag(pairs), atol=1e-12)
    assert np.quantile(null, 0.95) > null.mean() > 0


@pytest.mark.slow
def test_the_copying_null_is_random_heads_read_through_the_models_embeddings():
    model = load("plays_1l")
    null = copying_null(model, n=300, seed=0)
    assert null.shape == (300,) and (np.abs(null) <= 1).all()
    assert abs(null.mean()) < 3 * null.std() / np.sqrt(300)  # centred on 0 ...
    assert 0.1 < null.std() < 0.25                              # ... with a spread a score must clear
    np.testing.assert_array_equal(null, copying_null(model, n=300, seed=0))  # seeded
    # the first sample by hand: random W_V, W_O of the layer's d_head, read over the text tokens
    from attnlib import text

    ids = text.text_tokens(model)
    w = attnlib.random_weights(model.d_model, 300, seed=0, d_head=model.layers[0].d_head)
    M = w.per_head.W_V[0] @ w.per_head.W_O[0]
    full = model.W_E[ids] @ M @ model.W_U[:, ids]
    assert copying_score(full) == pytest.approx(null[0], abs=1e-9)


def test_a_head_that_copies_is_above_the_copying_null_and_bad_input_is_refused():
    model = load("copy_back")  # its one head copies the token three back
    score = copying_score(circuits.full_ov_circuit(model.W_E, model.layers[0], model.W_U))[0]
    assert score > np.quantile(copying_null(model, n=200), 0.99)
    with pytest.raises(ValueError, match="layer must be in 0 .. 0"):
        copying_null(model, layer=1)
    with pytest.raises(ValueError, match="tokens must be at least 2 token ids"):
        copying_null(model, tokens=[0, 99])
    with pytest.raises(ValueError, match="n must be"):
        copying_null(model, n=0)


def test_the_in_context_interval_is_a_bootstrap_over_windows():
    x = np.random.default_rng(1).normal(0.3, 2.0, size=500)
    r = incontext.in_context_interval(x, n_boot=4000, seed=0)
    assert r["windows"] == 500 and r["score"] == pytest.approx(x.mean())
    assert r["sd"] == pytest.approx(x.std() / np.sqrt(500), rel=0.1)  # the standard error of a mean
    assert r["low"] < x.mean() < r["high"]
    losses = np.random.default_rng(2).normal(3.0, 1.0, size=(50, 64))
    by_window = incontext.in_context_by_window(losses)
    assert by_window.mean() == pytest.approx(incontext.in_context_score(losses), abs=1e-11)
    with pytest.raises(ValueError, match="one score per window"):
        incontext.in_context_interval([1.0])
    with pytest.raises(ValueError, match=r"\(n windows, T\)"):
        incontext.in_context_by_window(np.zeros(64))


def test_untrained_scores_are_step_0_and_below_the_trained_head():
    spans = load("plays_2l_spans")
    seqs = incontext.repeated_random(spans, n=8, occurrences=3, seed=4)
    null = incontext.untrained_scores("plays_2l_spans", seqs)
    trained = incontext.induction_scores(spans, seqs)
    assert null["prefix"].shape == trained["prefix"].shape == (2, 4)
    assert null["prefix"].max() < 0.1 < trained["prefix"][1].max()
    with pytest.raises(ValueError, match="without checkpoints"):
        incontext.untrained_scores("induction", seqs)


def test_previous_token_scores_agree_between_metrics_and_incontext():
    """metrics.head_scores counts query 1 (whose previous position is BOS); incontext.induction_scores leaves it out."""
    spans = load("plays_2l_spans")
    seqs = incontext.repeated_random(spans, n=4, occurrences=3)
    A = spans.attention_weights(seqs)[0]  # (4, n_heads, T, T)
    mask = np.broadcast_to(np.arange(seqs.shape[-1]) >= 1, seqs.shape)
    from_metrics = metrics.head_scores(A, seqs, mask)["previous"]
    np.testing.assert_allclose(metrics.attention_to_previous(A), from_metrics, atol=1e-12)  # first=1
    T = seqs.shape[-1]
    at_1 = A[..., 1, 0].mean(axis=0)  # (n_heads,): query 1's weight on BOS
    np.testing.assert_allclose((from_metrics * (T - 1) - at_1) / (T - 2),
                               metrics.attention_to_previous(A, first=2), atol=1e-12)
    np.testing.assert_allclose(incontext.induction_scores(spans, seqs)["previous"][0],
                               metrics.attention_to_previous(A, first=2), atol=1e-12)


def test_prefix_scores_count_the_last_or_every_earlier_occurrence():
    """By hand on one sequence: a b c a b c a, with a head looking at every earlier 'after' token equally."""
    tokens = np.array([[1, 2, 3, 1, 2, 3, 1]])
    T = 7
    A = np.zeros((1, 1, T, T))
    A[0, 0, :, 0] = 1.0  # rest on position 0 ...
    A[0, 0, 6] = 0.0
    A[0, 0, 6, [1, 4]] = 0.5  # ... except query 6 (token 1): half on each token after an earlier 1
    mask = np.ones((1, T), bool)
    last = metrics.head_scores(A, tokens, mask)["induction"]
    every = incontext._after_any_earlier(A, tokens, mask)
    # queries with an earlier occurrence: 3, 4, 5, 6; only query 6 puts weight after one
    assert last[0] == pytest.approx(0.5 / 4) and every[0] == pytest.approx(1.0 / 4)


@pytest.mark.parametrize("call, message", [
    (lambda: composition_null("x", 8, 4), "kind must be one of"),
    (lambda: composition_null("k", 8, 4, samples=0), "samples"),
    (lambda: composition_null("k", 8, 4, seed=-1), "seed"),
])
def test_composition_null_refuses_bad_input(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_the_in_context_parts_of_a_window_of_64_are_as_documented():
    """EARLY and LATE in windows of 64: positions 3 to 8 (the slice 3:9) and 54 to 63."""
    losses = np.zeros((1, 64))
    losses[0, 3:9] = 1.0  # early part only
    assert incontext.in_context_score(losses) == -1.0
    losses = np.zeros((1, 64))
    losses[0, 54:] = 1.0  # late part only
    assert incontext.in_context_score(losses) == 1.0
    losses[0, [2, 9, 53]] = 5.0  # next to the parts: not counted
    assert incontext.in_context_score(losses) == 1.0


def test_a_random_rotation_is_orthogonal_and_seeded():
    Q = circuits.random_orthogonal(6, seed=2)
    np.testing.assert_allclose(Q @ Q.T, np.eye(6), atol=1e-12)
    np.testing.assert_array_equal(Q, circuits.random_orthogonal(6, seed=2))
    assert not np.allclose(Q, circuits.random_orthogonal(6, seed=3))
    # uniform (Haar): the mean of many draws is near zero, not the identity's signs
    mean = np.mean([circuits.random_orthogonal(3, seed=s) for s in range(400)], axis=0)
    assert np.abs(mean).max() < 0.15
    with pytest.raises(ValueError, match="d must be"):
        circuits.random_orthogonal(0)


def test_rotated_weights_keep_each_message_spectrum_and_every_pattern():
    w = attnlib.random_weights(12, 3, seed=0, d_head=2)
    r = circuits.rotated_weights(w, seed=5)
    M, M_r = attnlib.ov_circuit(w).full(), attnlib.ov_circuit(r).full()  # (3, 12, 12) each
    np.testing.assert_allclose(np.linalg.svd(M_r, compute_uv=False), np.linalg.svd(M, compute_uv=False),
                               atol=1e-12)
    assert not np.allclose(M_r, M)  # ... in other directions
    np.testing.assert_array_equal(attnlib.qk_circuit(r).full(), attnlib.qk_circuit(w).full())


@pytest.mark.parametrize("kind", "qkv")
def test_the_rotated_composition_null_scores_the_later_head_against_turned_earlier_heads(kind):
    model = load("induction")
    l0, l1 = model.layers
    null = circuits.rotated_composition_null(kind, l1, l0, samples=30, seed=4)
    assert null.shape == (30, 4, 4) and (null > 0).all()
    # sample 0 by hand: the same rotations, drawn from the same generator
    first = circuits.rotated_weights(l0, np.random.default_rng(4))
    np.testing.assert_allclose(null[0], composition_score(kind, l1, first), atol=1e-12)
    # the pair of chapter 13 whose Gaussian null is narrow: the kept spectrum widens it
    plain = load("induction_plain")
    wide = circuits.rotated_composition_null("q", *plain.layers[::-1], samples=200)[:, 1, 2]
    gauss = composition_null("q", plain.d_model, plain.layers[0].d_head)
    assert np.quantile(wide, 0.99) > np.quantile(gauss, 0.99) + 0.02
    with pytest.raises(ValueError, match="kind must be one of"):
        circuits.rotated_composition_null("x", l1, l0)
    with pytest.raises(ValueError, match="samples"):
        circuits.rotated_composition_null(kind, l1, l0, samples=0)


def test_the_rotated_copying_null_is_the_full_circuit_of_the_turned_heads():
    model = load("induction")
    ids = np.arange(model.card["data"]["vocab"])
    null = circuits.rotated_copying_null(model, layer=1, n=5, seed=7, tokens=ids)
    assert null.shape == (5, 4) and (np.abs(null) <= 1).all()
    turned = circuits.rotated_weights(model.layers[1], np.random.default_rng(7))
    direct = copying_score(circuits.full_ov_circuit(model.W_E[ids], turned, model.W_U[:, ids]))  # (4,)
    np.testing.assert_allclose(null[0], direct, atol=1e-9)
    # a copying head keeps its spectrum but not its alignment with W_E and W_U: it falls to chance
    score = copying_score(circuits.full_ov_circuit(model.W_E[ids], model.layers[1], model.W_U[:, ids]))
    assert score[0] > 0.9 > np.quantile(circuits.rotated_copying_null(model, 1, n=50, tokens=ids)[:, 0], 0.99)
    with pytest.raises(ValueError, match="layer must be in 0 .. 1"):
        circuits.rotated_copying_null(model, layer=2)
    with pytest.raises(ValueError, match="tokens must be at least 2"):
        circuits.rotated_copying_null(model, tokens=[3])
