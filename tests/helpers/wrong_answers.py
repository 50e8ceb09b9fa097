"""Common wrong answers to every exercise function, the way students write them,
and valid answers that differ from the instructor's.

``WRONG[assignment]`` lists ``(function, test cell, what is wrong, the wrong code)``;
the code replaces the function's solution region. ``test_exercises.py`` checks that
a visible check rejects each one with a message, and that the hidden tests do too.
"""

# exercise 10's stream_gradient, the instructor's solution, which some wrong answers below change in one place
_GRAD10 = (
    'x = model.trace(tokens).residual[1]  # (T, d_model)\n'
    'G = np.zeros_like(x)  # dM / d(final stream): only row p\n'
    'G[position] = model.W_U[:, good] - model.W_U[:, bad]\n'
    'grad = G.copy()  # the direct path\n'
    'w, d = model.layers[1].per_head, model.layers[1].d_head\n'
    'for i in range(model.layers[1].n_heads):\n'
    '    Q, K, V = x @ w.W_Q[i], x @ w.W_K[i], x @ w.W_V[i]\n'
    '    A = attnlib.attention_weights(Q, K, causal=True)  # (T, T)\n'
    '    dZ = G @ w.W_O[i].T  # (T, d_head): the gradient at Z = A V\n'
    '    dA, dV = dZ @ V.T, A.T @ dZ\n'
    '    dS = A * (dA - (A * dA).sum(axis=1, keepdims=True))\n'
    '    dQ, dK = dS @ K / np.sqrt(d), dS.T @ Q / np.sqrt(d)\n'
    '    grad += dQ @ w.W_Q[i].T + dK @ w.W_K[i].T + dV @ w.W_V[i].T\n'
    'return grad\n'
)

WRONG = {
    "01_copying": [
        ("attention_weights", "test-weights", "the exponentials without the max shift overflow",
         "return np.exp(keys @ q) / np.exp(keys @ q).sum()"),
        ("attention_weights", "test-weights", "the 1/sqrt(d) scale the exercise leaves out",
         "s = keys @ q / np.sqrt(len(q))\ne = np.exp(s - s.max())\nreturn e / e.sum()"),
        ("attention_weights", "test-weights", "the scores normalised without the exponential",
         "s = keys @ q\nreturn s / s.sum()"),
        ("attention_weights", "test-weights", "hard attention: all weight on the top key",
         "return np.eye(len(keys))[np.argmax(keys @ q)]"),
        ("attention_weights", "test-weights", "the min subtracted instead of the max",
         "s = keys @ q\ne = np.exp(s - s.min())\nreturn e / e.sum()"),
        ("attend", "test-attend", "the values averaged, ignoring the weights",
         "return values.mean(axis=0)"),
        ("attend", "test-attend", "the raw scores used as weights",
         "return (keys @ q) @ values"),
        ("attend", "test-attend", "the value of the top key only",
         "return values[np.argmax(attention_weights(keys, q))]"),
        ("attend", "test-attend", "the weighted sum divided again by n",
         "return attention_weights(keys, q) @ values / len(values)"),
        ("attend", "test-attend", "unnormalised exponentials as weights",
         "return np.exp(keys @ q) @ values"),
        ("copy_query", "test-copy", "beta ignored",
         "return keys[j]"),
        ("copy_query", "test-copy", "the 1/sqrt(d) scale",
         "return beta * keys[j] / np.sqrt(keys.shape[1])"),
        ("copy_query", "test-copy", "a column of keys taken for a row (transposed keys)",
         "return beta * keys[:, j]"),
        ("copy_query", "test-copy", "exp(beta) instead of beta",
         "return np.exp(beta) * keys[j]"),
        ("copy_query", "test-copy", "all keys summed",
         "return beta * keys.sum(axis=0)"),
        ("copy_query", "test-copy", "key 1 hard-coded, whatever j is",
         "return beta * keys[1]"),
        ("smallest_beta", "test-beta", "n - 1 forgotten",
         "return np.log((1 - eps) / eps)"),
        ("smallest_beta", "test-beta", "no logarithm",
         "return (n - 1) * (1 - eps) / eps"),
        ("smallest_beta", "test-beta", "n instead of n - 1",
         "return np.log(n * (1 - eps) / eps)"),
        ("smallest_beta", "test-beta", "the sign flipped",
         "return -np.log((n - 1) * (1 - eps) / eps)"),
        ("smallest_beta", "test-beta", "n - 1 multiplied outside the logarithm",
         "return (n - 1) * np.log((1 - eps) / eps)"),
        ("smallest_beta", "test-beta", "eps taken for the weight on key j (the argument misread)",
         "return np.log(eps * (n - 1) / (1 - eps))"),
        ("smallest_beta", "test-beta", "the weight formed and subtracted from 1 again: eps's digits lost",
         "weight = 1 - eps\nreturn np.log(weight * (n - 1) / (1 - weight))"),
        ("smallest_beta", "test-beta", "any large beta for a tiny eps (what an absolute tolerance lets through)",
         "return 50.0 if eps < 1e-6 else np.log(n - 1) + np.log1p(-eps) - np.log(eps)"),
        ("copy_margin", "test-margin", "the top score minus the runner-up, whichever key is on top",
         "s = np.sort(keys @ q)\nreturn s[-1] - s[-2]"),
        ("copy_margin", "test-margin", "the gap to the mean of the other scores",
         "s = keys @ q\nreturn s[j] - np.delete(s, j).mean()"),
        ("copy_margin", "test-margin", "the gap to the smallest other score",
         "s = keys @ q\nreturn s[j] - np.delete(s, j).min()"),
        ("copy_margin", "test-margin", "a ratio of scores instead of a difference",
         "s = keys @ q\nreturn s[j] / np.delete(s, j).max()"),
        ("copy_margin", "test-margin", "the gap measured on normalised keys",
         "s = (keys / np.linalg.norm(keys, axis=1, keepdims=True)) @ q\nreturn s[j] - np.delete(s, j).max()"),
        ("copy_margin", "test-margin", "only the keys before key j compared (a loop that stops at j)",
         "s = keys @ q\nrest = s[:j] if j > 0 else s[1:]\nreturn s[j] - rest.max()"),
        ("copy_weight_bound", "test-bound", "the margin used as the weight itself",
         "return margin"),
        ("copy_weight_bound", "test-bound", "n - 1 competitors forgotten (one only)",
         "return 1 / (1 + np.exp(-margin))"),
        ("copy_weight_bound", "test-bound", "the best case (other keys far below) instead of the worst",
         "return 1.0 if margin > 0 else 0.0"),
        ("copy_weight_bound", "test-bound", "the naive formula overflows for a negative margin",
         "return 1 / (1 + (n - 1) * np.exp(-margin))"),
        ("copy_weight_bound", "test-bound", "n competitors instead of n - 1: a bound, but not the best one",
         "return 1 / (1 + n * np.exp(-np.clip(margin, -700, 700)))"),
    ],
    "02_averaging": [
        ("average_query", "test-avgq", "the difference of the keys",
         "return beta * (keys[a] - keys[b])"),
        ("average_query", "test-avgq", "key a only",
         "return beta * keys[a]"),
        ("average_query", "test-avgq", "halved, so that each key scores beta / 2",
         "return beta * (keys[a] + keys[b]) / 2"),
        ("average_query", "test-avgq", "the 1/sqrt(d) scale",
         "return beta * (keys[a] + keys[b]) / np.sqrt(keys.shape[1])"),
        ("average_query", "test-avgq", "columns of keys taken for rows",
         "return beta * (keys[:, a] + keys[:, b])"),
        ("average_query", "test-avgq", "the example's pair a = 0, b = 3 hard-coded",
         "return beta * (keys[0] + keys[3])"),
        ("averaging_weight", "test-avgw", "the copying weight of exercise 1",
         "return np.exp(beta) / (np.exp(beta) + n - 1)"),
        ("averaging_weight", "test-avgw", "n instead of n - 2 in the denominator",
         "return np.exp(beta) / (2 * np.exp(beta) + n)"),
        ("averaging_weight", "test-avgw", "the unstable form: nan for a large beta",
         "return np.exp(beta) / (2 * np.exp(beta) + n - 2)"),
        ("averaging_weight", "test-avgw", "the limit 1/2 for every beta",
         "return 0.5"),
        ("averaging_weight", "test-avgw", "the weight of both keys together",
         "return 2 / (2 + (n - 2) * np.exp(-beta))"),
        ("averaging_weight", "test-avgw", "n - 1 other keys, as in copying",
         "return 1 / (2 + (n - 1) * np.exp(-beta))"),
    ],
    "03_subspace": [
        ("extract_projector", "test-proj", "U U^T, right only for orthonormal columns",
         "return U @ U.T"),
        ("extract_projector", "test-proj", "U^T U: an m x m matrix",
         "return U.T @ U"),
        ("extract_projector", "test-proj", "the complement: keeps v_b instead of v_a",
         "return np.eye(len(U)) - U @ np.linalg.solve(U.T @ U, U.T)"),
        ("extract_projector", "test-proj", "U U^T scaled by its trace",
         "return U @ U.T / np.trace(U.T @ U)"),
        ("extract_projector", "test-proj", "the identity: keeps everything",
         "return np.eye(len(U))"),
        ("extract_projector", "test-proj", "half the formula: U (U^T U)^-1, a d x m matrix",
         "return U @ np.linalg.inv(U.T @ U)"),
        ("extract_projector", "test-proj", "columns scaled to length 1, then N N^T: orthogonal columns assumed",
         "N = U / np.linalg.norm(U, axis=0)\nreturn N @ N.T"),
    ],
    "04_noisy_keys": [
        ("sample_noisy_keys", "test-sample", "alpha used as a standard deviation",
         "keys = means + alpha * rng.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys[wide] += np.sqrt(0.5) * rng.standard_normal() * means[wide]\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "numpy's global random state instead of rng",
         "keys = means + np.sqrt(alpha) * np.random.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys[wide] += np.sqrt(0.5) * np.random.standard_normal() * means[wide]\n"
         "return keys"),
        ("sample_noisy_keys", "test-sample", "the wide key made wide in every direction (isotropic)",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys[wide] += np.sqrt(0.5) * rng.standard_normal(means.shape[1])\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "1/2 used as the wide key's standard deviation",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys[wide] += 0.5 * rng.standard_normal() * means[wide]\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "every key made wide",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys += np.sqrt(0.5) * rng.standard_normal((len(means), 1)) * means\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "no noise at all",
         "return np.array(means, dtype=float)"),
        ("sample_noisy_keys", "test-sample", "uniform noise on [0, 1) (rng.random) instead of a normal draw",
         "keys = means + np.sqrt(alpha) * rng.random(means.shape)\n"
         "if wide is not None:\n    keys[wide] += np.sqrt(0.5) * rng.standard_normal() * means[wide]\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "`if wide:` takes key 0 for no wide key",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\n"
         "if wide:\n    keys[wide] += np.sqrt(0.5) * rng.standard_normal() * means[wide]\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "key 0 made wide, whichever key `wide` names",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys[0] += np.sqrt(0.5) * rng.standard_normal() * means[0]\nreturn keys"),
        ("sample_noisy_keys", "test-sample", "the wide key's scalar drawn from numpy's global random state",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\n"
         "if wide is not None:\n    keys[wide] += np.sqrt(0.5) * np.random.standard_normal() * means[wide]\n"
         "return keys"),
        ("score_noise_std", "test-noise-std", "the variance instead of the standard deviation",
         "return 2 * alpha * beta ** 2"),
        ("score_noise_std", "test-noise-std", "alpha taken as a standard deviation",
         "return beta * np.sqrt(2) * alpha"),
        ("score_noise_std", "test-noise-std", "beta left out",
         "return np.sqrt(2 * alpha)"),
        ("score_noise_std", "test-noise-std", "no noise in the score",
         "return 0.0"),
        ("score_noise_std", "test-noise-std", "|q| taken as beta (the sqrt 2 lost) and alpha as a std",
         "return beta * alpha"),
        ("wide_key_weight", "test-wide-weight", "the naive logistic overflows far from gamma = 1",
         "return 1 / (1 + np.exp(-(np.asarray(gamma) - 1) * beta))"),
        ("wide_key_weight", "test-wide-weight", "gamma beta instead of (gamma - 1) beta",
         "x = np.asarray(gamma, dtype=float) * beta\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("wide_key_weight", "test-wide-weight", "the sign flipped: a longer key gets less",
         "x = (1 - np.asarray(gamma, dtype=float)) * beta\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("wide_key_weight", "test-wide-weight", "the ratio of the two weights instead of the weight",
         "return np.exp(np.clip((np.asarray(gamma, dtype=float) - 1) * beta, -700, 700))"),
        ("wide_key_weight", "test-wide-weight", "beta left out",
         "x = np.asarray(gamma, dtype=float) - 1\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("wide_key_weight", "test-wide-weight", "the notebook's beta = 30 hard-coded",
         "x = (np.asarray(gamma, dtype=float) - 1) * 30.0\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("wide_key_weight", "test-wide-weight", "tanh without the halving of its argument",
         "x = (np.asarray(gamma, dtype=float) - 1) * beta\nreturn 0.5 * (1 + np.tanh(x))"),
    ],
    "05_two_heads": [
        ("two_head_queries", "test-queries", "both heads given the averaging query",
         "q = beta * (means[a] + means[b])\nreturn q, q"),
        ("two_head_queries", "test-queries", "the heads swapped",
         "return beta * means[b], beta * means[a]"),
        ("two_head_queries", "test-queries", "beta left out",
         "return means[a], means[b]"),
        ("two_head_queries", "test-queries", "the 1/sqrt(d) scale",
         "return beta * means[a] / np.sqrt(means.shape[1]), beta * means[b] / np.sqrt(means.shape[1])"),
        ("two_head_queries", "test-queries", "columns of means taken for rows",
         "return beta * means[:, a], beta * means[:, b]"),
        ("two_head_queries", "test-queries", "hard-coded to the example's a = 0, b = 1",
         "return beta * means[0], beta * means[1]"),
        ("two_head_queries", "test-queries", "beta hard-coded to the example's 30",
         "return 30.0 * means[a], 30.0 * means[b]"),
        ("two_head_output", "test-output", "the two heads added, not averaged",
         "return sum(softmax(keys @ q) @ values for q in queries)"),
        ("two_head_output", "test-output", "one softmax over the summed queries: one head again",
         "return softmax(keys @ sum(queries)) @ values"),
        ("two_head_output", "test-output", "head 1 only",
         "return softmax(keys @ queries[0]) @ values"),
        ("two_head_output", "test-output", "the heads concatenated",
         "return np.concatenate([softmax(keys @ q) @ values for q in queries]) / 2"),
        ("two_head_output", "test-output", "the two heads' weights multiplied",
         "w = softmax(keys @ queries[0]) * softmax(keys @ queries[1])\nreturn w @ values / w.sum()"),
        ("head1_weight", "test-fail", "the naive formula overflows for a large gamma beta",
         "return np.exp(gamma * beta) / (np.exp(gamma * beta) + n - 1)"),
        ("head1_weight", "test-fail", "n competitors instead of n - 1",
         "x = np.asarray(gamma, dtype=float) * beta - np.log(n)\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("head1_weight", "test-fail", "(gamma - 1) beta: the wide-key weight of exercise 4",
         "x = (np.asarray(gamma, dtype=float) - 1) * beta\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("head1_weight", "test-fail", "n ignored",
         "x = np.asarray(gamma, dtype=float) * beta\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("head1_weight", "test-fail", "the sign flipped",
         "x = np.log(n - 1) - np.asarray(gamma, dtype=float) * beta\nreturn 0.5 * (1 + np.tanh(x / 2))"),
        ("head1_weight", "test-fail", "the logistic without overflow, but n hard-coded to the example's 6",
         "x = np.asarray(gamma, dtype=float) * beta - np.log(5)\nreturn 0.5 * (1 + np.tanh(x / 2))"),
    ],
    "06_debug_head": [
        # detectors that do not expose the bug
        ("detects_scores_bug", "test-detect-scores", "tries a head as wide as the model, where the bug hides",
         "W = np.random.default_rng(0).standard_normal((2, d_model, d_model))\n"
         "return not np.allclose(softmax(f(X, *W)), attnlib.attention_weights(X @ W[0], X @ W[1]))"),
        ("detects_scores_bug", "test-detect-scores", "checks only the shape",
         "return f(X, W_Q[0], W_K[0]).shape != (T, T)"),
        ("detects_scores_bug", "test-detect-scores", "checks that the weights sum to one (they always do)",
         "return not np.allclose(softmax(f(X, W_Q[0], W_K[0])).sum(axis=-1), 1)"),
        ("detects_scores_bug", "test-detect-scores", "never flags anything",
         "return False"),
        ("detects_scores_bug", "test-detect-scores", "compares with the same mistake",
         "return not np.allclose(f(X, W_Q[0], W_K[0]), (X @ W_Q[0]) @ (X @ W_K[0]).T / np.sqrt(d_model))"),
        ("detects_scores_bug", "test-detect-scores", "the verdict computed but never returned (None)",
         "Q, K = X @ W_Q[0], X @ W_K[0]\n"
         "flagged = not np.allclose(f(X, W_Q[0], W_K[0]), Q @ K.T / np.sqrt(d_head))"),
        ("detects_scores_bug", "test-detect-scores", "flags every function, right or wrong",
         "return True"),
        ("detects_scores_bug", "test-detect-scores",
         "compares softmaxes, which hide a constant added to a row of scores",
         "Q, K = X @ W_Q[0], X @ W_K[0]\n"
         "return not np.allclose(softmax(f(X, W_Q[0], W_K[0])), attnlib.attention_weights(Q, K))"),
        ("fixed_head_scores", "test-fix-scores", "the scale dropped",
         "return (X @ W_Q_i) @ (X @ W_K_i).T"),
        ("fixed_head_scores", "test-fix-scores", "divided by d_head instead of its square root",
         "return (X @ W_Q_i) @ (X @ W_K_i).T / W_Q_i.shape[1]"),
        ("fixed_head_scores", "test-fix-scores", "scaled by the sequence length",
         "return (X @ W_Q_i) @ (X @ W_K_i).T / np.sqrt(X.shape[0])"),
        ("fixed_head_scores", "test-fix-scores", "queries and keys swapped (the transpose)",
         "return (X @ W_K_i) @ (X @ W_Q_i).T / np.sqrt(W_Q_i.shape[1]) + 0 * X[:, :1]"),
        ("fixed_head_scores", "test-fix-scores", "the colleague's code unchanged",
         "return head_scores(X, W_Q_i, W_K_i)"),
        ("detects_causal_bug", "test-detect-causal", "checks only that the future gets no weight",
         "S = np.random.default_rng(1).standard_normal((T, T))\nreturn bool(np.triu(f(S), 1).any())"),
        ("detects_causal_bug", "test-detect-causal", "checks only the shape",
         "return f(np.zeros((T, T))).shape != (T, T)"),
        ("detects_causal_bug", "test-detect-causal", "tries a 1 x 1 input, where the bug hides",
         "return not np.allclose(f(np.zeros((1, 1))), 1)"),
        ("detects_causal_bug", "test-detect-causal", "checks that no weight is negative",
         "return bool((f(np.random.default_rng(1).standard_normal((T, T))) < 0).any())"),
        ("detects_causal_bug", "test-detect-causal", "the entries that differ (an array), not one verdict",
         "S = np.random.default_rng(1).standard_normal((T, T))\n"
         "return ~np.isclose(f(S), softmax(S, where=attnlib.causal_mask(T)))"),
        ("detects_causal_bug", "test-detect-causal", "flags every function, right or wrong",
         "return True"),
        ("fixed_causal_weights", "test-fix-causal", "masked with 0 instead of -inf",
         "return softmax(np.where(attnlib.causal_mask(len(scores)), scores, 0.0))"),
        ("fixed_causal_weights", "test-fix-causal", "the wrong triangle",
         "return softmax(scores, where=attnlib.causal_mask(len(scores)).T)"),
        ("fixed_causal_weights", "test-fix-causal", "no mask at all",
         "return softmax(scores)"),
        ("fixed_causal_weights", "test-fix-causal", "the softmax taken over queries (axis 0)",
         "return softmax(scores, axis=0, where=attnlib.causal_mask(len(scores)))"),
        ("fixed_causal_weights", "test-fix-causal", "the colleague's code unchanged",
         "return causal_weights(scores)"),
        ("detects_pattern_bug", "test-detect-pattern", "tries a symmetric W^P, where the bug hides",
         "B = np.random.default_rng(0).standard_normal((d_model, d_model))\nW = B + B.T\n"
         "return not np.allclose(f(X, W), X @ W @ X.T)"),
        ("detects_pattern_bug", "test-detect-pattern", "tries the identity",
         "return not np.allclose(f(X, np.eye(d_model)), X @ X.T)"),
        ("detects_pattern_bug", "test-detect-pattern", "checks only the shape",
         "return f(X, np.eye(d_model)).shape != (T, T)"),
        ("detects_pattern_bug", "test-detect-pattern", "compares with the transposed scores",
         "W_P = attnlib.qk_circuit(w).full()[0]\nreturn not np.allclose(f(X, W_P), (X @ W_K[0]) @ (X @ W_Q[0]).T)"),
        ("detects_pattern_bug", "test-detect-pattern", "a pair (verdict, largest difference): a tuple is always true",
         "W_P = attnlib.qk_circuit(w).full()[0]\nS, want = f(X, W_P), (X @ W_Q[0]) @ (X @ W_K[0]).T\n"
         "return not np.allclose(S, want), np.abs(S - want).max()"),
        ("detects_pattern_bug", "test-detect-pattern", "flags every function, right or wrong",
         "return True"),
        ("fixed_pattern_scores", "test-fix-pattern", "symmetrised",
         "return X @ ((W_P_i + W_P_i.T) / 2) @ X.T"),
        ("fixed_pattern_scores", "test-fix-pattern", "scaled by 1/sqrt(d_model): the scores are unscaled",
         "return X @ W_P_i @ X.T / np.sqrt(X.shape[1])"),
        ("fixed_pattern_scores", "test-fix-pattern", "the colleague's code unchanged",
         "return pattern_scores(X, W_P_i)"),
        ("fixed_pattern_scores", "test-fix-pattern", "the symmetric part doubled",
         "return X @ (W_P_i + W_P_i.T) @ X.T"),
        ("detects_combine_bug", "test-detect-combine", "tries one head, where the bug hides",
         "Z = np.random.default_rng(4).standard_normal((1, T, d_model))\n"
         "return not np.allclose(f(Z, np.eye(d_model)), Z[0])"),
        ("detects_combine_bug", "test-detect-combine", "checks only the shape",
         "return f(np.zeros((n_heads, T, d_head)), w.W_O).shape != (T, d_model)"),
        ("detects_combine_bug", "test-detect-combine", "tries all-equal heads and an all-equal W_O",
         "Z = np.ones((n_heads, T, d_head))\nreturn not np.allclose(f(Z, np.ones((d_model, d_model))), d_model)"),
        ("detects_combine_bug", "test-detect-combine", "tries zero heads",
         "return not np.allclose(f(np.zeros((n_heads, T, d_head)), w.W_O), 0)"),
        ("detects_combine_bug", "test-detect-combine", "the verdict printed, not returned (None)",
         "Z = np.random.default_rng(4).standard_normal((n_heads, T, d_head))\n"
         "print('bug' if not np.allclose(f(Z, w.W_O), attnlib.merge_heads(Z) @ w.W_O) else 'ok')"),
        ("detects_combine_bug", "test-detect-combine", "flags every function, right or wrong",
         "return True"),
        ("fixed_combine_heads", "test-fix-combine", "the colleague's code unchanged",
         "return combine_heads(Z, W_O)"),
        ("fixed_combine_heads", "test-fix-combine", "head 0's rows for every head",
         "return sum(Z[i] @ W_O[:Z.shape[2]] for i in range(len(Z)))"),
        ("fixed_combine_heads", "test-fix-combine", "rows taken every n_heads-th",
         "return sum(Z[i] @ W_O[i::len(Z)] for i in range(len(Z)))"),
        ("fixed_combine_heads", "test-fix-combine", "the heads averaged instead of summed",
         "h, _, d = Z.shape\nreturn sum(Z[i] @ W_O[i * d:(i + 1) * d] for i in range(h)) / h"),
        ("fixed_combine_heads", "test-fix-combine", "W_O transposed (the column-vector habit)",
         "h, _, d = Z.shape\nreturn sum(Z[i] @ W_O.T[i * d:(i + 1) * d] for i in range(h))"),
        ("fixed_combine_heads", "test-fix-combine", "divided by sqrt(d_head), as the scores are",
         "h, _, d = Z.shape\nreturn sum(Z[i] @ W_O[i * d:(i + 1) * d] for i in range(h)) / np.sqrt(d)"),
        ("detects_reader_bug", "test-detect-reader", "tries orthonormal columns, where the bug hides",
         "U = np.linalg.qr(np.random.default_rng(7).standard_normal((6, 2)))[0]\nPi = f(U)\n"
         "return not (np.allclose(Pi @ Pi, Pi) and np.allclose(Pi @ U, U))"),
        ("detects_reader_bug", "test-detect-reader", "checks only that Pi is symmetric",
         "Pi = f(np.random.default_rng(7).standard_normal((6, 2)))\nreturn not np.allclose(Pi, Pi.T)"),
        ("detects_reader_bug", "test-detect-reader", "checks only the shape",
         "return f(np.ones((6, 2))).shape != (6, 6)"),
        ("detects_reader_bug", "test-detect-reader", "checks that Pi sends the orthogonal part to zero, only",
         "U = np.random.default_rng(7).standard_normal((6, 2))\n"
         "v = np.linalg.svd(U)[0][:, 2:].T\nreturn not np.allclose(v @ f(U), 0)"),
        ("detects_reader_bug", "test-detect-reader", "the residual (v_a + v_b) Pi - v_a returned, not a verdict",
         "rng = np.random.default_rng(7)\nbasis = np.linalg.qr(rng.standard_normal((6, 6)))[0]\n"
         "U = basis[:, :2] @ rng.standard_normal((2, 2))\n"
         "v_a, v_b = U @ rng.standard_normal(2), basis[:, 2:] @ rng.standard_normal(4)\n"
         "return (v_a + v_b) @ f(U) - v_a"),
        ("detects_reader_bug", "test-detect-reader", "flags every function, right or wrong",
         "return True"),
        ("fixed_subspace_reader", "test-fix-reader", "the colleague's code unchanged",
         "return subspace_reader(U)"),
        ("fixed_subspace_reader", "test-fix-reader", "the complement",
         "return np.eye(len(U)) - U @ np.linalg.solve(U.T @ U, U.T)"),
        ("fixed_subspace_reader", "test-fix-reader", "normalised by the trace",
         "return U @ U.T / np.trace(U.T @ U)"),
        ("fixed_subspace_reader", "test-fix-reader", "half the formula: U (U^T U)^-1, a d x m matrix",
         "return U @ np.linalg.inv(U.T @ U)"),
    ],
    "07_bookkeeping": [
        ("shapes", "test-shapes", "a head's output as wide as the model",
         "d = d_model // n_heads\nreturn {'X': (T, d_model), 'W_Q_i': (d_model, d), 'Q_i': (T, d), 'pattern_i': (T, T),\n"
         "        'z_i': (T, d_model), 'concat': (T, d_model), 'W_O': (d_model, d_model), 'W_O_i': (d, d_model),\n"
         "        'term_i': (T, d_model), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model), 'output': (T, d_model)}"),
        ("shapes", "test-shapes", "W^Q_i as wide as the model",
         "d = d_model // n_heads\nreturn {'X': (T, d_model), 'W_Q_i': (d_model, d_model), 'Q_i': (T, d), 'pattern_i': (T, T),\n"
         "        'z_i': (T, d), 'concat': (T, d_model), 'W_O': (d_model, d_model), 'W_O_i': (d, d_model),\n"
         "        'term_i': (T, d_model), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model), 'output': (T, d_model)}"),
        ("shapes", "test-shapes", "the pattern's shape from d_head, not T",
         "d = d_model // n_heads\nreturn {'X': (T, d_model), 'W_Q_i': (d_model, d), 'Q_i': (T, d), 'pattern_i': (d, d),\n"
         "        'z_i': (T, d), 'concat': (T, d_model), 'W_O': (d_model, d_model), 'W_O_i': (d_model, d),\n"
         "        'term_i': (T, d_model), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model), 'output': (T, d_model)}"),
        ("shapes", "test-shapes", "column vectors: every shape transposed",
         "d = d_model // n_heads\nreturn {'X': (d_model, T), 'W_Q_i': (d, d_model), 'Q_i': (d, T), 'pattern_i': (T, T),\n"
         "        'z_i': (d, T), 'concat': (d_model, T), 'W_O': (d_model, d_model), 'W_O_i': (d_model, d),\n"
         "        'term_i': (d_model, T), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model), 'output': (d_model, T)}"),
        ("shapes", "test-shapes", "no error when the heads do not divide d_model",
         "d = d_model // n_heads\nreturn {'X': (T, d_model), 'W_Q_i': (d_model, d), 'Q_i': (T, d), 'pattern_i': (T, T),\n"
         "        'z_i': (T, d), 'concat': (T, n_heads * d), 'W_O': (n_heads * d, d_model), 'W_O_i': (d, d_model),\n"
         "        'term_i': (T, d_model), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model), 'output': (T, d_model)}"),
        ("shapes", "test-shapes", "(name, shape) pairs in a list, not a dict",
         "if d_model % n_heads:\n    raise ValueError('n_heads must divide d_model')\nd = d_model // n_heads\nreturn [('X', (T, d_model)), ('W_Q_i', (d_model, d)), ('Q_i', (T, d)),\n"
         "        ('pattern_i', (T, T)), ('z_i', (T, d)), ('concat', (T, d_model)), ('W_O', (d_model, d_model)),\n"
         "        ('W_O_i', (d, d_model)), ('term_i', (T, d_model)), ('W_P_i', (d_model, d_model)),\n"
         "        ('W_M_i', (d_model, d_model)), ('output', (T, d_model))]"),
        ("shapes", "test-shapes", "W_P_i and W_M_i left out (the textbook layer's arrays only)",
         "if d_model % n_heads:\n    raise ValueError('n_heads must divide d_model')\nd = d_model // n_heads\nreturn {'X': (T, d_model), 'W_Q_i': (d_model, d), 'Q_i': (T, d), 'pattern_i': (T, T),\n"
         "        'z_i': (T, d), 'concat': (T, d_model), 'W_O': (d_model, d_model), 'W_O_i': (d, d_model),\n"
         "        'term_i': (T, d_model), 'output': (T, d_model)}"),
        ("shapes", "test-shapes", "the head width divided upside down, n_heads // d_model: heads of width 0",
         "if d_model % n_heads:\n    raise ValueError('n_heads must divide d_model')\nd = n_heads // d_model\nreturn {'X': (T, d_model), 'W_Q_i': (d_model, d), 'Q_i': (T, d), 'pattern_i': (T, T),\n"
         "        'z_i': (T, d), 'concat': (T, n_heads * d), 'W_O': (n_heads * d, d_model), 'W_O_i': (d, d_model),\n"
         "        'term_i': (T, d_model), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model), 'output': (T, d_model)}"),
        ("attention_parameters", "test-params", "W^O forgotten",
         "return 3 * d_model * d_model + (3 * d_model if bias else 0)"),
        ("attention_parameters", "test-params", "the biases counted although bias is False",
         "return 4 * d_model * d_model + 4 * d_model"),
        ("attention_parameters", "test-params", "every head counted with d_model x d_model matrices",
         "return n_heads * (4 * d_model * d_model + (4 * d_model if bias else 0))"),
        ("attention_parameters", "test-params", "one head's matrices only (d_model x d_head)",
         "d = d_model // n_heads\nreturn 4 * d_model * d + (4 * d if bias else 0)"),
        ("attention_parameters", "test-params", "one bias number per projection",
         "return 4 * d_model * d_model + (4 if bias else 0)"),
        ("attention_parameters", "test-params", "biases for W^Q, W^K, W^V only",
         "return 4 * d_model * d_model + (3 * d_model if bias else 0)"),
        ("attention_parameters", "test-params", "the weights and the biases counted apart, as a pair",
         "return 4 * d_model * d_model, (4 * d_model if bias else 0)"),
        ("pattern_rank_bound", "test-rank", "d_model: the size of W^P_i, not its rank",
         "return d_model"),
        ("pattern_rank_bound", "test-rank", "the number of heads",
         "return n_heads"),
        ("pattern_rank_bound", "test-rank", "the ranks of W^Q_i and W^K_i added",
         "return 2 * (d_model // n_heads)"),
        ("pattern_rank_bound", "test-rank", "GPT-2's 64 hard-coded",
         "return 64"),
        ("pattern_rank_bound", "test-rank", "the number of entries of W^Q_i",
         "return d_model * (d_model // n_heads)"),
        ("pattern_rank_bound", "test-rank", "the share of the model one head reads, 1 / n_heads",
         "return 1 / n_heads"),
        ("order", "test-order", "the softmax before the scores",
         "order = ['C', 'B', 'E', 'F', 'D', 'A']"),
        ("order", "test-order", "W^O before the concatenation",
         "order = ['C', 'E', 'B', 'F', 'A', 'D']"),
        ("order", "test-order", "the values weighted before the softmax",
         "order = ['C', 'E', 'F', 'B', 'D', 'A']"),
        ("order", "test-order", "the steps reversed",
         "order = ['A', 'D', 'F', 'B', 'E', 'C']"),
        ("order", "test-order", "a step left out",
         "order = ['C', 'E', 'B', 'F', 'A']"),
        ("order", "test-order", "each letter's place, in a dict {'A': 6, 'B': 3, ...}",
         "order = {'A': 6, 'B': 3, 'C': 1, 'D': 5, 'E': 2, 'F': 4}"),
        ("tf_a", "test-tf-a", "true: a head's output taken as d_model wide",
         "tf_a = (True, 5)"),
        ("tf_a", "test-tf-a", "true, because each head has all of W^O",
         "tf_a = (True, 4)"),
        ("tf_a", "test-tf-a", "false, with the false reason 4",
         "tf_a = (False, 4)"),
        ("tf_a", "test-tf-a", "false, with the false reason 1",
         "tf_a = (False, 1)"),
        ("tf_a", "test-tf-a", "the verdict as a string",
         "tf_a = ('False', 5)"),
        ("tf_b", "test-tf-b", "true: each head its own copy of W^O",
         "tf_b = (True, 4)"),
        ("tf_b", "test-tf-b", "true: each head its own pattern",
         "tf_b = (True, 3)"),
        ("tf_b", "test-tf-b", "false, with the false reason 4",
         "tf_b = (False, 4)"),
        ("tf_b", "test-tf-b", "false, with the false reason 1",
         "tf_b = (False, 1)"),
        ("tf_c", "test-tf-c", "false: the block product taken for something else",
         "tf_c = (False, 2)"),
        ("tf_c", "test-tf-c", "true, because the softmax would be linear",
         "tf_c = (True, 1)"),
        ("tf_c", "test-tf-c", "false, because the softmax is linear",
         "tf_c = (False, 1)"),
        ("tf_c", "test-tf-c", "true, because each head has all of W^O",
         "tf_c = (True, 4)"),
        ("tf_d", "test-tf-d", "true: the same T x T softmax",
         "tf_d = (True, 3)"),
        ("tf_d", "test-tf-d", "true: the count is the same for every h",
         "tf_d = (True, 6)"),
        ("tf_d", "test-tf-d", "false, with the false reason 1",
         "tf_d = (False, 1)"),
        ("tf_d", "test-tf-d", "false, with the false reason 4",
         "tf_d = (False, 4)"),
        ("consequence", "test-consequence", "more parameters",
         "consequence = 'a'"),
        ("consequence", "test-consequence", "a nonlinear function of the values",
         "consequence = 'c'"),
        ("consequence", "test-consequence", "one shared softmax",
         "consequence = 'd'"),
        ("consequence", "test-consequence", "the right letter in upper case",
         "consequence = 'B'"),
    ],
    "08_patterns_messages": [
        ("previous_token_pattern", "test-pattern", "orthonormal positions assumed: W_pos^T S W_pos",
         "S = np.eye(len(W_pos), k=-1)\nreturn beta * np.sqrt(d_head) * W_pos.T @ S @ W_pos"),
        ("previous_token_pattern", "test-pattern", "the 1/sqrt(d_head) of the logits not undone",
         "D = np.linalg.pinv(W_pos)\nreturn beta * D @ np.eye(len(W_pos), k=-1) @ D.T"),
        ("previous_token_pattern", "test-pattern", "the shift the wrong way: each position looks at the next",
         "D = np.linalg.pinv(W_pos)\nreturn beta * np.sqrt(d_head) * D @ np.eye(len(W_pos), k=1) @ D.T"),
        ("previous_token_pattern", "test-pattern", "every earlier position, not only the previous one",
         "D = np.linalg.pinv(W_pos)\nS = np.tril(np.ones((len(W_pos), len(W_pos))), -1)\n"
         "return beta * np.sqrt(d_head) * D @ S @ D.T"),
        ("previous_token_pattern", "test-pattern", "the diagonal too: each position also looks at itself",
         "D = np.linalg.pinv(W_pos)\nS = np.eye(len(W_pos), k=-1) + np.eye(len(W_pos))\n"
         "return beta * np.sqrt(d_head) * D @ S @ D.T"),
        ("previous_token_pattern", "test-pattern", "sqrt(d_model) instead of sqrt(d_head)",
         "D = np.linalg.pinv(W_pos)\nreturn beta * np.sqrt(W_pos.shape[1]) * D @ np.eye(len(W_pos), k=-1) @ D.T"),
        ("copying_message", "test-message", "orthonormal token embeddings assumed: W_E^T W_E",
         "return W_E.T @ W_E"),
        ("copying_message", "test-message", "the identity: the position is copied too",
         "return np.eye(W_E.shape[1])"),
        ("copying_message", "test-message", "the pseudo-inverse on the wrong side: W_E W_E^+, the V x V identity",
         "return W_E @ np.linalg.pinv(W_E)"),
        ("copying_message", "test-message", "the pseudo-inverse of the Gram matrix W_E^T W_E",
         "return np.linalg.pinv(W_E.T @ W_E)"),
        ("copying_message", "test-message", "half the projector: W_E^T (W_E W_E^T)^-1, a d_model x V matrix",
         "return W_E.T @ np.linalg.inv(W_E @ W_E.T)"),
        ("head_output", "test-head", "the softmax over the queries (axis 0)",
         "A = softmax(X @ W_P @ X.T / np.sqrt(d_head), axis=0)\nreturn A @ X @ W_M"),
        ("head_output", "test-head", "no 1/sqrt(d_head) scale",
         "return softmax(X @ W_P @ X.T) @ X @ W_M"),
        ("head_output", "test-head", "sqrt(d_model) instead of sqrt(d_head)",
         "return softmax(X @ W_P @ X.T / np.sqrt(X.shape[1])) @ X @ W_M"),
        ("head_output", "test-head", "W^P transposed: the keys look for the queries",
         "return softmax(X @ W_P.T @ X.T / np.sqrt(d_head)) @ X @ W_M"),
        ("head_output", "test-head", "the rows of X averaged, the message matrix forgotten",
         "return softmax(X @ W_P @ X.T / np.sqrt(d_head)) @ X"),
    ],
    "09_attribution": [
        ("logit_attribution", "test-logit", "the logit of the token at the position, not of the target",
         "tr = model.trace(tokens)\nu = model.W_U[:, tokens[position]]\n"
         "token = tr.embedding[position] - model.W_pos[position]\n"
         "return np.concatenate([[token @ u, model.W_pos[position] @ u], *[w[:, position] @ u for w in tr.writes]])"),
        ("logit_attribution", "test-logit", "the heads in head-major order (L0H0, L1H0, L0H1, ...)",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "token = tr.embedding[position] - model.W_pos[position]\n"
         "heads = np.stack([w[:, position] @ u for w in tr.writes])   # (n_layers, n_heads)\n"
         "return np.concatenate([[token @ u, model.W_pos[position] @ u], heads.T.ravel()])"),
        ("logit_attribution", "test-logit", "the token and position terms swapped",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "token = tr.embedding[position] - model.W_pos[position]\n"
         "return np.concatenate([[model.W_pos[position] @ u, token @ u], *[w[:, position] @ u for w in tr.writes]])"),
        ("logit_attribution", "test-logit", "each head's write summed over every position",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "token = tr.embedding[position] - model.W_pos[position]\n"
         "return np.concatenate([[token @ u, model.W_pos[position] @ u], *[w.sum(axis=1) @ u for w in tr.writes]])"),
        ("logit_attribution", "test-logit", "the whole embedding as the token term: the position counted twice",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "return np.concatenate([[tr.embedding[position] @ u, model.W_pos[position] @ u],"
         " *[w[:, position] @ u for w in tr.writes]])"),
        ("logit_attribution", "test-logit", "the whole embedding as the token term, the position term 0",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "return np.concatenate([[tr.embedding[position] @ u, 0.0], *[w[:, position] @ u for w in tr.writes]])"),
        ("logit_attribution", "test-logit", "the position term read at row 0 of W_pos",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "token = tr.embedding[position] - model.W_pos[0]\n"
         "return np.concatenate([[token @ u, model.W_pos[0] @ u], *[w[:, position] @ u for w in tr.writes]])"),
        ("logit_attribution", "test-logit", "the library's answer",
         "import attnlib.attribution\n"
         "return attnlib.attribution.logit_attribution(model, tokens, position, target).values"),
        ("logit_attribution", "test-logit", "the library's answer by another road (its path split, summed by head)",
         "from attnlib.attribution import path_attribution\n"
         "a = path_attribution(model, tokens, position, target)\n"
         "token = model.W_E[tokens[position]] @ model.W_U[:, target]\n"
         "heads = [f'L{l}H{i}' for l in range(model.n_layers) for i in range(model.layers[l].n_heads)]\n"
         "return np.array([token, model.W_pos[position] @ model.W_U[:, target]]"
         " + [sum(v for n, v in zip(a.names, a.values) if n.split('>')[-1] == h) for h in heads])"),
        ("logit_attribution", "test-logit", "the library's answer by another road (metrics.logit_terms for the heads)",
         "from attnlib.metrics import logit_terms\n"
         "tr = model.trace(tokens)\ntargets = np.full(len(tokens), -1)\ntargets[position] = target\n"
         "terms = logit_terms(tr, model.W_U, targets)\nu = model.W_U[:, target]\n"
         "token = (tr.embedding[position] - model.W_pos[position]) @ u\n"
         "return np.array([token, model.W_pos[position] @ u] + [v[position] for k, v in terms.items() if k != 'direct'])"),
        ("qk_attribution", "test-qk", "no 1/sqrt(d_head) scale",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]] + [h for w in tr.writes[:layer] for h in w])\n"
         "w = model.layers[layer].per_head\nreturn (terms[:, query] @ w.W_Q[head]) @ (terms[:, key] @ w.W_K[head]).T"),
        ("qk_attribution", "test-qk", "sqrt(d_model) instead of sqrt(d_head)",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]] + [h for w in tr.writes[:layer] for h in w])\n"
         "w = model.layers[layer].per_head\n"
         "return (terms[:, query] @ w.W_Q[head]) @ (terms[:, key] @ w.W_K[head]).T / np.sqrt(model.d_model)"),
        ("qk_attribution", "test-qk", "transposed: rows the key side, columns the query side",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]] + [h for w in tr.writes[:layer] for h in w])\n"
         "w = model.layers[layer].per_head\n"
         "return (terms[:, key] @ w.W_K[head]) @ (terms[:, query] @ w.W_Q[head]).T / np.sqrt(model.layers[layer].d_head)"),
        ("qk_attribution", "test-qk", "both sides read at the query's position",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]] + [h for w in tr.writes[:layer] for h in w])\n"
         "w = model.layers[layer].per_head\n"
         "return (terms[:, query] @ w.W_Q[head]) @ (terms[:, query] @ w.W_K[head]).T / np.sqrt(model.layers[layer].d_head)"),
        ("qk_attribution", "test-qk", "the heads of every layer as terms, the head's own layer too",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]] + [h for w in tr.writes for h in w])\n"
         "w = model.layers[layer].per_head\n"
         "return (terms[:, query] @ w.W_Q[head]) @ (terms[:, key] @ w.W_K[head]).T / np.sqrt(model.layers[layer].d_head)"),
        ("qk_attribution", "test-qk", "the whole score in one corner",
         "tr = model.trace(tokens)\nw = model.layers[layer].per_head\nx = tr.residual[layer]\n"
         "n = 2 + sum(model.layers[l].n_heads for l in range(layer))\nM = np.zeros((n, n))\n"
         "M[0, 0] = (x[query] @ w.W_Q[head]) @ (x[key] @ w.W_K[head]) / np.sqrt(model.layers[layer].d_head)\n"
         "return M"),
        ("qk_attribution", "test-qk", "the key side lumped in one column: the whole stream at the key",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.stack([tr.embedding - model.W_pos[:T], model.W_pos[:T]] + [h for w in tr.writes[:layer] for h in w])\n"
         "w = model.layers[layer].per_head\nM = np.zeros((len(terms), len(terms)))\n"
         "M[:, 0] = (terms[:, query] @ w.W_Q[head]) @ (tr.residual[layer][key] @ w.W_K[head])"
         " / np.sqrt(model.layers[layer].d_head)\nreturn M"),
        ("qk_attribution", "test-qk", "the library's answer",
         "from attnlib.attribution import qk_attribution as split\n"
         "return split(model, tokens, layer, head, query, key).values"),
        ("keys_read", "test-keys", "the query side (rows) summed instead of the key side",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = C.sum(axis=1)[2:]\nreturn names[int(np.argmax(side))] if side.max() > 0 else None"),
        ("keys_read", "test-keys", "the embeddings included: may name 'embed' or 'pos'",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = C.sum(axis=0)\nreturn (['embed', 'pos'] + names)[int(np.argmax(side))] if side.max() > 0 else None"),
        ("keys_read", "test-keys", "the index of the head, not its name",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = C.sum(axis=0)[2:]\nreturn int(np.argmax(side)) if side.max() > 0 else None"),
        ("keys_read", "test-keys", "the smallest key-side term instead of the largest",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = C.sum(axis=0)[2:]\nreturn names[int(np.argmin(side))] if side.max() > 0 else None"),
        ("keys_read", "test-keys", "never None: the largest head's term named even when it is not positive",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "return names[int(np.argmax(C.sum(axis=0)[2:]))]"),
        ("keys_read", "test-keys", "every earlier head named as a head of layer 0",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = C.sum(axis=0)[2:]\nreturn f'L0H{int(np.argmax(side))}' if side.max() > 0 else None"),
        ("keys_read", "test-keys", "the contrast over every key, the masked keys after the query included",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(len(tokens))])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = C.sum(axis=0)[2:]\nreturn names[int(np.argmax(side))] if side.max() > 0 else None"),
        ("keys_read", "test-keys", "the library's QK attribution, not the notebook's own",
         "from attnlib.attribution import qk_contrast\n"
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "side = qk_contrast(model, tokens, layer, head, query, key).key_side()\n"
         "best = max(side.names[2:], key=lambda n: side[n])\nreturn best if side[best] > 0 else None"),
    ],
    "10_attribution_patching": [
        ("stream_gradient", "test-grad", "the direct path only: layer 1's heads left out",
         "x = model.trace(tokens).residual[1]\ng = np.zeros_like(x)\n"
         "g[position] = model.W_U[:, good] - model.W_U[:, bad]\nreturn g"),
        ("stream_gradient", "test-grad", "the sign of M flipped (bad - good)",
         _GRAD10.replace("model.W_U[:, good] - model.W_U[:, bad]", "model.W_U[:, bad] - model.W_U[:, good]")),
        ("stream_gradient", "test-grad", "the gradient without the softmax's Jacobian (the weights' gradient as the scores')",
         _GRAD10.replace("dS = A * (dA - (A * dA).sum(axis=1, keepdims=True))", "dS = dA")),
        ("stream_gradient", "test-grad", "the softmax's Jacobian without its a a^T term",
         _GRAD10.replace("dS = A * (dA - (A * dA).sum(axis=1, keepdims=True))", "dS = A * dA")),
        ("stream_gradient", "test-grad", "the attention weights held fixed: the values and the direct path only",
         _GRAD10.replace("dQ @ w.W_Q[i].T + dK @ w.W_K[i].T + ", "")),
        ("stream_gradient", "test-grad", "A instead of A^T in the values' gradient",
         _GRAD10.replace("dA, dV = dZ @ V.T, A.T @ dZ", "dA, dV = dZ @ V.T, A @ dZ")),
        ("stream_gradient", "test-grad", "the 1/sqrt(d_head) of the scores left out",
         _GRAD10.replace("dQ, dK = dS @ K / np.sqrt(d), dS.T @ Q / np.sqrt(d)", "dQ, dK = dS @ K, dS.T @ Q")),
        ("stream_gradient", "test-grad", "the queries' and keys' gradients swapped (dS where dS^T belongs)",
         _GRAD10.replace("dQ, dK = dS @ K / np.sqrt(d), dS.T @ Q / np.sqrt(d)",
                         "dQ, dK = dS.T @ K / np.sqrt(d), dS @ Q / np.sqrt(d)")),
        ("stream_gradient", "test-grad", "the weights recomputed without the causal mask",
         _GRAD10.replace("A = attnlib.attention_weights(Q, K, causal=True)",
                         "A = attnlib.attention_weights(Q, K, causal=False)")),
        ("stream_gradient", "test-grad", "a central finite difference of logits_from_stream, not a backward pass",
         "x = model.trace(tokens).residual[1]\ng = np.zeros_like(x)\n"
         "for idx in np.ndindex(*x.shape):\n    E = np.zeros_like(x)\n    E[idx] = 1e-5\n"
         "    up = logit_diff(logits_from_stream(model, x + E), position, good, bad)\n"
         "    down = logit_diff(logits_from_stream(model, x - E), position, good, bad)\n"
         "    g[idx] = (up - down) / 2e-5\nreturn g"),
        ("activation_patch", "test-act", "the patched run's M, the corrupt run's not subtracted",
         "return float(logit_diff(patch(model, clean, corrupt, [site]), position, good, bad))"),
        ("activation_patch", "test-act", "the sign flipped: M(corrupt) - M(patched)",
         "patched = patch(model, clean, corrupt, [site])\n"
         "return float(logit_diff(model.forward(corrupt), position, good, bad)"
         " - logit_diff(patched, position, good, bad))"),
        ("activation_patch", "test-act", "the patch the other way: the clean run with the corrupt activation",
         "patched = patch(model, corrupt, clean, [site])\n"
         "return float(logit_diff(patched, position, good, bad) - logit_diff(model.forward(clean), position, good, bad))"),
        ("activation_patch", "test-act", "the logit of good alone, bad forgotten",
         "patched = patch(model, clean, corrupt, [site])\n"
         "return float(patched[position, good] - model.forward(corrupt)[position, good])"),
        ("activation_patch", "test-act", "M at the last position, whatever position is",
         "patched = patch(model, clean, corrupt, [site])\n"
         "return float(logit_diff(patched, -1, good, bad) - logit_diff(model.forward(corrupt), -1, good, bad))"),
        ("attribution_patch", "test-atp", "the patch's direction flipped: corrupt minus clean",
         "g = stream_gradient(model, corrupt, position, good, bad)\n"
         "return float((g * (model.trace(corrupt).writes[0][head] - model.trace(clean).writes[0][head])).sum())"),
        ("attribution_patch", "test-atp", "the gradient at the clean run instead of the corrupt one",
         "g = stream_gradient(model, clean, position, good, bad)\n"
         "return float((g * (model.trace(clean).writes[0][head] - model.trace(corrupt).writes[0][head])).sum())"),
        ("attribution_patch", "test-atp", "the gradient times the clean write, not the change the patch makes",
         "g = stream_gradient(model, corrupt, position, good, bad)\n"
         "return float((g * model.trace(clean).writes[0][head]).sum())"),
        ("attribution_patch", "test-atp", "the row at position only: the write at earlier positions left out",
         "g = stream_gradient(model, corrupt, position, good, bad)\n"
         "delta = model.trace(clean).writes[0][head] - model.trace(corrupt).writes[0][head]\n"
         "return float(g[position] @ delta[position])"),
        ("attribution_patch", "test-atp", "the change of every layer-0 head's write, not the one head's",
         "g = stream_gradient(model, corrupt, position, good, bad)\n"
         "delta = model.trace(clean).writes[0].sum(axis=0) - model.trace(corrupt).writes[0].sum(axis=0)\n"
         "return float((g * delta).sum())"),
        ("attribution_patch", "test-atp", "the exact patch returned instead of the estimate",
         "return activation_patch(model, clean, corrupt, (0, head), position, good, bad)"),
        ("precision_recall", "test-pr", "precision and recall swapped",
         "found, planted = set(found), set(planted)\nhits = len(found & planted)\n"
         "return hits / len(planted), (hits / len(found) if found else 0.0)"),
        ("precision_recall", "test-pr", "an empty found set scored as perfect precision",
         "found, planted = set(found), set(planted)\nhits = len(found & planted)\n"
         "return (hits / len(found) if found else 1.0), hits / len(planted)"),
        ("precision_recall", "test-pr", "an empty found set divides by zero",
         "found, planted = set(found), set(planted)\nhits = len(found & planted)\n"
         "return hits / len(found), hits / len(planted)"),
        ("precision_recall", "test-pr", "duplicates counted: the lists, not sets of edges",
         "hits = sum(e in planted for e in found)\n"
         "return (hits / len(found) if found else 0.0), sum(e in found for e in planted) / len(planted)"),
        ("precision_recall", "test-pr", "edges compared by sender and receiver only: the input (via) ignored",
         "found = {(e.sender, e.receiver) for e in found}\nplanted = {(e.sender, e.receiver) for e in planted}\n"
         "hits = len(found & planted)\nreturn (hits / len(found) if found else 0.0), hits / len(planted)"),
        ("precision_recall", "test-pr", "the numbers of hits, not fractions",
         "found, planted = set(found), set(planted)\nhits = len(found & planted)\nreturn float(hits), float(hits)"),
        ("precision_recall", "test-pr", "the Jaccard index (hits over the union) for both",
         "found, planted = set(found), set(planted)\nj = len(found & planted) / len(found | planted)\n"
         "return j, j"),
    ],
}


# Right answers written another way: ``(function, what differs, the code)``. Each keeps every point.
ALTERNATIVES = {
    "01_copying": [
        ("attention_weights", "scipy-free logsumexp written out",
         "s = keys @ q\nlse = s.max() + np.log(np.exp(s - s.max()).sum())\nreturn np.exp(s - lse)"),
        ("attention_weights", "a loop over the keys, and a warning from a discarded branch",
         "s = np.array([k @ q for k in keys])\n_ = np.log(np.zeros(1))   # warns: divide by zero\n"
         "e = np.exp(s - max(s))\nreturn e / sum(e)"),
        ("attend", "a sum over the keys",
         "w = attention_weights(keys, q)\nreturn sum(w[i] * values[i] for i in range(len(values)))"),
        ("attend", "einsum",
         "return np.einsum('n,nd->d', attention_weights(keys, q), values)"),
        ("copy_query", "keys^T e_j scaled",
         "e = np.zeros(len(keys)); e[j] = beta\nreturn keys.T @ e"),
        ("copy_query", "solve for the scores with least squares",
         "target = beta * np.eye(len(keys))[j]\nreturn np.linalg.lstsq(keys, target, rcond=None)[0]"),
        ("smallest_beta", "one logarithm of the ratio",
         "return np.log((n - 1) * (1 - eps) / eps)"),
        ("smallest_beta", "log(1 - eps) instead of log1p: the same digits, since 1 - eps is near 1",
         "return np.log(n - 1) - np.log(eps) + np.log(1 - eps)"),
        ("smallest_beta", "minus the log of what each other key keeps, relative to key j",
         "return -np.log(eps / ((n - 1) * (1 - eps)))"),
        ("copy_margin", "a mask instead of delete",
         "s = keys @ q\nothers = np.where(np.arange(len(s)) == j, -np.inf, s)\nreturn s[j] - others.max()"),
        ("copy_margin", "a loop",
         "best = max(float(keys[i] @ q) for i in range(len(keys)) if i != j)\nreturn float(keys[j] @ q) - best"),
        ("copy_weight_bound", "the logistic through logaddexp",
         "return np.exp(-np.logaddexp(0, np.log(n - 1) - margin))"),
        ("copy_weight_bound", "two branches of the logistic",
         "x = margin - np.log(n - 1)\nreturn 1 / (1 + np.exp(-x)) if x >= 0 else np.exp(x) / (1 + np.exp(x))"),
    ],
    "05_two_heads": [
        ("two_head_queries", "least squares for the scores asked for",
         "I = beta * np.eye(len(means))\nreturn tuple(np.linalg.lstsq(means, I[i], rcond=None)[0] for i in (a, b))"),
        ("two_head_queries", "both rows at once, unpacked",
         "q1, q2 = beta * means[[a, b]]\nreturn q1, q2"),
        ("two_head_queries", "the pseudo-inverse of the means",
         "P = np.linalg.pinv(means)   # (d, n): means @ P = I\nreturn beta * P[:, a], beta * P[:, b]"),
        ("two_head_output", "a loop with the softmax written out",
         "c = 0\nfor q in queries:\n    s = keys @ q\n    e = np.exp(s - s.max())\n    c = c + (e / e.sum()) @ values\n"
         "return c / 2"),
        ("two_head_output", "the heads stacked and averaged with einsum",
         "W = softmax(np.stack([keys @ q for q in queries]), axis=-1)   # (2, n)\n"
         "return np.einsum('hn,nv->v', W, values) / len(queries)"),
        ("head1_weight", "the logistic through logaddexp",
         "x = np.asarray(gamma, dtype=float) * beta - np.log(n - 1)\nreturn np.exp(-np.logaddexp(0, -x))"),
        ("head1_weight", "two branches of the logistic, each on its own side",
         "x = np.asarray(gamma, dtype=float) * beta - np.log(n - 1)\n"
         "e = np.exp(-np.abs(x))\nreturn np.where(x >= 0, 1 / (1 + e), e / (1 + e))"),
    ],
    "06_debug_head": [
        ("detects_scores_bug", "another head and another input, compared with the formula",
         "Xr = np.random.default_rng(3).standard_normal((4, d_model))\nQ, K = Xr @ W_Q[2], Xr @ W_K[2]\n"
         "return not np.allclose(f(Xr, W_Q[2], W_K[2]), Q @ K.T / np.sqrt(W_Q.shape[2]))"),
        ("detects_scores_bug", "a narrow head of its own making, against einsum",
         "r = np.random.default_rng(1)\nXr, Wq, Wk = r.standard_normal((6, 8)), r.standard_normal((8, 2)), "
         "r.standard_normal((8, 2))\nreturn not np.allclose(f(Xr, Wq, Wk), "
         "np.einsum('tk,sk->ts', Xr @ Wq, Xr @ Wk) / np.sqrt(2))"),
        ("detects_scores_bug", "an int for the verdict, 1 for a bug",
         "Q, K = X @ W_Q[1], X @ W_K[1]\n"
         "return int(not np.allclose(f(X, W_Q[1], W_K[1]), Q @ K.T / np.sqrt(W_Q.shape[2])))"),
        ("detects_scores_bug", "attention_weights, and the scores' row means (what a softmax cannot see)",
         "Q, K = X @ W_Q[2], X @ W_K[2]\nS, want = f(X, W_Q[2], W_K[2]), Q @ K.T / np.sqrt(d_head)\n"
         "same_weights = np.allclose(softmax(S), attnlib.attention_weights(Q, K))\n"
         "return not (same_weights and np.allclose(S.mean(axis=1), want.mean(axis=1)))"),
        ("fixed_head_scores", "einsum and a power of d_head",
         "d = W_K_i.shape[-1]\nreturn np.einsum('tk,sk->ts', X @ W_Q_i, X @ W_K_i) * d ** -0.5"),
        ("fixed_head_scores", "the queries scaled first",
         "Q = X @ W_Q_i / np.sqrt(W_Q_i.shape[1])\nreturn Q @ (X @ W_K_i).T"),
        ("detects_causal_bug", "a row-by-row check: nothing on the future, a softmax over the past",
         "S = np.random.default_rng(5).standard_normal((6, 6))\nW = f(S)\n"
         "ok = np.allclose(np.triu(W, 1), 0) and all(np.allclose(W[t, :t + 1], softmax(S[t, :t + 1])) "
         "for t in range(6))\nreturn not ok"),
        ("detects_causal_bug", "scores from queries and keys, against attention_weights(causal=True)",
         "r = np.random.default_rng(2)\nQ, K = r.standard_normal((7, 3)), r.standard_normal((7, 3))\n"
         "return not np.allclose(f(Q @ K.T / np.sqrt(3)), attnlib.attention_weights(Q, K, causal=True))"),
        ("detects_causal_bug", "the number of weights that differ, 0 when right (a numpy int)",
         "S = np.random.default_rng(1).standard_normal((T, T))\n"
         "return (~np.isclose(f(S), softmax(S, where=attnlib.causal_mask(T)))).sum()"),
        ("fixed_causal_weights", "the colleague's weights cut to the past and renormalised",
         "W = np.tril(softmax(scores, axis=-1))\nreturn W / W.sum(axis=-1, keepdims=True)"),
        ("fixed_causal_weights", "log of the mask added (numpy warns of log(0), the result is right)",
         "mask = np.tril(np.ones(scores.shape))\nreturn softmax(scores + np.log(mask), axis=-1)"),
        ("fixed_causal_weights", "np.where with -inf, then the softmax",
         "T_ = scores.shape[-1]\nreturn softmax(np.where(np.tril(np.ones((T_, T_), bool)), scores, -np.inf), axis=-1)"),
        ("detects_pattern_bug", "a random non-symmetric W^P, against einsum",
         "r = np.random.default_rng(8)\nXr, WP = r.standard_normal((4, 5)), r.standard_normal((5, 5))\n"
         "return not np.allclose(f(Xr, WP), np.einsum('td,de,se->ts', Xr, WP, Xr))"),
        ("detects_pattern_bug", "head 2 of the model, against its queries and keys",
         "WP = attnlib.qk_circuit(w).full()[2]\nreturn not np.allclose(f(X, WP), (X @ W_Q[2]) @ (X @ W_K[2]).T)"),
        ("detects_pattern_bug", "the share of scores that differ, 0.0 when right (a float)",
         "W_P = attnlib.qk_circuit(w).full()[0]\n"
         "return float(np.mean(~np.isclose(f(X, W_P), (X @ W_Q[0]) @ (X @ W_K[0]).T)))"),
        ("fixed_pattern_scores", "einsum",
         "return np.einsum('td,de,se->ts', X, W_P_i, X)"),
        ("fixed_pattern_scores", "the keys' side first",
         "return X @ (X @ W_P_i.T).T"),
        ("detects_combine_bug", "two heads of its own, against a loop over row blocks",
         "r = np.random.default_rng(9)\nZ, WO = r.standard_normal((2, 3, 3)), r.standard_normal((6, 5))\n"
         "return not np.allclose(f(Z, WO), Z[0] @ WO[:3] + Z[1] @ WO[3:])"),
        ("detects_combine_bug", "the model's W_O, against the concatenation written out",
         "Z = np.random.default_rng(1).standard_normal((n_heads, T, d_head))\n"
         "return not np.allclose(f(Z, w.W_O), np.concatenate(list(Z), axis=-1) @ w.W_O)"),
        ("detects_combine_bug", "a one-entry array for the verdict (np.any with keepdims)",
         "Z = np.random.default_rng(4).standard_normal((n_heads, T, d_head))\n"
         "return np.any(~np.isclose(f(Z, w.W_O), attnlib.merge_heads(Z) @ w.W_O), keepdims=True).ravel()"),
        ("fixed_combine_heads", "the concat form",
         "return attnlib.merge_heads(Z) @ W_O"),
        ("fixed_combine_heads", "W_O split into row blocks, einsum",
         "blocks = np.stack(np.split(W_O, Z.shape[0]))   # (n_heads, d_head, d_model)\n"
         "return np.einsum('htd,hdm->tm', Z, blocks)"),
        ("detects_reader_bug", "keeps U's columns, removes their orthogonal complement",
         "U = np.random.default_rng(4).standard_normal((5, 2))\nPi = f(U)\nN = np.linalg.svd(U)[0][:, 2:]\n"
         "return not (np.allclose(U.T @ Pi, U.T) and np.allclose(N.T @ Pi, 0))"),
        ("detects_reader_bug", "against the pseudo-inverse projector",
         "U = np.random.default_rng(6).standard_normal((6, 3))\nreturn not np.allclose(f(U), U @ np.linalg.pinv(U))"),
        ("detects_reader_bug", "the verdict as 1.0 or 0.0",
         "U = np.random.default_rng(6).standard_normal((6, 3))\n"
         "return 0.0 if np.allclose(f(U), U @ np.linalg.pinv(U)) else 1.0"),
        ("fixed_subspace_reader", "the pseudo-inverse",
         "return U @ np.linalg.pinv(U)"),
        ("fixed_subspace_reader", "an orthonormal basis of the span from QR",
         "Q, _ = np.linalg.qr(U)\nreturn Q @ Q.T"),
    ],
    "07_bookkeeping": [
        ("shapes", "divmod, and the dict filled step by step",
         "d, rest = divmod(d_model, n_heads)\nif rest:\n    raise ValueError('n_heads must divide d_model')\n"
         "s = {'X': (T, d_model), 'W_Q_i': (d_model, d), 'W_O_i': (d, d_model), 'W_O': (n_heads * d, d_model)}\n"
         "s['Q_i'] = s['z_i'] = (T, d)\ns['pattern_i'] = (T, T)\ns['concat'] = (T, n_heads * d)\n"
         "s['term_i'] = s['output'] = (T, d_model)\ns['W_P_i'] = s['W_M_i'] = (d_model, d_model)\nreturn s"),
        ("shapes", "read off arrays built with numpy",
         "if d_model % n_heads != 0:\n    raise ValueError(f'{n_heads} heads do not divide d_model = {d_model}')\n"
         "d = d_model // n_heads\nX, W_Q_i, W_O = np.zeros((T, d_model)), np.zeros((d_model, d)), "
         "np.zeros((d_model, d_model))\nQ_i = X @ W_Q_i\npattern_i = Q_i @ Q_i.T\nz_i = pattern_i @ Q_i\n"
         "W_O_i = W_O[:d]\nconcat = np.concatenate([z_i] * n_heads, axis=1)\n"
         "arrays = dict(X=X, W_Q_i=W_Q_i, Q_i=Q_i, pattern_i=pattern_i, z_i=z_i, concat=concat, W_O=W_O, W_O_i=W_O_i,\n"
         "              term_i=z_i @ W_O_i, W_P_i=W_Q_i @ W_Q_i.T, W_M_i=W_Q_i @ W_O_i, output=concat @ W_O)\n"
         "return {k: tuple(a.shape) for k, a in arrays.items()}"),
        ("shapes", "lists for the shapes",
         "if d_model % n_heads:\n    raise ValueError('n_heads must divide d_model')\nd = d_model // n_heads\n"
         "return {'X': [T, d_model], 'W_Q_i': [d_model, d], 'Q_i': [T, d], 'pattern_i': [T, T], 'z_i': [T, d],\n"
         "        'concat': [T, d_model], 'W_O': [d_model, d_model], 'W_O_i': [d, d_model], 'term_i': [T, d_model],\n"
         "        'W_P_i': [d_model, d_model], 'W_M_i': [d_model, d_model], 'output': [T, d_model]}"),
        ("shapes", "d_head from a true division: floats such as 4.0 in the shapes",
         "if d_model % n_heads:\n    raise ValueError('n_heads must divide d_model')\nd = d_model / n_heads\n"
         "return {'X': (T, d_model), 'W_Q_i': (d_model, d), 'Q_i': (T, d), 'pattern_i': (T, T), 'z_i': (T, d),\n"
         "        'concat': (T, n_heads * d), 'W_O': (n_heads * d, d_model), 'W_O_i': (d, d_model),\n"
         "        'term_i': (T, d_model), 'W_P_i': (d_model, d_model), 'W_M_i': (d_model, d_model),\n"
         "        'output': (T, d_model)}"),
        ("attention_parameters", "the sizes of the matrices that shapes lists",
         "s = shapes(1, d_model, n_heads)\nweights = 3 * n_heads * int(np.prod(s['W_Q_i'])) + int(np.prod(s['W_O']))\n"
         "return weights + (4 * d_model if bias else 0)"),
        ("attention_parameters", "the sizes of attnlib's weights, plus the biases",
         "w = attnlib.random_weights(d_model, n_heads)\n"
         "return sum(m.size for m in (w.W_Q, w.W_K, w.W_V, w.W_O)) + 4 * d_model * int(bias)"),
        ("attention_parameters", "head by head, with d_head from a true division: a float such as 1024.0",
         "d = d_model / n_heads\nreturn n_heads * 4 * d_model * d + (4 * d_model if bias else 0)"),
        ("pattern_rank_bound", "the narrow side of W^Q_i, from shapes",
         "return min(shapes(1, d_model, n_heads)['W_Q_i'])"),
        ("pattern_rank_bound", "a float division made an int",
         "return int(d_model / n_heads)"),
        ("pattern_rank_bound", "a true division: a float such as 4.0",
         "return d_model / n_heads"),
        ("order", "a string split into letters", "order = list('CEBFDA')"),
        ("order", "a tuple", "order = ('C', 'E', 'B', 'F', 'D', 'A')"),
        ("order", "one string of the letters", "order = 'CEBFDA'"),
        ("tf_a", "a list, with a numpy bool", "tf_a = [np.False_, 5]"),
        ("tf_a", "a comparison for the verdict", "tf_a = (12 // 3 == 12, 5)"),
        ("tf_a", "0 for False", "tf_a = (0, 5)"),
        ("tf_b", "a list", "tf_b = [False, 6]"),
        ("tf_b", "the verdict computed",
         "tf_b = (attention_parameters(48, 4, True) == 4 * attention_parameters(48, 1, True), 6)"),
        ("tf_c", "a list", "tf_c = [True, 2]"),
        ("tf_c", "a numpy bool", "tf_c = (np.True_, 2)"),
        ("tf_c", "1 for True, and a float reason", "tf_c = (1, 2.0)"),
        ("tf_d", "a list", "tf_d = [False, 3]"),
        ("tf_d", "a numpy int for the reason", "tf_d = (False, np.int64(3))"),
        ("tf_d", "a numpy array", "tf_d = np.array([False, 3])"),
        ("consequence", "upper case made lower", "consequence = 'B'.lower()"),
        ("consequence", "picked from the letters", "consequence = 'abcd'[1]"),
    ],
    "03_subspace": [
        ("extract_projector", "the pseudo-inverse",
         "return U @ np.linalg.pinv(U)"),
        ("extract_projector", "an orthonormal basis of the span from QR",
         "Q = np.linalg.qr(U)[0]\nreturn Q @ Q.T"),
        ("extract_projector", "an orthonormal basis of the span from the SVD",
         "E = np.linalg.svd(U, full_matrices=False)[0]\nreturn E @ E.T"),
        ("extract_projector", "the inverse written out",
         "return U @ np.linalg.inv(U.T @ U) @ U.T"),
        ("extract_projector", "least squares: the coefficients of each basis vector, by lstsq",
         "return U @ np.linalg.lstsq(U, np.eye(len(U)), rcond=None)[0]"),
    ],
    "04_noisy_keys": [
        ("sample_noisy_keys", "one multivariate normal draw per key",
         "d = means.shape[1]\nkeys = []\nfor i, mu in enumerate(means):\n    cov = alpha * np.eye(d)\n"
         "    if i == wide:\n        cov = cov + 0.5 * np.outer(mu, mu)\n"
         "    keys.append(rng.multivariate_normal(mu, cov))\nreturn np.array(keys)"),
        ("sample_noisy_keys", "rng.normal per key, the wide key's length drawn first",
         "keys = np.array(means, dtype=float)\nif wide is not None:\n"
         "    keys[wide] = keys[wide] * rng.normal(1, np.sqrt(0.5))\n"
         "for i in range(len(keys)):\n    keys[i] = keys[i] + rng.normal(0, np.sqrt(alpha), keys.shape[1])\n"
         "return keys"),
        ("sample_noisy_keys", "a Cholesky factor of the wide key's covariance",
         "keys = means + np.sqrt(alpha) * rng.standard_normal(means.shape)\nif wide is not None:\n"
         "    mu = means[wide]\n    L = np.linalg.cholesky(alpha * np.eye(len(mu)) + 0.5 * np.outer(mu, mu))\n"
         "    keys[wide] = mu + L @ rng.standard_normal(len(mu))\nreturn keys"),
        ("score_noise_std", "the length of q written out",
         "return np.sqrt(alpha) * np.linalg.norm([beta, beta])"),
        ("score_noise_std", "the square root of the variance",
         "return np.sqrt(2 * alpha * beta ** 2)"),
        ("score_noise_std", "the two independent parts of the noise added in quadrature",
         "part = np.sqrt(alpha) * beta   # mu_a . noise and mu_b . noise each\nreturn np.hypot(part, part)"),
        ("wide_key_weight", "the logistic through logaddexp",
         "return np.exp(-np.logaddexp(0, -(np.asarray(gamma, dtype=float) - 1) * beta))"),
        ("wide_key_weight", "two branches that never exponentiate a positive number",
         "x = (np.asarray(gamma, dtype=float) - 1) * beta\ne = np.exp(-np.abs(x))\n"
         "return np.where(x >= 0, 1 / (1 + e), e / (1 + e))"),
        ("wide_key_weight", "the stable softmax of the two scores",
         "g = np.asarray(gamma, dtype=float)\n"
         "return softmax(np.stack([g * beta, np.full_like(g, beta)], axis=-1))[..., 0]"),
        ("wide_key_weight", "the naive logistic with its argument clipped",
         "x = np.clip((np.asarray(gamma, dtype=float) - 1) * beta, -500, 500)\nreturn 1 / (1 + np.exp(-x))"),
    ],
    "08_patterns_messages": [
        ("previous_token_pattern", "the dual basis through solve, and the sum of outer products",
         "D = np.linalg.solve(W_pos @ W_pos.T, W_pos).T   # (d_model, T): W_pos @ D = I\n"
         "return beta * np.sqrt(d_head) * sum(np.outer(D[:, t], D[:, t - 1]) for t in range(1, len(W_pos)))"),
        ("previous_token_pattern", "the reader from least squares, the shift by slicing",
         "D = np.linalg.lstsq(W_pos, np.eye(len(W_pos)), rcond=None)[0]   # (d_model, T), least norm\n"
         "return beta * np.sqrt(d_head) * D[:, 1:] @ D[:, :-1].T"),
        ("previous_token_pattern", "einsum with a shifted identity",
         "D = np.linalg.pinv(W_pos)\nS = np.diag(np.ones(len(W_pos) - 1), -1)\n"
         "return np.einsum('at,ts,bs->ab', D, S, D) * beta * d_head ** 0.5"),
        ("copying_message", "solve instead of an inverse",
         "return W_E.T @ np.linalg.solve(W_E @ W_E.T, W_E)"),
        ("copying_message", "an orthonormal basis of the token span from QR",
         "Q = np.linalg.qr(W_E.T)[0]\nreturn Q @ Q.T"),
        ("copying_message", "an orthonormal basis from the SVD",
         "U = np.linalg.svd(W_E, full_matrices=False)[2].T\nreturn U @ U.T"),
        ("head_output", "the patterns and messages named, and a softmax written out",
         "P = X @ W_P\nM = X @ W_M\nL = P @ X.T / np.sqrt(d_head)\nE = np.exp(L - L.max(axis=1, keepdims=True))\n"
         "return (E / E.sum(axis=1, keepdims=True)) @ M"),
        ("head_output", "attnlib.attention with the patterns as queries, X as keys, rescaled to sqrt(d_head)",
         "return attnlib.attention(X @ W_P * np.sqrt(X.shape[1] / d_head), X, X @ W_M)   # it divides by sqrt(d_model)"),
    ],
    "02_averaging": [
        ("average_query", "keys^T times a vector with beta at a and b",
         "e = np.zeros(len(keys))\ne[[a, b]] = beta\nreturn keys.T @ e"),
        ("average_query", "solve for the scores with least squares",
         "target = np.zeros(len(keys))\ntarget[[a, b]] = beta\nreturn np.linalg.lstsq(keys, target, rcond=None)[0]"),
        ("average_query", "a loop over the two keys",
         "q = np.zeros(keys.shape[1])\nfor i in (a, b):\n    q = q + beta * keys[i]\nreturn q"),
        ("averaging_weight", "logaddexp (warns: log of 0 when n = 2)",
         "return np.exp(beta - np.logaddexp(np.log(2) + beta, np.log(n - 2)))"),
        ("averaging_weight", "the max shift of the stable softmax",
         "m = max(beta, 0)\nreturn np.exp(beta - m) / (2 * np.exp(beta - m) + (n - 2) * np.exp(-m))"),
        ("averaging_weight", "the softmax of the n scores itself",
         "return softmax(np.r_[beta, beta, np.zeros(n - 2)])[0]"),
    ],
    "09_attribution": [
        ("logit_attribution", "the stream's terms stacked, one matrix product",
         "tr = model.trace(tokens)\nterms = np.concatenate([(tr.embedding - model.W_pos[:len(tokens)])[None],"
         " model.W_pos[:len(tokens)][None], *tr.writes])   # (n_terms, T, d_model)\n"
         "return terms[:, position] @ model.W_U[:, target]"),
        ("logit_attribution", "a loop over layers and heads, the token's own row of W_E",
         "tr = model.trace(tokens)\nu = model.W_U[:, target]\n"
         "out = [model.W_E[tokens[position]] @ u, model.W_pos[position] @ u]\n"
         "for w in tr.writes:\n    for h in range(w.shape[0]):\n        out.append(float(w[h, position] @ u))\n"
         "return np.array(out)"),
        ("logit_attribution", "each head's write recomputed from W_Q, W_K, W_V and W_O, layer by layer",
         "T = len(tokens)\nx = model.W_E[tokens] + model.W_pos[:T]\nu = model.W_U[:, target]\n"
         "out = [model.W_E[tokens[position]] @ u, model.W_pos[position] @ u]\n"
         "for w in model.layers:\n    p = w.per_head\n    total = 0\n"
         "    for h in range(w.n_heads):\n"
         "        s = (x @ p.W_Q[h]) @ (x @ p.W_K[h]).T / np.sqrt(w.d_head)\n"
         "        s = np.where(np.tri(T, dtype=bool), s, -np.inf)\n"
         "        write = softmax(s) @ (x @ p.W_V[h]) @ p.W_O[h]   # (T, d_model)\n"
         "        out.append(write[position] @ u)\n        total = total + write\n"
         "    x = x + total\n"
         "return np.array(out)"),
        ("qk_attribution", "einsum over the stacked terms",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = np.concatenate([(tr.embedding - model.W_pos[:T])[None], model.W_pos[:T][None], *tr.writes[:layer]])\n"
         "w = model.layers[layer]\n"
         "return np.einsum('ad,de,bf,fe->ab', terms[:, query], w.per_head.W_Q[head], terms[:, key],"
         " w.per_head.W_K[head]) / w.d_head ** 0.5"),
        ("qk_attribution", "the pattern matrix W^P, then a loop over pairs",
         "tr = model.trace(tokens)\nT = len(tokens)\n"
         "terms = [model.W_E[tokens], model.W_pos[:T]] + [h for w in tr.writes[:layer] for h in w]\n"
         "w = model.layers[layer].per_head\nW_P = w.W_Q[head] @ w.W_K[head].T   # (d_model, d_model)\n"
         "n = len(terms)\nM = np.zeros((n, n))\nfor a in range(n):\n    for b in range(n):\n"
         "        M[a, b] = terms[a][query] @ W_P @ terms[b][key]\n"
         "return M / np.sqrt(model.layers[layer].d_head)"),
        ("keys_read", "the attended key from the softmax of the totals, a dict of names",
         "M = [qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)]\n"
         "key = int(np.argmax(softmax(np.array([m.sum() for m in M]))))\n"
         "C = M[key] - sum(m for k, m in enumerate(M) if k != key) / query\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "name, v = max(dict(zip(names, C.sum(axis=0)[2:])).items(), key=lambda kv: kv[1])\n"
         "return name if v > 0 else None"),
        ("keys_read", "the attention weights recomputed from W_Q and W_K, a loop keeping the best so far",
         "w = model.layers[layer]\nx = model.trace(tokens).residual[layer]   # (T, d_model)\n"
         "s = (x[query] @ w.per_head.W_Q[head]) @ (x[: query + 1] @ w.per_head.W_K[head]).T / np.sqrt(w.d_head)\n"
         "key = int(np.argmax(softmax(s)))\n"
         "M = np.stack([qk_attribution(model, tokens, layer, head, query, k) for k in range(query + 1)])\n"
         "C = M[key] - np.delete(M, key, axis=0).mean(axis=0)\nbest, name, j = 0.0, None, 2\n"
         "for l in range(layer):\n    for i in range(model.layers[l].n_heads):\n"
         "        if C[:, j].sum() > best:\n            best, name = C[:, j].sum(), f'L{l}H{i}'\n        j += 1\n"
         "return name"),
        ("keys_read", "a double loop over keys and key-side terms, the mean of the others by hand",
         "A = model.trace(tokens).attention_weights[layer][head, query]\nkey = int(np.argmax(A[: query + 1]))\n"
         "names = [f'L{l}H{i}' for l in range(layer) for i in range(model.layers[l].n_heads)]\n"
         "side = np.zeros(len(names))\n"
         "for k in range(query + 1):\n    col = qk_attribution(model, tokens, layer, head, query, k).sum(axis=0)[2:]\n"
         "    for j in range(len(names)):\n        side[j] += col[j] if k == key else -col[j] / query\n"
         "return names[int(np.argmax(side))] if side.max() > 0 else None"),
    ],
    "10_attribution_patching": [
        ("stream_gradient", "every head at once with einsum",
         "x = model.trace(tokens).residual[1]\nw, d = model.layers[1].per_head, model.layers[1].d_head\n"
         "G = np.zeros_like(x)\nG[position] = model.W_U[:, good] - model.W_U[:, bad]\n"
         "Q, K, V = (np.einsum('td,hde->hte', x, W) for W in (w.W_Q, w.W_K, w.W_V))   # (n_heads, T, d_head)\n"
         "A = attnlib.attention_weights(Q, K, causal=True)   # (n_heads, T, T)\n"
         "dZ = np.einsum('td,hed->hte', G, w.W_O)\ndA = np.einsum('hte,hse->hts', dZ, V)\n"
         "dV = np.einsum('hts,hte->hse', A, dZ)\n"
         "dS = A * (dA - np.einsum('hts,hts->ht', A, dA)[..., None]) / np.sqrt(d)\n"
         "dQ, dK = dS @ K, np.swapaxes(dS, 1, 2) @ Q\n"
         "return G + sum(np.einsum('hte,hde->td', dY, W) for dY, W in ((dQ, w.W_Q), (dK, w.W_K), (dV, w.W_V)))"),
        ("stream_gradient", "the softmax's Jacobian as a matrix, diag(a) - a a^T, row by row",
         "x = model.trace(tokens).residual[1]\nT = len(tokens)\nw, d = model.layers[1].per_head, model.layers[1].d_head\n"
         "u = model.W_U[:, good] - model.W_U[:, bad]\ngrad = np.zeros_like(x)\ngrad[position] += u\n"
         "for i in range(model.layers[1].n_heads):\n"
         "    Q, K, V = x @ w.W_Q[i], x @ w.W_K[i], x @ w.W_V[i]\n"
         "    A = attnlib.attention_weights(Q, K, causal=True)\n"
         "    dZ = np.zeros((T, d))\n    dZ[position] = w.W_O[i] @ u\n"
         "    dS = np.zeros((T, T))\n"
         "    for t in range(T):\n        a = A[t]\n        J = np.diag(a) - np.outer(a, a)   # d a / d s\n"
         "        dS[t] = J @ (V @ dZ[t])\n"
         "    grad += (dS @ K) @ w.W_Q[i].T / np.sqrt(d) + (dS.T @ Q) @ w.W_K[i].T / np.sqrt(d)"
         " + (A.T @ dZ) @ w.W_V[i].T\n"
         "return grad"),
        ("stream_gradient", "through the pattern and message matrices W^P and W^M",
         "x = model.trace(tokens).residual[1]\nw, d = model.layers[1].per_head, model.layers[1].d_head\n"
         "G = np.zeros_like(x)\nG[position] = model.W_U[:, good] - model.W_U[:, bad]\ngrad = G.copy()\n"
         "for i in range(model.layers[1].n_heads):\n"
         "    W_P, W_M = w.W_Q[i] @ w.W_K[i].T, w.W_V[i] @ w.W_O[i]   # (d_model, d_model)\n"
         "    A = attnlib.attention_weights(x @ w.W_Q[i], x @ w.W_K[i], causal=True)\n"
         "    dA = G @ (x @ W_M).T   # out = A x W^M\n"
         "    dS = A * (dA - (A * dA).sum(axis=1, keepdims=True)) / np.sqrt(d)\n"
         "    grad += A.T @ G @ W_M.T + dS @ x @ W_P.T + dS.T @ x @ W_P   # S = x W^P x^T / sqrt(d)\n"
         "return grad"),
        ("stream_gradient", "only the query row at position: M reads no other, so outer products suffice",
         "x = model.trace(tokens).residual[1]\nu = model.W_U[:, good] - model.W_U[:, bad]\n"
         "g = np.zeros_like(x)\ng[position] += u\nL = model.layers[1]\nW = L.per_head\n"
         "for h in range(L.n_heads):\n"
         "    q, k, v = x @ W.W_Q[h], x @ W.W_K[h], x @ W.W_V[h]\n"
         "    a = attnlib.attention_weights(q, k, causal=True)[position]   # (T,): the one row M reads\n"
         "    dz = W.W_O[h] @ u   # (d_head,)\n"
         "    g += np.outer(a, W.W_V[h] @ dz)   # the values\n"
         "    ds = a * (v @ dz - a @ (v @ dz))   # the scores of row position\n"
         "    g[position] += W.W_Q[h] @ (k.T @ ds) / np.sqrt(L.d_head)\n"
         "    g += np.outer(ds, W.W_K[h] @ q[position]) / np.sqrt(L.d_head)\n"
         "return g"),
        ("activation_patch", "one batched call: the patched and the unpatched corrupt run as two rows",
         "logits = patch(model, np.stack([clean, corrupt]), np.stack([corrupt, corrupt]), [site])   # (2, T, vocab)\n"
         "return float(logit_diff(logits[0], position, good, bad) - logit_diff(logits[1], position, good, bad))"),
        ("activation_patch", "a direction over the logits, as attnlib's methods take the metric",
         "direction = np.zeros((len(corrupt), model.vocab))\ndirection[position, good], direction[position, bad] = 1, -1\n"
         "return float((direction * (patch(model, clean, corrupt, site) - model.forward(corrupt))).sum())"),
        ("attribution_patch", "einsum over positions and dimensions",
         "g = stream_gradient(model, corrupt, position, good, bad)\n"
         "new, old = model.trace(clean).writes[0][head], model.trace(corrupt).writes[0][head]\n"
         "return float(np.einsum('td,td->', g, new - old))"),
        ("attribution_patch", "both runs traced as one batch, np.vdot",
         "writes = model.trace(np.stack([clean, corrupt])).writes[0]   # (2, n_heads, T, d_model)\n"
         "return float(np.vdot(stream_gradient(model, corrupt, position, good, bad), writes[0, head] - writes[1, head]))"),
        ("precision_recall", "a loop with counters over the distinct edges",
         "tp = 0\nseen = []\nfor e in found:\n    if e not in seen:\n        seen.append(e)\n"
         "        tp += e in planted\ntruth = []\nfor e in planted:\n    if e not in truth:\n        truth.append(e)\n"
         "return (tp / len(seen) if seen else 0.0), tp / len(truth)"),
        ("precision_recall", "dict.fromkeys to drop duplicates, edges compared as plain tuples",
         "f = list(dict.fromkeys(tuple(e) for e in found))\np = list(dict.fromkeys(tuple(e) for e in planted))\n"
         "hits = sum(e in p for e in f)\nreturn (0.0 if not f else hits / len(f)), hits / len(p)"),
    ],
}
