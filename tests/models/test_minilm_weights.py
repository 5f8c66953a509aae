"""How the MiniLM weight files store their tensors (jurist.models.minilm.weights): int8 rows
with a scale each, differences from the bi-encoder's, and what the shipped files hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")

from jurist.errors import ConfigError  # noqa: E402
from jurist.models.minilm import MODEL_DIR, WEIGHTS_FILE  # noqa: E402
from jurist.models.minilm.cross import JUDGE_WEIGHTS  # noqa: E402
from jurist.models.minilm.weights import (  # noqa: E402
    BASE_FILE, DELTA, INT8, QUANTIZED_MIN, SCALE, WORD, WordTable, read_stored, read_weights, widen, word_table,
    write_weights)

MATRIX = "encoder.layer.0.intermediate.dense.weight"  # 1536 x 384: stored as int8


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    up = rng.normal(0, 0.05, (1536, 384)).astype(np.float32)
    up[7] = 0  # a row of zeros keeps a usable scale
    up[9, 3] = 0.9  # an outlier sets its row's step only
    return {
        WORD: rng.normal(0, 0.05, (200, 384)).astype(np.float32),  # 76,800 weights: int8
        MATRIX: up,
        "encoder.layer.0.intermediate.dense.bias": rng.normal(0, 0.05, 1536).astype(np.float32),
        "embeddings.token_type_embeddings.weight": rng.normal(0, 0.05, (2, 384)).astype(np.float32),
    }


def test_matrices_are_int8_rows_within_half_a_step(tmp_path: Path) -> None:
    weights = _weights()
    write_weights(tmp_path / BASE_FILE, weights)
    stored, metadata = read_stored(tmp_path / BASE_FILE)
    assert stored[MATRIX + INT8].dtype == np.int8 and stored[MATRIX + SCALE].shape == (1536,)
    assert stored[WORD + INT8].dtype == np.int8
    assert stored["encoder.layer.0.intermediate.dense.bias"].dtype == np.float16  # a vector
    assert stored["embeddings.token_type_embeddings.weight"].dtype == np.float16  # under QUANTIZED_MIN
    assert (2 * 384) < QUANTIZED_MIN <= 200 * 384
    assert len(metadata["digest"]) == 64
    back = read_weights(tmp_path / BASE_FILE)
    assert set(back) == set(weights) and all(v.dtype == np.float32 for v in back.values())
    for name in (MATRIX, WORD):
        step = np.abs(weights[name]).max(axis=1, keepdims=True) / 127
        assert np.all(np.abs(back[name] - weights[name]) <= step / 2 + 1e-7), name
    assert np.all(back[MATRIX][7] == 0)
    assert abs(back[MATRIX][9, 3] - 0.9) < 1e-6  # the row's largest magnitude is kept exactly
    np.testing.assert_allclose(back["encoder.layer.0.intermediate.dense.bias"],
                               weights["encoder.layer.0.intermediate.dense.bias"], atol=1e-4)


def test_the_same_weights_give_the_same_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_weights(tmp_path / "a" / BASE_FILE, _weights())
    write_weights(tmp_path / "b" / BASE_FILE, _weights())
    assert (tmp_path / "a" / BASE_FILE).read_bytes() == (tmp_path / "b" / BASE_FILE).read_bytes()


def test_word_table_widens_only_the_rows_looked_up(tmp_path: Path) -> None:
    write_weights(tmp_path / BASE_FILE, _weights())
    stored, _ = read_stored(tmp_path / BASE_FILE)
    table = word_table(stored)
    assert table is not None and WORD + INT8 not in stored and WORD + SCALE not in stored
    assert table.values.dtype == np.int8 and table.shape == (200, 384)
    ids = np.array([[3, 0, 199], [5, 5, 5]])
    rows = table[ids]
    assert rows.dtype == np.float32 and rows.shape == (2, 3, 384)
    all_rows = read_weights(tmp_path / BASE_FILE)[WORD]
    np.testing.assert_array_equal(rows, all_rows[ids])
    plain = WordTable(all_rows.astype(np.float16))  # a float table: rows as stored, widened
    assert plain[ids].dtype == np.float32
    assert word_table({}) is None


def test_differences_from_the_base_file(tmp_path: Path) -> None:
    base = _weights(0)
    write_weights(tmp_path / BASE_FILE, base)
    tuned = {k: v + np.random.default_rng(1).normal(0, 0.002, v.shape).astype(np.float32)
             for k, v in base.items() if k != WORD}  # fine-tuned by a little; no word table (frozen)
    write_weights(tmp_path / JUDGE_WEIGHTS, tuned, differences=True)
    stored, metadata = read_stored(tmp_path / JUDGE_WEIGHTS)
    assert MATRIX + DELTA + INT8 in stored and MATRIX + INT8 not in stored
    assert metadata == {"base": read_stored(tmp_path / BASE_FILE)[1]["digest"]}
    back = read_weights(tmp_path / JUDGE_WEIGHTS)
    assert set(back) == set(tuned)
    # the differences' steps are far finer than the weights' own: several times closer than int8 of the weights
    (tmp_path / "own").mkdir()
    write_weights(tmp_path / "own" / JUDGE_WEIGHTS, tuned)
    own = read_weights(tmp_path / "own" / JUDGE_WEIGHTS)
    error, own_error = (float(np.abs(w[MATRIX] - tuned[MATRIX]).mean()) for w in (back, own))
    assert error < own_error / 4


def test_differences_refuse_another_base(tmp_path: Path) -> None:
    write_weights(tmp_path / BASE_FILE, _weights(0))
    write_weights(tmp_path / JUDGE_WEIGHTS, {MATRIX: _weights(0)[MATRIX]}, differences=True)
    write_weights(tmp_path / BASE_FILE, _weights(2))  # the bi-encoder's file changed since
    with pytest.raises(ConfigError, match=r"differences from another model\.safetensors.*--judge"):
        read_weights(tmp_path / JUDGE_WEIGHTS)


def test_int8_without_its_scales_is_refused(tmp_path: Path) -> None:
    stored = {MATRIX + INT8: np.zeros((4, 3), np.int8), MATRIX + SCALE: np.ones(3, np.float32)}
    with pytest.raises(ConfigError, match=r"needs a scale per row"):
        widen(stored, {}, tmp_path / BASE_FILE)
    with pytest.raises(ConfigError, match=r"needs a scale per row"):
        widen({MATRIX + INT8: np.zeros((4, 3), np.int8)}, {}, tmp_path / BASE_FILE)


def test_float_files_load_as_they_are(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    weights = {k: v.astype(np.float16) for k, v in _weights().items()}
    save_file(weights, str(tmp_path / JUDGE_WEIGHTS))  # as the training script writes the cross-encoder's
    back = read_weights(tmp_path / JUDGE_WEIGHTS)
    for name, values in weights.items():
        np.testing.assert_array_equal(back[name], values.astype(np.float32))


def test_the_shipped_files_are_int8() -> None:
    """The install's size depends on it (docs/local-judge.md, "Install size")."""
    stored, metadata = read_stored(MODEL_DIR / WEIGHTS_FILE)
    matrices = [k for k in stored if k.endswith(INT8)]
    assert WORD + INT8 in stored and len(matrices) == 2 + 6 * 6  # word and position tables, 6 dense per layer
    assert not [k for k, v in stored.items() if v.ndim == 2 and v.size >= QUANTIZED_MIN and v.dtype != np.int8]
    judge, judge_metadata = read_stored(MODEL_DIR / JUDGE_WEIGHTS)
    assert judge_metadata["base"] == metadata["digest"]
    assert len([k for k in judge if k.endswith(DELTA + INT8)]) == 1 + 6 * 6  # all but the word table
    assert not any(k.startswith(WORD) for k in judge)
