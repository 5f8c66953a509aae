"""Answers to compare or probe: one system's answers to a set of prompts.

An answers file is JSONL, one answer per line::

    {"id": "q1", "prompt": "Why does coffee wake me up?", "answer": "Caffeine blocks ...", "model": "openai/gpt-4o"}

``id`` names the prompt (the same id in two systems' files is the same prompt),
``prompt`` is what was asked, ``answer`` the system's answer, ``model`` (optional)
the model that wrote it. Blank lines and ``#`` lines are skipped; an id is used once
per file. Every problem names the file and the line.

A session file (or a folder of ``*.jsonl`` sessions, :mod:`jurist.rubrics.sessions`)
gives one answer per session instead: its id is the session's, its answer the last
assistant message, and its prompt the conversation before that message.

Either way an answer also reads as a chat session (the conversation, then the
answer), which is what a rubric judge scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jurist.errors import InputError
from jurist.jsonfiles import jsonl_objects, line_problem
from jurist.judges.prompting import escape_turn_markers, turn_header
from jurist.rubrics.naming import id_problem, shorten
from jurist.rubrics.sessions import ChatSession, Message, load_session
from jurist.store.tables import SUBJECT_ID_LENGTH

MAX_ANSWERS_BYTES = 50_000_000
MAX_LINE_CHARS = 400_000
MAX_NAME_CHARS = 100
FIELDS = "id, prompt, answer, model"


class AnswerLine(BaseModel):
    """One line of an answers file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    answer: str
    model: str | None = Field(default=None, min_length=1, max_length=200)


@dataclass
class Answer:
    """One system's answer to one prompt, and where it came from."""

    id: str
    prompt: str  # what the judge reads as the prompt (a conversation's turns, for a session)
    answer: str
    context: list[Message]  # the conversation before the answer
    model: str | None = None  # the model that wrote it, when known
    source: str = ""
    line: int | None = None

    def session(self, answer: str | None = None) -> ChatSession:
        """The conversation and the answer (or another text in its place) as a chat session."""
        text = self.answer if answer is None else answer
        return ChatSession(self.id, [*self.context, Message("assistant", text)], self.source)

    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else self.source


@dataclass
class AnswerSet:
    """A system's answers by id, in the order of its file(s)."""

    name: str
    source: str
    answers: dict[str, Answer] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.answers)


def parse_answers(lines: list[str], source: str, name: str) -> AnswerSet:
    """Parse answer lines; a bad line is an :class:`InputError` with its number."""
    out = AnswerSet(name, source)
    for n, obj in jsonl_objects(lines, source, comments=True, max_line=MAX_LINE_CHARS):
        if "role" in obj and "answer" not in obj:
            raise InputError("this line is a chat message, not an answer: give a session file as a file of its "
                             f"own (or a folder of sessions), or answers as JSONL with {FIELDS}", file=source, line=n)
        try:
            line = AnswerLine.model_validate(obj)
        except ValidationError as exc:
            raise InputError(line_problem(exc, AnswerLine, "answer"), file=source, line=n) from None
        problem = id_problem(line.id, SUBJECT_ID_LENGTH)
        if problem:
            raise InputError(f"id {shorten(line.id)!r} {problem}", file=source, line=n)
        if line.id in out.answers:
            raise InputError(f"id {shorten(line.id)!r} is already answered on line {out.answers[line.id].line}",
                             file=source, line=n)
        out.answers[line.id] = Answer(line.id, line.prompt, line.answer, [Message("user", line.prompt)],
                                      line.model, source, n)
    if not out.answers:
        raise InputError("the file holds no answers", file=source)
    return out


def _session_answer(chat: ChatSession) -> Answer:
    """A session as an answer: its last assistant message, after the conversation before it."""
    last = max((i for i, m in enumerate(chat.messages) if m.role == "assistant"), default=None)
    source = chat.source or chat.session_id
    if last is None:
        raise InputError("the session has no assistant message to compare", file=source)
    context = chat.messages[:last]
    if not context:
        raise InputError("the session has no prompt before its assistant message", file=source)
    prompt = "\n\n".join(turn_header(i, m.role, m.name) + escape_turn_markers(m.content)
                         for i, m in enumerate(context, start=1))
    return Answer(chat.session_id, prompt, chat.messages[last].content, context, None, source)


def _is_session(path: Path) -> bool:
    """Whether a JSONL file holds a session (its first object is a message or a session header)."""
    with path.open(encoding="utf-8") as fh:
        for _, obj in jsonl_objects(fh, str(path), comments=True, max_line=MAX_LINE_CHARS):
            return "answer" not in obj and ("role" in obj or "session_id" in obj)
    return False


def load_answers(path: str | Path, name: str | None = None) -> AnswerSet:
    """A system's answers from an answers file, a session file or a folder of sessions;
    named ``name`` (default: the file's or folder's name)."""
    p = Path(path)
    label = name or (p.name if p.is_dir() else p.stem)
    problem = id_problem(label, MAX_NAME_CHARS)
    if problem:
        raise InputError(f"the system's name {shorten(label)!r} {problem}", file=str(p))
    try:
        if p.is_dir():
            files = sorted(p.glob("*.jsonl"))
            if not files:
                raise InputError("the folder holds no *.jsonl sessions", file=str(p))
            return _from_sessions(files, label, str(p))
        if p.stat().st_size > MAX_ANSWERS_BYTES:
            raise InputError(f"the file is larger than {MAX_ANSWERS_BYTES:,} bytes", file=str(p))
        if _is_session(p):
            return _from_sessions([p], label, str(p))
        with p.open(encoding="utf-8") as fh:
            return parse_answers(fh.readlines(), str(p), label)
    except OSError as exc:
        raise InputError(f"cannot read answers: {exc.strerror}", file=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=str(p)) from None


def _from_sessions(files: list[Path], name: str, source: str) -> AnswerSet:
    out = AnswerSet(name, source)
    for f in files:
        answer = _session_answer(load_session(f))
        if answer.id in out.answers:
            raise InputError(f"session {shorten(answer.id)!r} is also in {out.answers[answer.id].source}",
                             file=str(f))
        out.answers[answer.id] = answer
    return out


def answer_sets(specs: list[str]) -> list[AnswerSet]:
    """Answer sets from ``PATH`` or ``NAME=PATH`` specs; two sets of one name are an InputError."""
    sets: list[AnswerSet] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or Path(spec).exists():
            name, path = "", spec
        sets.append(load_answers(path, name or None))
    seen: dict[str, str] = {}
    for s in sets:
        if s.name in seen:
            raise InputError(f"two systems are named {s.name!r} ({seen[s.name]} and {s.source}); "
                             "name them with NAME=PATH")
        seen[s.name] = s.source
    return sets


def inline_answers(prompt: str, answers: list[str], names: tuple[str, ...] = ("answer1", "answer2")) -> list[AnswerSet]:
    """Two answers to one prompt given on the command line, as two one-answer systems."""
    if not prompt.strip():
        raise InputError("the prompt is empty")
    if len(answers) != len(names):
        raise InputError(f"give {len(names)} answers to compare (got {len(answers)})")
    out = []
    for name, text in zip(names, answers):
        item = Answer("prompt", prompt, text, [Message("user", prompt)], None, "the command line")
        out.append(AnswerSet(name, "the command line", {"prompt": item}))
    return out


def with_answer(answer: Answer, text: str) -> Answer:
    """The same answer with another text (a padded one, say)."""
    return replace(answer, answer=text)
