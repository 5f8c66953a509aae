"""Refit the local judge's answers head on the shipped encoder, which stays as it is.

    python training/fit_answers_head.py            # fit, write judge.safetensors and judge.json
    python training/fit_answers_head.py --check    # fit and print the figures, write nothing

The answers head is one linear layer over the cross-encoder's first-token state. This
script reads that state with jurist's own numpy encoder (the int8 weights that ship, so
the head is fitted on exactly what runs), for the training pairs of
:func:`judge_data.sag_answers` (an answer to its own question or to another) and
:func:`judge_data.own_answer_pairs` (the project's own questions: sentences that answer
them against sentences on their topic that do not), and fits a logistic regression with a
fixed L2 penalty, each source weighted equally. Then, on development pairs only (the same
two sources' ``dev`` splits): the answers temperature, threshold and band, as the training
script fits them. The NLI head and the encoder are untouched, so every ``expresses`` and
``support`` probability stays the same.

Runs in jurist's own environment (numpy, scipy), no torch: under three minutes on 2 cores.
``judge.json`` records what was done under ``training.answers_head``.

The shipped head is not this one: on held-out data the refit told the project's own
questions' answers from their topical sentences better, but did worse on TREC-QA, WikiQA
and the project's coverage pairs (docs/local-judge.md, model card, *Tried and not kept*).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judge_data  # noqa: E402
from fitting import band_for, ece, fit_temperature, fit_threshold, macro_f1_by_source, sigmoid  # noqa: E402
from judge_files import write_judge  # noqa: E402

from jurist.models.minilm.cross import JUDGE_RECORD, JUDGE_WEIGHTS, CrossEncoder  # noqa: E402
from jurist.models.minilm.weights import read_stored  # noqa: E402

MODEL_DIR = judge_data.ROOT / "src" / "jurist" / "models" / "minilm"
L2 = 1e-3  # the penalty on the head's weights, per pair (fixed before fitting; not tuned)


def source_weights(sources: np.ndarray) -> np.ndarray:
    """Each source counts as much as any other, whatever its number of pairs (mean weight 1)."""
    w = np.ones(len(sources))
    for s in np.unique(sources):
        w[sources == s] = 1.0 / np.sum(sources == s)
    return w * len(w) / w.sum()


def fit_head(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = L2) -> tuple[np.ndarray, float]:
    """Weights and bias of the logistic regression of ``y`` on ``x`` (weighted, L2 on the weights)."""
    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        z = x @ theta[:-1] + theta[-1]
        p = sigmoid(z)
        nll = np.sum(w * (np.logaddexp(0, -z) * y + np.logaddexp(0, z) * (1 - y))) / w.sum()
        g = w * (p - y) / w.sum()
        grad = np.concatenate([x.T @ g + 2 * l2 * theta[:-1], [g.sum()]])
        return float(nll + l2 * theta[:-1] @ theta[:-1]), grad

    fit = minimize(loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    if not fit.success:
        raise SystemExit(f"the answers head did not converge: {fit.message}")
    return fit.x[:-1], float(fit.x[-1])


def write_head(model_dir: Path, weight: np.ndarray, bias: float, record: dict) -> None:
    """Replace the answers head in ``judge.safetensors`` (float16, as the file keeps its heads) and
    write ``record`` as ``judge.json`` (:func:`judge_files.write_judge`: each renamed into place
    once whole); every other tensor and the weights' metadata are written back as they were read."""
    from safetensors.numpy import save_file

    stored, metadata = read_stored(model_dir / JUDGE_WEIGHTS)
    stored["head.answers.weight"] = weight[None, :].astype(np.float16)
    stored["head.answers.bias"] = np.array([bias], np.float16)
    write_judge(model_dir, lambda path: save_file(stored, str(path), metadata=metadata), record)


def pairs_of(split: str) -> list[judge_data.Pair]:
    return judge_data.sag_answers(split) + judge_data.own_answer_pairs(split)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="print the figures, write nothing")
    parser.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    args = parser.parse_args()
    started = time.time()
    cross = CrossEncoder(args.model_dir)
    train, dev = pairs_of("train"), pairs_of("dev")
    x = cross.pair_vectors([(p.first, p.second) for p in train]).astype(np.float64)
    xd = cross.pair_vectors([(p.first, p.second) for p in dev]).astype(np.float64)
    y = np.array([p.label for p in train], float)
    yd = np.array([p.label for p in dev], float)
    weight, bias = fit_head(x, y, source_weights(np.array([p.source for p in train])))

    logits = xd @ weight + bias
    temperature = fit_temperature(logits, yd, binary=True)
    p = sigmoid(logits / temperature)
    threshold, f1 = fit_threshold(p, yd == 1)
    dev_sources = np.array([p.source for p in dev])
    before = sigmoid((xd @ cross.head[:, 3] + cross.head_bias[3]) / cross.record.temperature_answers)
    figures = {
        "answers_macro_f1": round(f1, 4),
        "ece_answers": round(ece(p, yd == 1), 4),
        "answers_macro_f1_by_source": macro_f1_by_source(yd == 1, p >= threshold, dev_sources),
        "answers_macro_f1_by_source_before": macro_f1_by_source(yd == 1, before >= cross.record.thresholds["answers"],
                                                                dev_sources),
    }
    print(json.dumps({"temperature": round(temperature, 4), "threshold": threshold,
                      "band": band_for(p, threshold), **figures}, indent=2))
    if args.check:
        return

    meta = json.loads((args.model_dir / JUDGE_RECORD).read_text())
    meta["temperature"]["answers"] = round(temperature, 4)
    meta["thresholds"]["answers"] = threshold
    meta["band"]["answers"] = band_for(p, threshold)
    meta["figures"].update({k: v for k, v in figures.items() if not k.endswith("_before")})
    meta["figures"]["development_pairs"]["answers"] = len(dev)
    meta["training"]["answers_head"] = {
        "script": "training/fit_answers_head.py", "l2": L2,
        "pairs_by_source": {s: sum(p.source == s for p in train) for s in sorted({p.source for p in train})},
        "seconds": round(time.time() - started)}
    write_head(args.model_dir, weight, bias, meta)
    print(f"wrote {args.model_dir / JUDGE_WEIGHTS} and {args.model_dir / JUDGE_RECORD}")


if __name__ == "__main__":
    main()
