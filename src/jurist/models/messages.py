"""Chat messages: one frozen pydantic model per role, a union tagged by ``role``.

What travels between jurist's packages is a :data:`Message`, never a dict:
:class:`SystemMessage` (``system``, or OpenAI's ``developer``), :class:`UserMessage`,
:class:`AssistantMessage` (text and/or ``tool_calls``), :class:`ToolMessage` (a tool's
result, with the ``tool_call_id`` it answers) and, for old OpenAI clients,
:class:`FunctionMessage`. Content is text or a tuple of parts (:class:`TextPart`,
:class:`ImagePart`; a user turn may also hold audio and file parts, an assistant
turn a refusal part).

Two conversions at the edges: :func:`message_from_openai` reads an OpenAI-style dict
strictly (an unknown role, field or part type is an :class:`~jurist.errors.InputError`
naming the closest known name; a tool result without ``tool_call_id`` and an assistant
turn with neither content nor tool calls are refused), and :meth:`openai` writes the
wire dict back, field for field as it was read. The fields jurist does not use but
passes through are listed in :data:`PASSED_THROUGH`. The Anthropic adapter renders
messages as its own blocks (:mod:`jurist.models.anthropic`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Iterable, Literal, Mapping, Union

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError, model_validator

from jurist.errors import InputError
from jurist.jsonfiles import unknown_name

__all__ = ["PASSED_THROUGH", "ROLES", "AssistantMessage", "AssistantPart", "AudioPart", "BaseMessage", "FilePart",
           "FunctionCall", "FunctionMessage", "ImagePart", "ImageURL", "Message", "RefusalPart", "SystemMessage",
           "TextPart", "ToolCall", "ToolMessage", "UserMessage", "UserPart", "message_from_openai", "message_text",
           "messages_from_openai", "openai_messages", "prepend_text"]


class _Strict(BaseModel):
    """Frozen; an unknown field is refused with the closest known name."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    _fields: ClassVar[frozenset[str]] = frozenset()
    _tags: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._fields = frozenset(cls.model_fields)  # looked up once: model_fields is slow to read
        cls._tags = tuple(tag for tag in ("role", "type") if tag in cls._fields)

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key not in cls._fields:
                    raise ValueError(unknown_name(str(key), cls.model_fields))
        return data

    @model_validator(mode="after")
    def _tag_given(self) -> Any:
        """The tag (``role``, a part's ``type``) is written out even where it was left to its default."""
        self.__pydantic_fields_set__.update(self._tags)
        return self

    def openai(self) -> dict[str, JsonValue]:
        """The wire dict (OpenAI's form): the tag, then the fields that were given, as they were given."""
        return self.model_dump(mode="json", exclude_unset=True)


# --- content parts -------------------------------------------------------------------------


class TextPart(_Strict):
    type: Literal["text"] = "text"
    text: str


class ImageURL(_Strict):
    url: str  # a data URL (the bytes) or an http(s) URL the endpoint fetches
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Strict):
    type: Literal["image_url"] = "image_url"
    image_url: ImageURL


class AudioPart(_Strict):
    """Audio input, passed through to the endpoint as it is."""

    type: Literal["input_audio"] = "input_audio"
    input_audio: dict[str, Any]


class FilePart(_Strict):
    """A file input, passed through to the endpoint as it is."""

    type: Literal["file"] = "file"
    file: dict[str, Any]


class RefusalPart(_Strict):
    type: Literal["refusal"] = "refusal"
    refusal: str


UserPart = Annotated[Union[TextPart, ImagePart, AudioPart, FilePart], Field(discriminator="type")]
AssistantPart = Annotated[Union[TextPart, RefusalPart], Field(discriminator="type")]

_PART_TYPES: dict[str, tuple[str, ...]] = {
    "system": ("text",), "developer": ("text",), "tool": ("text",), "function": (),
    "user": ("text", "image_url", "input_audio", "file"), "assistant": ("text", "refusal"),
}


# --- tool calls -----------------------------------------------------------------------------


class FunctionCall(_Strict):
    name: str
    arguments: str  # JSON text, as the model wrote it


class ToolCall(_Strict):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


# --- messages -------------------------------------------------------------------------------


class BaseMessage(_Strict):
    """What every message has; a message is one of the subclasses (see :data:`Message`)."""

    @model_validator(mode="before")
    @classmethod
    def _known_parts(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("content"), (list, tuple)):
            role = data.get("role", cls.model_fields["role"].default if "role" in cls._fields else None)
            known = _PART_TYPES.get(str(role), ())
            for i, part in enumerate(data["content"]):
                kind = part.get("type") if isinstance(part, Mapping) else None
                if isinstance(kind, str) and kind not in known:
                    raise ValueError(f"content[{i}]: " + unknown_name(kind, known, what="part type"))
        return data

    @property
    def text(self) -> str:
        """The message's text: its content, or its text parts joined by blank lines ("" when none)."""
        content = getattr(self, "content", None)
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        return "\n\n".join(p.text for p in content if isinstance(p, TextPart))


class SystemMessage(BaseMessage):
    role: Literal["system", "developer"] = "system"
    content: str | tuple[TextPart, ...]
    name: str | None = None  # a participant's name: passed through


class UserMessage(BaseMessage):
    role: Literal["user"] = "user"
    content: str | tuple[UserPart, ...]
    name: str | None = None  # a participant's name: passed through


class AssistantMessage(BaseMessage):
    role: Literal["assistant"] = "assistant"
    content: str | tuple[AssistantPart, ...] | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    name: str | None = None  # a participant's name: passed through
    # Passed through: what OpenAI-compatible clients send back with an assistant turn.
    refusal: str | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None
    reasoning_content: str | None = None

    @model_validator(mode="after")
    def _says_something(self) -> "AssistantMessage":
        if self.content is None and not self.tool_calls and self.function_call is None and self.refusal is None \
                and self.audio is None:
            raise ValueError("an assistant turn needs content or tool_calls")
        return self


class ToolMessage(BaseMessage):
    role: Literal["tool"] = "tool"
    content: str | tuple[TextPart, ...]
    tool_call_id: str  # the id of the assistant's tool call this result answers
    name: str | None = None  # a participant's name: passed through


class FunctionMessage(BaseMessage):
    """A function's result in OpenAI's old form (before tool calls): passed through."""

    role: Literal["function"] = "function"
    name: str
    content: str | None


#: One chat message, its type picked by ``role``.
Message = Annotated[Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage, FunctionMessage],
                    Field(discriminator="role")]

ROLES: dict[str, type[BaseMessage]] = {"system": SystemMessage, "developer": SystemMessage, "user": UserMessage,
                                    "assistant": AssistantMessage, "tool": ToolMessage,
                                    "function": FunctionMessage}

#: The fields a message may have that jurist does not read, sent on as they are.
PASSED_THROUGH: dict[str, tuple[str, ...]] = {
    "every message": ("name",),
    "assistant": ("refusal", "audio", "function_call", "reasoning_content"),
    "content parts": ("input_audio", "file", "refusal", "image_url.detail"),
}

_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


def message_from_openai(data: Any, where: str = "message", *, tool_text: bool = False) -> Message:
    """A message from its OpenAI-style dict, checked strictly; a bad one is an InputError
    saying what was wrong in it (``where``: how to name it, e.g. ``messages[2]``). With
    ``tool_text``, a tool turn without ``tool_call_id`` (a transcript's tool output, no answer
    to a call) becomes user text ``[tool result] ...`` instead of an error."""
    if isinstance(data, BaseModel):
        if isinstance(data, BaseMessage):
            return data  # type: ignore[return-value]  # every subclass is a member of the union
        raise InputError(f"{where}: a {type(data).__name__} is not a message")
    if not isinstance(data, Mapping):
        raise InputError(f"{where}: a message is a JSON object with a role, not {type(data).__name__}")
    role = data.get("role")
    if not isinstance(role, str) or role not in ROLES:
        problem = unknown_name(role, ROLES, what="role") if isinstance(role, str) else \
            "missing field 'role'" if role is None else f"role must be text, not {type(role).__name__}"
        raise InputError(f"{where}: {problem}")
    if tool_text and role == "tool" and "tool_call_id" not in data:
        tool = message_from_openai({**data, "tool_call_id": ""}, where)
        return UserMessage(content=f"[tool result] {tool.text}")
    try:
        return _MESSAGE.validate_python(data)
    except ValidationError as exc:
        raise InputError(f"{where}: {_problem(exc)}") from None


def _problem(exc: ValidationError) -> str:
    """A message's validation error in words: the one deepest in the message (where a union
    tried each of its kinds, the kind that got furthest), its path without pydantic's labels."""
    found: dict[str, list[str]] = {}
    for err in exc.errors():
        path = _path(err["loc"][1:])  # the role's tag left out
        msg = err["msg"].removeprefix("Value error, ").replace("a valid tuple", "a list")
        found.setdefault(path, []).append(f"missing field {path.rpartition('.')[2]!r}"
                                          if err["type"] == "missing" else msg)
    path = max(found, key=lambda p: (p.count(".") + p.count("["), len(p)))
    first, *rest = dict.fromkeys(found[path])
    msg = " or ".join([first, *(m.removeprefix("Input should be ") for m in rest)])
    parent = path.rpartition(".")[0] if found[path][0].startswith("missing field") else path
    return f"{parent}: {msg}" if parent else msg


def _path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a path (``tool_calls[0].function``), without the labels
    pydantic gives a union's members and the tags of tagged parts."""
    out = ""
    tagged = tag_next = False
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            tag_next, tagged = tagged, False
        elif tag_next:
            tag_next = False  # the tag of a part in a tagged union
        elif part == "str" or "[" in part or part.startswith("function-"):
            tagged = "tagged-union" in part
        else:
            out += f".{part}" if out else part
    return out


def messages_from_openai(items: Iterable[Any], where: str = "messages", *,
                         tool_text: bool = False) -> tuple[Message, ...]:
    """Messages from OpenAI-style dicts (messages already typed pass as they are), each checked
    strictly (``tool_text`` as for :func:`message_from_openai`); the first bad one is an
    InputError naming it (``messages[2]: unknown field ...``)."""
    return tuple(message_from_openai(m, f"{where}[{i}]", tool_text=tool_text) for i, m in enumerate(items))


def openai_messages(messages: Iterable[Message]) -> list[dict[str, JsonValue]]:
    """Messages as the OpenAI wire dicts (:meth:`openai`)."""
    return [m.openai() for m in messages]


def message_text(messages: Iterable[Message]) -> str:
    """The messages' text (:attr:`text` of each), joined by blank lines."""
    return "\n\n".join(m.text for m in messages)


def prepend_text(message: UserMessage, text: str) -> UserMessage:
    """``message`` with ``text`` and a blank line before its content (a text part before its parts)."""
    if isinstance(message.content, str):
        return message.model_copy(update={"content": f"{text}\n\n{message.content}"})
    return message.model_copy(update={"content": (TextPart(text=text), *message.content)})
