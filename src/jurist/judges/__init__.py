"""Turning a model into a judge: templates, parsing, the Judge and its verdicts."""

from jurist.judges.judge import FAILED, OK, Judge, Verdict
from jurist.judges.meaning import LLMMeaningJudge
from jurist.judges.panel import Panel, PanelResult, Role, RoleResult, roles_for
from jurist.judges.parsing import ItemReply, ScoreReply, extract_json, parse_items, parse_score
from jurist.judges.templates import PromptTemplate, builtin, from_file
from jurist.judges.weighting import SCORE_MODES, weighted_score

__all__ = [
    "FAILED",
    "OK",
    "ItemReply",
    "Judge",
    "LLMMeaningJudge",
    "Panel",
    "PanelResult",
    "PromptTemplate",
    "Role",
    "RoleResult",
    "SCORE_MODES",
    "ScoreReply",
    "Verdict",
    "builtin",
    "extract_json",
    "from_file",
    "parse_items",
    "parse_score",
    "roles_for",
    "weighted_score",
]
