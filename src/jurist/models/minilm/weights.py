"""How the MiniLM weight files (``model.safetensors``, ``judge.safetensors``) store their tensors.

Safetensors files with BERT's weight names. Each matrix of at least ``QUANTIZED_MIN``
weights (the word and position embeddings, the encoder's dense layers) is stored as
int8 with one float32 scale per row, ``<name>.int8`` and ``<name>.scale``: the
weight is the int8 value times its row's scale, the scale being the row's largest
magnitude / 127 (per output channel for a dense layer, torch's layout; per token for
an embedding table). The rest (biases, LayerNorm, the token-type rows, the
cross-encoder's heads) is float16. A float16 or float32 tensor under its plain name
is read as it is, so a file written as plain floats (the training script's
``judge.safetensors``) loads too.

The cross-encoder, fine-tuned from the bi-encoder, moved its matrices by a few
percent, so it stores each as its difference from the bi-encoder's, in int8
(``<name>.delta.int8``, ``<name>.delta.scale``): steps some 25 times finer than int8
of the weights themselves, for the same size. Such a file names, in its metadata
(``base``), the digest of the ``model.safetensors`` the differences were taken from
(its ``digest``); reading it checks that this is the file beside it.

Reading widens the int8 once, to float32, except the word-embedding table
(:class:`WordTable`), which stays as stored: only the rows a batch looks up widen.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jurist.errors import ConfigError

BASE_FILE = "model.safetensors"  # the bi-encoder's: what a file of differences is read against
WORD = "embeddings.word_embeddings.weight"
INT8, SCALE, DELTA = ".int8", ".scale", ".delta"
QUANTIZED_MIN = 65536  # smaller matrices (token types, the heads) stay float16: int8 would save nothing


@dataclass(frozen=True)
class WordTable:
    """The (vocabulary, hidden) word-embedding table as stored: float rows, or int8 rows
    with a scale each. ``table[ids]`` is those rows widened to float32 (a new array)."""

    values: np.ndarray
    scales: np.ndarray | None = None

    def __getitem__(self, ids: np.ndarray) -> np.ndarray:
        rows: np.ndarray = self.values[ids].astype(np.float32)
        if self.scales is not None:
            rows *= self.scales[ids][..., None]
        return rows

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


def read_stored(path: Path, *, skip: tuple[str, ...] = ()) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A weights file's tensors as stored (but those whose names start with ``skip``), and its metadata."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys() if not k.startswith(skip)}, dict(f.metadata() or {})


def word_table(stored: dict[str, np.ndarray]) -> WordTable | None:
    """The word-embedding table of a file's stored tensors, taken out of them; None when the file has none."""
    if WORD + INT8 in stored:
        return WordTable(stored.pop(WORD + INT8), stored.pop(WORD + SCALE))
    if WORD in stored:
        return WordTable(stored.pop(WORD))
    return None


def read_word_table(path: Path) -> WordTable | None:
    """The word-embedding table of a weights file (None when it has none), without its other tensors."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        names = set(f.keys())
        return word_table({k: f.get_tensor(k) for k in (WORD, WORD + INT8, WORD + SCALE) if k in names})


def widen(stored: dict[str, np.ndarray], metadata: dict[str, str], path: Path) -> dict[str, np.ndarray]:
    """The tensors of ``path`` (read as ``stored`` and ``metadata``) under their plain names, int8 ones
    widened to float32 and differences added to the weights of ``BASE_FILE`` beside it; the rest as stored.
    ConfigError when an int8 tensor lacks its scales or the base file is not the one the differences
    were taken from."""
    out: dict[str, np.ndarray] = {}
    for name, values in stored.items():
        if name.endswith(SCALE):
            continue
        if name.endswith(INT8):
            name = name.removesuffix(INT8)
            scales = stored.get(name + SCALE)
            if scales is None or scales.shape != values.shape[:1]:
                raise ConfigError(f"{path}: {name}{INT8} needs a scale per row ({name}{SCALE})")
            values = np.multiply(values, scales[:, None], dtype=np.float32)
        out[name] = values
    deltas = [name for name in out if name.endswith(DELTA)]
    if deltas:
        base_path = path.parent / BASE_FILE
        base_stored, base_metadata = read_stored(base_path, skip=(WORD,))
        if base_metadata.get("digest") != metadata.get("base"):
            raise ConfigError(f"{path} holds differences from another {BASE_FILE} than {base_path} (digest "
                              f"{metadata.get('base')!r}, found {base_metadata.get('digest')!r}); write it again "
                              "with benchmarks/minilm_export.py --judge")
        base = widen(base_stored, base_metadata, base_path)
        for name in deltas:
            weight = base[name.removesuffix(DELTA)]  # float32 and just made: added to in place
            weight += out.pop(name)
            out[name.removesuffix(DELTA)] = weight
    return out


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a weights file as float32 under BERT's names (the word embeddings, when the
    file has them, included and widened): what a model of these weights computes with."""
    stored, metadata = read_stored(path)
    table = word_table(stored)
    weights = {k: v.astype(np.float32) for k, v in widen(stored, metadata, path).items()}
    if table is not None:
        weights[WORD] = table[np.arange(table.shape[0])]
    return weights


def _quantize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 rows and their float32 scales (the row's largest magnitude / 127; 1 for a row of zeros)."""
    values = values.astype(np.float32)
    scales = np.abs(values).max(axis=1) / 127
    scales[scales == 0] = 1
    return np.clip(np.rint(values / scales[:, None]), -127, 127).astype(np.int8), scales.astype(np.float32)


def digest(stored: dict[str, np.ndarray]) -> str:
    """sha256 of stored tensors: names, dtypes, shapes and bytes."""
    h = hashlib.sha256()
    for name in sorted(stored):
        v = np.ascontiguousarray(stored[name])
        h.update(f"{name}\0{v.dtype.str}\0{v.shape}\0".encode())
        h.update(v.tobytes())
    return h.hexdigest()


def write_weights(path: Path, weights: dict[str, np.ndarray], *, differences: bool = False) -> None:
    """Write float ``weights`` (BERT's names) to ``path`` as described above, with their ``digest`` in the
    metadata; with ``differences``, each matrix as its difference from the same-named weight of
    ``BASE_FILE`` beside ``path`` (as read back), with that file's digest as ``base`` instead. One
    metadata entry each: safetensors writes several in no fixed order, and the same weights give the same file."""
    from safetensors.numpy import save_file

    base: dict[str, np.ndarray] = {}
    if differences:
        base_path = path.parent / BASE_FILE
        base_stored, base_metadata = read_stored(base_path, skip=(WORD,))
        if "digest" not in base_metadata:
            raise ConfigError(f"{base_path} has no digest to take differences from: write it again with "
                              "benchmarks/minilm_export.py --weights")
        base = widen(base_stored, base_metadata, base_path)
    stored: dict[str, np.ndarray] = {}
    for name, values in weights.items():
        if values.ndim != 2 or values.size < QUANTIZED_MIN:
            stored[name] = values.astype(np.float16)
            continue
        if name in base and base[name].shape == values.shape:
            values, name = values.astype(np.float32) - base[name], name + DELTA
        stored[name + INT8], stored[name + SCALE] = _quantize(values)
    save_file(stored, str(path), metadata={"base": base_metadata["digest"]} if differences else {"digest": digest(stored)})
