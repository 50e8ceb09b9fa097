"""Named sites of a forward pass, and edits of them: TransformerLens's hook points, in numpy (chapters 10-17).

:meth:`attnlib.model.Model.run` is the one place the model is computed. Every
value it computes has a name, a *site*, in the book's vocabulary:

===============================  ==================  ==========================================
site                             shape               what it is
===============================  ==================  ==========================================
``"tok"``, ``"pos"``             (..., T, d_model)   the token embedding ``W_E[tokens]``, the position embedding ``W_pos[:T]``
``"embed"``                      (..., T, d_model)   their sum, the stream before layer 0
``(layer, "stream")``            (..., T, d_model)   the stream a layer reads (``layer = n_layers``: what the unembedding reads)
``(layer, head, "x_q")`` ...     (..., T, d_model)   what the head's queries (``"x_k"``: keys, ``"x_v"``: values) read: the stream, unless edited
``(layer, head, "q")``           (..., T, d_head)    queries ``x_q W^Q``
``(layer, head, "k_raw")``       (..., T, d_head)    keys ``x_k W^K`` before smearing
``(layer, head, "k")``           (..., T, d_head)    keys as compared (after smearing; the raw keys if the model has none)
``(layer, head, "v")``           (..., T, d_head)    values ``x_v W^V``
``(layer, head, "scores")``      (..., T, T)         ``q kᵀ / √d_head``, future keys ``-inf``
``(layer, head, "weights")``     (..., T, T)         the attention weights, ``softmax(scores)``
``(layer, head)``                (..., T, d_model)   the head's write, ``weights v W^O``, added to the stream
``"logits"``                     (..., T, vocab)     ``stream W_U``
===============================  ==================  ==========================================

An *edit* of a site is a function ``edit(site, value, cache) -> new value``,
called where the site is computed (``cache`` holds what the run has computed so
far, by site), or an array to put in its place. Everything downstream is
computed from what the edit returns. A head's three reads of the stream are
sites of their own, so that an edit can change what one head reads and
nothing else (a path cut, :mod:`attnlib.paths`); the scores' mask is applied
again after an edit (a head never sees the future).

Examples
--------
>>> site_name((1, 0, "k")), site_name((0, 2)), site_name((2, "stream"))
('L1H0.k', 'L0H2', 'stream2')
>>> check_site((0, 1, "weights"), n_heads=[4, 4])
(0, 1, 'weights')
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np

from .normalize import causal_mask

EMBEDDINGS = ("tok", "pos", "embed")
"""The sites before layer 0."""

READS = {"x_q": "q", "x_k": "k", "x_v": "v"}
"""A head's three reads of the stream, by site, and the input each feeds."""

HEAD_SITES = ("x_q", "x_k", "x_v", "q", "k_raw", "k", "v", "scores", "weights")
"""A head's named values, in the order they are computed (its write, ``(layer, head)``, comes last)."""


def _integer(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_site(site, n_heads) -> tuple | str:
    """``site`` in its normal form (a string or a tuple of ints and a name), or a ``ValueError`` naming it.

    Parameters
    ----------
    site : str or tuple
        One of the sites in this module's table.
    n_heads : sequence of int
        The model's heads per layer.

    Returns
    -------
    str or tuple
    """
    n_layers = len(n_heads)
    if isinstance(site, str):
        if site in EMBEDDINGS or site == "logits":
            return site
    elif isinstance(site, tuple) and site and _integer(site[0]):
        layer = int(site[0])
        if len(site) == 2 and site[1] == "stream" and 0 <= layer <= n_layers:
            return (layer, "stream")
        if 0 <= layer < n_layers and len(site) in (2, 3) and _integer(site[1]) and 0 <= site[1] < n_heads[layer]:
            if len(site) == 2:
                return (layer, int(site[1]))
            if site[2] in HEAD_SITES:
                return (layer, int(site[1]), site[2])
    raise ValueError(f"{site!r} is not a site of this model ({n_layers} layers of {list(n_heads)} heads): a site is"
                     " 'tok', 'pos', 'embed', (layer, 'stream'), (layer, head), (layer, head, name) with name one of"
                     f" {', '.join(HEAD_SITES)}, or 'logits'")


def site_name(site) -> str:
    """A short printable name: ``"L1H0.k"``, ``"L0H2"``, ``"stream2"``, ``"embed"``."""
    if isinstance(site, str):
        return site
    if site[1] == "stream":
        return f"stream{site[0]}"
    return f"L{site[0]}H{site[1]}" + (f".{site[2]}" if len(site) == 3 else "")


def replace(value, positions=None):
    """An edit that puts ``value`` in place of a site's (at ``positions`` of its position axis only).

    Parameters
    ----------
    value : array_like
        Broadcast to the site's shape.
    positions : sequence of int, optional
        Positions (the site's second-to-last axis for ``(..., T, d)`` sites,
        the query axis for scores and weights); default: all.

    Returns
    -------
    callable
        ``edit(site, old, cache) -> new``.

    Examples
    --------
    >>> edit = replace(np.zeros((3, 2)), positions=[1])
    >>> edit("embed", np.ones((3, 2)), {})
    array([[1., 1.],
           [0., 0.],
           [1., 1.]])
    """
    value = np.asarray(value)
    if positions is None:
        return lambda site, old, cache: np.broadcast_to(value, old.shape).astype(old.dtype)
    positions = np.asarray(positions)

    def edit(site, old, cache):
        new = old.copy()
        new[..., positions, :] = np.broadcast_to(value, old.shape)[..., positions, :]
        return new
    return edit


def zero(site, value, cache):
    """An edit that puts zeros in place of a site's value (zero ablation of a head's write, say)."""
    return np.zeros_like(value)


def normalise(edits, n_heads) -> dict:
    """``edits`` (a mapping or pairs of site and edit) as ``{site: [callable, ...]}``, checked.

    An array becomes :func:`replace` of it; several edits of one site are
    applied in the order given.
    """
    if edits is None:
        return {}
    pairs = edits.items() if isinstance(edits, Mapping) else edits
    out = {}
    for item in pairs:
        try:
            site, edit = item
        except (TypeError, ValueError):
            raise TypeError("edits must be a dict of site to edit, or (site, edit) pairs") from None
        site = check_site(site, n_heads)
        if not callable(edit):
            edit = replace(edit)
        out.setdefault(site, []).append(edit)
    return out


class Cache(Mapping):
    """Every value of one run, by site (TransformerLens's ``ActivationCache``).

    Built by :meth:`attnlib.model.Model.run`: it stores each layer's values
    for all heads at once, and a head's site is a view of them. ``scores``
    not edited are recomputed from the cached queries and keys when read
    (bit for bit what the run computed).
    """

    def __init__(self, n_heads, d_head):
        self.n_heads = tuple(n_heads)
        self.d_head = tuple(d_head)
        self.values = {}  # "tok", "pos", "embed", "logits", (layer, "stream"), (layer, name): all heads
        self.reads = {}  # (layer, head, "x_q" | "x_k" | "x_v"): edited reads only

    def __getitem__(self, site):
        site = check_site(site, self.n_heads)
        if isinstance(site, str) or site[1] == "stream":
            return self.values[site]
        layer, head = site[:2]
        name = site[2] if len(site) == 3 else "write"
        if name in READS:
            return self.reads.get(site, self.values[(layer, "stream")])
        if name == "scores" and (layer, "scores") not in self.values:
            return self.scores(layer)[..., head, :, :]
        return self.values[(layer, name)][..., head, :, :]

    def scores(self, layer) -> np.ndarray:
        """Every head's scores in ``layer``: ``(..., n_heads, T, T)``, future keys ``-inf``."""
        if (layer, "scores") in self.values:
            return self.values[(layer, "scores")]
        S = attention_scores(self.values[(layer, "q")], self.values[(layer, "k")], self.d_head[layer])
        S[..., ~causal_mask(S.shape[-1])] = -np.inf
        return S

    def __iter__(self):
        yield from EMBEDDINGS
        for l, h in enumerate(self.n_heads):
            yield (l, "stream")
            for i in range(h):
                yield from ((l, i, name) for name in HEAD_SITES)
                yield (l, i)
        yield (len(self.n_heads), "stream")
        yield "logits"

    def __len__(self):
        return 5 + sum(h * (len(HEAD_SITES) + 1) + 1 for h in self.n_heads)

    def __contains__(self, site):
        try:
            site = check_site(site, self.n_heads)
        except ValueError:
            return False
        if isinstance(site, str) or site[1] == "stream":
            return site in self.values
        return (site[0], "weights") in self.values or (site[0], "q") in self.values


def attention_scores(Q, K, d_head) -> np.ndarray:
    """``Q Kᵀ / √d_head`` for every head at once, unmasked: ``(..., n_heads, T, T)``.

    The queries are scaled, not the ``(T, T)`` scores (as :func:`attnlib.attention.attention_weights` does).
    """
    return (Q * (1.0 / math.sqrt(d_head))) @ np.swapaxes(K, -1, -2)  # a Python float keeps float32


def smear(K, s) -> np.ndarray:
    """Smeared keys ``s k_j + (1 - s) k_(j-1)`` (position 0 keeps its own key).

    Parameters
    ----------
    K : (..., n_heads, T, d_head) ndarray
        Raw keys.
    s : (n_heads,) ndarray
        Each head's weight on a position's own key.

    Returns
    -------
    (..., n_heads, T, d_head) ndarray

    Examples
    --------
    >>> smear(np.arange(3.0)[None, :, None], np.array([0.5]))[0, :, 0]
    array([0. , 0.5, 1.5])
    """
    s = s[:, None, None]  # (n_heads, 1, 1)
    return s * K + (1 - s) * np.concatenate([K[..., :1, :], K[..., :-1, :]], axis=-2)
