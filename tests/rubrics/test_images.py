"""Sessions with images: a vision judge (visual_evaluator) is sent them, any other judge reads
placeholders and the result says so; bad image inputs are input errors; records hold no bytes."""

from __future__ import annotations

import base64
import json

import pytest

from jurist.config import Settings
from jurist.errors import InputError
from jurist.rubrics import evaluate, evaluate_batch, load_session
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.sessions import MAX_SESSION_IMAGES
from jurist.store import Store
from jurist.testing import Reply

from tests.images import GIF, data_url, png
from tests.rubrics.test_against_server import settings_for

ONE = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c")])
ITEMS = RubricSet(rubrics=[Rubric(id="b", name="B", items=[{"id": "shows", "text": "shows a chart", "points": 1}])])
CHART = "https://example.com/chart.png"


def write_session(folder, name: str = "shot", parts: list | None = None):
    """A session whose assistant turn holds a file image, a remote image and a base64 block."""
    (folder / "shots").mkdir(parents=True, exist_ok=True)
    (folder / "shots" / "a.png").write_bytes(png())
    parts = parts if parts is not None else [
        {"type": "text", "text": "Here is the chart."},
        {"type": "image_url", "image_url": {"url": "shots/a.png"}},
        {"type": "image_url", "image_url": {"url": CHART}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif",
                                     "data": base64.b64encode(GIF).decode()}},
    ]
    path = folder / f"{name}.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "Plot it."}) + "\n"
                    + json.dumps({"role": "assistant", "content": parts}) + "\n")
    return path


def test_a_sessions_images_are_numbered_placeholders_with_their_data(tmp_path):
    s = load_session(write_session(tmp_path))
    assert s.messages[1].content == (
        f"Here is the chart.\n[image 1: image/png, {len(png()):,} bytes]\n[image 2: remote image {CHART}]\n"
        f"[image 3: image/gif, {len(GIF):,} bytes]")
    assert [i.media_type for i in s.images] == ["image/png", None, "image/gif"]
    assert s.images[0].url == data_url(png())


@pytest.mark.parametrize("part, message", [
    ({"type": "image_url", "image_url": {"url": "../outside.png"}}, "outside the session's folder"),
    ({"type": "image_url", "image_url": {"url": "notes.txt"}}, "is not a PNG, JPEG, GIF or WebP image"),
    ({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, "scheme 'file' is not taken"),
    ({"type": "image_url", "image_url": {}}, "has no url"),
    ({"type": "image", "source": {"type": "file", "file_id": "f1"}}, "needs a source of type base64"),
])
def test_bad_images_are_input_errors_with_file_and_line(tmp_path, part, message):
    (tmp_path / "s").mkdir()
    (tmp_path / "outside.png").write_bytes(png())
    (tmp_path / "s" / "notes.txt").write_text("not an image")
    path = write_session(tmp_path / "s", parts=[part])
    with pytest.raises(InputError, match=message) as info:
        load_session(path)
    assert (info.value.file, info.value.line) == (str(path), 2)


def test_an_oversized_file_is_refused(tmp_path, monkeypatch):
    from jurist.models import images

    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 64)
    path = write_session(tmp_path, parts=[{"type": "image_url", "image_url": {"url": "shots/a.png"}}])
    (tmp_path / "shots" / "a.png").write_bytes(png(20, 20))
    with pytest.raises(InputError, match="over the limit of 64 per image"):
        load_session(path)


def test_a_session_holds_a_bounded_number_of_images(tmp_path):
    parts = [{"type": "image_url", "image_url": {"url": "shots/a.png"}}] * (MAX_SESSION_IMAGES + 1)
    with pytest.raises(InputError, match=f"more than {MAX_SESSION_IMAGES} images"):
        load_session(write_session(tmp_path, parts=parts))


async def test_the_visual_evaluator_is_sent_the_images(provider, tmp_path):
    provider.default = Reply(text='{"score": 4, "reasoning": "the chart is clear"}')
    s = settings_for(provider, visual_evaluator="fake/vision-1")
    result = await evaluate(ONE, write_session(tmp_path), judge="fake/judge-1", settings=s)
    assert result["rubric_scores"][0]["score"] == 4.0
    assert result["judge_model"] == "fake/vision-1" == result["rubric_scores"][0]["judge_model"]
    assert result["images"] == {"count": 3, "judge_model": "fake/vision-1"}
    [request] = provider.requests
    body = request["json"]
    assert body["model"] == "vision-1"
    user = body["messages"][1]["content"]
    assert user[0]["type"] == "text" and "<chat_session>" in user[0]["text"]
    assert user[1:] == [
        {"type": "text", "text": "[image 1]"}, {"type": "image_url", "image_url": {"url": data_url(png())}},
        {"type": "text", "text": "[image 2]"}, {"type": "image_url", "image_url": {"url": CHART}},
        {"type": "text", "text": "[image 3]"}, {"type": "image_url", "image_url": {"url": data_url(GIF, "image/gif")}},
    ]

    # A session without images goes to the judge, as text.
    text_only = tmp_path / "plain.jsonl"
    text_only.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    result = await evaluate(ONE, text_only, judge="fake/judge-1", settings=s)
    assert result["judge_model"] == "fake/judge-1" and "images" not in result
    body = provider.requests[-1]["json"]
    assert body["model"] == "judge-1" and all(isinstance(m["content"], str) for m in body["messages"])


async def test_item_rubrics_send_the_images_too(provider, tmp_path):
    provider.default = Reply(text='{"items": [{"id": "shows", "met": true, "reasoning": "it does"}]}')
    s = settings_for(provider, visual_evaluator="fake/vision-1")
    result = await evaluate(ITEMS, write_session(tmp_path), judge="fake/judge-1", settings=s)
    assert result["rubric_scores"][0]["items"][0]["met"] is True
    body = provider.requests[0]["json"]
    assert body["model"] == "vision-1"
    assert [p["type"] for p in body["messages"][-1]["content"]].count("image_url") == 3


async def test_a_judge_without_vision_reads_placeholders_and_the_result_says_so(provider, tmp_path):
    provider.default = Reply(text='{"score": 2, "reasoning": "cannot see the chart"}')
    result = await evaluate(ONE, write_session(tmp_path), judge="fake/judge-1", settings=settings_for(provider))
    assert result["judge_model"] == "fake/judge-1"
    assert result["images"]["count"] == 3
    assert result["images"]["not_seen"].startswith("3 image(s) not seen by the judge")
    body = provider.requests[0]["json"]
    assert all(isinstance(m["content"], str) for m in body["messages"])
    assert f"[image 1: image/png, {len(png()):,} bytes]" in body["messages"][1]["content"]
    assert base64.b64encode(png()).decode() not in json.dumps(body)


async def test_anthropic_vision_judge_gets_image_blocks(provider, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    provider.default = Reply(text='{"score": 5, "reasoning": "fine"}')
    s = Settings.load(providers={"anthropic": {"base_url": provider.anthropic_base_url}},
                      visual_evaluator="anthropic/claude-haiku-4-5")
    result = await evaluate(ONE, write_session(tmp_path), judge="local/minilm", settings=s)
    assert result["rubric_scores"][0]["score"] == 5.0
    [request] = provider.requests
    content = request["json"]["messages"][0]["content"]
    assert content[2] == {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                      "data": base64.b64encode(png()).decode()}}
    assert content[4] == {"type": "image", "source": {"type": "url", "url": CHART}}
    assert content[6]["source"]["media_type"] == "image/gif"


async def test_records_describe_images_and_the_cache_tells_images_apart(provider, tmp_path):
    provider.default = Reply(text='{"score": 3, "reasoning": "ok"}')
    s = settings_for(provider, visual_evaluator="fake/vision-1")
    sessions = tmp_path / "sessions"
    write_session(sessions, "first")
    await evaluate_batch(ONE, sessions, tmp_path / "out", judge="fake/judge-1", settings=s)
    await evaluate_batch(ONE, sessions, tmp_path / "out", judge="fake/judge-1", settings=s, force=True)
    assert len(provider.requests) == 1  # the same images: answered from the cache
    (sessions / "shots" / "a.png").write_bytes(png(rgb=(0, 0, 255)))  # same text, another picture
    await evaluate_batch(ONE, sessions, tmp_path / "out", judge="fake/judge-1", settings=s, force=True)
    assert len(provider.requests) == 2

    store = Store(s.database)
    calls = store.calls(limit=None, purpose="rubric_judge")
    store.close()
    assert len(calls) == 3 and [c["cached"] for c in calls].count(True) == 1
    for call in calls:
        recorded = json.dumps(call, default=str)
        assert base64.b64encode(png()).decode() not in recorded and "base64," not in recorded
        described = call["params"]["images"]
        assert [d.get("media_type") for d in described] == ["image/png", None, "image/gif"]
        assert described[1] == {"url": CHART, "sha256": described[1]["sha256"]}
        assert len(recorded) < 20_000
    assert calls[0]["params"]["images"][0]["sha256"] != calls[-1]["params"]["images"][0]["sha256"]


async def test_posted_sessions_take_data_urls_but_no_files(tmp_path):
    from jurist.rubrics import parse_session

    lines = [json.dumps({"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url(png())}}]})]
    assert parse_session(lines, "body", "posted").images[0].media_type == "image/png"
    lines = [json.dumps({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "a.png"}}]})]
    with pytest.raises(InputError, match="not read from a file"):
        parse_session(lines, "body", "posted")


def test_a_visual_evaluator_that_reads_no_images_is_a_config_error():
    from jurist.errors import ConfigError
    from jurist.rubrics import build_judge

    with pytest.raises(ConfigError, match="visual_evaluator local/minilm reads no images"):
        build_judge(Settings.load(visual_evaluator="local/minilm"), judge="local/minilm")


def test_the_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("JURIST_VISUAL_EVALUATOR", "ollama/qwen3-vl:8b")
    assert Settings.load().visual_evaluator == "ollama/qwen3-vl:8b"
