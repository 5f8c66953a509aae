"""Images as an attacker sends them: a FIFO swapped in for an image file (the batch once hung on its
open), a PNG header followed by HTML, and http(s) URLs at loopback or private addresses that a
vision endpoint would fetch from inside the operator's network."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.errors import InputError
from jurist.models.images import from_base64, from_file, from_url, resolve_image
from jurist.rubrics.sessions import load_session
from jurist.server import create_app
from jurist.testing import Reply

from tests.faults.harness import RUBRICS
from tests.images import png

posix = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


def _within(seconds: float, fn, *args):
    """``fn(*args)``'s value or exception, run in a thread that must end within ``seconds``."""
    out: list = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    worker = threading.Thread(target=run, daemon=True)  # a hung open cannot keep the test run alive
    worker.start()
    worker.join(seconds)
    assert out, f"{getattr(fn, '__name__', fn)} did not return within {seconds} s"
    return out[0]


@posix
def test_a_fifo_in_place_of_an_image_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "chart.png")
    (tmp_path / "s.jsonl").write_text(json.dumps({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "chart.png"}}]}) + "\n")
    failed = _within(1.0, load_session, tmp_path / "s.jsonl")
    assert isinstance(failed, InputError) and "'chart.png' is not a regular file" in str(failed), failed


# Swaps a regular image and a FIFO under one name as fast as it can, from another process.
SWAPPER = textwrap.dedent("""
    import os, sys
    folder = sys.argv[1]
    name, image, fifo = (os.path.join(folder, n) for n in ("chart.png", "image.src", "fifo.src"))
    while True:
        for source in (image, fifo):
            os.link(source, name + ".new")
            os.replace(name + ".new", name)
""")
# Reads the image again and again for two seconds; prints what it saw.
READER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from jurist.errors import InputError
    from jurist.models.images import from_file
    seen = {"image": 0, "refused": 0}
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        try:
            from_file("chart.png", Path(sys.argv[1]))
            seen["image"] += 1
        except InputError:
            seen["refused"] += 1
    print(json.dumps(seen))
""")


@posix
def test_an_image_swapped_for_a_fifo_between_check_and_open_never_hangs(tmp_path):
    """Before, the file was checked by name, then opened by name: a FIFO put there in between
    blocked the open for good (a 400-session batch hung 858 s and ignored SIGTERM)."""
    (tmp_path / "image.src").write_bytes(png())
    os.mkfifo(tmp_path / "fifo.src")
    (tmp_path / "chart.png").write_bytes(png())
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(tmp_path)])
    try:
        reader = subprocess.run([sys.executable, "-c", READER, str(tmp_path)], capture_output=True, text=True,
                                timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("reading an image that is swapped for a FIFO hung")
    finally:
        swapper.kill()
        swapper.wait()
    assert reader.returncode == 0, reader.stderr[-2000:]
    seen = json.loads(reader.stdout)
    assert seen["image"] > 0 and seen["refused"] > 0, seen  # both were met


HTML = b"\x89PNG\r\n\x1a\n<html><body><script>alert(1)</script></body></html>"


@pytest.mark.parametrize("data", [
    HTML,
    png()[:40],  # cut short
    png()[:-8] + b"XXXX" + png()[-4:],  # its end chunk's checksum wrong
    b"GIF89a" + b"<svg onload=alert(1)>",
    b"\xff\xd8\xff\xe0" + b"<html></html>",
])
def test_an_image_header_before_other_bytes_is_not_an_image(tmp_path, data):
    with pytest.raises(InputError, match="does not decode as one"):
        from_base64(base64.b64encode(data).decode())
    (tmp_path / "x.png").write_bytes(data)
    with pytest.raises(InputError, match="'x.png' starts as a .* image but does not decode as one"):
        from_file("x.png", tmp_path)


def test_real_images_still_decode(tmp_path):
    assert from_base64(base64.b64encode(png(3, 2)).decode()).media_type == "image/png"
    chart = Path(__file__).parents[2] / "examples" / "images" / "chart.png"
    assert from_file(chart.name, chart.parent).media_type == "image/png"


PRIVATE = ["http://127.0.0.1/x.png", "http://127.1.2.3:8080/x.png", "https://localhost/x.png",
           "http://10.0.0.7/x.png", "http://192.168.1.1/x.png", "http://172.16.0.1/x.png",
           "http://169.254.169.254/latest/meta-data/", "http://[::1]/x.png", "http://[::ffff:127.0.0.1]/x.png",
           "http://[fe80::1]/x.png", "http://0.0.0.0/x.png", "http://2130706433/x.png", "http://0x7f000001/x.png",
           "http://user@127.0.0.1/x.png", "http://100.64.0.1/x.png", "http://[fd00::1]/x.png"]


@pytest.mark.parametrize("url", PRIVATE)
def test_an_image_url_at_a_private_address_is_refused_unless_allowed(url):
    with pytest.raises(InputError, match="allow_private_image_urls"):
        from_url(url)
    with pytest.raises(InputError, match="allow_private_image_urls"):
        resolve_image(url, None)
    assert from_url(url, allow_private=True).url == url


@pytest.mark.parametrize("url", ["http://127.0.0.1\\@example.com/x.png", "http:///x.png"])
def test_an_image_url_that_fetchers_read_differently_is_refused(url):
    with pytest.raises(InputError):
        from_url(url, allow_private=True)


def test_a_public_address_is_passed_on():
    assert from_url("http://93.184.216.34/x.png").remote
    assert from_url("https://[2606:2800:220:1:248:1893:25c8:1946]/x.png").remote


def _app(tmp_path, provider, **settings):
    built = Settings.load(home=str(tmp_path / ".jurist"), judge="fake/judge-1",
                          providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                          **settings)
    return TestClient(create_app(built), base_url="http://localhost", raise_server_exceptions=False)


def test_the_operator_allows_private_image_urls_by_a_setting(tmp_path, provider, monkeypatch):
    provider.default = Reply(text='{"score": 4, "reasoning": "clear"}')
    session = [{"role": "user", "content": [{"type": "text", "text": "What is on this chart?"},
                                            {"type": "image_url", "image_url": {"url": "http://10.1.2.3/c.png"}}]},
               {"role": "assistant", "content": "Sign-ups, by day."}]
    body = {"rubrics": RUBRICS, "session": session}
    with _app(tmp_path, provider) as c:
        refused = c.post("/api/evaluate", json=body)
    assert refused.status_code == 422 and "10.1.2.3 is not a public address" in refused.json()["detail"]
    assert provider.requests == []
    monkeypatch.setenv("JURIST_ALLOW_PRIVATE_IMAGE_URLS", "1")
    assert Settings.load().allow_private_image_urls is True
    with _app(tmp_path, provider, allow_private_image_urls=True) as c:
        taken = c.post("/api/evaluate", json=body)
    assert taken.status_code == 200, taken.text[:500]
