"""Images that go to a vision judge with a request, read from untrusted input with bounds.

An :class:`Image` is what an adapter sends: a ``data:`` URL (the bytes, base64)
or an ``http(s)`` URL, which jurist passes on and never fetches. It comes from
a data URL (:func:`from_data_url`), base64 data with its media type
(:func:`from_base64`), a remote URL (:func:`from_url`) or a file
(:func:`from_file`, confined to a folder: a session's images live beside it).
Every one is checked where it enters: at most :data:`MAX_IMAGE_BYTES`, a PNG,
JPEG, GIF or WebP by its first bytes (the types both OpenAI and Anthropic
take), whatever name or media type it claims, and one that decodes as that
type (Pillow reads it through); anything else is an
:class:`~jurist.errors.InputError` saying what was wrong. A remote URL whose
host is, or resolves to, a loopback, private, link-local or reserved address
is refused unless the operator allows it (``allow_private_image_urls``): a
vision endpoint that fetches it would reach into the operator's network.

A call's record holds :meth:`Image.describe` (media type, bytes, SHA-256; a
remote URL shortened), never the bytes; the call cache's key holds the hashes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import ipaddress
import os
import re
import socket
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

import PIL.Image

from jurist.errors import InputError
from jurist.models.messages import ImagePart, ImageURL, Message, TextPart, UserMessage, UserPart

__all__ = ["IMAGE_TYPES", "MAX_IMAGE_BYTES", "MAX_URL_CHARS", "RESOLVE_TIMEOUT", "Image", "attach", "from_base64", "from_data_url",
           "from_file", "from_url", "image_parts", "image_type", "resolve_image"]

#: The most bytes one image may have (Anthropic's limit per image; OpenAI takes more).
MAX_IMAGE_BYTES = 5 * 1024 * 1024
#: The longest remote image URL taken.
MAX_URL_CHARS = 2048
#: The image types taken, by the bytes they start with.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: Seconds a remote image's host name may take to resolve (to check the addresses it names).
RESOLVE_TIMEOUT = 2.0

# How an image file is opened: without waiting for a writer, without following a link (POSIX), as bytes (Windows).
_OPEN_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
_PILLOW_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_DATA_URL = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*),", re.IGNORECASE)
_SHOWN_URL = 200  # the most of a remote URL a placeholder or record shows


def image_type(head: bytes) -> str | None:
    """The media type of image bytes by their magic number (``None``: not a type we take)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True)
class Image:
    """One image of a request: ``url`` is what goes out (a data URL, or an http(s) URL
    the endpoint fetches); ``sha256`` is of the bytes (of the URL for a remote image)."""

    url: str
    sha256: str
    media_type: str | None = None  # None: a remote image, its type unknown to jurist
    size: int | None = None  # bytes; None for a remote image

    @property
    def remote(self) -> bool:
        return self.size is None

    @property
    def base64_data(self) -> str:
        """The base64 payload of a data-URL image (what Anthropic's ``base64`` source takes)."""
        if self.remote:
            raise ValueError("a remote image has no data")
        return self.url.partition(",")[2]

    def describe(self) -> dict[str, str | int | None]:
        """The image in a call's record: media type, bytes and SHA-256 (a remote one: its URL, shortened)."""
        if self.remote:
            return {"url": _shorten(self.url), "sha256": self.sha256}
        return {"media_type": self.media_type, "bytes": self.size, "sha256": self.sha256}

    def label(self) -> str:
        """The image as placeholder text: ``image/png, 12,345 bytes`` or ``remote image <url>``."""
        if self.remote:
            return f"remote image {_shorten(self.url)}"
        return f"{self.media_type}, {self.size:,} bytes"


def _shorten(url: str) -> str:
    return url if len(url) <= _SHOWN_URL else url[:_SHOWN_URL] + "…"


def _checked(data: bytes, what: str, *, file: str | None, line: int | None) -> Image:
    if len(data) > MAX_IMAGE_BYTES:
        raise InputError(f"{what} has {len(data):,} bytes, over the limit of {MAX_IMAGE_BYTES:,} per image; "
                         "make it smaller", file=file, line=line)
    kind = image_type(data[:16])
    if kind is None:
        raise InputError(f"{what} is not a PNG, JPEG, GIF or WebP image (judged by its first bytes)",
                         file=file, line=line)
    if not _decodes(data, kind):
        raise InputError(f"{what} starts as a {_PILLOW_FORMATS[kind]} image but does not decode as one",
                         file=file, line=line)
    encoded = base64.b64encode(data).decode("ascii")
    return Image(f"data:{kind};base64,{encoded}", hashlib.sha256(data).hexdigest(), kind, len(data))


def _decodes(data: bytes, kind: str) -> bool:
    """Whether Pillow reads ``data`` through as an image of type ``kind`` (its structure and,
    where the format has them, its checksums)."""
    try:
        with PIL.Image.open(io.BytesIO(data), formats=[_PILLOW_FORMATS[kind]]) as image:
            image.verify()
    except Exception:  # Pillow's decoders raise many kinds (SyntaxError, struct.error, ...): not an image
        return False
    return True


def from_base64(data: str, what: str = "the image", *, file: str | None = None, line: int | None = None) -> Image:
    """An image from its base64 text (checked: size before decoding, then type by its bytes)."""
    text = "".join(data.split()) if any(c.isspace() for c in data) else data
    if len(text) > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise InputError(f"{what} has about {len(text) * 3 // 4:,} bytes, over the limit of {MAX_IMAGE_BYTES:,} "
                         "per image; make it smaller", file=file, line=line)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{what} is not valid base64", file=file, line=line) from None
    return _checked(raw, what, file=file, line=line)


def from_data_url(url: str, what: str = "the image", *, file: str | None = None, line: int | None = None) -> Image:
    """An image from a ``data:<type>;base64,...`` URL; the media type sent is the one its bytes show."""
    match = _DATA_URL.match(url)
    if match is None or "base64" not in [p.strip().lower() for p in match[2].split(";")]:
        raise InputError(f"{what} is a data URL that is not base64 (data:<type>;base64,...)", file=file, line=line)
    return from_base64(url[match.end():], what, file=file, line=line)


def from_url(url: str, what: str = "the image", *, file: str | None = None, line: int | None = None,
             allow_private: bool = False) -> Image:
    """A remote image: an http(s) URL passed on to the endpoint as it is (jurist never fetches it).
    Its host must not be, or resolve to, a loopback, private, link-local or reserved address
    unless ``allow_private``. Blocking (a name is resolved): call it off the event loop."""
    scheme = _SCHEME.match(url)
    if scheme is None or scheme[1].lower() not in ("http", "https"):
        raise InputError(f"{what} is not an http(s) URL", file=file, line=line)
    if len(url) > MAX_URL_CHARS or any(c.isspace() or ord(c) < 32 or c == "\\" for c in url):
        raise InputError(f"{what} URL is longer than {MAX_URL_CHARS} characters or holds spaces, backslashes or "
                         "control characters", file=file, line=line)
    try:
        host = urlsplit(url).hostname
    except ValueError:
        host = None
    if not host:
        raise InputError(f"{what} URL {_shorten(url)!r} has no host", file=file, line=line)
    if not allow_private:
        problem = _private_host(host)
        if problem is not None:
            raise InputError(f"{what} URL {_shorten(url)!r}: {problem}; a vision endpoint fetching it would reach "
                             "the network jurist runs in (allow it with allow_private_image_urls: true, "
                             "JURIST_ALLOW_PRIVATE_IMAGE_URLS=1)", file=file, line=line)
    return Image(url, hashlib.sha256(url.encode()).hexdigest())


def _not_public(address: str) -> bool:
    """Whether an IP address is loopback, private, link-local, reserved, multicast or unspecified."""
    ip = ipaddress.ip_address(address.partition("%")[0])  # an IPv6 scope (fe80::1%eth0) left out
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def _private_host(host: str) -> str | None:
    """Why a URL's host may not be fetched (None: it may): an address that is not public, or a
    name that resolves to one (or is not resolved in time). A name that does not resolve here
    names nothing of this network and is passed on."""
    try:
        return f"{host} is not a public address" if _not_public(host) else None
    except ValueError:
        pass  # a name (or a number form such as 2130706433, which the resolver reads)
    found: list[list[str] | OSError] = []

    def resolve() -> None:
        try:
            found.append([str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)])
        except (OSError, UnicodeError) as exc:
            found.append(OSError(str(exc)))

    lookup = threading.Thread(target=resolve, name="jurist-resolve", daemon=True)
    lookup.start()
    lookup.join(RESOLVE_TIMEOUT)
    if not found:
        return f"its host {host} did not resolve within {RESOLVE_TIMEOUT:g} s, so its addresses cannot be checked"
    addresses = found[0]
    if isinstance(addresses, OSError):
        return None
    private = [a for a in addresses if _not_public(a)]
    return f"its host {host} resolves to {private[0]}, not a public address" if private else None


def from_file(path: str, root: Path, what: str = "the image", *, file: str | None = None,
              line: int | None = None) -> Image:
    """An image file at ``path`` relative to ``root`` (a session's folder): refused when it
    resolves (symbolic links followed) outside ``root``, is not a regular file, is too big or
    is not an image. Blocking: call it off the event loop."""
    shown = _shorten(path)
    if not path or "\x00" in path or os.path.isabs(path) or path.startswith(("/", "\\")):
        raise InputError(f"{what} {shown!r}: an image file is named by a path relative to the session's folder",
                         file=file, line=line)
    base = root.resolve()
    target = (base / path).resolve()
    if not target.is_relative_to(base):
        raise InputError(f"{what} {shown!r} is outside the session's folder {str(base)!r}; keep images beside "
                         "the session", file=file, line=line)
    try:
        # Opened once, without following a link or waiting (a FIFO put in its place opens at
        # once); what was opened is checked and read, whatever the name points to by then.
        fd = os.open(target, os.O_RDONLY | _OPEN_FLAGS)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{what} {shown!r} is not a regular file", file=file, line=line)
            if info.st_size > MAX_IMAGE_BYTES:
                raise InputError(f"{what} {shown!r} has {info.st_size:,} bytes, over the limit of "
                                 f"{MAX_IMAGE_BYTES:,} per image; make it smaller", file=file, line=line)
            with open(fd, "rb", closefd=False) as fh:
                data = fh.read(MAX_IMAGE_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot read {what} {shown!r}: {exc.strerror}", file=file, line=line) from None
    return _checked(data, f"{what} {shown!r}", file=file, line=line)


def resolve_image(ref: str, root: Path | None, what: str = "the image", *, file: str | None = None,
                  line: int | None = None, allow_private: bool = False) -> Image:
    """An image from a reference as sessions write it: a data URL, an http(s) URL (``allow_private``
    as for :func:`from_url`), or a file path relative to ``root`` (``None``: files are refused,
    there is no folder to confine them to)."""
    scheme = _SCHEME.match(ref)
    if scheme is not None:
        name = scheme[1].lower()
        if name == "data":
            return from_data_url(ref, what, file=file, line=line)
        if name in ("http", "https"):
            return from_url(ref, what, file=file, line=line, allow_private=allow_private)
        if len(name) > 1:  # "C:" is a Windows path, refused below as absolute
            raise InputError(f"{what}: URL scheme {name!r} is not taken; use a data URL, an http(s) URL or a "
                             "file path relative to the session's folder", file=file, line=line)
    if root is None:
        raise InputError(f"{what} {_shorten(ref)!r} names a file, but this session was not read from a file; "
                         "use a data URL or an http(s) URL", file=file, line=line)
    return from_file(ref, root, what, file=file, line=line)


def image_parts(content: str | tuple[UserPart, ...], images: tuple[Image, ...] | list[Image]) -> tuple[UserPart, ...]:
    """A user message's content as parts: its text (or parts), then each image after a text part
    naming it ``[image i]`` (i from 1, as sessions number them)."""
    parts: list[UserPart] = list(content) if not isinstance(content, str) else \
        [TextPart(text=content)] if content else []
    for i, image in enumerate(images, start=1):
        parts.append(TextPart(text=f"[image {i}]"))
        parts.append(ImagePart(image_url=ImageURL(url=image.url)))
    return tuple(parts)


def attach(messages: Sequence[Message], images: tuple[Image, ...] | list[Image]) -> tuple[Message, ...]:
    """``messages`` with the images after the content of the first user message (a user message
    of its own at the end when there is none); the other messages as they are. Each adapter
    sends the image parts in its own form."""
    for i, m in enumerate(messages):
        if isinstance(m, UserMessage):
            return (*messages[:i], m.model_copy(update={"content": image_parts(m.content, images)}),
                    *messages[i + 1:])
    return (*messages, UserMessage(content=image_parts("", images)))
