"""The search for induction heads in two-layer models of the plays: every attempt, measured.

    python scripts/induction_attempts.py --list            # the attempts and their settings
    python scripts/induction_attempts.py smear_plain       # run one (or several) and record it
    python scripts/induction_attempts.py --table           # the recorded attempts as a table

Each attempt is a two-layer model trained like scripts/train_model.py's
``plays_2l`` with some settings changed (smeared keys, repeated spans,
positions, learning rate, context). Every ``EVERY`` steps it is measured with
attnlib.incontext: the best previous-token head (layer 0), the best
prefix-matching head (layer 1) on Olsson et al.'s repeated random tokens,
the loss on the second copy, and the in-context score on held-out windows.
The records go to attnlib/models/induction_attempts.json (one entry per
attempt, with the settings, the torch version, the thread count and the
training time), which chapter 15 reads. Needs torch and tokenizers, as
train_model.py does; the same seed and thread count give the same record.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import time

import numpy as np

import train_model
from attnlib import incontext, text
from attnlib.model import MODELS

RECORD = MODELS / "induction_attempts.json"
WEIGHTS = train_model.ROOT / ".cache" / "attempts"  # each attempt's latest weights (not shipped)
EVERY = 500
BASE = train_model.TEXT_2L
SPANS = train_model.SPANS
POS5 = dict(positions=dict(kind="sinusoidal", scale=5.0))
HALF_SHORT = dict(share=0.5, min_len=4, max_len=24)
# name: (what it tries, settings changed from BASE). BASE is plays_2l's settings (plain text);
# plays_2l_spans adds repeat=SPANS.
ATTEMPTS = {
    "spans": ("spans of 4-24 tokens repeated in half the windows, positions of norm 5", dict(POS5, repeat=HALF_SHORT)),
    "spans_lr3": ("the same, lr 3e-3", dict(POS5, repeat=HALF_SHORT, lr=3e-3)),
    "long_spans_pos20": ("spans of 8-31 tokens repeated in half the windows, positions of norm 20",
                         dict(repeat=dict(SPANS, share=0.5))),
    "all_spans_pos20": ("spans of 8-31 tokens repeated in every window, positions of norm 20 (plays_2l_spans)",
                        dict(repeat=SPANS)),
    # One change at a time: span length and position scale, each alone (with the two above).
    "spans_pos20": ("spans of 4-24 tokens repeated in half the windows, positions of norm 20",
                    dict(repeat=HALF_SHORT)),
    "long_spans_pos5": ("spans of 8-31 tokens repeated in half the windows, positions of norm 5",
                        dict(POS5, repeat=dict(SPANS, share=0.5))),
    "plain_pos20": ("plain text, positions of norm 20 (plays_2l)", {}),
    "smear_pos20": ("plain text, smeared keys, positions of norm 20", dict(smear=True)),
    "smear_25k": ("plain text, smeared keys, 25,000 steps", dict(smear=True, steps=25000)),
    "smear_ctx128": ("plain text, smeared keys, context 128", dict(smear=True, data=dict(vocab_size=256, T=128),
                                                                  batch=16)),
    # How often the head forms: plays_2l_spans's settings with other seeds (the seed fixes the
    # initial weights and every training batch).
    "all_spans_pos20_seed1": ("as all_spans_pos20 (plays_2l_spans), seed 1", dict(repeat=SPANS, seed=1)),
    "all_spans_pos20_seed2": ("as all_spans_pos20 (plays_2l_spans), seed 2", dict(repeat=SPANS, seed=2)),
}


def config(name) -> dict:
    cfg = {**BASE, **ATTEMPTS[name][1]}
    cfg["description"] = ATTEMPTS[name][0]
    return cfg


def windows(model, n=256):
    """The held-out windows an attempt is measured on: ``n`` of them, picked once (seed 0)."""
    tokens, targets = text.heldout_windows(model)
    pick = np.random.default_rng(0).choice(len(tokens), size=n, replace=False)
    return tokens[pick], targets[pick]


def probe(model, windows):
    """The attempt's figures at one step."""
    m = model.astype(np.float64)
    seqs = incontext.repeated_random(m, n=32, occurrences=3, seed=1)
    s = incontext.induction_scores(m, seqs)
    copies = incontext.repeat_losses(m, seqs)
    tokens, targets = windows
    losses = incontext.token_losses(m, tokens, targets)
    by_window = incontext.in_context_by_window(losses)
    return {"previous": float(s["previous"][0].max()), "previous_head": int(s["previous"][0].argmax()),
            "previous_by_head": s["previous"].round(4).tolist(), "prefix_by_head": s["prefix"].round(4).tolist(),
            "in_context_sd": round(incontext.in_context_interval(by_window)["sd"], 4), "windows": len(by_window),
            "_by_window": by_window.round(4).tolist(),
            "prefix": float(s["prefix"][-1].max()), "prefix_head": int(s["prefix"][-1].argmax()),
            "second_copy_loss": float(copies[1]), "first_copy_loss": float(copies[0]),
            "heldout_loss": float(losses.mean()), "in_context": incontext.in_context_score(losses),
            **({"smear": [s_.tolist() for s_ in m.smear]} if m.smear is not None else {})}


def save_entry(name, entry):
    """Write one attempt's entry into the record (under a lock: attempts may run side by side)."""
    WEIGHTS.mkdir(parents=True, exist_ok=True)
    with open(WEIGHTS / "record.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        record[name] = entry
        tmp = RECORD.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
        os.replace(tmp, RECORD)


def run(name, threads=1):
    cfg = config(name)
    torch = train_model.setup_torch(threads)
    data = train_model.text_data(cfg)
    curve = []
    held = None
    start = time.perf_counter()

    def entry(steps_done, seconds, complete):
        return {"description": cfg["description"], "settings": {k: v for k, v in cfg.items() if k != "description"},
                "tokens_seen": steps_done * cfg["batch"] * cfg["data"]["T"], "training_seconds": round(seconds, 1),
                "threads": threads, "torch": torch.__version__, "machine": platform.machine(),
                "cpu": train_model.cpu_name(), "script": "scripts/induction_attempts.py",
                **({} if complete else {"complete": False, "steps_done": steps_done}), "curve": curve}

    def on_step(step, net, losses):
        nonlocal held
        model = net.to_numpy({"positions": cfg["positions"], "bos": data["bos"], "name": name},
                             data["bpe"], data["corpus"])
        if held is None:
            held = windows(model)
        row = {"step": step, "train_loss": float(np.mean(losses)) if losses else None, **probe(model, held)}
        by_window = row.pop("_by_window")
        if step == cfg["steps"]:  # kept at the end, so the bootstrap can be redone from the record
            row["in_context_by_window"] = by_window
        curve.append(row)
        print(f"  {name} {step:6d}: loss {row['train_loss'] or float('nan'):.3f}  held-out {row['heldout_loss']:.3f}"
              f"  prev {row['previous']:.2f}  prefix {row['prefix']:.3f}  2nd copy {row['second_copy_loss']:.2f}"
              f"  icl {row['in_context']:+.3f}", flush=True)
        if step < cfg["steps"]:  # an unfinished attempt is recorded as such (wall-clock seconds, probes included)
            save_entry(name, entry(step, time.perf_counter() - start, complete=False))
        # the latest weights, for measurements the record does not hold (not shipped)
        WEIGHTS.mkdir(parents=True, exist_ok=True)
        np.savez(WEIGHTS / f"{name}.npz", step=step, **{k: v for k, v in model.arrays().items()
                                                         if not k.startswith(("tokenizer.", "corpus."))})

    _, seconds = train_model.fit(name, threads, cfg["steps"], cfg=cfg, data=data, every=EVERY, on_step=on_step)
    done = entry(cfg["steps"], seconds, complete=True)
    save_entry(name, done)
    return done


def table():
    record = json.loads(RECORD.read_text())
    print(f"{'attempt':21} {'seed':>4} {'steps':>6} {'s':>6} {'prev':>5} {'L1 prefix':>9} {'L0 prefix':>9}"
          f" {'2nd':>5} {'icl':>6} {'sd':>5} {'n':>4}")
    for name, e in record.items():
        best = max(e["curve"], key=lambda r: r["prefix"])
        last = e["curve"][-1]
        l0 = [max(r["prefix_by_head"][0]) for r in e["curve"] if "prefix_by_head" in r]
        l0 = f"{max(l0):9.3f}" if l0 else f"{'-':>9}"
        sd = f"{last['in_context_sd']:5.3f}" if "in_context_sd" in last else f"{'-':>5}"
        print(f"{name:21} {e['settings']['seed']:4d} {last['step']:6d} {e['training_seconds']:6.0f} {last['previous']:5.2f}"
              f" {best['prefix']:9.3f} {l0} {last['second_copy_loss']:5.2f} {last['in_context']:+6.3f} {sd}"
              f" {last.get('windows', 256):4d}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        for name in ATTEMPTS:
            print(name, config(name))
        return
    if args.table:
        return table()
    unknown = [n for n in args.names if n not in ATTEMPTS]
    if unknown:
        parser.error(f"unknown attempt(s) {unknown}; choose from {list(ATTEMPTS)}")
    for name in args.names:
        run(name, args.threads)


if __name__ == "__main__":
    os.environ.update(train_model.CPU_PIN)
    main()
