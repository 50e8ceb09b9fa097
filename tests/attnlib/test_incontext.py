"""Smeared keys, Olsson et al.'s induction test and the in-context score (numpy only)."""
import numpy as np
import pytest

import attnlib
from attnlib import incontext
from attnlib.model import Model
from attnlib.tokenizer import BPE

from test_model import loop_forward


def toy(smear=None, seed=0, vocab=12, n_ctx=16, d_model=8, n_heads=2, n_layers=2):
    rng = np.random.default_rng(seed)
    layers = [attnlib.random_weights(d_model, n_heads, seed=seed + l) for l in range(n_layers)]
    bpe = BPE({**{chr(97 + i): i for i in range(vocab - 2)}, "<unk>": vocab - 2, "<bos>": vocab - 1}, [], r".",
              unk="<unk>", special=["<bos>"])
    return Model(rng.normal(size=(vocab, d_model)), rng.normal(size=(n_ctx, d_model)),
                 rng.normal(size=(d_model, vocab)), layers, {"bos": vocab - 1}, bpe, None, smear)


def test_smeared_keys_equal_a_plain_loop_over_positions():
    s = [np.array([0.3, 1.0]), np.array([0.0, 0.7])]
    model = toy(smear=s)
    tokens = np.array([11, 3, 4, 3, 4, 5, 6, 7])
    np.testing.assert_allclose(model.forward(tokens), loop_forward(model, tokens), atol=1e-10)
    # and smearing changes something: s = 1 everywhere is the plain model
    plain = toy(smear=[np.ones(2), np.ones(2)])
    np.testing.assert_allclose(plain.forward(tokens), toy().forward(tokens), atol=1e-12)
    assert not np.allclose(model.forward(tokens), plain.forward(tokens))


@pytest.mark.parametrize("smear, message", [
    ([np.ones(2)], "one per layer"),
    ([np.ones(3), np.ones(2)], r"expected \(n_heads,\)"),
    ([np.ones(2), np.array([0.5, 1.5])], r"in \[0, 1\]"),
])
def test_bad_smear_weights_are_refused_with_the_reason(smear, message):
    with pytest.raises(ValueError, match=message):
        toy(smear=smear)


def test_smear_weights_survive_saving_and_loading(tmp_path):
    model = toy(smear=[np.array([0.25, 0.5]), np.array([1.0, 0.0])])
    arrays = model.arrays()
    assert np.array_equal(arrays["L1.smear"], [1.0, 0.0])
    assert "L0.smear" not in toy().arrays()


def test_repeated_random_sequences_repeat_distinct_text_tokens():
    model = toy()
    seqs = incontext.repeated_random(model, n=5, occurrences=3, seed=4)
    L = (model.n_ctx - 1) // 3
    assert seqs.shape == (5, 1 + 3 * L) and (seqs[:, 0] == model.bos).all()
    first = seqs[:, 1:1 + L]
    assert (seqs[:, 1 + L:1 + 2 * L] == first).all() and (seqs[:, 1 + 2 * L:] == first).all()
    assert all(len(set(row)) == L for row in first)
    assert not np.isin(seqs[:, 1:], [model.bos, model.tokenizer.unk]).any()
    with pytest.raises(ValueError, match="occurrences must be at least 2"):
        incontext.repeated_random(model, occurrences=1)
    with pytest.warns(DeprecationWarning, match="'copies' is now called 'occurrences'"):
        old = incontext.repeated_random(model, n=2, copies=3, seed=1)
    assert np.array_equal(old, incontext.repeated_random(model, n=2, occurrences=3, seed=1))


def test_a_head_built_to_prefix_match_scores_one_and_one_built_to_look_back_scores_one():
    """Hand-made attention weights: one head attends to the previous position, the other to the token after the earlier copy."""
    seqs = incontext.repeated_random(toy(), n=3, occurrences=3, seed=0)  # (3, 16)
    T = seqs.shape[1]
    earlier = attnlib_earlier(seqs)
    A = np.zeros((3, 2, T, T))
    for b in range(3):
        for t in range(T):
            A[b, 0, t, max(t - 1, 0)] = 1
            A[b, 1, t, earlier[b, t] + 1 if earlier[b, t] >= 0 else 0] = 1
    from attnlib.metrics import attention_to_previous, head_scores
    assert attention_to_previous(A, first=2).tolist() == [1.0, pytest.approx(0.0, abs=0.2)]
    s = head_scores(A, seqs, np.broadcast_to(np.arange(T) >= 1, seqs.shape))
    assert s["induction"][1] == 1.0 and s["induction"][0] < 0.2


def attnlib_earlier(seqs):
    from attnlib.metrics import earlier_occurrence
    return earlier_occurrence(seqs)


def test_the_in_context_score_compares_late_with_early_positions():
    flat = np.full((4, 64), 3.0)
    assert incontext.in_context_score(flat) == 0.0
    falling = np.tile(np.linspace(4.0, 2.0, 64), (4, 1))
    assert incontext.in_context_score(falling) < -1.5
    assert incontext.in_context_score(falling[:, ::-1]) > 1.5


def test_repeat_losses_and_token_losses_agree_with_the_forward_pass():
    model = toy()
    seqs = incontext.repeated_random(model, n=4, occurrences=3, seed=2)
    per_token = incontext.token_losses(model, seqs[:, :-1], seqs[:, 1:], batch=3)
    logits = model.forward(seqs[:, :-1])
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = -np.log(np.take_along_axis(p, seqs[:, 1:, None], -1)[..., 0])
    np.testing.assert_allclose(per_token, want, atol=1e-10)
    L = (model.n_ctx - 1) // 3
    np.testing.assert_allclose(incontext.repeat_losses(model, seqs), want.reshape(4, 3, L).mean(axis=(0, 2)))
