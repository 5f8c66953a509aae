"""The cross-encoder behind the ``local/minilm`` judge's decisions, in numpy.

The same 6-layer BERT encoder as :class:`~jurist.models.minilm.MiniLM`, fine-tuned
to read two texts at once (``[CLS] A [SEP] B [SEP]``, token type 0 for ``[CLS] A
[SEP]`` and 1 for ``B [SEP]``, truncated longest-first to ``max_seq_length``
tokens), with two linear heads on the last layer's ``[CLS]`` vector:

* ``nli`` (A = premise, B = hypothesis): entails / neutral / contradicts, as
  probabilities ``softmax(logits / temperature.nli)``;
* ``answers`` (A = a question, B = a candidate answer): does B answer A, as the
  probability ``sigmoid(logit / temperature.answers)``.

The temperatures were fitted on development splits when the model was trained, so
the probabilities are calibrated. The weights (``judge.safetensors``: each matrix as
its int8 difference from the bi-encoder's, see :mod:`jurist.models.minilm.weights`;
without the word embeddings, which stayed frozen in training: they are the
bi-encoder's, read from ``model.safetensors`` or shared with the loaded bi-encoder) and
the model's record (``judge.json``: the temperatures, the decision thresholds and
bands of uncertainty, what it was trained on, its figures) ship in this folder,
written by ``training/train_local_judge.py``; the tokenizer and config are the
bi-encoder's.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from jurist.errors import ConfigError
from jurist.models.minilm import BATCH_SIZE, MODEL_DIR, MiniLM, tokenizable

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from jurist.models.minilm.weights import WordTable

JUDGE_WEIGHTS = "judge.safetensors"
JUDGE_RECORD = "judge.json"
FORMAT = 1
LABELS = ("entailment", "neutral", "contradiction")
KINDS = ("expresses", "answers")  # the decisions the record holds a threshold and a band for


@dataclass(frozen=True)
class JudgeRecord:
    """What ``judge.json`` says the runtime needs: the sequence length, the two
    temperatures, and each decision's threshold and band (probability units)."""

    max_seq_length: int
    temperature_nli: float
    temperature_answers: float
    thresholds: dict[str, float]
    band: dict[str, float]


def _number(data: dict[str, Any], key: str, where: str, *, low: float, high: float, open_low: bool = False) -> float:
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not (low < value if open_low else low <= value) or value > high:
        raise ValueError(f"{where}.{key}: expected a number in {'(' if open_low else '['}{low:g}, {high:g}], "
                         f"got {value!r}")
    return float(value)


def parse_record(data: Any) -> JudgeRecord:
    """Check and read a ``judge.json`` document; ValueError naming the field at fault."""
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise ValueError(f"format: expected {FORMAT}, got {data.get('format')!r}")
    if tuple(data.get("labels") or ()) != LABELS:
        raise ValueError(f"labels: expected {list(LABELS)}, got {data.get('labels')!r}")
    length = data.get("max_seq_length")
    if isinstance(length, bool) or not isinstance(length, int) or not 8 <= length <= 512:
        raise ValueError(f"max_seq_length: expected an integer in [8, 512], got {length!r}")
    temperature = data.get("temperature")
    if not isinstance(temperature, dict):
        raise ValueError(f"temperature: expected an object, got {temperature!r}")
    thresholds, band = data.get("thresholds"), data.get("band")
    for name, part in (("thresholds", thresholds), ("band", band)):
        if not isinstance(part, dict):
            raise ValueError(f"{name}: expected an object, got {part!r}")
    assert isinstance(thresholds, dict) and isinstance(band, dict)
    return JudgeRecord(
        max_seq_length=length,
        temperature_nli=_number(temperature, "nli", "temperature", low=0.0, high=100.0, open_low=True),
        temperature_answers=_number(temperature, "answers", "temperature", low=0.0, high=100.0, open_low=True),
        thresholds={k: _number(thresholds, k, "thresholds", low=0.0, high=1.0) for k in KINDS},
        band={k: _number(band, k, "band", low=0.0, high=0.5) for k in KINDS},
    )


def read_record(model_dir: Path | None = None) -> JudgeRecord:
    """``judge.json`` of ``model_dir`` (default: this folder, read once per process: every
    ``LocalThresholds()`` asks for it), checked; ConfigError when it is missing or invalid."""
    return _shipped_record() if model_dir is None else _read_record(model_dir)


@functools.lru_cache(maxsize=1)
def _shipped_record() -> JudgeRecord:
    return _read_record(MODEL_DIR)


def _read_record(model_dir: Path) -> JudgeRecord:
    path = model_dir / JUDGE_RECORD
    try:
        return parse_record(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ConfigError(f"The local judge's model record is missing: {path}; reinstall jurist "
                          '(pip install --force-reinstall "jurist[local]").') from None
    except ValueError as exc:  # a JSON syntax error is a ValueError too
        raise ConfigError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class PairScores:
    """Calibrated probabilities of a batch of pairs: ``nli`` (n, 3) in the order of
    ``LABELS``, ``answers`` (n,)."""

    nli: "np.ndarray"
    answers: "np.ndarray"


class CrossEncoder(MiniLM):
    """The fine-tuned encoder and its two heads, read from ``judge.safetensors`` and
    ``judge.json`` (with the bi-encoder's config.json and tokenizer.json) in ``model_dir``."""

    def __init__(self, model_dir: Path | None = None, *, word_embeddings: "WordTable | None" = None) -> None:
        """``word_embeddings``: the bi-encoder's word-embedding table, when it is loaded (the
        cross-encoder was trained with it frozen and ships without it); None reads it from
        ``model.safetensors``."""
        model_dir = model_dir or MODEL_DIR
        self.record = read_record(model_dir)
        if not (model_dir / JUDGE_WEIGHTS).is_file():
            raise ConfigError(f"The local judge's weights are missing: {model_dir / JUDGE_WEIGHTS}; reinstall "
                              'jurist (pip install --force-reinstall "jurist[local]").')
        super().__init__(model_dir, JUDGE_WEIGHTS, word_embeddings=word_embeddings)
        self.tokenizer.enable_truncation(self.record.max_seq_length, strategy="longest_first")

    def _load_more(self, raw: "dict[str, np.ndarray]") -> None:
        import numpy as np

        shapes = {"head.nli.weight": (3, self.hidden), "head.nli.bias": (3,),
                  "head.answers.weight": (1, self.hidden), "head.answers.bias": (1,)}
        for name, shape in shapes.items():
            if name not in raw or tuple(raw[name].shape) != shape:
                got = tuple(raw[name].shape) if name in raw else "missing"
                raise ConfigError(f"{JUDGE_WEIGHTS}: {name} should have shape {shape}, got {got}")
        if raw["embeddings.token_type_embeddings.weight"].shape[0] < 2:
            raise ConfigError(f"{JUDGE_WEIGHTS}: a pair needs two token-type rows")
        # both heads as one matmul: columns 0..2 the NLI logits, column 3 the answers logit
        self.head = np.ascontiguousarray(np.concatenate(
            [raw["head.nli.weight"], raw["head.answers.weight"]]).astype(np.float32).T)
        self.head_bias = np.concatenate([raw["head.nli.bias"], raw["head.answers.bias"]]).astype(np.float32)

    def pair_vectors(self, pairs: Sequence[tuple[str, str]], batch_size: int = BATCH_SIZE) -> "np.ndarray":
        """The encoder's first-token states (n, hidden) of ``pairs`` (A, B): what both heads read.
        One batched forward pass over all pairs (length-sorted batches)."""
        import numpy as np

        if not pairs:
            return np.zeros((0, self.hidden), np.float32)
        encodings = self.tokenizer.encode_batch([(tokenizable(a), tokenizable(b)) for a, b in pairs])
        return np.stack([s[0] for s in self.run_batches(encodings, batch_size, segments=True, first_only=True)])

    def logits(self, pairs: Sequence[tuple[str, str]], batch_size: int = BATCH_SIZE) -> "np.ndarray":
        """Raw logits (n, 4) of ``pairs`` (A, B): the three NLI logits, then the answers logit."""
        out: np.ndarray = self.pair_vectors(pairs, batch_size) @ self.head + self.head_bias
        return out

    def scores(self, pairs: Sequence[tuple[str, str]], batch_size: int = BATCH_SIZE) -> PairScores:
        """Calibrated probabilities of both heads for each pair (A, B)."""
        import numpy as np

        z = self.logits(pairs, batch_size).astype(np.float64)
        nli = z[:, :3] / self.record.temperature_nli
        nli = np.exp(nli - nli.max(axis=1, keepdims=True))
        nli /= nli.sum(axis=1, keepdims=True)
        answers = 1.0 / (1.0 + np.exp(-z[:, 3] / self.record.temperature_answers))
        return PairScores(nli=nli, answers=answers)
