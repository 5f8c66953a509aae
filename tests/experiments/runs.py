"""What the experiment tests share: a dataset in the store, settings for the scripted server, its replies."""

import json

from jurist.config import Settings
from jurist.experiments.datasets import read_dataset
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store
from jurist.testing import Reply

RUBRICS = RubricSet(rubrics=[Rubric(id="correct", name="Correct", scoring_criteria="1 wrong .. 5 right"),
                             Rubric(id="clear", name="Clear", scoring_criteria="1 muddled .. 5 clear")])
RUBRICS_JSON = {"version": "1.0", "rubrics": [r.model_dump(exclude_none=True) for r in RUBRICS.rubrics]}


def questions(n):
    return [{"id": f"q{i:03d}", "input": f"Question {i}?", "expected": f"Answer {i}"} for i in range(n)]


def add_dataset(url, folder, rows, name="qa"):
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    dataset = read_dataset(path)
    with Store(url) as store:
        store.add_dataset_version(name, dataset.version, dataset.items, str(path))
    return dataset


def settings_for(server, url, **kw):
    return Settings.load(providers={"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k"}},
                         database_url=url, backoff_base=0.01, backoff_max=0.05, **kw)


def question_of(body):
    """The last user turn of a request: the item's question (the target's request) or the judge's prompt."""
    return body["messages"][-1]["content"]


def replies(answers=None, score=4, fail=()):
    """The server's replies: the target (model ``app``) answers each question (``answers[question]``, else
    ``Answer to <question>``), with a 500 for questions in ``fail``; the judge (any other model) gives ``score``."""
    answers = answers or {}

    def respond(body):
        if body.get("model") == "app":
            q = question_of(body)
            if q in fail:
                return Reply(status=500)
            return Reply(text=answers.get(q, f"Answer to {q}"))
        return Reply(text=json.dumps({"score": score, "reasoning": "fine"}))

    return respond


def target_requests(server):
    return [r for r in server.requests if (r["json"] or {}).get("model") == "app"]


def judge_requests(server):
    return [r for r in server.requests if (r["json"] or {}).get("model") not in (None, "app")]
