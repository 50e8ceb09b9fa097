"""Measuring a trained model on fresh sequences: accuracy, loss, and what each head attends to.

Weight-based readings (circuits, copying and composition scores) are in
:mod:`attnlib.circuits`; here are behaviour-based ones, computed from the
attention weights and predictions of :meth:`attnlib.model.Model.trace` on sequences
from :mod:`attnlib.tasks`. :func:`measure` computes a model card's metrics.
"""
from __future__ import annotations

import numpy as np

from ._deprecated import renamed_keywords
from .grader import answer_of
from .circuits import composition_baseline, composition_score, copying_score, full_ov_circuit, qk_circuit
from .tasks import TASKS


def _scored(logits, targets, mask, what: str):
    """The arrays :func:`accuracy` and :func:`loss` score, checked against each other."""
    logits, targets, mask = np.asarray(logits), np.asarray(targets), np.asarray(mask, dtype=bool)
    if logits.shape[:-1] != targets.shape or mask.shape != targets.shape:
        raise ValueError(f"logits {logits.shape} must be targets {targets.shape} plus a vocab axis,"
                         f" and mask {mask.shape} the shape of targets")
    if not mask.any():
        raise ValueError(f"mask selects no position: {what} is undefined")
    return logits, targets, mask


def accuracy(logits, targets, mask) -> float:
    """Fraction of masked positions where the largest logit is the target.

    Parameters
    ----------
    logits : (..., T, vocab) ndarray
    targets : (..., T) ndarray of int
    mask : (..., T) ndarray of bool

    Returns
    -------
    float

    Examples
    --------
    >>> accuracy(np.eye(3)[None], np.array([[0, 2, 2]]), np.array([[True, True, False]]))
    0.5
    """
    logits, targets, mask = _scored(logits, targets, mask, "accuracy")
    return float((logits.argmax(axis=-1) == targets)[mask].mean())


def loss(logits, targets, mask) -> float:
    """Mean cross-entropy (nats) of the masked positions' targets: what :func:`accuracy` rounds away.

    Accuracy saturates: once the target's logit is the largest, a model (or
    an ablation) that makes it much less certain scores the same. The loss
    keeps that difference: ``-log softmax(logits)[target]``, averaged.

    Parameters
    ----------
    logits : (..., T, vocab) ndarray
    targets : (..., T) ndarray of int
    mask : (..., T) ndarray of bool

    Returns
    -------
    float

    Examples
    --------
    Uniform logits over 4 tokens cost log 4 nats, whatever the target:

    >>> round(loss(np.zeros((1, 2, 4)), np.array([[0, 3]]), np.array([[True, True]])), 4)
    1.3863
    """
    logits, targets, mask = _scored(logits, targets, mask, "the loss")
    picked = logits[mask]  # (n, vocab): the masked positions
    picked = picked - picked.max(axis=-1, keepdims=True)
    logp = picked - np.log(np.exp(picked).sum(axis=-1, keepdims=True))  # (n, vocab)
    return float(-logp[np.arange(len(picked)), targets[mask]].mean())


def earlier_occurrence(tokens) -> np.ndarray:
    """For each position, where the same token last occurred before it (``-1`` if never).

    Parameters
    ----------
    tokens : (..., T) array_like of int

    Returns
    -------
    (..., T) ndarray of int

    Examples
    --------
    >>> earlier_occurrence([5, 7, 5, 5, 7])
    array([-1, -1,  0,  2,  1])
    """
    tokens = np.asarray(tokens)
    T = tokens.shape[-1]
    same = tokens[..., :, None] == tokens[..., None, :]  # (..., T, T): [t, s] same token
    earlier = same & np.tri(T, T, -1, dtype=bool)  # s < t
    last = np.where(earlier, np.arange(T), -1).max(axis=-1)  # (..., T)
    return last


@renamed_keywords(weights="A")
def onto_one_occurrence(A, tokens, which: str = "last") -> np.ndarray:
    """Attention weights with all the weight on earlier copies of the query's token put on one.

    For each query whose token occurred before, the total weight the head
    puts on *all* those earlier occurrences is put on one of them (the most
    recent, ``which="last"``, or the first, ``"first"``); the weight on
    every other position is kept. Rows still sum to 1. With
    :func:`attnlib.paths.trace`'s ``attention``, this asks what a head that
    spreads its weight over several copies would do if it did not.

    Parameters
    ----------
    A : (..., T, T) array_like
        One head's attention weights (rows: queries).
    tokens : (..., T) array_like of int
    which : {"last", "first"}

    Returns
    -------
    (..., T, T) ndarray

    Examples
    --------
    >>> A = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    >>> onto_one_occurrence(A, [4, 4, 4])[2].tolist()   # 0.2 + 0.3 onto position 1
    [0.0, 0.5, 0.5]
    """
    if which not in ("last", "first"):
        raise ValueError(f"which must be 'last' or 'first', got {which!r}")
    A, tokens = np.array(A, dtype=float), np.asarray(tokens)
    T = tokens.shape[-1]
    if A.shape != tokens.shape + (T,):
        raise ValueError(f"A (the attention weights) has shape {A.shape}, expected the tokens' shape plus T:"
                         f" {tokens.shape + (T,)}")
    same = (tokens[..., :, None] == tokens[..., None, :]) & np.tri(T, T, -1, dtype=bool)  # (..., T, T)
    total = np.where(same, A, 0.0).sum(axis=-1)  # (..., T): weight on every earlier copy
    pos = np.arange(T)
    one = (np.where(same, pos, -1).max(axis=-1) if which == "last"
           else np.where(same, pos, T).min(axis=-1))  # (..., T): the copy that gets it
    A[same] = 0.0
    has = same.any(axis=-1)  # (..., T): queries with an earlier copy
    idx = np.nonzero(has)
    A[idx + (one[idx],)] += total[idx]
    return A


@renamed_keywords(pattern="A")
def attention_to(A, source, mask) -> np.ndarray:
    """Mean attention each head pays from query ``t`` to key ``source[t]``, over the masked queries.

    Parameters
    ----------
    A : (..., n_heads, T, T) ndarray
        Attention weights.
    source : (..., T) ndarray of int
        For each query, the key position of interest (ignored where not masked).
    mask : (..., T) ndarray of bool

    Returns
    -------
    (n_heads,) ndarray
        In ``[0, 1]``: 1 means every masked query puts all its weight there.

    Examples
    --------
    >>> A = np.tri(3)[None] / np.arange(1, 4)[:, None]          # one head, uniform causal
    >>> attention_to(A, np.array([0, 0, 1]), np.array([False, True, True])).round(3)
    array([0.417])
    """
    A, source, mask = np.asarray(A), np.asarray(source), np.asarray(mask, dtype=bool)
    if not mask.any():
        raise ValueError("mask selects no query: the score is undefined")
    T = A.shape[-1]
    picked = np.take_along_axis(A, np.clip(source, 0, T - 1)[..., None, :, None], axis=-1)[..., 0]
    # picked: (..., n_heads, T), the weight each query puts on its source key
    picked = np.moveaxis(picked, -2, 0)  # (n_heads, ..., T)
    return picked[:, mask].mean(axis=-1)


@renamed_keywords(pattern="A")
def attention_to_previous(A, first: int = 1) -> np.ndarray:
    """Mean weight each head puts on the position just before the query, over queries ``first`` .. ``T - 1``.

    :func:`head_scores` uses ``first=1`` (every query that has a previous
    position: the toy models' cards); :func:`attnlib.incontext.induction_scores`
    uses ``first=2``, leaving out query 1, whose previous position is BOS,
    where many heads rest whatever they do elsewhere.

    Parameters
    ----------
    A : (..., n_heads, T, T) ndarray
        Attention weights.
    first : int
        The first query position counted (at least 1).

    Returns
    -------
    (n_heads,) ndarray

    Examples
    --------
    >>> A = np.tri(4)[None] / np.arange(1, 5)[:, None]   # one head, uniform causal
    >>> attention_to_previous(A).round(3), attention_to_previous(A, first=2).round(3)
    (array([0.361]), array([0.292]))
    """
    A = np.asarray(A)
    T = A.shape[-1]
    if not 1 <= first < T:
        raise ValueError(f"first must be a query position from 1 to T - 1 = {T - 1}, got {first}")
    rows = np.arange(first, T)
    picked = A[..., rows, rows - 1]  # (..., n_heads, T - first)
    return np.moveaxis(picked, -2, 0).reshape(picked.shape[-2], -1).mean(axis=-1)


@renamed_keywords(pattern="A")
def head_scores(A, tokens, mask) -> dict:
    """Three standard readings of every head on sequences with repeats.

    ``previous``: weight on the previous token; ``duplicate``: weight on the
    earlier occurrence of the current token; ``induction``: weight on the
    token *after* that earlier occurrence. Queries are those in ``mask``
    (``previous`` uses every position after the first:
    :func:`attention_to_previous` with ``first=1``).

    Parameters
    ----------
    A : (..., n_heads, T, T) ndarray
        Attention weights.
    tokens : (..., T) ndarray of int
    mask : (..., T) ndarray of bool

    Returns
    -------
    dict of str to (n_heads,) ndarray
    """
    tokens = np.asarray(tokens)
    T = tokens.shape[-1]
    prev = np.broadcast_to(np.arange(T) - 1, tokens.shape)
    earlier = earlier_occurrence(tokens)
    has = mask & (earlier >= 0)
    return {
        "previous": attention_to(A, prev, np.broadcast_to(np.arange(T) >= 1, tokens.shape)),
        "duplicate": attention_to(A, earlier, has),
        "induction": attention_to(A, earlier + 1, has),
    }


@answer_of("09_attribution")
def logit_terms(trace, W_U, targets) -> dict:
    """Each path's share of the target logits: the direct path, then every head.

    The logits are a sum, ``X^0 W_U + Σ_(l,i) (head write) W_U``
    (:meth:`attnlib.model.Model.trace`), so the logit of the target token
    splits into one term per path.

    Parameters
    ----------
    trace : attnlib.model.Trace
    W_U : (d_model, vocab) ndarray
    targets : (..., T) array_like of int
        The token whose logit is split, per position (``-1``: none; its terms are 0).

    Returns
    -------
    dict of str to (..., T) ndarray
        ``"direct"``, then ``"L0H0"``, ``"L0H1"``, ...; they add up to the target logits.
    """
    targets = np.asarray(targets)
    u = np.swapaxes(W_U, 0, 1)[np.clip(targets, 0, None)] * (targets >= 0)[..., None]  # (..., T, d_model)
    out = {"direct": (trace.embedding * u).sum(axis=-1)}
    for l, writes in enumerate(trace.writes):  # (..., n_heads, T, d_model)
        per_head = (writes * u[..., None, :, :]).sum(axis=-1)  # (..., n_heads, T)
        out.update({_head(l, i): per_head[..., i, :] for i in range(per_head.shape[-2])})
    return out


def _head(layer: int, head: int) -> str:
    return f"L{layer}H{head}"


def measure(model, n: int = 2000, seed: int = 12345) -> dict:
    """A model card's metrics, recomputed from the weights on fresh sequences.

    The sequences come from the model's own task (``model.card["task"]`` and
    ``["data"]``, without alternating sequences), drawn with ``seed``, so the
    numbers are the same on every run and every machine up to floating-point
    ties.

    Returns
    -------
    dict
        Task-dependent; always a ``"summary"`` string.
    """
    card = model.card
    task, data = card["task"], dict(card["data"])
    if task == "induction":
        data["alternating"] = 0.0
    batch = TASKS[task](n, seed, **data)
    tr = model.trace(batch.tokens)
    out: dict = {"eval_sequences": n, "eval_seed": seed}
    if task == "induction":
        return _measure_induction(model, batch, tr, out)
    return _measure_copying(model, task, batch, tr, out)


def _measure_induction(model, batch, tr, out):
    n_tokens = model.card["data"]["vocab"]
    repeat, first = batch.masks["repeat"], batch.masks["first"]
    out["repeat_accuracy"] = accuracy(tr.logits, batch.targets, repeat)
    out["first_accuracy"] = accuracy(tr.logits, batch.targets, first)
    out["chance"] = 1 / n_tokens
    scores = [head_scores(A, batch.tokens, repeat) for A in tr.attention_weights]
    out["head_scores"] = {kind: {_head(l, i): float(s[kind][i]) for l, s in enumerate(scores)
                                 for i in range(len(s[kind]))} for kind in ("previous", "duplicate", "induction")}
    prev = int(np.argmax(scores[0]["previous"]))
    dup = int(np.argmax(scores[0]["duplicate"]))
    ind = int(np.argmax(scores[-1]["induction"]))
    L = model.n_layers - 1
    out["previous_token_head"], out["duplicate_token_head"], out["induction_head"] = [0, prev], [0, dup], [L, ind]
    W_E, W_U = model.W_E[:n_tokens], model.W_U[:, :n_tokens]  # the segment tokens, not BOS
    out["induction_copying_score"] = float(copying_score(full_ov_circuit(W_E, model.layers[L], W_U)[ind]))
    out["ablated_repeat_accuracy"] = {
        _head(l, i): accuracy(model.forward(batch.tokens, ablate=[(l, i)], clean=tr), batch.targets, repeat)
        for l, w in enumerate(model.layers) for i in range(w.n_heads)}
    out["composition"] = {k: [round(float(s), 6) for s in composition_score(k, model.layers[L], model.layers[0])[ind]]
                          for k in "qkv"}
    out["composition_baseline"] = round(composition_baseline("k", model.d_model, model.layers[0].d_head), 6)
    out["summary"] = (f"repeated segment {out['repeat_accuracy']:.3f}, first {out['first_accuracy']:.3f}"
                      f" (chance {out['chance']:.3f}); previous-token head L0H{prev}"
                      f" ({scores[0]['previous'][prev]:.2f}), induction head L{L}H{ind}"
                      f" ({scores[-1]['induction'][ind]:.2f}); without L0H{prev}:"
                      f" {out['ablated_repeat_accuracy'][_head(0, prev)]:.3f}")
    return out


def _measure_copying(model, task, batch, tr, out):
    scored = batch.masks["scored"]
    out["accuracy"] = accuracy(tr.logits, batch.targets, scored)
    A = tr.attention_weights[0]  # (n, 1, T, T)
    T = batch.tokens.shape[-1]
    if task == "copy_back":
        k = model.card["data"]["k"]
        source = np.broadcast_to(np.arange(T) - k, batch.tokens.shape)
        copied = np.arange(model.vocab)
    else:
        source = np.broadcast_to(np.argmax(batch.tokens >= model.card["data"]["plain"], axis=-1)[:, None],
                                 batch.tokens.shape)
        copied = np.arange(model.card["data"]["plain"], model.vocab)
    out["attention_to_source"] = float(attention_to(A, source, scored)[0])
    ov = full_ov_circuit(model.W_E[copied], model.layers[0], model.W_U[:, copied])
    out["copying_score"] = float(copying_score(ov)[0])
    out["summary"] = (f"accuracy {out['accuracy']:.3f}; attention on the copied token"
                      f" {out['attention_to_source']:.2f}; copying score {out['copying_score']:.3f}")
    return out


def score_parts(model, tokens) -> dict:
    """Layer 0's attention scores split by what the query and the key bring: token or position.

    Layer 0 reads ``X^0 = E + P`` (token embeddings ``E = W_E[tokens]``,
    position embeddings ``P = W_pos[:T]``), so its unscaled score
    ``X^0 W^P X^0ᵀ`` is the sum of four parts, ``E W^P Eᵀ + E W^P Pᵀ + P W^P
    Eᵀ + P W^P Pᵀ``. Which part varies along a row decides where a query looks.

    Parameters
    ----------
    model : attnlib.model.Model
    tokens : (T,) array_like of int

    Returns
    -------
    dict of str to (n_heads, T, T) ndarray
        Keys ``"token → token"``, ``"token → position"``, ``"position → token"``,
        ``"position → position"`` (query side first).
    """
    tokens = model._tokens(tokens)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be one sequence (T,), got shape {tokens.shape}")
    E, P = model.W_E[tokens], model.W_pos[:len(tokens)]  # (T, d_model) each
    W_P = qk_circuit(model.layers[0])  # LowRank (n_heads, d_model, d_model)
    sides = {"token": E, "position": P}
    return {f"{q} → {k}": (Xq @ W_P @ Xk.T).full() for q, Xq in sides.items() for k, Xk in sides.items()}
