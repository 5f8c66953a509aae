"""Named, versioned prompt templates.

A template has a name, a version and a content hash; every judge call records
the hash, so results can be compared across prompt versions. Placeholders are
bare names in ``str.format`` syntax (``{rubric_name}``); literal braces are
doubled. A placeholder with a format spec, a conversion, an attribute or an
index (``{score_min:>300000000}``, ``{x!r}``, ``{x.y}``, ``{x[0]}``) is
refused when the template is read, so a prompt is never longer than its
template and its values. A template naming a placeholder its judge does not
provide is rejected when it is loaded, before any call.

A judge sends a template as two messages (:meth:`PromptTemplate.messages`): the
static instructions, up to the first placeholder that holds quoted data (a
:class:`~jurist.judges.prompting.Quoted` value: a transcript, an answer, a
source), as the system message, and the rest, the data first, as the user
message. An endpoint that takes no system role gets both in one user message
(``system_role: false`` in its provider settings).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Callable, Protocol

from jurist.errors import InputError
from jurist.jsonfiles import read_text, unknown_name
from jurist.judges.prompting import Quoted
from jurist.models.messages import Message, SystemMessage, UserMessage

RUBRIC_PLACEHOLDERS = frozenset(
    {"rubric_name", "rubric_description", "scoring_criteria", "chat_session", "score_min", "score_max", "rubric_items",
     "expected"}
)
#: The pairwise judge's template (``pairwise_judge``): what makes an answer better, the prompt
#: and the two answers, each quoted (:mod:`jurist.judges.pairwise`).
PAIRWISE_TEMPLATE = "pairwise_judge"
PAIRWISE_PLACEHOLDERS = frozenset({"criteria", "question", "answer_a", "answer_b"})
#: The source of a template shipped with jurist (and of the stored versions that replace it).
BUILTIN_SOURCE = "builtin"


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    version: str
    text: str
    source: str = BUILTIN_SOURCE

    @functools.cached_property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    @property
    def placeholders(self) -> set[str]:
        return placeholders_of(self.text, self.source)

    def check(self, allowed: frozenset[str], required: set[str] | None = None) -> "PromptTemplate":
        """Raise InputError for unknown (or missing required) placeholders; an unknown one is
        named with the closest allowed one (``unknown placeholder {rubric_nme} (did you mean
        {rubric_name}?)``) and the line of the file where it is first used."""
        names = self.placeholders
        unknown = sorted(names - allowed)
        if unknown:
            problems = "; ".join(unknown_name(u, sorted(allowed), "placeholder", "{{{}}}") for u in unknown)
            first = re.search(r"(?<!\{)\{" + re.escape(unknown[0]) + r"\}", self.text)
            builtin = self.source == BUILTIN_SOURCE
            raise InputError(
                f"template {self.name!r}: {problems} (write literal braces as {{{{ }}}})",
                file=None if builtin else self.source,
                line=None if builtin or first is None else self.text.count("\n", 0, first.start()) + 1,
            )
        missing = sorted((required or set()) - names)
        if missing:
            raise InputError(
                f"template {self.name!r} must contain {', '.join('{' + m + '}' for m in missing)}",
                file=self.source if self.source != "builtin" else None,
            )
        return self

    def render(self, **values: object) -> str:
        return self.text.format(**values)

    def messages(self, **values: object) -> list[Message]:
        """The prompt as chat messages: the instructions before the first quoted
        value as a system message, the rest as the user message. A template whose
        data comes first (or that quotes nothing) is one user message."""
        head: list[str] = []
        pieces = list(string.Formatter().parse(self.text))
        for i, (literal, field, _, _) in enumerate(pieces):
            if field is not None and isinstance(values.get(field), Quoted):
                system = "".join(head) + literal
                rest = "".join(lit + ("" if f is None else str(values[f])) for lit, f, _, _ in pieces[i + 1:])
                user = str(values[field]) + rest
                if not system.strip():
                    break
                return [SystemMessage(content=system.rstrip()), UserMessage(content=user)]
            head.append(literal + ("" if field is None else str(values[field])))
        return [UserMessage(content=self.render(**values))]


def variables_key(variables: dict[str, object]) -> str:
    """A call's routing key from its variables (its content): the same call, the same key."""
    return hashlib.sha256(json.dumps({k: str(v) for k, v in variables.items()}, sort_keys=True).encode()).hexdigest()


class PromptSource(Protocol):
    """Where a judge asks, before each call, which text of its template to use (the prompt
    lab's active version or A/B test arm: :class:`jurist.prompt_router.PromptRouter`)."""

    async def resolve(self, template: PromptTemplate, key: Callable[[], str]) -> PromptTemplate:
        """The template for a call of ``template`` whose routing key ``key()`` gives (asked only
        when an A/B test runs)."""
        ...


def placeholders_of(text: str, source: str = "template") -> set[str]:
    """The placeholder names of a template; InputError for invalid braces or a
    placeholder that is not a bare ``{name}``."""
    names: set[str] = set()
    try:
        for _, field, spec, conversion in string.Formatter().parse(text):
            if field is None:
                continue
            if spec or conversion or not field.isidentifier():
                written = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
                raise InputError(
                    f"template placeholder {_shown(written)} is not a bare {{name}}: format specs (widths, "
                    "precisions), conversions (!r, !s), attributes and indexes are not allowed; "
                    "write it as {name} (and literal braces as {{ }})",
                    file=source,
                )
            names.add(field)
    except ValueError as exc:
        raise InputError(f"template is not valid: {exc} (write literal braces as {{{{ }}}})", file=source) from None
    return names


def _shown(placeholder: str, limit: int = 80) -> str:
    return placeholder if len(placeholder) <= limit else placeholder[:limit] + "…"


def builtin(name: str, version: str = "1") -> PromptTemplate:
    """A template shipped with jurist (``src/jurist/templates/<name>.txt``)."""
    text = (files("jurist") / "templates" / f"{name}.txt").read_text(encoding="utf-8")
    return PromptTemplate(name=name, version=version, text=text)


def from_file(path: str | Path, name: str | None = None) -> PromptTemplate:
    """A user's template file; its version is its content hash."""
    p = Path(path)
    text = read_text(p, "template")  # unreadable or not UTF-8: an InputError naming the file
    if not text.strip():
        raise InputError("template is empty", file=str(p))
    placeholders_of(text, str(p))  # refused at once: only bare {name} placeholders
    tmpl = PromptTemplate(name=name or p.stem, version="", text=text, source=str(p))
    return PromptTemplate(name=tmpl.name, version=tmpl.hash, text=text, source=str(p))
