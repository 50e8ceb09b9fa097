"""The hand-built layer of chapters 1-9 does what the chapters say it does."""
import numpy as np
import pytest

import attnlib
from attnlib import example
from attnlib.forms import FORMS

RNG = np.random.default_rng(0)
SENTENCES = [example.SENTENCE] + [tuple(RNG.choice(example.WORDS, size=n)) for n in (1, 2, 3, 5, 6, 6, 6)]


def _weights(X, w, causal=False):
    return attnlib.attention_weights(X @ w.W_Q_heads, X @ w.W_K_heads, causal=causal)  # (h, T, T)


def test_the_embedding_reads_as_word_and_position():
    X = example.embed(example.SENTENCE)
    assert X.shape == (6, len(example.FEATURES)) == (6, 17)
    words = [example.FEATURES[j] for j in X[:, :5].argmax(axis=1)]
    assert words == list(example.SENTENCE)
    assert not X[:, 5:15].any()  # prev: and next: are empty until the heads write them
    angles = np.arctan2(X[:, 16], X[:, 15])
    assert np.allclose(np.unwrap(angles), np.arange(6) * example.ANGLE)


@pytest.mark.parametrize("tokens", SENTENCES, ids=" ".join)
def test_x_is_the_token_embedding_plus_the_position_embedding(tokens):
    W_E, W_pos = example.token_embedding(), example.position_embedding(len(tokens))
    assert W_E.shape == (5, 17) and W_pos.shape == (len(tokens), 17)
    assert not W_E[:, 5:].any() and not W_pos[:, :15].any()  # words and positions in their own dimensions
    ids = [example.WORDS.index(t) for t in tokens]
    assert np.array_equal(example.embed(tokens), W_E[ids] + W_pos)


@pytest.mark.parametrize("T", [0, 7, 2.5, "3"])
def test_position_embedding_names_a_bad_length(T):
    with pytest.raises(ValueError, match="T must be"):
        example.position_embedding(T)


@pytest.mark.parametrize("i, step, name", [(0, -1, "prev:"), (1, 1, "next:")])
def test_each_head_writes_what_its_token_did_not_have(i, step, name):
    ex = example.sentence()
    M = ex.X @ attnlib.ov_circuit(ex.weights)[i].full()  # (T, d_model): head i's messages
    term = _weights(ex.X, ex.weights)[i] @ M  # (T, d_model): what head i writes
    for t in range(6):
        if 0 <= t + step < 6:
            j = example.FEATURES.index(name + ex.tokens[t + step])
            assert ex.X[t, j] == 0 and term[t, j] > 0.9  # new at the destination


@pytest.mark.parametrize("tokens", SENTENCES, ids=" ".join)
@pytest.mark.parametrize("causal", [False, True])
def test_head_0_looks_at_the_previous_token(tokens, causal):
    ex = example.sentence(tokens)
    A = _weights(ex.X, ex.weights, causal)[0]
    T = len(tokens)
    assert A[0, 0] > 0.9  # the first token has no previous one: it reads itself
    assert all(A[t, t - 1] > 0.9 for t in range(1, T))


@pytest.mark.parametrize("tokens", SENTENCES, ids=" ".join)
def test_head_1_looks_at_the_next_token_and_the_mask_hides_it(tokens):
    ex = example.sentence(tokens)
    A, A_causal = _weights(ex.X, ex.weights)[1], _weights(ex.X, ex.weights, causal=True)[1]
    T = len(tokens)
    assert A[T - 1, T - 1] > 0.9  # the last token has no next one: it reads itself
    assert all(A[t, t + 1] > 0.9 for t in range(T - 1))
    # causal: the next token is hidden, and each token reads the nearest it may see, itself
    assert (A_causal.diagonal() > 0.99).all()


def test_random_heads_do_neither():
    # the null: a random layer of the same size puts little weight on the previous token
    X = example.embed(example.SENTENCE)
    prev = []
    for seed in range(20):
        A = _weights(X, attnlib.random_weights(17, 2, seed=seed, d_head=6))
        prev.append(np.mean([A[:, t, t - 1] for t in range(1, 6)] + [A[:, t, t + 1] for t in range(5)]))
    assert max(prev) < 0.5 < 0.9


def test_the_messages_carry_the_word_under_prev_and_under_next():
    ex = example.sentence()
    W_M = attnlib.ov_circuit(ex.weights).full()  # (2, d_model, d_model)
    M = ex.X @ W_M  # (2, T, d_model)
    f = example.FEATURES
    for t, word in enumerate(ex.tokens):
        assert M[0, t, f.index(f"prev:{word}")] == 1 and np.abs(M[0, t]).sum() == 1
        assert M[1, t, f.index(f"next:{word}")] == 1 and np.abs(M[1, t]).sum() == 1
    out = FORMS["concat"](ex.X, ex.weights)
    for t in range(1, len(ex.tokens)):  # after the layer, token t carries prev:<word t - 1>
        assert out[t, f.index(f"prev:{ex.tokens[t - 1]}")] > 0.9
    for t in range(len(ex.tokens) - 1):  # and next:<word t + 1>
        assert out[t, f.index(f"next:{ex.tokens[t + 1]}")] > 0.9


def test_ranks_are_below_d_head():
    w = example.weights()
    s_P = attnlib.qk_circuit(w).singular_values()
    s_M = attnlib.ov_circuit(w).singular_values()
    rank = lambda s: int((s > 1e-9 * s.max()).sum())  # noqa: E731
    assert [rank(s) for s in s_P] == [2, 2] and [rank(s) for s in s_M] == [5, 5]
    assert w.d_head == 6 and w.n_heads * w.d_head == 12 and w.d_model == 17


@pytest.mark.parametrize("causal", [False, True])
def test_every_form_agrees_on_the_example(causal):
    ex = example.sentence()
    ref = FORMS["concat"](ex.X, ex.weights, causal=causal)
    for name, f in FORMS.items():
        assert np.abs(f(ex.X, ex.weights, causal=causal) - ref).max() < 1e-12, name


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown words \\['dog'\\]"):
        example.embed(["the", "dog"])
    with pytest.raises(ValueError, match="7 words; at most 6"):
        example.embed(["the"] * 7)
    with pytest.raises(ValueError, match="empty"):
        example.embed([])
    with pytest.raises(ValueError, match="sharpness"):
        example.weights(-1.0)
    with pytest.raises(ValueError, match="expected \\(2, 17\\)"):
        example.table(np.zeros((2, 3)), ["a", "b"])


def test_table_hides_zeros_and_drops_empty_features():
    text = example.table(example.embed(["the", "cat"]), ["the", "cat"])
    lines = text.splitlines()
    assert lines[0].split() == ["the", "cat"]
    assert [ln.split()[0] for ln in lines[1:]] == ["the", "cat", "pos", "pos"]  # no sat, on, mat, prev:
    assert lines[1].split() == ["the", "1.00", "·"]
