"""Train the cross-encoder of the ``local/minilm`` judge and export it for jurist's numpy runtime.

    python -m venv .venv-train && .venv-train/bin/pip install -r training/requirements.txt
    .venv-train/bin/python training/train_local_judge.py            # from the sentence encoder (2 idle CPU cores: about 10 minutes)
    .venv-train/bin/python training/train_local_judge.py --examples 2000 --out /tmp/judge   # a quick try
    python training/train_local_judge.py --device cuda --threads 3 --max-seconds 420 --examples 0 --answers-pairs 0 --epochs 3 --lr 6e-5
        # run A, on a GPU: every training pair, up to 3 epochs (about 3 minutes; see docs/local-judge.md)
    python training/train_local_judge.py --init src/jurist/models/minilm --replay 12000 --speech-acts 3 --epochs 1 --lr 2e-5
        # run S, the shipped model, on 2 CPU cores (about 4 minutes): run A continued on 12,000 of its
        # pairs and the project's speech acts (training/speech_acts.json)

Starts from the all-MiniLM-L6-v2 encoder that ships in ``src/jurist/models/minilm``
(nothing is downloaded), or with ``--init`` from a trained judge, fine-tunes it on the
training pairs of ``judge_data.py`` (NLI, short-answer grading, answers-the-question; every
licence allows any use; with ``--speech-acts``, the project's own speech acts too),
then, on the development pairs only: fits one temperature per head (the calibration),
the decision thresholds (macro-F1) and the band of uncertainty, and writes
``judge.safetensors`` (float16) and ``judge.json`` next to the bi-encoder. Fixed seeds;
the test splits are never read here. Torch is needed for training only: jurist runs
the exported weights with numpy. jurist ships ``judge.safetensors`` as int8 differences
from ``model.safetensors``: after training into ``src/jurist/models/minilm`` (the default
``--out``; copy the two files there from another folder), ``python benchmarks/minilm_export.py
--judge`` converts it (jurist also reads the float16 file as it is).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judge_data  # noqa: E402
from cross_model import CrossEncoder, NLI_LABELS, export, load_encoder, load_judge, read_config  # noqa: E402
from fitting import band_for, ece, fit_temperature, fit_threshold, macro_f1, macro_f1_by_source, sigmoid, softmax  # noqa: E402
from judge_files import write_judge  # noqa: E402

MODEL_DIR = judge_data.ROOT / "src" / "jurist" / "models" / "minilm"
MAX_SEQ = 128
ANSWERS_PAIRS = 4000


def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_SEQ, strategy="longest_first")
    return tok


def encode(tok: Tokenizer, pairs: list[judge_data.Pair]) -> list[tuple[list[int], list[int]]]:
    out = tok.encode_batch([(p.first, p.second) for p in pairs])
    return [(e.ids, e.type_ids) for e in out]


def batches(lengths: list[int], size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length (little padding)."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = size * 50
    out: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lengths.__getitem__)
        out += [part[i:i + size] for i in range(0, len(part), size)]
    rng.shuffle(out)
    return out


def tensors(enc: list[tuple[list[int], list[int]]], idx: list[int], device: str = "cpu") -> tuple[torch.Tensor, ...]:
    lengths = [len(enc[i][0]) for i in idx]
    seq = max(lengths)
    ids = torch.zeros(len(idx), seq, dtype=torch.long)
    types = torch.zeros(len(idx), seq, dtype=torch.long)
    for row, i in enumerate(idx):
        ids[row, :lengths[row]] = torch.tensor(enc[i][0])
        types[row, :lengths[row]] = torch.tensor(enc[i][1])
    return ids.to(device), types.to(device), torch.tensor(lengths).to(device)


def sample_training(pairs: list[judge_data.Pair], n: int, rng: random.Random, *, answers_pairs: int = ANSWERS_PAIRS,
                    sag_repeat: int = 1) -> list[judge_data.Pair]:
    """``n`` training pairs (0: all): every short-answer grading pair (``sag_repeat`` times),
    ``answers_pairs`` answers-the-question pairs made from them (0: all); NLI fills the rest."""
    task_pairs = [p for p in pairs if p.source.startswith("sag_") and p.task == "nli"] * sag_repeat
    answers = [p for p in pairs if p.task == "answers"]
    rng.shuffle(answers)
    task_pairs += answers[:answers_pairs or len(answers)]
    nli = [p for p in pairs if p.task == "nli" and not p.source.startswith("sag_")]
    rng.shuffle(nli)
    chosen = task_pairs + (nli if n <= 0 else nli[:max(0, n - len(task_pairs))])
    rng.shuffle(chosen)
    return chosen if n <= 0 else chosen[:n]


@torch.no_grad()
def predict(model: CrossEncoder, enc: list[tuple[list[int], list[int]]], size: int = 128,
            device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    model.eval()
    nli_out = np.zeros((len(enc), 3), np.float32)
    ans_out = np.zeros(len(enc), np.float32)
    order = sorted(range(len(enc)), key=lambda i: len(enc[i][0]))
    for start in range(0, len(order), size):
        idx = order[start:start + size]
        with torch.autocast(device, dtype=torch.bfloat16):
            nli, ans = model(*tensors(enc, idx, device))
        nli_out[idx] = nli.float().cpu().numpy()
        ans_out[idx] = ans.float().cpu().numpy()
    return nli_out, ans_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=38000, help="training pairs (sampled once, fixed seed; 0: all)")
    ap.add_argument("--answers-pairs", type=int, default=ANSWERS_PAIRS, help="answers-the-question pairs (0: all)")
    ap.add_argument("--sag-repeat", type=int, default=1, help="times each short-answer grading pair is seen per epoch")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--swap-contradictions", action="store_true",
                    help="also train on every contradiction with its two texts swapped")
    ap.add_argument("--speech-acts", type=int, default=0, metavar="N",
                    help="also train on the project's own speech acts (training/speech_acts.json, train acts), each "
                         "pair N times per epoch, and fit on their dev acts too (0: neither)")
    ap.add_argument("--own-answers", type=int, default=0, metavar="N",
                    help="also train on the project's own questions (training/answers_own.json, train questions), "
                         "each pair N times per epoch, and fit on their dev questions too (0: neither)")
    ap.add_argument("--init", type=Path, default=None, metavar="DIR",
                    help="continue from the judge in DIR (judge.safetensors and judge.json, heads included) instead "
                         "of the sentence encoder")
    ap.add_argument("--replay", type=int, default=0, metavar="N",
                    help="with --init: N pairs sampled (fixed seed) from every training pair, trained on with the "
                         "speech acts so that the judge keeps what it learnt (0: as --examples says)")
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="a time limit for training (0: none): after 120 steps (timed from the 20th) the plan is "
                         "shortened to fit, and judge.json records the epochs actually seen")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=6e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=MODEL_DIR, help="folder for judge.safetensors and judge.json")
    args = ap.parse_args()

    random.seed(judge_data.SEED)
    np.random.seed(judge_data.SEED % 2**32)
    torch.manual_seed(judge_data.SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(judge_data.SEED)
    started = time.time()

    tok = tokenizer()
    if args.replay and args.init is None:
        ap.error("--replay continues a trained judge: give --init")
    if args.replay:
        pool = judge_data.training_pairs()
        train = rng.sample(pool, min(args.replay, len(pool)))
    else:
        train = sample_training(judge_data.training_pairs(), args.examples, rng, answers_pairs=args.answers_pairs,
                                sag_repeat=args.sag_repeat)
    if args.speech_acts:
        train += judge_data.speech_act_pairs("train") * args.speech_acts
        rng.shuffle(train)
    if args.own_answers:
        train += judge_data.own_answer_pairs("train") * args.own_answers
        rng.shuffle(train)
    if args.swap_contradictions:  # contradiction is symmetric: B contradicts A when A contradicts B
        train += [dataclasses.replace(p, first=p.second, second=p.first, source=p.source + "_swapped")
                  for p in train if p.task == "nli" and p.label == judge_data.NLI_INDEX["contradiction"]]
        rng.shuffle(train)
    dev = judge_data.development_pairs(speech_acts=args.speech_acts > 0, own_answers=args.own_answers > 0)
    enc = encode(tok, train)
    dev_enc = encode(tok, dev)
    print(f"training pairs {len(train)}, development pairs {len(dev)}", flush=True)

    config = read_config(MODEL_DIR / "config.json")
    layers = int(config["num_hidden_layers"])
    model = CrossEncoder(config)
    load_encoder(model, MODEL_DIR / "model.safetensors", layers)
    previous = None
    if args.init is not None:
        load_judge(model, args.init, layers)
        previous = json.loads((args.init / "judge.json").read_text()).get("training")
    model.to(args.device)
    model.word.weight.requires_grad_(False)  # the vocabulary stays as it is: fewer weights to move
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)

    lengths = [len(e[0]) for e in enc]
    plan: list[list[int]] = []
    epoch = 0
    while len(plan) * args.batch < args.epochs * len(train):
        plan += batches(lengths, args.batch, random.Random(judge_data.SEED + epoch))
        epoch += 1
    plan = plan[:math.ceil(args.epochs * len(train) / args.batch)]
    warm = max(1, len(plan) // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (len(plan) - s) / (len(plan) - warm))))
    labels = torch.tensor([p.label for p in train]).to(args.device)
    is_nli = torch.tensor([p.task == "nli" for p in train]).to(args.device)
    model.train()
    seen, loss_avg = 0, 0.0
    train_started = steady = time.time()  # steady: reset at step 20, once the first steps have warmed up
    for step, idx in enumerate(plan, 1):
        with torch.autocast(args.device, dtype=torch.bfloat16):
            nli, ans = model(*tensors(enc, idx, args.device))
        y, m = labels[idx], is_nli[idx]
        loss = torch.zeros((), device=args.device)
        if m.any():
            loss = loss + torch.nn.functional.cross_entropy(nli.float()[m], y[m], reduction="sum")
        if (~m).any():
            loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(
                ans.float()[~m], y[~m].float(), reduction="sum")
        (loss / len(idx)).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        seen += len(idx)
        value = float(loss.detach()) / len(idx)
        loss_avg = 0.98 * loss_avg + 0.02 * value if step > 1 else value
        if step == 20:
            steady = time.time()  # the first steps warm up (kernels, allocator): timed from here
        if step == 120 and args.max_seconds > 0:
            per_step = (time.time() - steady) / 100
            fit = max(warm + 1, step + int((args.max_seconds - (time.time() - train_started)) / per_step))
            if fit < len(plan):
                print(f"time limit: {len(plan)} steps planned, {fit} fit in {args.max_seconds:.0f} s", flush=True)
                del plan[fit:]  # the schedule reads len(plan): it decays to zero at the new end
        if step % 25 == 0 or step == len(plan):
            rate = seen / (time.time() - started)
            print(f"step {step}/{len(plan)} pairs {seen} loss {loss_avg:.3f} {rate:.1f} pairs/s "
                  f"eta {(len(plan) - step) * args.batch / rate / 60:.1f} min", flush=True)
    train_seconds = time.time() - started

    # --- calibration, thresholds and band: development pairs only ---
    nli_logits, ans_logits = predict(model, dev_enc, device=args.device)
    d_nli = np.array([p.task == "nli" for p in dev])
    d_y = np.array([p.label for p in dev])
    t_nli = fit_temperature(nli_logits[d_nli], d_y[d_nli], binary=False)
    t_ans = fit_temperature(ans_logits[~d_nli], d_y[~d_nli].astype(float), binary=True)
    p_nli = softmax(nli_logits[d_nli] / t_nli)
    p_entail = p_nli[:, 0]
    entailed = d_y[d_nli] == 0
    sag = np.array([p.source.startswith("sag_") for p in dev])[d_nli]
    own = np.array([p.source == "own_speech_acts" for p in dev])[d_nli]
    # the threshold serves "does this text express this point": fitted on short-answer grading
    # and NLI development pairs alike (entailment vs the rest)
    t_expr, f1_expr = fit_threshold(p_entail, entailed)
    p_ans = sigmoid(ans_logits[~d_nli] / t_ans)
    answers = d_y[~d_nli] == 1
    t_answ, f1_answ = fit_threshold(p_ans, answers)
    ans_sources = np.array([p.source for p in dev])[~d_nli]
    figures = {
        "nli_accuracy": round(float(np.mean(p_nli.argmax(1) == d_y[d_nli])), 4),
        "expresses_macro_f1": round(f1_expr, 4),
        "expresses_macro_f1_sag": round(macro_f1(entailed[sag], p_entail[sag] >= t_expr), 4),
        "answers_macro_f1": round(f1_answ, 4),
        "answers_macro_f1_by_source": macro_f1_by_source(answers, p_ans >= t_answ, ans_sources),
        **({"expresses_macro_f1_speech_acts": round(macro_f1(entailed[own], p_entail[own] >= t_expr), 4)}
           if own.any() else {}),
        "ece_expresses": round(ece(p_entail, entailed), 4),
        "ece_answers": round(ece(p_ans, answers), 4),
        "development_pairs": {"nli": int(d_nli.sum() - sag.sum() - own.sum()), "short_answer": int(sag.sum()),
                              **({"speech_acts": int(own.sum())} if own.any() else {}), "answers": int((~d_nli).sum())},
    }
    meta = {
        "format": 1,
        "max_seq_length": MAX_SEQ,
        "labels": list(NLI_LABELS),
        "temperature": {"nli": round(t_nli, 4), "answers": round(t_ans, 4)},
        "thresholds": {"expresses": t_expr, "answers": t_answ},
        "band": {"expresses": band_for(p_entail, t_expr), "answers": band_for(p_ans, t_answ)},
        "training": {
            "base": "all-MiniLM-L6-v2 (src/jurist/models/minilm/model.safetensors)",
            "script": "training/train_local_judge.py",
            "seed": judge_data.SEED,
            "pairs": len(train),
            "pairs_by_source": {s: sum(p.source == s for p in train) for s in sorted({p.source for p in train})},
            "epochs": round(len(plan) * args.batch / len(train), 3), "batch": args.batch, "lr": args.lr, "steps": len(plan),
            "sag_repeat": args.sag_repeat, "answers_pairs": args.answers_pairs,
            "swap_contradictions": args.swap_contradictions,
            **({"speech_acts": args.speech_acts} if args.speech_acts else {}),
            **({"own_answers": args.own_answers} if args.own_answers else {}),
            **({"init": str(args.init), "replay": args.replay, "continued_from": previous} if args.init else {}),
            "seconds": round(train_seconds), "threads": args.threads, "device": args.device,
            "torch": torch.__version__, "machine": platform.machine(),
        },
        "figures": figures,
    }
    write_judge(args.out, lambda path: export(model, path, layers), meta)
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main()
