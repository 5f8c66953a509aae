"""An experiment judged by the offline judge (local/minilm): item-based rubrics are scored, a free-form one
is said to be beyond it (the item fails with that reason, never a silent score)."""

import pytest

from jurist.config import Settings
from jurist.experiments.run import ExperimentSpec, run_experiment
from jurist.models import script
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store

from tests.experiments.runs import add_dataset

pytestmark = pytest.mark.slow

ITEMS = Rubric(id="photo", name="Photosynthesis", items=[
    {"id": "sunlight", "text": "Plants use energy from sunlight to make sugar.", "points": 2},
    {"id": "soil", "text": "Plants get their food by eating soil.", "points": -2},
])
ANSWERS = {"good": "Plants capture energy from sunlight and use it to build sugar from water and carbon dioxide.",
           "bad": "Plants feed by eating the soil around their roots."}


async def test_the_offline_judge_scores_item_rubrics_and_says_what_it_cannot(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, [{"id": k, "input": f"How do plants make food? ({k})"} for k in ANSWERS])
    script("plants", default=lambda request: ANSWERS[request.messages[-1].text.split("(")[-1].rstrip(")")])
    spec = ExperimentSpec(name="offline", dataset="qa", target="scripted/plants", judge="local/minilm",
                          rubrics=RubricSet(rubrics=[ITEMS]), parallel=1, output_dir=tmp_path / "out")
    report = await run_experiment(spec, settings=Settings.load(database_url=url))
    assert report.record.judge_models == ["local/minilm"] and report.record.items_scored == 2
    with Store(url) as store:
        items = {i.item_id: i for i in store.experiment_items("offline")}
    assert items["good"].scores["photo"].score > items["bad"].scores["photo"].score
    assert items["good"].passed is True and items["bad"].passed is False

    free = RubricSet(rubrics=[ITEMS, Rubric(id="free", name="Free-form", scoring_criteria="1 = poor, 5 = great")])
    spec = ExperimentSpec(name="offline-free", dataset="qa", target="scripted/plants", judge="local/minilm",
                          rubrics=free, parallel=1, output_dir=tmp_path / "out2")
    report = await run_experiment(spec, settings=Settings.load(database_url=url))
    assert report.record.items_failed == 2 and report.exit_code == 1
    with Store(url) as store:
        good = {i.item_id: i for i in store.experiment_items("offline-free")}["good"]
    assert good.status == "failed" and "rubric free: the local judge cannot score free-form rubric free" in good.error
    assert good.scores["photo"].status == "scored" and good.scores["free"].score is None
