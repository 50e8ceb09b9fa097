"""A hand-built layer whose heads mean something (the pictures of chapters 1-9).

Random weights prove the identities; they cannot show what a head *does*.
This module builds one small layer by hand, on a sentence whose words and
positions can be read off the model dimensions:

* the sentence "the cat sat on the mat" (any sentence of up to 6 words of
  ``WORDS``);
* ``d_model = 17`` named ``FEATURES``: one dimension per word (which word
  a token is), one per word again under ``prev:`` and again under ``next:``
  (empty in the input: the two heads write there), and two for the
  position ``t``, ``(cos tθ, sin tθ)`` with ``θ = π/4``;
* head 0, **previous token**: its pattern matrix rotates a token's position
  back by one step, so token ``t`` looks for position ``t - 1``; its message
  matrix moves a word's dimension to the same word under ``prev:``. After
  the layer, "sat" carries ``prev:cat``.
* head 1, **next token**: its pattern matrix rotates a token's position
  forward by one step, so token ``t`` looks for position ``t + 1``; its
  message matrix moves a word's dimension to the same word under ``next:``.
  After the layer, "sat" carries ``next:on`` too. (A causal mask hides the
  next token: chapter 9 shows this head failing under it.)

Both heads have ``d_head = 6`` (``n_heads * d_head = 12``, less than
``d_model``: nothing forces them equal); the pattern matrices have rank 2
and the message matrices rank 5, all below ``d_head``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .weights import Weights

WORDS = ("the", "cat", "sat", "on", "mat")
"""The vocabulary: one model dimension per word."""

FEATURES = (*WORDS, *(f"prev:{w}" for w in WORDS), *(f"next:{w}" for w in WORDS), "pos cos", "pos sin")
"""The name of each of the 17 model dimensions, in order."""

SENTENCE = ("the", "cat", "sat", "on", "the", "mat")
"""The sentence the chapters use."""

HEADS = ("previous token", "next token")
"""What head 0 and head 1 do."""

ANGLE = np.pi / 4
"""Position ``t`` is the direction ``(cos tθ, sin tθ)``, θ = π/4."""

MAX_TOKENS = 6  # 8θ = 2π: with 7 tokens, "one before the first" would tie with the last

D_MODEL, D_HEAD = len(FEATURES), 6
_WORD = slice(0, 5)
_PREV = slice(5, 10)
_NEXT = slice(10, 15)
_POS = slice(15, 17)


class Example(NamedTuple):
    """The sentence, its embedding and the layer (see :func:`sentence`)."""

    tokens: tuple
    X: np.ndarray  #: (T, d_model)
    weights: Weights
    features: tuple = FEATURES
    heads: tuple = HEADS


def token_embedding() -> np.ndarray:
    """The embedding ``W_E``: one row per word of ``WORDS``, the vector it enters the residual stream as.

    Returns
    -------
    W_E : (n_words, d_model) ndarray
        Row ``a`` is 1 in word ``a``'s dimension, 0 elsewhere.

    Examples
    --------
    >>> token_embedding()[WORDS.index("cat")][:5]
    array([0., 1., 0., 0., 0.])
    """
    W_E = np.zeros((len(WORDS), D_MODEL))
    W_E[:, _WORD] = np.eye(len(WORDS))
    return W_E


def position_embedding(T: int = MAX_TOKENS) -> np.ndarray:
    """The position embedding: row ``t`` (from 0) is ``(cos tθ, sin tθ)`` in the two position dimensions.

    Parameters
    ----------
    T : int
        How many positions, at most ``MAX_TOKENS``.

    Returns
    -------
    W_pos : (T, d_model) ndarray

    Examples
    --------
    >>> position_embedding(2)[:, 15:].round(2)
    array([[1.  , 0.  ],
           [0.71, 0.71]])
    """
    if not isinstance(T, (int, np.integer)) or not 1 <= T <= MAX_TOKENS:
        raise ValueError(f"T must be a whole number of positions from 1 to {MAX_TOKENS}, got {T!r}")
    t = np.arange(T)
    W_pos = np.zeros((T, D_MODEL))
    W_pos[:, _POS] = np.stack([np.cos(t * ANGLE), np.sin(t * ANGLE)], axis=1)  # (T, 2)
    return W_pos


def embed(tokens=SENTENCE) -> np.ndarray:
    """The tokens as rows of ``X``: each word's embedding plus its position's.

    Parameters
    ----------
    tokens : sequence of str
        Words of ``WORDS``, at most ``MAX_TOKENS`` of them.

    Returns
    -------
    X : (T, d_model) ndarray
        Row ``t`` (counting from 0) is ``W_E[word] + W_pos[t]``: 1 in the
        word's dimension and ``(cos tθ, sin tθ)`` in the two position
        dimensions; ``prev:`` and ``next:`` are 0, free for the heads to write into.

    Examples
    --------
    >>> embed(["the", "cat"]).round(2)[:, [0, 1, 15, 16]]
    array([[1.  , 0.  , 1.  , 0.  ],
           [0.  , 1.  , 0.71, 0.71]])
    """
    tokens = tuple(tokens)
    unknown = [t for t in tokens if t not in WORDS]
    if unknown or not tokens:
        raise ValueError(f"tokens must be 1 to {MAX_TOKENS} words of {WORDS}, got unknown words {unknown}"
                         if unknown else "tokens is empty: give at least one word")
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"tokens has {len(tokens)} words; at most {MAX_TOKENS} have positions the"
                         f" heads tell apart (position t and t + 8 are one direction)")
    ids = [WORDS.index(word) for word in tokens]
    return token_embedding()[ids] + position_embedding(len(tokens))  # (T, d_model)


def weights(sharpness: float = 30.0) -> Weights:
    """The two heads, previous token and next token, as a :class:`~attnlib.Weights`.

    Parameters
    ----------
    sharpness : float
        Scale of both pattern matrices. At 30 each head puts at least 0.9 of
        its attention weight where it looks (checked in ``tests/attnlib/test_example.py``).

    Returns
    -------
    Weights
        ``d_model = 17``, ``n_heads = 2``, ``d_head = 6``.

    Examples
    --------
    >>> w = weights()
    >>> w.n_heads, w.d_head, w.W_Q.shape
    (2, 6, (17, 12))
    """
    if not np.isfinite(sharpness) or sharpness <= 0:
        raise ValueError(f"sharpness must be a positive number, got {sharpness}")
    g, c, s = float(sharpness), np.cos(ANGLE), np.sin(ANGLE)
    back = np.array([[c, -s], [s, c]])  # (cos tθ, sin tθ) @ back = position t - 1
    forward = back.T  # (cos tθ, sin tθ) @ forward = position t + 1
    W_Q, W_K, W_V = np.zeros((3, 2, D_MODEL, D_HEAD))  # each (n_heads, d_model, d_head)
    W_O = np.zeros((2, D_HEAD, D_MODEL))  # (n_heads, d_head, d_model)
    # head 0, previous token: the query is the position moved back one step,
    # the key the position itself; the value is the word, written under prev:
    W_Q[0, _POS, 0:2] = g * back
    W_K[0, _POS, 0:2] = np.eye(2)
    W_V[0, _WORD, 0:5] = np.eye(5)
    W_O[0, 0:5, _PREV] = np.eye(5)
    # head 1, next token: the same, one step forward, written under next:
    W_Q[1, _POS, 0:2] = g * forward
    W_K[1, _POS, 0:2] = np.eye(2)
    W_V[1, _WORD, 0:5] = np.eye(5)
    W_O[1, 0:5, _NEXT] = np.eye(5)

    def side_by_side(stack):
        return np.concatenate(list(stack), axis=1)  # (h, d_model, d_head) -> (d_model, h * d_head)

    return Weights(side_by_side(W_Q), side_by_side(W_K), side_by_side(W_V),
                   np.concatenate(list(W_O), axis=0), n_heads=2)


def sentence(tokens=SENTENCE, sharpness: float = 30.0) -> Example:
    """The sentence, its ``X`` and the layer, in one tuple.

    Examples
    --------
    >>> ex = sentence()
    >>> ex.tokens, ex.X.shape, ex.heads
    (('the', 'cat', 'sat', 'on', 'the', 'mat'), (6, 17), ('previous token', 'next token'))
    """
    return Example(tuple(tokens), embed(tokens), weights(sharpness))


def table(vectors, names, features=FEATURES, digits: int = 2, hide_below: float = 0.005,
          drop_empty: bool = True) -> str:
    """Vectors in model space side by side, one column each, one line per feature.

    Entries smaller than ``hide_below`` show as ``·``, so the structure reads
    at a glance; with ``drop_empty`` a feature that is ``·`` in every column
    is left out.

    Parameters
    ----------
    vectors : (k, d_model) array_like
        ``k`` vectors (rows of ``X``, messages, outputs).
    names : list of str
        One column title per vector.
    features : list of str
        One name per model dimension.

    Returns
    -------
    str

    Examples
    --------
    >>> print(table([[1.0, 0.0, 0.0], [0.5, 0.0, 0.25]], ["a", "b"], features=["x", "y", "z"]))
          a     b
    x  1.00  0.50
    z     ·  0.25
    """
    vectors = np.atleast_2d(np.asarray(vectors, dtype=float))
    if vectors.shape != (len(names), len(features)):
        raise ValueError(f"vectors has shape {vectors.shape}, expected ({len(names)}, {len(features)}):"
                         " one vector per name, one entry per feature")
    width = max(digits + 4, *(len(str(n)) + 2 for n in names))
    left = max(len(f) for f in features)
    lines = [" " * left + "".join(f"{n:>{width}}" for n in names)]
    for j, feature in enumerate(features):
        column = vectors[:, j]
        if drop_empty and (np.abs(column) < hide_below).all():
            continue
        cells = ["·" if abs(v) < hide_below else f"{v:.{digits}f}" for v in column]
        lines.append(f"{feature:<{left}}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(line.rstrip() for line in lines)
