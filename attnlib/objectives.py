"""What a patch is measured by: metrics of the logits, each with its gradient (chapter 17).

Circuit discovery compares runs by one number computed from the logits, the
*metric*. A metric here has a value and its exact gradient with respect to
the logits, which is all a backward pass (:mod:`attnlib.backward`) needs to
reach every activation:

* :class:`Linear`: ``(direction * logits).sum()``, any fixed direction (what
  the methods took before there were metric objects, and still take as an array);
* :class:`LogitDifference`: one token's logit minus another's at one position;
* :class:`LogProb`: a token's log-probability at one position;
* :class:`KL`: the KL divergence of the run's next-token distributions from a
  reference run's (ACDC's default, Conmy et al., 2023): zero for the clean run,
  and it grows however the distribution moves.

Sums run over the batch (and, for :class:`KL`, over the positions chosen).

Examples
--------
>>> logits = np.array([[[2.0, 0.0, -1.0]]])           # (batch 1, T 1, vocab 3)
>>> LogitDifference(0, 0, 1).value(logits), LogitDifference(0, 0, 1).gradient(logits)[0, 0]
(2.0, array([ 1., -1.,  0.]))
>>> round(KL(logits).value(logits), 12)
0.0
"""
from __future__ import annotations

import numpy as np


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class Metric:
    """A number computed from the logits, and its gradient with respect to them."""

    name = "metric"

    def value(self, logits) -> float:  # pragma: no cover - each metric defines it
        raise NotImplementedError

    def gradient(self, logits) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class Linear(Metric):
    """``(direction * logits).sum()``.

    Parameters
    ----------
    direction : (..., T, vocab) array_like
        The metric's weights on the logits, batch axes included.
    """

    name = "a linear direction"

    def __init__(self, direction):
        self.direction = np.asarray(direction, dtype=float)
        if not np.isfinite(self.direction).all():
            raise ValueError("direction has NaN or infinite entries")

    def _check(self, logits):
        if self.direction.shape != np.shape(logits):
            raise ValueError(f"direction has shape {self.direction.shape}: expected the logits' shape"
                             f" (..., T, vocab) = {np.shape(logits)}")

    def value(self, logits) -> float:
        self._check(logits)
        return float((self.direction * logits).sum())

    def gradient(self, logits) -> np.ndarray:
        self._check(logits)
        return self.direction


class _AtPosition(Metric):
    """A metric read at one position of every sequence of the batch."""

    def __init__(self, position: int):
        self.position = int(position)

    def _at(self, logits):
        logits = np.asarray(logits, dtype=float)
        if logits.ndim < 2 or not -logits.shape[-2] <= self.position < logits.shape[-2]:
            raise ValueError(f"position {self.position} is not a position of logits of shape {logits.shape}")
        return logits[..., self.position, :]  # (..., vocab)


class LogitDifference(_AtPosition):
    """``logit[good] - logit[bad]`` at ``position``, summed over the batch.

    Parameters
    ----------
    position : int
    good, bad : int or (batch,) array_like of int
        The tokens (one per sequence of the batch, or one for all).
    """

    name = "a logit difference"

    def __init__(self, position: int, good, bad):
        super().__init__(position)
        self.good, self.bad = np.asarray(good), np.asarray(bad)

    def _onehots(self, logits):
        at = self._at(logits)
        g = np.zeros_like(at)
        np.put_along_axis(g, np.broadcast_to(self.good, at.shape[:-1])[..., None], 1.0, axis=-1)
        b = np.zeros_like(at)
        np.put_along_axis(b, np.broadcast_to(self.bad, at.shape[:-1])[..., None], 1.0, axis=-1)
        return at, g - b

    def value(self, logits) -> float:
        at, d = self._onehots(logits)
        return float((at * d).sum())

    def gradient(self, logits) -> np.ndarray:
        _, d = self._onehots(logits)
        out = np.zeros(np.shape(logits))
        out[..., self.position, :] = d
        return out


class LogProb(_AtPosition):
    """The log-probability of ``target`` at ``position``, summed over the batch.

    Its gradient is ``onehot(target) - softmax(logits)`` at that position: unlike a
    logit, it is not linear in the logits.
    """

    name = "a log-probability"

    def __init__(self, position: int, target):
        super().__init__(position)
        self.target = np.asarray(target)

    def _onehot(self, at):
        t = np.zeros_like(at)
        np.put_along_axis(t, np.broadcast_to(self.target, at.shape[:-1])[..., None], 1.0, axis=-1)
        return t

    def value(self, logits) -> float:
        at = self._at(logits)
        return float((_log_softmax(at) * self._onehot(at)).sum())

    def gradient(self, logits) -> np.ndarray:
        at = self._at(logits)
        out = np.zeros(np.shape(logits))
        out[..., self.position, :] = self._onehot(at) - np.exp(_log_softmax(at))
        return out


class KL(Metric):
    """``KL(p_reference || p)`` of the next-token distributions, summed over the batch and ``positions``.

    Parameters
    ----------
    reference : (..., T, vocab) array_like
        The logits of the reference run (the clean run, for ACDC).
    positions : sequence of int, optional
        Where to compare the distributions (default: every position).
    """

    name = "the KL divergence from the clean run"

    def __init__(self, reference, positions=None):
        self.reference = np.asarray(reference, dtype=float)
        self.log_p = _log_softmax(self.reference)
        self.positions = slice(None) if positions is None else np.asarray(positions)

    def _check(self, logits):
        if np.shape(logits) != self.reference.shape:
            raise ValueError(f"logits of shape {np.shape(logits)} against reference logits of shape"
                             f" {self.reference.shape}: the runs must match")

    def value(self, logits) -> float:
        self._check(logits)
        p = np.exp(self.log_p[..., self.positions, :])
        return float((p * (self.log_p[..., self.positions, :] - _log_softmax(np.asarray(logits, float))[
            ..., self.positions, :])).sum())

    def gradient(self, logits) -> np.ndarray:
        self._check(logits)
        out = np.zeros(self.reference.shape)
        q = np.exp(_log_softmax(np.asarray(logits, float)))
        out[..., self.positions, :] = (q - np.exp(self.log_p))[..., self.positions, :]
        return out


def as_metric(metric) -> Metric:
    """``metric`` if it is a :class:`Metric`, else a :class:`Linear` of it (an array: a direction)."""
    return metric if isinstance(metric, Metric) else Linear(metric)
