"""attnlib.backward: the exact gradient, against central finite differences of an independent forward pass."""
import numpy as np
import pytest

from attnlib import backward, random_weights
from attnlib.model import Model, load
from reference import ref_model_run as run


def small_model(smear=True, n_layers=3, seed=0):
    """A random model with three layers (so gradients flow through two later layers) and smeared keys."""
    rng = np.random.default_rng(seed)
    d, vocab, n_ctx, h = 12, 9, 8, 3
    layers = [random_weights(d, h, seed=seed + l) for l in range(n_layers)]
    s = [rng.uniform(0.3, 1.0, h) for _ in range(n_layers)] if smear else None
    return Model(rng.standard_normal((vocab, d)), rng.standard_normal((n_ctx, d)) * 0.5,
                 rng.standard_normal((d, vocab)), layers, {}, smear=s)


def grad_of(g, name):
    if name == "embed":
        return g.stream[0]
    kind, l, i = name[:3]
    if kind == "in":
        return g.inputs[l][..., "qkv".index(name[3]), i, :, :]
    if kind == "write":
        return g.write(l)
    return {"q": g.queries, "k": g.keys, "v": g.values, "A": g.weights}[kind][l][..., i, :, :]


NAMES = ["embed", ("write", 0, 1), ("write", 2, 0), ("in", 1, 2, "q"), ("in", 1, 0, "k"), ("in", 2, 1, "v"),
         ("q", 0, 0), ("k", 1, 1), ("k", 0, 2), ("v", 2, 2), ("A", 1, 0), ("A", 0, 2)]


@pytest.mark.parametrize("smear", [True, False])
@pytest.mark.parametrize("name", NAMES, ids=str)
def test_gradient_matches_central_differences(name, smear):
    m = small_model(smear)
    rng = np.random.default_rng(1)
    toks = rng.integers(0, m.vocab, (2, 7))  # a batch of two
    direction = rng.standard_normal(toks.shape + (m.vocab,))
    g = backward.gradients(m, toks, direction)
    assert np.isclose(g.metric, (direction * run(m, toks)).sum(), rtol=1e-12)
    G = grad_of(g, name)
    for trial in range(3):
        v = rng.standard_normal(G.shape)
        if name[0] == "A":
            v = np.tril(v)  # the weights of masked keys do not exist
        eps = 1e-5
        f = [(direction * run(m, toks, {name: s * eps * v})).sum() for s in (1, -1)]
        fd = (f[0] - f[1]) / (2 * eps)
        assert abs(fd - (G * v).sum()) < 1e-6 * max(1.0, abs(fd)), (name, fd, (G * v).sum())


def test_writes_share_their_layer_gradient_and_stream_is_the_sum_of_inputs():
    m = small_model()
    toks = np.array([1, 4, 2, 8, 0, 3])
    d = np.random.default_rng(2).standard_normal((6, m.vocab))
    g = backward.gradients(m, toks, d)
    assert np.allclose(g.stream[-1], d @ m.W_U.T)
    for l in range(m.n_layers):  # what layer l reads = what passes it by + what its heads read
        assert np.allclose(g.stream[l], g.stream[l + 1] + g.inputs[l].sum(axis=(0, 1)))


def test_trained_model_one_logit():
    m = load("induction")
    toks = np.array([50, 11, 12, 13, 14, 11, 12])
    d = np.zeros((7, m.vocab))
    d[5, 12] = 1.0
    g = backward.gradients(m, toks, d)
    rng = np.random.default_rng(3)
    v = rng.standard_normal(g.stream[0].shape)
    eps = 1e-5
    fd = (run(m, toks, {"embed": eps * v})[5, 12] - run(m, toks, {"embed": -eps * v})[5, 12]) / (2 * eps)
    assert abs(fd - (g.stream[0] * v).sum()) < 1e-6 * max(1.0, abs(fd))


def test_direction_must_have_the_logits_shape():
    m = load("copy_back")
    with pytest.raises(ValueError, match=r"direction has shape \(5, 3\).*\(5, 20\)"):
        backward.gradients(m, [1, 2, 3, 4, 5], np.zeros((5, 3)))
    with pytest.raises(ValueError, match="NaN"):
        backward.gradients(m, [1, 2], np.full((2, 20), np.nan))
