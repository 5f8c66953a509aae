"""Images read from untrusted input: types by their bytes, bounds, paths confined to a folder."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from jurist.errors import InputError
from jurist.models import images
from jurist.models.images import (from_base64, from_data_url, from_file, from_url, image_type,
                                  resolve_image)

from tests.images import GIF, JPEG_HEAD, WEBP_HEAD, data_url, png


def test_types_are_known_by_their_first_bytes() -> None:
    assert image_type(png()) == "image/png"
    assert image_type(JPEG_HEAD) == "image/jpeg"
    assert image_type(GIF) == "image/gif"
    assert image_type(WEBP_HEAD) == "image/webp"
    assert image_type(b"<svg xmlns=...>") is None and image_type(b"%PDF-1.7") is None


def test_a_data_url_is_checked_and_sent_with_the_type_its_bytes_show() -> None:
    raw = png(2, 2)
    image = from_data_url(data_url(raw, "image/jpeg"))  # the declared type is wrong
    assert image.media_type == "image/png" and image.url.startswith("data:image/png;base64,")
    assert base64.b64decode(image.base64_data) == raw
    assert image.describe() == {"media_type": "image/png", "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    assert image.label() == f"image/png, {len(raw):,} bytes"


@pytest.mark.parametrize("url, message", [
    ("data:image/png,notbase64", "not base64"),
    ("data:image/png;base64,@@@@", "not valid base64"),
    (data_url(b"%PDF-1.7 not an image"), "not a PNG, JPEG, GIF or WebP image"),
])
def test_bad_data_urls_are_input_errors(url: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        from_data_url(url, file="s.jsonl", line=3)


def test_an_oversized_image_is_refused_before_it_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 1000)
    with pytest.raises(InputError, match="over the limit of 1,000 per image") as info:
        from_base64(base64.b64encode(png() + b"\x00" * 2000).decode(), file="s.jsonl", line=2)
    assert (info.value.file, info.value.line) == ("s.jsonl", 2)


def test_a_remote_url_is_passed_on_never_fetched() -> None:
    image = from_url("https://example.com/chart.png")
    assert image.remote and image.url == "https://example.com/chart.png" and image.media_type is None
    assert image.describe() == {"url": "https://example.com/chart.png",
                                "sha256": hashlib.sha256(b"https://example.com/chart.png").hexdigest()}
    with pytest.raises(InputError, match="longer than"):
        from_url("https://example.com/" + "a" * 3000)
    with pytest.raises(InputError, match="not an http"):
        from_url("ftp://example.com/a.png")


def test_files_are_read_from_the_folder_with_bounds(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "a.png").write_bytes(png())
    assert from_file("shots/a.png", tmp_path).media_type == "image/png"
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="'notes.txt' is not a PNG"):
        from_file("notes.txt", tmp_path)
    with pytest.raises(InputError, match="not a regular file"):
        from_file("shots", tmp_path)
    with pytest.raises(InputError, match="cannot read the image 'missing.png'"):
        from_file("missing.png", tmp_path)
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 100)
    (tmp_path / "big.png").write_bytes(png() + b"\x00" * 200)
    with pytest.raises(InputError, match="over the limit of 100 per image"):
        from_file("big.png", tmp_path)


def test_files_outside_the_folder_are_refused(tmp_path) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    (tmp_path / "secret.png").write_bytes(png())
    with pytest.raises(InputError, match="outside the session's folder"):
        from_file("../secret.png", root)
    os.symlink(tmp_path / "secret.png", root / "link.png")
    with pytest.raises(InputError, match="outside the session's folder"):
        from_file("link.png", root)
    with pytest.raises(InputError, match="relative to the session's folder"):
        from_file(str(tmp_path / "secret.png"), root)


def test_references_as_sessions_write_them(tmp_path) -> None:
    (tmp_path / "a.png").write_bytes(png())
    assert resolve_image("a.png", tmp_path).size == len(png())
    assert resolve_image("http://example.com/x.png", None).remote
    assert resolve_image(data_url(GIF, "image/gif"), None).media_type == "image/gif"
    with pytest.raises(InputError, match="scheme 'file' is not taken"):
        resolve_image("file:///etc/passwd", tmp_path)
    with pytest.raises(InputError, match="not read from a file"):
        resolve_image("a.png", None)

