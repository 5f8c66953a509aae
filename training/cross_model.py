"""The cross-encoder trained for the ``local/minilm`` judge, in torch (training only).

The same BERT as :mod:`jurist.models.minilm` runs in numpy (6 layers, hidden 384,
12 heads, exact-erf GELU, post-layer-norm), read from and written to safetensors
with BERT's weight names, so what is trained here is what jurist runs. Two heads
sit on the ``[CLS]`` vector of the last layer:

* ``nli``: three logits, entailment / neutral / contradiction (does the first
  text express the second, contradict it, or neither);
* ``answers``: one logit, does the second text answer the question in the first.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from torch import nn

NLI_LABELS = ("entailment", "neutral", "contradiction")


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, inner: int, eps: float, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.up = nn.Linear(hidden, inner)
        self.down = nn.Linear(inner, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(dropout)
        self.p = dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, hid = x.shape
        d = hid // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        ctx = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        ctx = ctx.transpose(1, 2).reshape(b, s, hid)
        x = self.ln1(x + self.drop(self.out(ctx)))
        return self.ln2(x + self.drop(self.down(nn.functional.gelu(self.up(x)))))


class CrossEncoder(nn.Module):
    def __init__(self, config: dict, dropout: float = 0.1) -> None:
        super().__init__()
        hidden, eps = int(config["hidden_size"]), float(config["layer_norm_eps"])
        self.word = nn.Embedding(int(config["vocab_size"]), hidden)
        self.position = nn.Embedding(int(config["max_position_embeddings"]), hidden)
        self.token_type = nn.Embedding(int(config["type_vocab_size"]), hidden)
        self.embed_ln = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            Layer(hidden, int(config["num_attention_heads"]), int(config["intermediate_size"]), eps, dropout)
            for _ in range(int(config["num_hidden_layers"])))
        self.nli = nn.Linear(hidden, len(NLI_LABELS))
        self.answers = nn.Linear(hidden, 1)

    def forward(self, ids: torch.Tensor, types: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, s = ids.shape
        pos = torch.arange(s, device=ids.device)
        x = self.word(ids) + self.position(pos)[None] + self.token_type(types)
        x = self.drop(self.embed_ln(x))
        keep = pos[None, :] < lengths[:, None]
        mask = torch.zeros(b, 1, 1, s, dtype=x.dtype, device=x.device).masked_fill(~keep[:, None, None, :], -1e9)
        for layer in self.layers:
            x = layer(x, mask)
        cls = self.drop(x[:, 0])
        return self.nli(cls), self.answers(cls).squeeze(-1)


# BERT weight names <-> this module's
def _name_map(n_layers: int) -> dict[str, str]:
    names = {
        "embeddings.word_embeddings.weight": "word.weight",
        "embeddings.position_embeddings.weight": "position.weight",
        "embeddings.token_type_embeddings.weight": "token_type.weight",
        "embeddings.LayerNorm.weight": "embed_ln.weight",
        "embeddings.LayerNorm.bias": "embed_ln.bias",
    }
    for i in range(n_layers):
        p, m = f"encoder.layer.{i}", f"layers.{i}"
        for bert, ours in (("attention.self.query", "query"), ("attention.self.key", "key"),
                           ("attention.self.value", "value"), ("attention.output.dense", "out"),
                           ("attention.output.LayerNorm", "ln1"), ("intermediate.dense", "up"),
                           ("output.dense", "down"), ("output.LayerNorm", "ln2")):
            for kind in ("weight", "bias"):
                names[f"{p}.{bert}.{kind}"] = f"{m}.{ours}.{kind}"
    for head in ("nli", "answers"):
        for kind in ("weight", "bias"):
            names[f"head.{head}.{kind}"] = f"{head}.{kind}"
    return names


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """A MiniLM weights file as float32 tensors under BERT's names, read by
    ``jurist.models.minilm.weights.read_weights`` (int8 matrices widened with their scales,
    differences added to the ``model.safetensors`` beside the file). That module is loaded from
    this checkout by itself: it needs numpy, safetensors and ``jurist.errors``, not the rest of
    jurist's dependencies, which the training environment does not install."""
    import importlib.util
    import sys

    src = Path(__file__).resolve().parents[1] / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))  # for jurist.errors (jurist/__init__.py imports nothing heavy)
    name = "jurist.models.minilm.weights"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, src / "jurist" / "models" / "minilm" / "weights.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return {k: torch.from_numpy(v) for k, v in module.read_weights(path).items()}


def load_encoder(model: CrossEncoder, weights: Path, n_layers: int) -> None:
    """Start from the shipped sentence encoder (the heads start fresh)."""
    raw = read_weights(weights)
    names = _name_map(n_layers)
    state = {names[k]: v.float() for k, v in raw.items() if k in names}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all(m.startswith(("nli.", "answers.")) for m in missing), missing


def load_judge(model: CrossEncoder, folder: Path, n_layers: int) -> None:
    """Start from a trained judge (``judge.safetensors`` in ``folder``, heads included; its
    word embeddings are the bi-encoder's, loaded first by :func:`load_encoder`)."""
    raw = read_weights(folder / "judge.safetensors")
    names = _name_map(n_layers)
    state = {names[k]: v.float() for k, v in raw.items() if k in names}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert missing == ["word.weight"], missing


def export(model: CrossEncoder, path: Path, n_layers: int) -> None:
    """Write the weights as float16 with BERT's names (what jurist's numpy runs). The word
    embeddings are left out: they are frozen in training, so jurist reads them from the
    bi-encoder's file (23 MB less in the package)."""
    from safetensors.torch import save_file

    back = {ours: bert for bert, ours in _name_map(n_layers).items()}
    state = {back[k]: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()
             if k != "word.weight"}
    save_file(state, str(path))


def read_config(path: Path) -> dict:
    return json.loads(path.read_text())


__all__ = ["CrossEncoder", "NLI_LABELS", "export", "load_encoder", "load_judge", "read_config", "math"]
