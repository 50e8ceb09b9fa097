"""Induction heads and in-context learning in models of text (chapter 15).

Olsson et al. (2022) test a model for induction heads on a sequence nobody
could predict from statistics: BOS, then random tokens, then the same random
tokens again (and again). A head that, at a repeated token, attends to the
token *after* that token's earlier occurrence is **prefix matching**; one
that attends to the position just before is a **previous-token** head. The
two together are the induction circuit (chapter 12). In-context learning is
measured on ordinary text: how much lower the loss is late in a window than
early in it.

Examples
--------
>>> from attnlib.model import load
>>> m = load("plays_1l")
>>> tokens = repeated_random(m, n=2, occurrences=3)
>>> tokens.shape, bool((tokens[:, 1:43] == tokens[:, 43:85]).all())
((2, 127), True)
"""
from __future__ import annotations

import warnings

import numpy as np

from . import paths
from ._deprecated import renamed_keywords
from .metrics import attention_to_previous as _attention_to_previous
from .metrics import head_scores
from .text import text_tokens

EARLY, LATE = (0.05, 0.15), (0.85, 1.0)
"""The parts of a window (as fractions of its length) whose losses :func:`in_context_score` compares.

Each part is the slice ``int(a * T):int(b * T)``: in windows of 64, positions
3 to 8 (the slice ``3:9``) early and 54 to 63 late."""


@renamed_keywords(copies="occurrences")
def repeated_random(model, n: int = 64, occurrences: int = 3, seed: int = 0) -> np.ndarray:
    """Olsson et al.'s test sequences: BOS, then ``L`` random tokens, occurring ``occurrences`` times in a row.

    ``L = (n_ctx - 1) // occurrences``; the ``L`` tokens of a sequence are distinct
    text tokens (``attnlib.text.text_tokens``), drawn without replacement.
    (``copies`` is the old name of ``occurrences``: it warns.)

    Returns
    -------
    (n, 1 + occurrences * L) ndarray of int64
    """
    if occurrences < 2:
        raise ValueError(f"occurrences must be at least 2 (a first occurrence and a repeat), got {occurrences}")
    L = (model.n_ctx - 1) // occurrences
    rng = np.random.default_rng(seed)
    ids = text_tokens(model)
    segments = np.stack([rng.choice(ids, size=L, replace=False) for _ in range(n)])  # (n, L)
    return np.concatenate([np.full((n, 1), model.bos), np.tile(segments, occurrences)], axis=1).astype(np.int64)


def induction_scores(model, tokens, ablate=(), edges=(), occurrences: str = "last") -> dict:
    """Every head's previous-token and prefix-matching scores on repeated sequences.

    Parameters
    ----------
    tokens : (n, T) ndarray of int
        BOS then a segment repeated (:func:`repeated_random`).
    ablate : collection of (layer, head)
        Heads dropped from the model while measuring (``Model.trace``).
    edges : collection of attnlib.paths.Edge
        Paths cut while measuring (:func:`attnlib.paths.trace`), e.g. one
        layer-0 head removed from one layer-1 head's keys only.

    occurrences : {"last", "all"}
        Which earlier occurrences of the current token count for
        ``"prefix"``: the most recent one only (the default), or every one.

    Returns
    -------
    dict of str to (n_layers, n_heads) ndarray
        ``"previous"``: mean weight on the previous position (queries from
        position 2: ``metrics.attention_to_previous(A, first=2)``); ``"prefix"``: mean
        weight on the token after the earlier occurrence of the current
        token (queries in the repeats).

    Notes
    -----
    In the third copy of a :func:`repeated_random` sequence a token has two
    earlier occurrences. By default only the token after the *most recent*
    one counts (``metrics.head_scores``, as for the toy models' cards): one
    target per query, the one a head that copies the nearest repeat picks.
    A head that splits its weight between the two copies then scores lower
    than with ``occurrences="all"``, which sums the weight on the tokens
    after every earlier occurrence (as TransformerLens-style scores do).
    """
    tokens = np.asarray(tokens)
    if occurrences not in ("last", "all"):
        raise ValueError(f"occurrences must be 'last' or 'all', got {occurrences!r}")
    attention_weights = _trace(model, tokens, ablate, edges).attention_weights  # per layer: (n, n_heads, T, T)
    T = tokens.shape[-1]
    mask = np.broadcast_to(np.arange(T) >= 1, tokens.shape)  # not BOS
    if occurrences == "last":
        prefix = [head_scores(A, tokens, mask)["induction"] for A in attention_weights]
    else:
        prefix = [_after_any_earlier(A, tokens, mask) for A in attention_weights]
    previous = [_attention_to_previous(A, first=2) for A in attention_weights]
    return {"previous": np.stack(previous), "prefix": np.stack(prefix)}


def _after_any_earlier(A, tokens, mask) -> np.ndarray:
    """Mean total weight on the tokens after every earlier occurrence of the query's token, per head.

    ``A`` is the attention weights, ``(..., n_heads, T, T)``.
    """
    T = tokens.shape[-1]
    t, k = np.arange(T)[:, None], np.arange(T)[None, :]
    prev_tok = np.concatenate([np.full(tokens.shape[:-1] + (1,), -1), tokens[..., :-1]], axis=-1)  # token at k - 1
    target = (prev_tok[..., None, :] == tokens[..., :, None]) & (k >= 1) & (k <= t)  # (..., T, T)
    has = mask & target.any(axis=-1)  # queries with an earlier occurrence
    weight = (A * target[..., None, :, :]).sum(axis=-1)  # (..., n_heads, T)
    return np.moveaxis(weight, -2, 0)[:, has].mean(axis=-1)


def untrained_scores(name, tokens) -> dict:
    """:func:`induction_scores` of a shipped model at step 0 of its training: what the scores are by chance.

    The untrained model has the trained one's architecture, positions and
    BOS but no learned weights, so its heads' scores are what an
    unspecialised head gets on the same sequences (a head that spreads its
    weight over the ``t`` keys of query ``t`` puts about ``1/t`` on each).
    A trained head matches prefixes *above chance* only if its score is
    above the largest of these.

    Parameters
    ----------
    name : str
        A shipped model kept with its checkpoints (``attnlib.model.checkpoints``).
    tokens : (n, T) ndarray of int
        The sequences the trained model is measured on.

    Returns
    -------
    dict of str to (n_layers, n_heads) ndarray

    Examples
    --------
    >>> from attnlib.model import load
    >>> seqs = repeated_random(load("plays_2l"), n=4)
    >>> bool(untrained_scores("plays_2l", seqs)["prefix"].max() < 0.1)
    True
    """
    from .model import checkpoints

    steps = checkpoints(name)
    if 0 not in steps:
        raise ValueError(f"model {name!r} was not kept at step 0: its checkpoints are {list(steps)}")
    return induction_scores(steps[0], tokens)


@renamed_keywords(pattern="A")
def attention_to_previous(A, first: int = 2) -> np.ndarray:
    """Deprecated: call :func:`attnlib.metrics.attention_to_previous` with ``first=2`` (its default is 1).

    There is one such function; this old one, with another default
    (position 1's previous position is BOS, where many heads rest whatever
    they do elsewhere, so :func:`induction_scores` leaves it out), keeps
    code written against it running with the same numbers. It issues a
    ``PendingDeprecationWarning``, as :func:`attnlib.attention_pattern` does.

    Parameters
    ----------
    A : (..., n_heads, T, T) ndarray
        Attention weights.
    first : int

    Returns
    -------
    (n_heads,) ndarray
    """
    warnings.warn("attnlib.incontext.attention_to_previous is the old name of"
                  " attnlib.metrics.attention_to_previous with first=2 (its default is first=1);"
                  " call metrics.attention_to_previous(A, first=2)", PendingDeprecationWarning, stacklevel=3)
    return _attention_to_previous(A, first)


def _trace(model, tokens, ablate, edges):
    """``Model.trace``, or :func:`attnlib.paths.trace` when paths are cut (``ablate`` then adds its edges)."""
    if not len(edges):
        return model.trace(tokens, ablate=ablate)
    return paths.trace(model, tokens, list(edges) + paths.residual(model, model._ablation(ablate)))


def token_losses(model, tokens, targets, batch: int = 32, ablate=(), edges=()) -> np.ndarray:
    """Cross-entropy (nats) of every prediction (``ablate``, ``edges``: as :func:`induction_scores`).

    Returns
    -------
    (n, T) ndarray
    """
    out = []
    for i in range(0, len(tokens), batch):
        logits = _trace(model, tokens[i:i + batch], ablate, edges).logits  # (b, T, vocab)
        logits = logits - logits.max(axis=-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        out.append(-np.take_along_axis(logp, targets[i:i + batch, :, None], axis=-1)[..., 0])
    return np.concatenate(out)


def repeat_losses(model, tokens, ablate=(), edges=()) -> np.ndarray:
    """Mean loss on each occurrence of repeated sequences (the first occurrence is unpredictable).

    Returns
    -------
    (occurrences,) ndarray
        Nats per token when predicting each occurrence's tokens (the first
        occurrence's first token, predicted from BOS, included).
    """
    tokens = np.asarray(tokens)
    losses = token_losses(model, tokens[:, :-1], tokens[:, 1:], ablate=ablate, edges=edges)  # (n, T - 1)
    L = _segment(tokens)
    copies = (tokens.shape[1] - 1) // L
    return losses[:, :copies * L].reshape(len(tokens), copies, L).mean(axis=(0, 2))


def _segment(tokens) -> int:
    """The length of the repeated segment of :func:`repeated_random` sequences."""
    seq = tokens[0, 1:]
    for L in range(1, len(seq)):
        if (seq[L:] == seq[:-L]).all():
            return L
    raise ValueError("the sequences are not a repeated segment (expected repeated_random's output)")


def in_context_score(losses) -> float:
    """Loss late in the window minus loss early in it (nats): negative when context helps.

    Olsson et al. compare the 500th token with the 50th in windows of 8,192;
    here the windows are short, so the parts compared are fractions of the
    window (``EARLY``, ``LATE``).

    Parameters
    ----------
    losses : (n, T) ndarray
        Per-token losses on text windows (``token_losses``).

    Examples
    --------
    >>> in_context_score(np.linspace(5.0, 4.0, 100)[None])  # loss falls along the window
    -0.8
    """
    losses = np.asarray(losses, dtype=np.float64)
    T = losses.shape[-1]
    early = losses[..., int(EARLY[0] * T):int(EARLY[1] * T)].mean()
    late = losses[..., int(LATE[0] * T):int(LATE[1] * T)].mean()
    return round(float(late - early), 12)


def in_context_by_window(losses) -> np.ndarray:
    """Each window's late-minus-early loss: their mean is :func:`in_context_score`.

    Parameters
    ----------
    losses : (n, T) ndarray
        Per-token losses on text windows (``token_losses``).

    Returns
    -------
    (n,) ndarray

    Examples
    --------
    >>> in_context_by_window(np.linspace(5.0, 4.0, 100)[None]).round(3)
    array([-0.8])
    """
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 2:
        raise ValueError(f"losses must be (n windows, T), got shape {losses.shape}")
    T = losses.shape[-1]
    early = losses[:, int(EARLY[0] * T):int(EARLY[1] * T)].mean(axis=-1)
    late = losses[:, int(LATE[0] * T):int(LATE[1] * T)].mean(axis=-1)
    return late - early


def in_context_interval(by_window, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> dict:
    """The in-context score with a bootstrap interval over windows.

    Windows are resampled with replacement ``n_boot`` times; the score's
    spread across resamples is what another draw of as many windows would
    plausibly give. Two scores whose intervals overlap widely are not told
    apart by these windows.

    Parameters
    ----------
    by_window : (n,) array_like
        Each window's late-minus-early loss (:func:`in_context_by_window`).

    Returns
    -------
    dict
        ``"score"`` (the mean), ``"sd"`` (bootstrap standard deviation),
        ``"low"``, ``"high"`` (the central ``level`` interval) and
        ``"windows"`` (``n``).

    Examples
    --------
    >>> r = in_context_interval(np.random.default_rng(0).normal(-0.1, 1.0, 400))
    >>> r["windows"], round(r["sd"], 2), r["low"] < r["score"] < r["high"]
    (400, 0.05, True)
    """
    x = np.asarray(by_window, dtype=np.float64)
    if x.ndim != 1 or len(x) < 2:
        raise ValueError(f"by_window must be one score per window (at least 2), got shape {x.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)  # (n_boot,)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return {"score": float(x.mean()), "sd": float(means.std()), "low": float(low), "high": float(high),
            "windows": len(x)}


def repeat_spans(windows, rng, share: float, min_len: int, max_len: int) -> np.ndarray:
    """Windows of text with a span of their own text written again later (how ``plays_2l_spans`` was trained).

    In each window, with probability ``share``: a length ``L`` from
    ``min_len`` to ``max_len``, a first place, and a later place at least
    ``L`` after it; the ``L`` tokens at the first place are copied over the
    later ones.

    Parameters
    ----------
    windows : (n, T) ndarray of int
        Not changed: the result is a copy.
    rng : numpy.random.Generator

    Returns
    -------
    (n, T) ndarray

    Examples
    --------
    >>> w = repeat_spans(np.arange(20)[None], np.random.default_rng(0), 1.0, 4, 4)
    >>> int((np.diff(w[0]) != 1).sum())  # the copy breaks the count twice (or once, at the end)
    2
    """
    if not 1 <= min_len <= max_len or 2 * max_len > windows.shape[-1]:
        raise ValueError(f"spans of {min_len} to {max_len} tokens do not fit twice in windows of"
                         f" {windows.shape[-1]}")
    out = np.array(windows)
    T = out.shape[-1]
    for row in np.flatnonzero(rng.random(len(out)) < share):
        L = int(rng.integers(min_len, max_len + 1))
        first = int(rng.integers(0, T - 2 * L + 1))
        second = int(rng.integers(first + L, T - L + 1))
        out[row, second:second + L] = out[row, first:first + L]
    return out


def repeated_pairs(tokens) -> np.ndarray:
    """Where an induction head could help: the pair (previous token, token) occurred earlier in the window.

    Parameters
    ----------
    tokens : (..., T) array_like of int

    Returns
    -------
    (..., T) ndarray of bool
        True at ``t`` if some ``s < t`` has ``tokens[s - 1] == tokens[t - 1]``
        and ``tokens[s] == tokens[t]``.

    Examples
    --------
    >>> repeated_pairs([7, 1, 2, 5, 1, 2, 1, 3]).astype(int)
    array([0, 0, 0, 0, 0, 1, 0, 0])
    """
    tokens = np.asarray(tokens)
    T = tokens.shape[-1]
    prev, cur = tokens[..., :-1], tokens[..., 1:]  # pairs ending at 1 .. T-1
    same = (prev[..., :, None] == prev[..., None, :]) & (cur[..., :, None] == cur[..., None, :])  # (..., T-1, T-1)
    seen = (same & np.tri(T - 1, T - 1, -1, dtype=bool)).any(axis=-1)  # an earlier pair equal to this one
    return np.concatenate([np.zeros(tokens.shape[:-1] + (1,), bool), seen], axis=-1)


def measure(model, n: int = 64, seed: int = 0) -> dict:
    """A two-layer text model's induction figures, recomputed from its weights (its card's ``induction``).

    The best previous-token head of layer 0 and prefix-matching head of the
    last layer on :func:`repeated_random` sequences, the prefix-matching
    score again with each layer-0 head ablated, the loss on each occurrence, and
    the in-context score on every held-out window.

    Returns
    -------
    dict
    """
    from .text import heldout_windows

    seqs = repeated_random(model, n=n, occurrences=3, seed=seed)
    s = induction_scores(model, seqs)
    last = model.n_layers - 1
    p, i = int(s["previous"][0].argmax()), int(s["prefix"][last].argmax())
    ablated = [float(induction_scores(model, seqs, ablate=[(0, h)])["prefix"][last, i])
               for h in range(model.layers[0].n_heads)]
    tokens, targets = heldout_windows(model)
    out = {
        "test": f"{n} sequences of BOS then {(model.n_ctx - 1) // 3} distinct random text tokens, three times"
                f" (repeated_random, seed {seed})",
        "previous": {f"L{l}H{h}": float(v) for l in range(model.n_layers) for h, v in enumerate(s["previous"][l])},
        "prefix": {f"L{l}H{h}": float(v) for l in range(model.n_layers) for h, v in enumerate(s["prefix"][l])},
        "best_previous": f"L0H{p}", "best_prefix": f"L{last}H{i}",
        "prefix_with_layer0_head_ablated": {f"L0H{h}": v for h, v in enumerate(ablated)},
        "copy_losses": [float(v) for v in repeat_losses(model, seqs)],
        "in_context": in_context_score(token_losses(model, tokens, targets)),
    }
    out["summary"] = (f"best prefix-matching head {out['best_prefix']} {s['prefix'][last, i]:.2f}"
                      f" (without L0H{p}: {ablated[p]:.2f}); best previous-token head L0H{p} {s['previous'][0, p]:.2f};"
                      f" in-context score {out['in_context']:+.3f}")
    return out
