"""Train the book's small attention-only models and write them to attnlib/models/.

    python scripts/train_model.py                 # every model (what `make model` runs)
    python scripts/train_model.py induction       # one model
    python scripts/train_model.py --list          # the models and their settings
    python scripts/train_model.py --check         # each model's 30-step checksum (as in its card)
    python scripts/train_model.py copy_back --steps 30 --out /tmp/m   # a short run elsewhere

The models of text (task "text") read Shakespeare's plays through
scripts/corpus.py, which also trains their tokenizer (the tokenizers package,
needed here like torch and nowhere else).

PyTorch (CPU) is needed here and nowhere else: ``pip install torch==2.13.0``.
The book, attnlib and ``make test`` read the written ``.npz`` files with numpy.

Reproducible: the seed fixes the initial weights (torch) and every training
batch (numpy, through ``attnlib.tasks``); deterministic algorithms are on, and
denormal floats are flushed (without that, steps get about five times slower
once attention saturates, and results could depend on the CPU's handling).
With the same torch version and the same number of threads (``--threads``,
default 1) a rerun gives bit-identical weights; another thread count changes
the order of some sums, and the weights then differ at about 1e-6.

The CPU matters too: PyTorch picks its vectorised kernels by what the CPU can
do (AVX2, AVX-512), and the two round differently (the 30-step check of
``copy_back`` differs between them). So training pins PyTorch's kernels and
MKL's code path to AVX2, which every x86-64 CPU of the last decade has
(``ATEN_CPU_CAPABILITY=avx2``, ``MKL_CBWR=AVX2``; the card records it). They
must be set before torch starts, so this script sets them when it is run;
:func:`pinned_env` gives them to a process that imports it.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# Read once, when torch first dispatches a kernel: set before anything imports torch.
CPU_PIN = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}

import attnlib  # noqa: E402
from attnlib import incontext, metrics, tasks, text  # noqa: E402
from attnlib.model import MODELS, Model, sinusoidal_positions, weights_sha256  # noqa: E402

# The two-layer models of text: what they share (scripts/induction_attempts.py varies it).
TEXT_2L = dict(task="text", data=dict(vocab_size=256, T=64), positions=dict(kind="sinusoidal", scale=20.0),
               n_layers=2, n_heads=4, d_model=128, d_head=32, steps=10000, batch=32, lr=1e-3, seed=0)
SPANS = dict(share=1.0, min_len=8, max_len=31)
CHECKPOINTS = (0, 500, 1000, 1500, 2000, 2500, 2750, 3000, 3250, 3500, 4000, 5000, 6000, 8000, 10000)

# Every shipped model: its task (a generator in attnlib.tasks, with options),
# its shape and how it is trained. Changing a line here and running
# `make model` is how a model changes; the card records all of it.
CONFIGS = {
    "induction": dict(
        description="Repeated random segments, plus 25% alternating 'a b a b' sequences: "
                    "the textbook induction circuit (a previous-token head feeding the keys of an induction head).",
        task="induction", data=dict(vocab=50, T=41, min_len=5, max_len=20, alternating=0.25),
        n_layers=2, n_heads=4, d_model=64, d_head=16, steps=3000, batch=64, lr=3e-3, seed=1),
    "induction_plain": dict(
        description="Repeated random segments only: without the alternating sequences the model builds "
                    "induction the other way (a duplicate-token head feeding the queries; chapter 13).",
        task="induction", data=dict(vocab=50, T=41, min_len=5, max_len=20, alternating=0.0),
        n_layers=2, n_heads=4, d_model=64, d_head=16, steps=3000, batch=64, lr=3e-3, seed=0),
    "copy_back": dict(
        description="Random tokens; predict the token three places back: a purely positional pattern.",
        task="copy_back", data=dict(vocab=20, T=24, k=3),
        n_layers=1, n_heads=1, d_model=32, d_head=32, steps=1500, batch=64, lr=1e-3, seed=0),
    "copy_marked": dict(
        description="One marked token among plain ones; from it on, predict it: a content-based pattern.",
        task="copy_marked", data=dict(plain=30, marked=10, T=24),
        n_layers=1, n_heads=1, d_model=32, d_head=32, steps=1500, batch=64, lr=1e-3, seed=0),
    "plays_1l": dict(
        description="Shakespeare's plays (every 10th held out), BPE of 2,048 tokens, windows of 127 tokens "
                    "after a BOS token: one layer of eight heads, read as skip-trigrams.",
        task="text", data=dict(vocab_size=2048, T=128),
        positions=dict(kind="sinusoidal", scale=1.0),
        n_layers=1, n_heads=8, d_model=128, d_head=16, steps=4000, batch=8, lr=3e-3, seed=0),
    "plays_2l": dict(
        TEXT_2L, checkpoints=CHECKPOINTS,
        description="Shakespeare's plays, BPE of 256 tokens, windows of 63 tokens after BOS: two layers of four "
                    "heads, read for induction (none formed: chapter 15)."),
    "plays_2l_spans": dict(
        TEXT_2L, repeat=SPANS, checkpoints=CHECKPOINTS,
        description="Shakespeare's plays, BPE of 256 tokens, windows of 63 tokens after BOS, each with a span of "
                    "its own text (8 to 31 tokens) repeated later: two layers of four heads, read for induction."),
}
# `induction` and `induction_plain` differ in seed and data at once; these two change one of
# them each (chapter 13).
CONFIGS["induction_seed0"] = dict(
    CONFIGS["induction"], seed=CONFIGS["induction_plain"]["seed"],
    description="As `induction` (25% alternating sequences) but with `induction_plain`'s seed (0): "
                "the data kept, the seed changed.")
CONFIGS["induction_plain_seed1"] = dict(
    CONFIGS["induction_plain"], seed=CONFIGS["induction"]["seed"],
    description="As `induction_plain` (no alternating sequences) but with `induction`'s seed (1): "
                "the data kept, the seed changed.")
EVAL = dict(n=2000, seed=12345)  # the card's metrics: fresh sequences, never trained on
OPTIMISER = dict(name="AdamW", betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def vocab_of(cfg) -> int:
    d = cfg["data"]
    if cfg["task"] == "text":
        return d["vocab_size"]
    if cfg["task"] == "induction":
        return d["vocab"] + 1  # and BOS
    if cfg["task"] == "copy_marked":
        return d["plain"] + d["marked"]
    return d["vocab"]


def n_ctx_of(cfg) -> int:
    return cfg["data"]["T"]


class AttnOnly:
    """The model of attnlib.model, in torch: same parameters, same arithmetic."""

    def __init__(self, torch, vocab, n_ctx, n_layers, n_heads, d_model, d_head, positions=None, smear=False):
        def param(*shape, std):
            return torch.nn.Parameter(torch.randn(*shape) * std)

        self.torch, self.n_heads, self.d_head = torch, n_heads, d_head
        width = n_heads * d_head
        self.W_E = param(vocab, d_model, std=1 / math.sqrt(d_model))
        self.fixed_positions = positions is not None and positions["kind"] == "sinusoidal"
        if self.fixed_positions:  # frozen, and recomputed by attnlib.model.load rather than stored
            self.W_pos = torch.from_numpy(sinusoidal_positions(n_ctx, d_model, positions["scale"]))
        else:
            self.W_pos = param(n_ctx, d_model, std=1 / math.sqrt(d_model))
        self.layers = [{k: param(d_model, width, std=1 / math.sqrt(d_model)) for k in ("W_Q", "W_K", "W_V")}
                       for _ in range(n_layers)]
        for layer in self.layers:
            layer["W_O"] = param(width, d_model, std=1 / math.sqrt(width))
        self.W_U = param(d_model, vocab, std=1 / math.sqrt(d_model))
        # Smeared keys: a logit per head, s = sigmoid(logit) the weight on a position's own key (0.5 at the start)
        self.smear = [torch.nn.Parameter(torch.zeros(n_heads)) for _ in range(n_layers)] if smear else None

    def parameters(self):
        pos = [] if self.fixed_positions else [self.W_pos]
        return [self.W_E, *pos, *(l[k] for l in self.layers for k in ("W_Q", "W_K", "W_V", "W_O")), self.W_U,
                *(self.smear or [])]

    def forward(self, tokens):
        torch = self.torch
        B, T = tokens.shape
        h, d = self.n_heads, self.d_head
        x = self.W_E[tokens] + self.W_pos[:T]  # (B, T, d_model)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for l, layer in enumerate(self.layers):
            q, k, v = ((x @ layer[n]).view(B, T, h, d).transpose(1, 2) for n in ("W_Q", "W_K", "W_V"))  # (B, h, T, d)
            if self.smear is not None:  # each key mixed with the one before it (position 0 keeps its own)
                s = self.smear[l].sigmoid()[:, None, None]  # (h, 1, 1)
                k = s * k + (1 - s) * torch.cat([k[:, :, :1], k[:, :, :-1]], dim=2)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)  # (B, h, T, T)
            A = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            z = (A @ v).transpose(1, 2).reshape(B, T, h * d)  # (B, T, h * d_head): heads side by side
            x = x + z @ layer["W_O"]
        return x @ self.W_U  # (B, T, vocab)

    def to_numpy(self, card, tokenizer=None, corpus=None) -> Model:
        def arr(p):
            return p.detach().numpy().astype(np.float32).copy()

        layers = [attnlib.Weights(*(arr(l[k]) for k in ("W_Q", "W_K", "W_V", "W_O")), self.n_heads)
                  for l in self.layers]
        smear = None if self.smear is None else [arr(a.sigmoid()) for a in self.smear]
        return Model(arr(self.W_E), arr(self.W_pos), arr(self.W_U), layers, card, tokenizer, corpus, smear)


def text_data(cfg) -> dict:
    """The corpus of a text model: its tokenizer, training stream and the statistics its card ships."""
    import corpus

    bpe = corpus.train_tokenizer(cfg["data"]["vocab_size"])
    parts = corpus.split()
    train_ids, heldout_ids = corpus.tokens(bpe, parts["train"]), corpus.tokens(bpe, parts["heldout"])
    counts = corpus.bigram_counts(train_ids, len(bpe))
    a, b = np.nonzero(counts)
    stream = np.concatenate(train_ids).astype(np.int64)
    return {
        "bpe": bpe, "stream": stream, "bos": bpe.ids[corpus.BOS],
        "corpus": {"heldout": np.concatenate(heldout_ids), "heldout_lengths": np.array([len(h) for h in heldout_ids]),
                   "unigram": np.bincount(stream, minlength=len(bpe)),
                   "bigrams": np.stack([a, b, counts[a, b]], axis=1).astype(np.uint32)},
        "card": {"corpus": {**corpus.WHEEL, "held_out": f"every {corpus.HELD_OUT_EVERY}th play in path order: "
                            + ", ".join(Path(n).stem for n in corpus.heldout_names()),
                            "markup": "headings, bold, italics and escapes stripped (scripts/corpus.py)",
                            "train_tokens": int(len(stream)), "heldout_tokens": int(sum(map(len, heldout_ids))),
                            "train_characters": sum(map(len, parts["train"])),
                            "heldout_characters": sum(map(len, parts["heldout"]))},
                 "tokenizer": {"kind": "BPE", "vocab_size": len(bpe), "merges": len(bpe.merges),
                               "pattern": corpus.PATTERN, "special": [corpus.UNK, corpus.BOS],
                               "trained_with": f"tokenizers {_version('tokenizers')} on the training plays",
                               "read_with": "attnlib.tokenizer.BPE (vocabulary and merges in the .npz)"}},
    }


def _version(package):
    from importlib.metadata import version
    return version(package)


def text_batches(data, repeat=None):
    """Training windows of a text model: ``BOS`` then ``T - 1`` tokens from a random place, every position scored.

    ``repeat``: in a share of the windows (``repeat["share"]``), a span of the
    window's own text (``min_len`` to ``max_len`` tokens, from a random place)
    is written again at a random later place, so that the second copy can be
    predicted from the first.
    """
    stream, bos = data["stream"], data["bos"]

    def make_batch(n, rng, T, **_):
        starts = rng.integers(0, len(stream) - T + 1, size=n)
        targets = stream[starts[:, None] + np.arange(T)]  # (n, T): x_0 .. x_{T-1}
        if repeat:
            targets = incontext.repeat_spans(targets, rng, repeat["share"], repeat["min_len"], repeat["max_len"])
        tokens = np.concatenate([np.full((n, 1), bos), targets[:, :-1]], axis=1)  # BOS, x_0 .. x_{T-2}
        return tasks.Batch(tokens, targets, {})
    return make_batch


def setup_torch(threads: int):
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is needed to train: pip install torch==2.13.0 (CPU); the book itself never needs it")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability.lower() != CPU_PIN["ATEN_CPU_CAPABILITY"]:
        sys.exit(f"PyTorch runs its {capability} kernels here, and the shipped models were trained with "
                 f"{CPU_PIN['ATEN_CPU_CAPABILITY']}: start Python with the environment of pinned_env() "
                 f"({' '.join(f'{k}={v}' for k, v in CPU_PIN.items())}) so retraining gives the same weights")
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    torch.set_flush_denormal(True)
    return torch


def cpu_name() -> str:
    """The CPU's model name (the AVX2 pin does not make every CPU round alike: the check records it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pinned_env(env=None) -> dict:
    """A copy of ``env`` (default: this process's) with the CPU pin of the shipped models set."""
    return {**(os.environ if env is None else env), **CPU_PIN}


CURVE_EVERY = 100  # the training-loss curve's resolution, for models with checkpoints
CHECK_STEPS = 30  # the short run whose checksum the card records (tests/attnlib/test_model.py repeats it)


def fit(name: str, threads: int, steps: int, quiet=True, data=None, cfg=None, every=None, on_step=None):
    """Train one model from its config and seed: (torch model, seconds). Nothing is written.

    ``data`` is a text model's :func:`text_data` (made here if not given);
    ``cfg`` replaces ``CONFIGS[name]``. ``on_step(step, net, losses)`` is
    called at step 0 and every ``every`` steps (``losses``: the training
    losses since the last call); its time is not counted.
    """
    cfg = cfg or CONFIGS[name]
    torch = setup_torch(threads)
    if cfg["task"] == "text":
        make_batch = text_batches(data or text_data(cfg), cfg.get("repeat"))
    else:
        make_batch = tasks.TASKS[cfg["task"]]
    torch.manual_seed(cfg["seed"])
    data_rng = np.random.default_rng(cfg["seed"])
    vocab = vocab_of(cfg)
    net = AttnOnly(torch, vocab, n_ctx_of(cfg), cfg["n_layers"], cfg["n_heads"], cfg["d_model"], cfg["d_head"],
                   cfg.get("positions"), cfg.get("smear", False))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg["lr"], betas=OPTIMISER["betas"], eps=OPTIMISER["eps"],
                            weight_decay=OPTIMISER["weight_decay"])
    losses, paused = [], 0.0
    if on_step:
        on_step(0, net, losses)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        batch = make_batch(cfg["batch"], data_rng, **cfg["data"])
        logits = net.forward(torch.from_numpy(batch.tokens))  # (batch, T, vocab)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                                 torch.from_numpy(batch.targets).reshape(-1), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if on_step:
            losses.append(loss.item())
            if step % every == 0:
                t = time.perf_counter()
                on_step(step, net, losses)
                losses = []
                paused += time.perf_counter() - t
        if not quiet and (step % 500 == 0 or step == steps):
            print(f"  {name}: step {step:5d}/{steps}  loss {loss.item():.4f}  ({time.perf_counter() - start:.0f} s)",
                  flush=True)
    return net, time.perf_counter() - start - paused


def train(name: str, threads: int = 1, steps: int | None = None, out: Path = MODELS, quiet=False) -> Model:
    """Train one model, measure it, and write its weights and card to ``out``."""
    import torch

    cfg = CONFIGS[name]
    steps = cfg["steps"] if steps is None else steps
    data = text_data(cfg) if cfg["task"] == "text" else None
    keep = sorted(k for k in cfg.get("checkpoints", ()) if k <= steps)
    snapshots, curve, window = {}, [], []

    def on_step(step, net, losses):  # checkpoints and the training loss along the way (bit-for-bit neutral)
        window.extend(losses)
        if step in keep:
            snapshots[step] = net.to_numpy({"positions": cfg.get("positions") or {"kind": "learned"}})
        if step and step % CURVE_EVERY == 0:
            curve.append([step, round(float(np.mean(window)), 5)])
            window.clear()

    every = math.gcd(CURVE_EVERY, *keep) if keep else None
    net, seconds = fit(name, threads, steps, quiet, data, every=every, on_step=on_step if keep else None)
    card = {
        "name": name, "description": cfg["description"],
        "task": cfg["task"], "data": cfg["data"], "vocab": vocab_of(cfg), "n_ctx": n_ctx_of(cfg),
        "bos": cfg["data"]["vocab"] if cfg["task"] == "induction" else data["bos"] if data else None,
        "positions": cfg.get("positions") or {"kind": "learned"},
        "n_layers": cfg["n_layers"], "n_heads": cfg["n_heads"], "d_model": cfg["d_model"], "d_head": cfg["d_head"],
        "architecture": "attention only: token + position embeddings, causal attention layers added to the "
                        "residual stream, unembedding; no LayerNorm, MLP or biases; scores scaled by 1/sqrt(d_head)",
        **({"smear": "smeared keys (Olsson et al. 2022): k'_j = s k_j + (1 - s) k_{j-1}, s = sigmoid(a) "
                      "learned per head, a = 0 at the start"} if cfg.get("smear") else {}),
        **({"repeat": {**cfg["repeat"], "what": "in this share of the training windows, a span of the window's "
                       "own text (min_len to max_len tokens) is written again at a random later place"}}
           if cfg.get("repeat") else {}),
        "seed": cfg["seed"], "steps": steps, "batch": cfg["batch"],
        "optimiser": {**OPTIMISER, "betas": list(OPTIMISER["betas"]), "lr": cfg["lr"]},
        "loss": "cross-entropy on every position with a target (attnlib.tasks)",
        "init": "normal, std 1/sqrt(fan-in) (W_E, W_pos: 1/sqrt(d_model))",
        "torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "threads": threads,
        "cpu_kernels": {"torch": torch.backends.cpu.get_cpu_capability(), "mkl": os.environ.get("MKL_CBWR")}, "training_seconds": round(seconds, 1),
        "script": "scripts/train_model.py", "retrain": f"make model MODELS={name}",
        "eval": EVAL,
    }
    if data:
        card.update(data["card"])
        card["eval"] = "every held-out window (attnlib.text.measure)"
        card["loss"] = "cross-entropy on every position of random training windows"
        model = net.to_numpy(card, data["bpe"], data["corpus"])
        card["metrics"] = text.measure(model.astype(np.float64))
        if cfg["n_layers"] > 1:
            card["metrics"]["induction"] = incontext.measure(model.astype(np.float64))
    else:
        model = net.to_numpy(card)
        card["metrics"] = metrics.measure(model.astype(np.float64), **EVAL)
    if steps == cfg["steps"]:  # a checksum a test can reproduce in a second
        short, _ = fit(name, threads, CHECK_STEPS, data=data)
        card["check"] = {"steps": CHECK_STEPS, "threads": threads, "torch": torch.__version__, "cpu": cpu_name(),
                         "sha256": weights_sha256(short.to_numpy({"positions": card["positions"]}).arrays())}
    if keep:
        card["training_curve"] = {"every": CURVE_EVERY, "what": "mean training loss of the steps since the last row",
                                  "rows": curve}
        card["checkpoints"] = save_checkpoints(Path(out) / f"{name}.checkpoints.npz", snapshots)
    model = Model(model.W_E, model.W_pos, model.W_U, model.layers, card, model.tokenizer, model.corpus, model.smear)
    Path(out).mkdir(parents=True, exist_ok=True)
    path = model.save(Path(out) / name)
    if not quiet:
        print(f"  {name}: wrote {path} ({seconds:.0f} s of training); metrics: {card['metrics']['summary']}")
    return model


def save_checkpoints(path: Path, snapshots: dict) -> dict:
    """Write the weights taken along training (float16: they are read for their patterns and scores)."""
    arrays = {f"step{step}.{k}": v.astype(np.float16) for step, m in snapshots.items()
              for k, v in m.arrays().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return {"file": path.name, "steps": sorted(snapshots), "dtype": "float16", "sha256": weights_sha256(arrays)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help=f"models to train (default: all of {list(CONFIGS)})")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the card records it; default 1)")
    parser.add_argument("--steps", type=int, help="override the number of steps (for a short check)")
    parser.add_argument("--out", type=Path, default=MODELS, help=f"output folder (default {MODELS})")
    parser.add_argument("--list", action="store_true", help="list the models and their settings")
    parser.add_argument("--check", action="store_true",
                        help=f"print the SHA-256 of a {CHECK_STEPS}-step run of each model (its card's check); write nothing")
    args = parser.parse_args(argv)
    if args.list:
        for name, cfg in CONFIGS.items():
            print(f"{name}: {cfg['description']}\n    {cfg}")
        return
    unknown = [n for n in args.names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(CONFIGS)}")
    if args.threads < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--threads and --steps must be positive")
    if args.check:
        for name in args.names or CONFIGS:
            net, _ = fit(name, args.threads, CHECK_STEPS)
            positions = CONFIGS[name].get("positions", {"kind": "learned"})
            print(name, weights_sha256(net.to_numpy({"positions": positions}).arrays()))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or CONFIGS:
        train(name, args.threads, args.steps, args.out)


if __name__ == "__main__":
    os.environ.update(CPU_PIN)  # before torch is imported (see the module's docstring)
    main()
