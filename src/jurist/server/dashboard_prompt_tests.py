"""The prompt lab's A/B test page: the test's configuration, the calls each version had, the
running comparison (means, difference with its confidence interval, the t-test, the verdict)
and a button that ends it. The prompt page (:mod:`jurist.server.dashboard`) shows the prompt's
route and starts tests; both write through the API (``/api/prompt-tests``), so the guard's
rules hold. Without the ``analysis`` extra the page shows the counts and names the extra."""

from __future__ import annotations

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from jurist.errors import NotFound
from jurist.server.dashboard import not_found, render
from jurist.server.state import get_state

router = APIRouter(prefix="/evaluation", include_in_schema=False)


@router.get("/prompts/{name}/tests/{test_id}", response_class=HTMLResponse)
async def test_page(request: Request, name: str, test_id: str = Path(max_length=32)) -> HTMLResponse:
    from jurist.analysis import ab_report

    state = get_state(request)
    try:
        report = await ab_report(state.store, test_id)
    except NotFound:
        return not_found(request, f"No A/B test {test_id!r}.")
    if report.prompt != name:
        return not_found(request, f"Test {test_id!r} is not a test of {name!r}.")
    if not report.running and state.runtime.prompts is not None:
        state.runtime.prompts.forget()
    return render(request, "prompt_test.html", {"active": "prompts", "test": report,
                                                "token_required": bool(state.settings.api_token)})


__all__ = ["router"]
