"""Path-specific ablation: remove one head's term from what *one* later reader sees (chapters 12, 13, 15).

``Model.forward(tokens, ablate=[(0, 1)])`` drops head L0H1's term from the
residual stream, so every later reader loses it at once: the queries, keys
and values of every layer-1 head, and the unembedding. Because the stream is
a sum, the term can instead be dropped from one reader only. Head ``j``
of layer ``l`` reads the stream three times, and each read is a separate
path::

    Q = x_q W^Q_j,   K = x_k W^K_j,   V = x_v W^V_j       (normally x_q = x_k = x_v = x)

An :class:`Edge` names a sender head, a receiver (a later head, or
``"logits"`` for the unembedding) and the receiver's inputs it is removed
from (``"q"``, ``"k"``, ``"v"`` or any combination); ``x_q`` (say) is then
the stream minus the sender's term. :func:`trace` runs the model so. Removing
a sender from every input of every later head and from the logits is the
residual-stream ablation of ``Model.trace(tokens, ablate=...)``; removing it
from the keys of one head only asks whether that head's attention weights needed the
sender through its keys (K-composition), and so on.

The removed term is the sender's write in this run (the same as the clean
run's in a two-layer model, whose layer 0 reads only the embedding). It is
replaced by zero (``how="zero"``) or by its mean over the batch at each
position (``how="mean"``, from the clean run of ``tokens``, or of
``reference`` tokens if given), which keeps what the term has in common
across sequences and removes only what varies with them. ``attention``
replaces a head's attention weights by given ones (an intervention on
where it looks, chapter 13).

Examples
--------
>>> from attnlib.model import load
>>> m = load("induction")
>>> toks = np.arange(1, 11)[None].repeat(2, 0)   # (2, 10)
>>> tr = trace(m, toks, [Edge((0, 2), (1, 0), "k")])
>>> len(tr.attention_weights), tr.logits.shape
(2, (2, 10, 51))
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np

from .model import Model, Trace

INPUTS = "qkv"
"""A head's three reads of the stream: queries, keys, values."""

EMBEDDINGS = ("embed", "tok", "pos")
"""Senders before layer 0: the embedding (token and position together), or either alone."""


class Edge(NamedTuple):
    """A path to cut: ``sender``'s term, removed from ``receiver``'s inputs ``via``.

    Parameters
    ----------
    sender : (int, int) or "embed"
        ``(layer, head)`` whose write is removed, or the input: ``"embed"``
        (token and position embeddings together), ``"tok"`` or ``"pos"``.
    receiver : (int, int) or "logits"
        A head of a later layer, or the unembedding.
    via : str
        Which of the receiver's inputs lose the term: ``"q"``, ``"k"``,
        ``"v"`` or a combination such as ``"qk"`` (ignored for ``"logits"``).
    """

    sender: tuple
    receiver: tuple | str
    via: str = INPUTS


def residual(model: Model, heads) -> list:
    """The edges that together drop ``heads`` from the residual stream (``Model.trace``'s ``ablate``).

    Every later head's queries, keys and values, and the logits.

    Returns
    -------
    list of Edge

    Examples
    --------
    >>> from attnlib.model import load
    >>> len(residual(load("induction"), [(0, 2)]))   # 4 layer-1 heads and the logits
    5
    """
    out = []
    for layer, head in heads:
        out += [Edge((layer, head), (l, j)) for l in range(layer + 1, model.n_layers)
                for j in range(model.layers[l].n_heads)]
        out.append(Edge((layer, head), "logits"))
    return out


def _pair(model, p, what) -> tuple:
    ok = (isinstance(p, tuple) and len(p) == 2
          and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in p)
          and 0 <= p[0] < model.n_layers and 0 <= p[1] < model.layers[p[0]].n_heads)
    if not ok:
        raise ValueError(f"{what} {p!r} is not a (layer, head) pair of this model"
                         f" ({model.n_layers} layers of {[w.n_heads for w in model.layers]} heads)")
    return int(p[0]), int(p[1])


def _edges(model, edges) -> list:
    """Check the edges; return them as (sender, receiver, set of inputs)."""
    if isinstance(edges, Edge):
        edges = [edges]
    out = []
    for e in edges:
        if not isinstance(e, Edge):
            e = Edge(*e) if isinstance(e, tuple) and 2 <= len(e) <= 3 else None
            if e is None:
                raise TypeError("edges must be Edge(sender, receiver, via) tuples")
        if isinstance(e.sender, str):
            if e.sender not in EMBEDDINGS:
                raise ValueError(f"sender {e.sender!r} is not a (layer, head) pair nor one of {EMBEDDINGS}")
            sender = e.sender
        else:
            sender = _pair(model, tuple(e.sender), "sender")
        if e.receiver == "logits":
            out.append((sender, "logits", set(INPUTS)))
            continue
        receiver = _pair(model, tuple(e.receiver), "receiver")
        if not isinstance(sender, str) and receiver[0] <= sender[0]:
            raise ValueError(f"receiver L{receiver[0]}H{receiver[1]} must be in a later layer than sender"
                             f" L{sender[0]}H{sender[1]}: a head reads only what earlier layers wrote")
        via = set(e.via) if isinstance(e.via, str) else None
        if not via or not via <= set(INPUTS):
            raise ValueError(f"via must be some of 'q', 'k', 'v' (e.g. 'k' or 'qkv'), got {e.via!r}")
        out.append((sender, receiver, via))
    return out


def trace(model: Model, tokens, edges=(), how: str = "zero", reference=None,
          attention=None) -> Trace:
    """Run ``model`` with each edge's sender removed from its receiver's inputs only.

    Parameters
    ----------
    model : Model
    tokens : (..., T) array_like of int
    edges : collection of Edge
        The paths to cut (:class:`Edge`, or ``(sender, receiver, via)``
        tuples); :func:`residual` gives those of a whole-stream ablation.
    how : {"zero", "mean"}
        Replace the removed term by zero, or by its mean over the batch at
        each position (needs a batch: tokens with a leading axis, or
        ``reference``).
    reference : (n, T) array_like of int, optional
        Sequences whose clean run gives the means for ``how="mean"``
        (default: ``tokens``).
    attention : dict, optional
        ``{(layer, head): A}``: attention weights to use in place of what
        the head computes, ``A`` of shape ``(..., T, T)`` like the tokens
        (an intervention on where the head looks: its values and what later
        layers do with its message are computed as usual).

    Returns
    -------
    Trace
        As ``Model.trace``. ``writes`` are each head's terms in this
        run; ``residual[l]`` is the stream as written before layer ``l``
        (cut terms are removed from their readers, not from the stream),
        and ``residual[-1]`` is what the unembedding reads.
    """
    tokens = model._tokens(tokens)
    cuts = _edges(model, edges)
    if how not in ("zero", "mean"):
        raise ValueError(f"how must be 'zero' or 'mean', got {how!r}")
    T = tokens.shape[-1]
    forced = {}
    for p, A in (attention or {}).items():
        A = np.asarray(A, dtype=float)
        if A.shape != tokens.shape + (T,):
            raise ValueError(f"attention for {p!r} has shape {A.shape}, expected the tokens' shape plus T:"
                             f" {tokens.shape + (T,)}")
        forced[_pair(model, tuple(p), "attention's head")] = A  # (..., T, T)
    means = None
    if how == "mean":
        ref = tokens if reference is None else model._tokens(reference)
        if ref.ndim < 2 or ref.shape[-1] != T:
            raise ValueError(f"mean ablation needs a batch of sequences of T = {T} tokens to average over;"
                             f" got {'reference' if reference is not None else 'tokens'} of shape {ref.shape}")
        ref_cache = model.run(ref).cache
        means = {s: np.broadcast_to(ref_cache[s], ref.shape + (model.d_model,)).mean(axis=tuple(range(ref.ndim - 1)))
                 for s in {s for s, _, _ in cuts}}  # (T, d_model) each

    def removed(sender, cache):
        term = cache[sender]  # (..., T, d_model): the sender's write (or the embedding) in this run
        return term if means is None else term - means[sender]

    edits = cut_edits(model, cuts, removed)
    edits += [((l, h, "weights"), A) for (l, h), A in forced.items()]
    return model.run(tokens, edits)


def cut_edits(model: Model, cuts, removed) -> list:
    """The edits of :meth:`attnlib.model.Model.run` that take ``removed(sender, cache)`` out of each cut's reads.

    Parameters
    ----------
    model : Model
    cuts : list of (sender, receiver, set of inputs)
        As :func:`_edges` returns them.
    removed : callable
        ``removed(sender, cache) -> (..., T, d_model)``: the term to subtract,
        from what the run has computed so far.

    Returns
    -------
    list of (site, edit)
        For a head, its reads ``(layer, head, "x_q")`` ...; for the logits,
        the final stream ``(n_layers, "stream")``.
    """
    edits = []
    for sender, receiver, via in cuts:
        def edit(site, x, cache, sender=sender):
            return x - removed(sender, cache)
        if receiver == "logits":
            edits.append(((model.n_layers, "stream"), edit))
        else:
            edits += [((receiver[0], receiver[1], "x_" + c), edit) for c in INPUTS if c in via]
    return edits


def forward(model: Model, tokens, edges=(), how: str = "zero", reference=None,
            attention=None) -> np.ndarray:
    """Logits with the given paths cut, or heads' attention weights replaced (:func:`trace`).

    Returns
    -------
    (..., T, vocab) ndarray

    Examples
    --------
    >>> from attnlib.model import load
    >>> m = load("induction")
    >>> toks = np.arange(1, 11)
    >>> bool(np.allclose(forward(m, toks, residual(m, [(0, 2)])), m.forward(toks, ablate=[(0, 2)])))
    True
    """
    return trace(model, tokens, edges, how, reference, attention).logits
