"""What a fresh install costs: `jurist --help`, the first local judgement, the venv.

    python benchmarks/startup.py                   # install "jurist[local]" into a fresh venv, measure there
    python benchmarks/startup.py --venv DIR        # measure in an existing venv (where jurist is installed)
    python benchmarks/startup.py --keep DIR        # install into DIR and leave it there

The fresh venv gets ``pip install "<checkout>[local]"`` (a regular install, not
an editable one) from a copy of the tracked files, with the pip configured
on the machine. Then, in that venv:

* venv size: the folder's size on disk (``du``), with the biggest packages,
  and any GPU or torch package that came along (there should be none);
* ``jurist --help``: wall time of the whole process, median of ``--runs``;
* first local judgement: a fresh ``python`` process that imports jurist and
  asks the local judge one ``expresses`` question (model load included), wall
  time of the whole process, median of ``--runs``; and the same through the
  command line, ``jurist evaluate`` of a bundled example session with the
  bundled item-based rubrics (settings, store, model load, three rubrics).

Targets (docs/benchmarks.md): venv under 400 MB with no GPU package, `jurist
--help` within 0.4 s, first local judgement within 1 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU_PACKAGES = ("torch", "nvidia-", "triton", "cuda-", "sentence-transformers", "transformers")

FIRST_JUDGEMENT = """\
import asyncio
from jurist.errors import Uncertain
from jurist.models.local import get_local_judge

try:  # timed, not judged: the verdict (or a declined one) is the accuracy benchmark's business
    asyncio.run(get_local_judge().expresses(
        "Caffeine occupies the adenosine receptors, so adenosine cannot make you sleepy.",
        ["Caffeine keeps you awake by blocking adenosine receptors."]))
except Uncertain:
    pass
"""


def install(venv: Path) -> float:
    """A fresh venv with jurist[local] from a copy of the tracked files; returns the seconds it took."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "jurist"
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
        for name in filter(None, files.decode().split("\0")):
            target = src / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / name).is_symlink() or (ROOT / name).is_file():  # src/jurist/examples is a symlink
                shutil.copy2(ROOT / name, target, follow_symlinks=False)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{src}[local]"], check=True,
                       stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def size_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0]) / 1024


def packages(venv: Path) -> list[str]:
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"], check=True,
                         capture_output=True, text=True).stdout
    return [line.split("==")[0] for line in out.splitlines() if line]


def biggest(venv: Path, count: int = 8) -> list[tuple[str, float]]:
    site = next((venv / "lib").glob("python3*/site-packages"))
    sizes = [(p.name, size_mb(p)) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return sorted(sizes, key=lambda s: -s[1])[:count]


def timed(cmd: list[str], runs: int, env: dict[str, str], cwd: Path, ok: tuple[int, ...] = (0,)) -> list[float]:
    """Wall times of ``runs`` runs of ``cmd``; SystemExit when one exits with a code not in ``ok``."""
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
        if done.returncode not in ok:
            raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return walls


def show(label: str, walls: list[float]) -> None:
    print(f"{label}: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}, "
          f"{len(walls)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, help="measure in this venv instead of installing a fresh one")
    parser.add_argument("--keep", type=Path, help="install the fresh venv here and keep it")
    parser.add_argument("--runs", type=int, default=7, help="runs of each timing (default 7)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        venv = args.venv or args.keep or work / "venv"
        if args.venv is None:
            seconds = install(venv)
            print(f"fresh venv: pip install \"jurist[local]\" took {seconds:.0f} s")
        names = packages(venv)
        gpu = [n for n in names if n.lower().startswith(GPU_PACKAGES)]
        print(f"venv size: {size_mb(venv):.0f} MB, {len(names)} packages; "
              f"GPU or torch packages: {', '.join(gpu) if gpu else 'none'}")
        print("  biggest: " + ", ".join(f"{name} {mb:.0f} MB" for name, mb in biggest(venv)))

        env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
        env.update(JURIST_HOME=str(work / "home"), COLUMNS="120", PYTHONPATH="")
        bin_dir = venv / "bin"
        python = str(bin_dir / "python")
        timed([python, "-c", "import jurist"], 1, env, work)  # compile nothing later: pip already did
        show("jurist --help", timed([str(bin_dir / "jurist"), "--help"], args.runs, env, work))
        show("first local judgement (python: import, load, one expresses call)",
             timed([python, "-c", FIRST_JUDGEMENT], args.runs, env, work))
        examples = subprocess.run([python, "-c", "import jurist, pathlib; print(pathlib.Path(jurist.__file__).parent"
                                   " / 'examples')"], env=env, check=True, capture_output=True, text=True).stdout
        ex = Path(examples.strip())
        # timed, not judged, as above: exit 1 is a rubric the local judge declined (docs/cli.md, exit codes)
        show("first local judgement (jurist evaluate s1.jsonl, 3 rubrics, local/minilm)",
             timed([str(bin_dir / "jurist"), "evaluate", "--rubrics", str(ex / "rubrics.json"), "--session",
                    str(ex / "sessions" / "s1.jsonl"), "--output", str(work / "result.json")],
                   max(3, args.runs // 2), env, work, ok=(0, 1)))


if __name__ == "__main__":
    main()
