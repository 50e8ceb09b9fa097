"""An exact reverse-mode pass through the book's models: the gradient of a logit direction (chapter 17).

Methods such as attribution patching estimate a patch's effect to first
order, from the gradient of a metric with respect to an activation. The
book's models are attention only (no LayerNorm, no MLP), so their backward
pass is short enough to write out, and numpy is all it needs. The metric
is ``(direction * logits).sum()``: a logit, a mean logit or a logit
difference, over a batch. Going down from the logits, with ``g`` the
gradient of the metric with respect to what is named::

    g(x_L)  = direction W_Uᵀ                               (the final stream)
    g(z_i)  = g(x_(l+1)) W^O_iᵀ                            (z_i = A_i V_i: head i's mix of values)
    g(A_i)  = g(z_i) V_iᵀ,   g(V_i) = A_iᵀ g(z_i)
    g(S_i)  = A_i ⊙ (g(A_i) − rowsum(g(A_i) ⊙ A_i))        (through the softmax)
    g(Q_i)  = g(S_i) K_i / √d_head,   g(K_i) = g(S_i)ᵀ Q_i / √d_head
    g(x_l)  = g(x_(l+1)) + Σ_i g(Q_i) W^Q_iᵀ + g(K_i) W^K_iᵀ + g(V_i) W^V_iᵀ

A head's write is added to the stream, so the gradient with respect to
every write of layer ``l`` is ``g(x_(l+1))``; the gradient with respect to
what head ``i``'s queries, keys and values *read* (the receiver's inputs of
:mod:`attnlib.paths`) is each term of the sum above on its own. Smeared keys
(``k'_j = s k_j + (1 - s) k_(j-1)``) pass their gradient back to both keys.

Examples
--------
>>> from attnlib.model import load
>>> m = load("induction")
>>> toks = np.array([50, 3, 7, 9, 3])
>>> direction = np.zeros((5, m.vocab)); direction[-1, 7] = 1.0   # the logit of 7 at the last position
>>> g = gradients(m, toks, direction)
>>> bool(np.isclose(g.metric, m.forward(toks)[-1, 7])), g.stream.shape
(True, (3, 5, 64))
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .grader import answer_of
from .model import Model, Trace, _count
from .objectives import Linear, Metric


class Gradients(NamedTuple):
    """The gradient of ``(direction * logits).sum()`` with respect to every activation of one run.

    Leading batch axes ``...`` are those of the tokens; gradients are not
    summed over the batch (each sequence's activations are its own).
    """

    metric: float  #: the metric in this run (``(direction * logits).sum()`` for a direction)
    trace: Trace  #: the forward pass the gradients were taken at
    stream: np.ndarray  #: (n_layers + 1, ..., T, d_model): w.r.t. the stream before each layer, and the final one
    queries: list  #: per layer, (..., n_heads, T, d_head)
    keys: list  #: per layer, (..., n_heads, T, d_head): w.r.t. the keys as compared (after smearing)
    values: list  #: per layer, (..., n_heads, T, d_head)
    weights: list  #: per layer, (..., n_heads, T, T): w.r.t. the attention weights
    inputs: list  #: per layer, (..., 3, n_heads, T, d_model): w.r.t. what each head's q, k, v read

    def write(self, layer: int) -> np.ndarray:
        """The gradient with respect to any write of ``layer`` (each head's term is added to the stream).

        Returns
        -------
        (..., T, d_model) ndarray
        """
        return self.stream[layer + 1]


def _unsmear(g, s):
    """The adjoint of ``K -> s K + (1 - s) shift(K)``, ``shift(K)_j = K_(max(j-1, 0))``; g: (..., n_heads, T, d)."""
    back = np.zeros_like(g)
    back[..., :-1, :] = g[..., 1:, :]  # key j-1 receives what key j's smeared copy got
    back[..., 0, :] += g[..., 0, :]  # position 0 keeps its own key
    s = s[:, None, None]  # (n_heads, 1, 1)
    return s * g + (1 - s) * back


def check_direction(model: Model, tokens: np.ndarray, direction):
    """``direction`` as a float array of the logits' shape (or a :class:`~attnlib.objectives.Metric`), or a clear error."""
    if isinstance(direction, Metric):
        return direction
    direction = np.asarray(direction, dtype=float)
    want = tokens.shape + (model.vocab,)
    if direction.shape != want:
        raise ValueError(f"direction has shape {direction.shape}: expected the logits' shape"
                         f" (..., T, vocab) = {want} for tokens of shape {tokens.shape}")
    if not np.isfinite(direction).all():
        raise ValueError("direction has NaN or infinite entries")
    return direction


@answer_of("10_attribution_patching")
def gradients(model: Model, tokens, direction, edits=None) -> Gradients:
    """Run ``model`` on ``tokens`` and take the exact gradient of ``(direction * logits).sum()``.

    Parameters
    ----------
    model : Model
    tokens : (..., T) array_like of int
    direction : (..., T, vocab) array_like, or Metric
        The metric's weights on the logits: one-hot for a logit, ``1/n`` on
        ``n`` entries for a mean logit, ``+1`` and ``-1`` for a difference;
        or any :class:`attnlib.objectives.Metric` (a log-probability, the KL
        divergence ...), whose gradient at this run's logits starts the pass.
    edits : optional
        Edits of the forward pass (:meth:`attnlib.model.Model.run`), held
        fixed: the gradients are those of the edited run with respect to the
        activations downstream of each edit (e.g. an embedding moved part of
        the way to another input's, for integrated gradients).

    Returns
    -------
    Gradients

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("copy_back")
    >>> toks = np.array([3, 1, 4, 1, 5])
    >>> d = np.zeros((5, m.vocab)); d[:, 2] = 1.0
    >>> [g.shape for g in gradients(m, toks, d).keys]
    [(1, 5, 32)]
    """
    tokens = model._tokens(tokens)
    direction = check_direction(model, tokens, direction)
    tr = model.run(tokens, edits)  # the forward side (counted there)
    _count(backward=1)
    metric = direction if isinstance(direction, Metric) else Linear(direction)
    direction = metric.gradient(tr.logits)  # (..., T, vocab): d metric / d logits
    g = direction @ model.W_U.T  # (..., T, d_model): the final stream
    stream = [g]
    queries, keys, values, weights, inputs = [], [], [], [], []
    for l in reversed(range(model.n_layers)):
        w = model.layers[l]
        W_Q, W_K, W_V, W_O = w.per_head  # (n_heads, d_model, d_head) each; W_O (n_heads, d_head, d_model)
        Q, K, V = (tr.cache.values[(l, c)] for c in "qkv")  # (..., n_heads, T, d_head): the keys as compared
        A = tr.attention_weights[l]  # (..., n_heads, T, T)
        gz = g[..., None, :, :] @ np.swapaxes(W_O, -1, -2)  # (..., n_heads, T, d_head)
        gA = gz @ np.swapaxes(V, -1, -2)  # (..., n_heads, T, T)
        gV = np.swapaxes(A, -1, -2) @ gz  # (..., n_heads, T, d_head)
        gS = A * (gA - (gA * A).sum(axis=-1, keepdims=True))  # masked entries have A = 0: no gradient
        scale = 1 / np.sqrt(w.d_head)
        gQ = gS @ K * scale  # (..., n_heads, T, d_head)
        gK = np.swapaxes(gS, -1, -2) @ Q * scale
        gK_read = gK if model.smear is None else _unsmear(gK, model.smear[l])
        g_in = np.stack([gy @ np.swapaxes(Wm, -1, -2) for gy, Wm in ((gQ, W_Q), (gK_read, W_K), (gV, W_V))],
                        axis=-4)
        # g_in: (..., 3, n_heads, T, d_model)
        g = g + g_in.sum(axis=(-4, -3))
        stream.append(g)
        queries.append(gQ)
        keys.append(gK)
        values.append(gV)
        weights.append(gA)
        inputs.append(g_in)
    return Gradients(metric.value(tr.logits), tr, np.stack(stream[::-1]), queries[::-1], keys[::-1], values[::-1],
                     weights[::-1],
                     inputs[::-1])
