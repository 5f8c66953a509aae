"""Helpers for the calibrated-gate tests: stored calibrations and labelled sessions."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from jurist.analysis.labels import LabelSet, parse_labels
from jurist.ids import new_id
from jurist.judges.calibration import JudgeIdentity
from jurist.store import Store
from jurist.store.calibrations import StoredCalibration, save_calibrations


def store_calibration(store: Store, judge: JudgeIdentity, kappa: float | None, *, n: int = 20,
                      at: datetime | None = None) -> str:
    """Store a calibration of ``judge`` with this κ (the other figures plausible); its id."""
    row = StoredCalibration(
        id=new_id(), kind="test", judge_model=judge.judge_model, template_name=judge.template_name,
        template_hash=judge.template_hash, rubric=judge.rubric, rubric_hash=judge.rubric_hash, scale="pass/fail",
        items=n, n=n, kappa=kappa, kappa_low=None, kappa_high=None, agreement=0.8, agreement_low=None,
        agreement_high=None, pass_at=0.5, threshold=None, threshold_fit=None, threshold_agreement=None,
        threshold_agreement_low=None, threshold_agreement_high=None, labels="test", figures={},
        created_at=at or datetime.now(timezone.utc))
    store.write(save_calibrations, [row])
    return row.id


def write_sessions(folder: Path, answers: dict[str, str], question: str = "Tell me about the tower.") -> Path:
    """One session file per item: a user question and the assistant's answer."""
    folder.mkdir(parents=True, exist_ok=True)
    for item, answer in answers.items():
        lines = [{"session_id": item, "role": "user", "content": question},
                 {"role": "assistant", "content": answer}]
        (folder / f"{item}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return folder


def label_set(rows: list[tuple[str, str, Any, str]], source: str = "labels.jsonl") -> LabelSet:
    """Labels from (item, rubric, label, annotator) tuples."""
    lines = [json.dumps({"item": i, "rubric": r, "label": v, "annotator": a}) for i, r, v, a in rows]
    return parse_labels(lines, source)
