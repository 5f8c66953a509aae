"""What a judge's verdicts lean on besides the answer: length and kinship.

* **Verbosity.** :func:`pad` appends neutral filler to an answer (sentences that
  add no fact, no claim and no advice) until it is at least ``factor`` times as
  long. A judge free of verbosity bias scores the padded answer as it scored the
  answer (Saito et al. 2023, "Verbosity Bias in Preference Labeling by Large
  Language Models"; Zheng et al. 2023 §3.3 pad answers the same way).
* **Self-preference.** Judges tend to favour text written by their own model
  family (Panickssery et al. 2024, "LLM Evaluators Recognize and Favor Their Own
  Generations"). :func:`family` names a model's family by a simple rule, so a
  probe can warn when the judge and a judged answer's model share one.
"""

from __future__ import annotations

import re

FILLER = (
    "I hope this helps.",
    "Let me know if you would like more detail on any part of this.",
    "There are several ways to look at a question like this one, and the points above are the main ones.",
    "Everyone's situation is a little different, so take from this what fits yours.",
    "Thank you for the question.",
)
PAD_FACTOR = 2.0

#: Model names whose first word is not their family's name.
FAMILY_ALIASES = {"o": "gpt", "chatgpt": "gpt", "text": "gpt", "meta": "llama", "codellama": "llama"}
_WORD = re.compile(r"[a-z]+")


def pad(answer: str, factor: float = PAD_FACTOR) -> str:
    """``answer`` followed by a paragraph of :data:`FILLER` sentences, in turn, until the text
    is at least ``factor`` times as long (and at least one sentence is added)."""
    target = max(len(answer) * factor, len(answer) + 1)
    added: list[str] = []
    text = answer
    while len(text) < target:
        added.append(FILLER[len(added) % len(FILLER)])
        text = answer.rstrip() + "\n\n" + " ".join(added)
    return text


def family(model: str) -> str:
    """A model's family: the first run of letters of its name (the part after the last ``/``
    of ``provider/model``), lower-cased, with :data:`FAMILY_ALIASES` applied.

    ``openai/gpt-4o-mini`` -> gpt, ``anthropic/claude-haiku-4-5`` -> claude,
    ``ollama/qwen3:14b`` -> qwen, ``openrouter/meta-llama/llama-3.1-8b`` -> llama,
    ``openai/o3-mini`` -> gpt. A name with no letters is its own family.
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    m = _WORD.search(name)
    if m is None:
        return name
    return FAMILY_ALIASES.get(m.group(0), m.group(0))
