"""Research takes its section from the settings it is given (or loads them once): it never
opens jurist.yaml a second time behind them."""

from __future__ import annotations

from pathlib import Path

from jurist.config import Settings
from jurist.research import ResearchEvaluation, load_research_config


def test_given_settings_are_not_read_again_from_the_file(isolated: Path) -> None:
    (isolated / "jurist.yaml").write_text("research:\n  model: openai/from-the-file\n")
    given = Settings(judge="scripted/r")  # built without the file: no research section
    assert load_research_config(settings=given).model != "openai/from-the-file"
    ev = ResearchEvaluation(settings=given)
    assert ev.config.model != "openai/from-the-file" and ev.settings is given


def test_without_settings_the_file_is_read_once_into_the_runtime(isolated: Path) -> None:
    (isolated / "jurist.yaml").write_text("judge: scripted/r\nresearch:\n  model: openai/from-the-file\n")
    ev = ResearchEvaluation()
    assert ev.config.model == "openai/from-the-file"
    assert ev.settings.judge == "scripted/r" and ev.settings.research == {"model": "openai/from-the-file"}
