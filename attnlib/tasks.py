"""The tasks the book's small models are trained on, as seeded sequence generators.

The training script (``scripts/train_model.py``) and the book draw their
sequences from here, so a chapter measures a model on exactly the kind of
data it was trained on, but on fresh draws. Each task returns a
:class:`Batch`: the tokens, the next-token targets the loss is taken on, and
named masks of the positions a metric is computed on.

=================  ==============================================================
``induction``      ``BOS, filler, a segment of L distinct tokens, the segment
                   again``; optionally some ``BOS, a, b, a, b, ...`` sequences.
                   Only the repeated segment is predictable.
``copy_back``      random tokens; predict the token ``k`` places back.
``copy_marked``    random plain tokens and one *marked* token; from the marked
                   token on, predict the marked token.
=================  ==============================================================
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validate import check_positive_int


@dataclass(frozen=True)
class Batch:
    """Sequences of one task, with what is predicted where.

    Attributes
    ----------
    tokens : (n, T) ndarray of int
    targets : (n, T) ndarray of int
        The token to predict at each position, ``-1`` where nothing is.
    masks : dict of str to (n, T) ndarray of bool
        Named sets of positions that metrics are computed on.
    """

    tokens: np.ndarray
    targets: np.ndarray
    masks: dict = field(default_factory=dict)


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(seed)


def _next_token_targets(tokens: np.ndarray) -> np.ndarray:
    targets = np.full_like(tokens, -1)
    targets[:, :-1] = tokens[:, 1:]  # position t predicts token t + 1
    return targets


def induction(n: int, seed=0, *, vocab: int = 50, T: int = 41, min_len: int = 5,
              max_len: int = 20, alternating: float = 0.0) -> Batch:
    """Repeated segments: the second copy can be predicted by looking back.

    Each sequence is ``BOS``, filler, a segment of ``L`` distinct tokens
    (``L`` uniform in ``[min_len, max_len]``), then the same segment again;
    filler tokens are drawn from the tokens not in the segment, so every
    segment token occurs exactly twice. A fraction ``alternating`` of the
    sequences are ``BOS, a, b, a, b, ...`` instead. Tokens are ``0 ..
    vocab - 1`` and ``BOS = vocab``. Every position predicts the next token.

    Parameters
    ----------
    n : int
        Number of sequences.
    seed : int or numpy.random.Generator
    vocab, T, min_len, max_len : int
        ``T`` counts the BOS; it needs ``1 + 2 * max_len <= T``.
    alternating : float
        Fraction of ``a, b, a, b`` sequences, in ``[0, 1]``.

    Returns
    -------
    Batch
        Masks ``"repeat"``: positions in the second copy that predict its
        tokens 2 .. L (the predictable ones); ``"first"``: the matching
        positions in the first copy (unpredictable: chance level). Both are
        False on alternating sequences.

    Examples
    --------
    >>> b = induction(2, seed=0, vocab=10, T=13, min_len=3, max_len=4)
    >>> b.tokens.shape, int(b.tokens[0, 0])
    ((2, 13), 10)
    >>> bool((b.targets[b.masks["repeat"]] == b.targets[b.masks["first"]]).all())
    True
    """
    n, vocab, T = (check_positive_int(v, name) for v, name in ((n, "n"), (vocab, "vocab"), (T, "T")))
    min_len, max_len = check_positive_int(min_len, "min_len"), check_positive_int(max_len, "max_len")
    if not 2 <= min_len <= max_len or 1 + 2 * max_len > T or max_len > vocab:
        raise ValueError(
            f"need 2 <= min_len <= max_len, 1 + 2 * max_len <= T and max_len <= vocab;"
            f" got min_len={min_len}, max_len={max_len}, T={T}, vocab={vocab}")
    if not 0.0 <= alternating <= 1.0:
        raise ValueError(f"alternating must be a fraction in [0, 1], got {alternating!r}")
    rng = _rng(seed)
    tokens = np.empty((n, T), dtype=np.int64)
    first = np.zeros((n, T), dtype=bool)
    repeat = np.zeros((n, T), dtype=bool)
    tokens[:, 0] = vocab  # BOS
    for row in range(n):
        if rng.random() < alternating:
            a, b = rng.choice(vocab, size=2, replace=False)
            tokens[row, 1:] = np.where(np.arange(T - 1) % 2 == 0, a, b)
            continue
        L = int(rng.integers(min_len, max_len + 1))
        order = rng.permutation(vocab)
        segment, rest = order[:L], order[L:]
        start = T - 2 * L  # first copy at start .. start + L - 1, second right after
        tokens[row, 1:start] = rng.choice(rest, size=start - 1)
        tokens[row, start:start + L] = segment
        tokens[row, start + L:] = segment
        first[row, start:start + L - 1] = True  # predict segment[1:] in the first copy
        repeat[row, start + L:T - 1] = True  # ... and in the second
    return Batch(tokens, _next_token_targets(tokens), {"first": first, "repeat": repeat})


def copy_back(n: int, seed=0, *, vocab: int = 20, T: int = 24, k: int = 3) -> Batch:
    """Random tokens; position ``t`` predicts token ``t - k`` (for ``t >= k``).

    Parameters
    ----------
    n : int
    seed : int or numpy.random.Generator
    vocab, T, k : int
        Tokens are ``0 .. vocab - 1``; no BOS.

    Returns
    -------
    Batch
        Mask ``"scored"``: the positions with a target.

    Examples
    --------
    >>> b = copy_back(1, seed=0, T=6, k=2)
    >>> bool((b.targets[0, 2:] == b.tokens[0, :4]).all()), int(b.targets[0, 1])
    (True, -1)
    """
    n, vocab, T, k = (check_positive_int(v, name) for v, name in ((n, "n"), (vocab, "vocab"), (T, "T"), (k, "k")))
    if k >= T:
        raise ValueError(f"k = {k} must be smaller than T = {T}")
    rng = _rng(seed)
    tokens = rng.integers(0, vocab, size=(n, T))
    targets = np.full_like(tokens, -1)
    targets[:, k:] = tokens[:, :-k]
    return Batch(tokens, targets, {"scored": targets >= 0})


def copy_marked(n: int, seed=0, *, plain: int = 30, marked: int = 10, T: int = 24) -> Batch:
    """One marked token among plain ones; from it on, predict the marked token.

    Tokens ``0 .. plain - 1`` are plain and ``plain .. plain + marked - 1``
    are marked; each sequence has exactly one marked token, at a uniformly
    random position. Where the marked token sits carries no information, so
    a model must find it by *what* it is.

    Returns
    -------
    Batch
        Mask ``"scored"``: the marked token's position and every later one.

    Examples
    --------
    >>> b = copy_marked(1, seed=0, plain=5, marked=2, T=8)
    >>> int((b.tokens >= 5).sum()), bool((b.targets[b.masks["scored"]] >= 5).all())
    (1, True)
    """
    n, plain, marked, T = (check_positive_int(v, name)
                           for v, name in ((n, "n"), (plain, "plain"), (marked, "marked"), (T, "T")))
    rng = _rng(seed)
    tokens = rng.integers(0, plain, size=(n, T))
    where = rng.integers(0, T, size=n)
    which = rng.integers(plain, plain + marked, size=n)
    tokens[np.arange(n), where] = which
    scored = np.arange(T)[None, :] >= where[:, None]  # (n, T)
    targets = np.where(scored, which[:, None], -1)
    return Batch(tokens, targets, {"scored": scored})


TASKS = {"induction": induction, "copy_back": copy_back, "copy_marked": copy_marked}
"""Task name → generator ``f(n, seed, **options) -> Batch``."""
