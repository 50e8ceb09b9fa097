"""Reading a model trained on text: held-out loss, n-gram baselines, skip-trigrams (chapter 14).

A text model (``model.card["task"] == "text"``) ships its tokenizer and the
corpus statistics its card was measured on (``model.corpus``):

=====================  ===================================================
``heldout``            token ids of the held-out plays, one after another
``heldout_lengths``    how many tokens each held-out play has
``unigram``            (vocab,) token counts of the training text
``bigrams``            (n, 3) rows ``a, b, count``: token ``b`` followed ``a``
=====================  ===================================================

A one-layer attention-only model predicts the logits
``x W_U + Σ_i Σ_s A_i[t, s] x_s W^M_i W_U``: a direct path from the current
token (bigram statistics) plus, per head, terms that depend on the current
token (through its pattern ``x_t W^P_i``) and on one earlier token (through the message).
Elhage et al. (2021) read the latter as **skip-trigrams** ``source … query →
output``: :func:`skip_trigrams` lists the strongest of them from the weights.

Examples
--------
>>> from attnlib.model import load
>>> m = load("plays_1l")
>>> tokens, targets = heldout_windows(m, max_windows=2)
>>> tokens.shape, bool((tokens[:, 1:] == targets[:, :-1]).all()), m.decode(tokens[0, :4])
((2, 128), True, 'Henry IV')
"""
from __future__ import annotations

import re

import numpy as np

from .circuits import copying_score, full_ov_circuit, full_qk_circuit

BIGRAM_ALPHAS = (1, 3, 10, 30, 100, 300, 1000)
"""Smoothing strengths tried for the bigram baseline (the best one on the held-out text is kept)."""


def heldout_windows(model, max_windows=None):
    """The held-out text as model inputs: ``[BOS, x_0 .. x_{T-2}]`` predicting ``x_0 .. x_{T-1}``.

    Each held-out play is cut into consecutive windows of ``T = n_ctx``
    tokens (a play's last, shorter piece is left out); a window never spans
    two plays.

    Returns
    -------
    tokens, targets : (n_windows, n_ctx) ndarray of int64 each
    """
    T, heldout = model.n_ctx, model.corpus["heldout"].astype(np.int64)
    chunks, start = [], 0
    for n in model.corpus["heldout_lengths"]:
        play = heldout[start:start + n]
        start += n
        k = len(play) // T
        chunks.append(play[:k * T].reshape(k, T))  # (k, T)
    targets = np.concatenate(chunks)[:max_windows]  # (n_windows, T)
    tokens = np.concatenate([np.full((len(targets), 1), model.bos), targets[:, :-1]], axis=1)
    return tokens, targets


def loss(model, tokens, targets, batch=32, ablate=()) -> float:
    """Mean cross-entropy (nats per token) of the model's next-token predictions.

    Parameters
    ----------
    tokens, targets : (n, T) ndarray of int
    batch : int
        Windows per forward pass (bounds the memory of the ``(batch, T, vocab)`` logits).
    ablate : collection of (layer, head)

    Returns
    -------
    float
    """
    total = 0.0
    for i in range(0, len(tokens), batch):
        logits = model.forward(tokens[i:i + batch], ablate=ablate)  # (batch, T, vocab)
        logp = logits - logits.max(-1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
        total -= np.take_along_axis(logp, targets[i:i + batch, :, None], -1).sum()
    return float(total / targets.size)


def bigram_table(model) -> np.ndarray:
    """The training text's bigram counts as a dense ``(vocab, vocab)`` table: ``[a, b]`` = how often b followed a."""
    b = model.corpus["bigrams"].astype(np.int64)
    counts = np.zeros((model.vocab, model.vocab), np.int64)
    counts[b[:, 0], b[:, 1]] = b[:, 2]
    return counts


def ngram_losses(model, tokens, targets) -> dict:
    """Held-out loss of the unigram and best smoothed bigram models of the training text.

    Unigram: add-one counts. Bigram: ``p(b | a) = (C[a, b] + α p(b)) / (C[a] + α)``,
    the unigram ``p(b)`` after BOS, with the ``α`` of :data:`BIGRAM_ALPHAS`
    that gives the lowest held-out loss (the strongest bigram baseline).

    Returns
    -------
    dict
        ``"unigram"``, ``"bigram"`` (nats per token) and ``"bigram_alpha"``.
    """
    uni = model.corpus["unigram"].astype(np.float64) + 1
    p_uni = uni / uni.sum()
    C = bigram_table(model)
    rows = C.sum(axis=1)
    prev, nxt = tokens.ravel(), targets.ravel()
    after_bos = prev == model.bos
    best = None
    for alpha in BIGRAM_ALPHAS:
        p = (C[prev, nxt] + alpha * p_uni[nxt]) / (rows[prev] + alpha)
        p = np.where(after_bos, p_uni[nxt], p)
        value = float(-np.log(p).mean())
        if best is None or value < best[0]:
            best = (value, alpha)
    return {"unigram": float(-np.log(p_uni[nxt]).mean()), "bigram": best[0], "bigram_alpha": best[1]}


def text_tokens(model) -> np.ndarray:
    """Ids of the tokens text can produce (not BOS, not the unknown token)."""
    skip = {model.bos, model.tokenizer.unk}
    return np.array([i for i in range(model.vocab) if i not in skip])


def copying_scores(model, layer=0) -> np.ndarray:
    """Each head's copying score ``Σλ/Σ|λ|`` of ``W_E W^M W_U`` over the text tokens.

    Returns
    -------
    (n_heads,) ndarray
    """
    ids = text_tokens(model)
    return copying_score(full_ov_circuit(model.W_E[ids], model.layers[layer], model.W_U[:, ids]))


def word_tokens(model, min_count=300, share=0.25) -> np.ndarray:
    """Ids of the tokens that are whole words (or newlines) and common in the training text.

    A token is a whole word if it is letters (an apostrophe inside allowed),
    with or without a space before them, and in the training text less than
    ``share`` of its occurrences continue a word (the token before it ends
    in a letter, and it starts with one) or are continued (the token after it
    starts with a letter and it ends with one): ``" kingdom"`` and ``"KING"``
    are words, ``" Cl"`` (of ``" Clarence"``) and ``"ing"`` are not.

    Returns
    -------
    (k,) ndarray of int
    """
    names = model.token_names
    counts = model.corpus["unigram"]
    starts = np.array([n[:1].isalpha() for n in names])  # (vocab,)
    ends = np.array([n[-1:].isalpha() for n in names])
    a, b, c = model.corpus["bigrams"].astype(np.int64).T
    glued = (ends[a] & starts[b]) * c  # pairs that are inside one word
    joined = np.bincount(a, glued, model.vocab) + np.bincount(b, glued, model.vocab)  # (vocab,)
    ok = [i for i in text_tokens(model) if counts[i] >= min_count and joined[i] < share * counts[i]
          and (set(names[i]) <= {"⏎"} or re.fullmatch(r" ?[A-Za-z]+(?:'[A-Za-z]+)*", names[i]))]
    return np.array(ok)


def skip_trigrams(model, head, layer=0, n=10, tokens=None, sources=40, queries=3):
    """A head's strongest skip-trigrams ``source … query → output``, read off its weights.

    For a one-layer model the head's effect is a product of two circuits in
    token space: the **OV circuit** ``W_E W^M W_U`` says which output a
    source token, once attended to, raises (``[source, output]``); the **QK
    circuit** ``W_E W^P W_Eᵀ / √d_head`` says which query tokens attend to
    that source (``[query, source]``). Following Elhage et al. (2021):

    * the OV circuit is centred twice: a shift common to a whole row (every
      output raised alike) changes no probability, and a shift common to a
      whole column raises that output whatever the head attends to (a bias,
      not a skip-trigram);
    * the QK circuit is centred along each query's row (the softmax ignores
      a shift common to all keys);
    * the ``sources`` source tokens with the largest OV entry are kept (each
      with its best output), then for each the ``queries`` query tokens that
      prefer it most; triples are ranked by OV entry × QK score.

    Parameters
    ----------
    tokens : (k,) array_like of int, optional
        The tokens that may be source, query or output; default
        :func:`word_tokens` (rare tokens and word pieces have large,
        unreadable circuit entries).

    Returns
    -------
    list of (source, query, output, ov, qk)
        Token ids and the two centred circuit entries, strongest first; at most ``n``.
    """
    ids = word_tokens(model) if tokens is None else np.asarray(tokens)
    w = model.layers[layer]
    ov = full_ov_circuit(model.W_E[ids], w, model.W_U[:, ids])[head].full()  # (k, k): [source, output]
    ov = ov - ov.mean(axis=1, keepdims=True) - ov.mean(axis=0, keepdims=True) + ov.mean()
    qk = full_qk_circuit(model.W_E[ids], w)[head].full() / np.sqrt(w.d_head)  # (k, k): [query, source]
    qk = qk - qk.mean(axis=1, keepdims=True)
    best_out = ov.argmax(axis=1)  # (k,)
    strength = ov[np.arange(len(ids)), best_out]
    out = []
    for s in np.argsort(-strength)[:sources]:
        for q in np.argsort(-qk[:, s])[:queries]:
            out.append((int(ids[s]), int(ids[q]), int(ids[best_out[s]]), float(strength[s]), float(qk[q, s])))
    out.sort(key=lambda r: -r[3] * max(r[4], 0))
    return out[:n]


def measure(model, max_windows=None) -> dict:
    """A text model card's metrics, recomputed from the shipped file.

    Returns
    -------
    dict
        Held-out loss, the unigram and bigram baselines, each head's copying
        score, and a ``"summary"`` string.
    """
    tokens, targets = heldout_windows(model, max_windows)
    out = {"heldout_windows": int(len(tokens)), "heldout_tokens": int(targets.size)}
    out["heldout_loss"] = loss(model, tokens, targets)
    base = ngram_losses(model, tokens, targets)
    out.update(unigram_loss=base["unigram"], bigram_loss=base["bigram"], bigram_alpha=base["bigram_alpha"])
    scores = np.concatenate([copying_scores(model, l) for l in range(model.n_layers)])  # (n_layers * n_heads,)
    out["copying_scores"] = {f"L{l}H{i}": float(scores[l * model.layers[0].n_heads + i])
                             for l, w in enumerate(model.layers) for i in range(w.n_heads)}
    positive, total = int((scores > 0).sum()), len(scores)
    out["positive_copying_heads"] = positive
    out["summary"] = (f"held-out loss {out['heldout_loss']:.3f} nats/token (bigram {out['bigram_loss']:.3f},"
                      f" unigram {out['unigram_loss']:.3f}); {positive} of {total} heads copy (score > 0)")
    return out
