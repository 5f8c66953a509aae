#!/usr/bin/env bash
# A clean install of jurist alone (no extras) into a fresh venv: `jurist --help`
# works, `jurist serve` and `jurist proxy` start and answer /api/health, the
# dashboard renders (a notice naming jurist[analysis] where its charts would be),
# no GPU package and none of the analysis extra's came along, and the commands
# that need an extra (the offline judge, the statistics) say which to install.
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

python3 -m venv "$work/venv"
py="$work/venv/bin/python"
jurist="$work/venv/bin/jurist"
# built from a copy, so the checkout gets no build/ folder
git ls-files -z | tar --null -T - -cf - | (mkdir "$work/src" && tar -xf - -C "$work/src")
"$py" -m pip install -q "$work/src"

if "$py" -m pip list --format=freeze | grep -iE '^(torch|nvidia-|triton|sentence-transformers)'; then
  echo "clean install: a GPU or torch package was installed without being asked for" >&2
  exit 1
fi
if "$py" -m pip list --format=freeze | grep -iE '^(scipy|plotly|krippendorff)=='; then
  echo "clean install: a package of the analysis extra was installed without being asked for" >&2
  exit 1
fi

"$jurist" --help >/dev/null

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
health() {  # health NAME PORT: wait up to 60 s for /api/health
  "$py" - "$2" <<'EOF' || { echo "clean install: jurist $1 did not answer /api/health:" >&2; cat "$work/$1.log" >&2; exit 1; }
import json, sys, time, urllib.request
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/health", timeout=2) as r:
            assert json.load(r)["status"] == "ok"
            break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
EOF
}

# A history of synthetic evaluations for the dashboard to show (jurist.testing.synthetic).
mkdir -p "$work/serve-home"
"$py" -m jurist.testing.synthetic --database "sqlite:///$work/serve-home/jurist.db" --evaluations 60 >/dev/null
serve_port="$(free_port)"
JURIST_HOME="$work/serve-home" "$jurist" serve --port "$serve_port" >"$work/serve.log" 2>&1 &
pids+=($!)
proxy_port="$(free_port)"
# The proxy's judge is an API model here (its key given, never called): the default judge,
# local/minilm, needs the local extra, and the proxy checks its gate before it listens (below).
JURIST_HOME="$work/proxy-home" OPENAI_API_KEY=sk-clean-install "$jurist" proxy --upstream "http://127.0.0.1:9/v1" \
  --judge openai/gpt-4o-mini --port "$proxy_port" >"$work/proxy.log" 2>&1 &
pids+=($!)
health serve "$serve_port"
health proxy "$proxy_port"

# The dashboard renders without plotly: the overview's figures, a notice naming the extra where the charts were.
"$py" - "$serve_port" <<'EOF' || { echo "clean install: /evaluation did not render:" >&2; cat "$work/serve.log" >&2; exit 1; }
import html, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/evaluation?period=all", timeout=10) as r:
    assert r.status == 200 and r.headers["content-type"].startswith("text/html"), r.status
    page = html.unescape(r.read().decode())
assert 'id="m-total">60<' in page and 'id="by-kind"' in page, page[:500]
assert 'Drawing charts needs the analysis extra' in page and 'pip install "jurist[analysis]"' in page, page[:500]
EOF

examples="$("$py" -c 'import jurist, pathlib; print(pathlib.Path(jurist.__file__).parent / "examples")')"
set +e
(cd "$work" && JURIST_HOME="$work/cli-home" JURIST_JUDGE= "$jurist" evaluate --rubrics "$examples/rubrics.json" \
  --session "$examples/sessions/s1.jsonl" >"$work/evaluate.log" 2>&1)
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q 'pip install "jurist\[local\]"' "$work/evaluate.log"; then
  echo "clean install: without the local extra, jurist evaluate (exit $code) should name jurist[local]:" >&2
  cat "$work/evaluate.log" >&2
  exit 1
fi

set +e
(cd "$work" && JURIST_HOME="$work/cli-home" JURIST_JUDGE= timeout 60 "$jurist" proxy --upstream "http://127.0.0.1:9/v1" \
  --port "$(free_port)" >"$work/proxy-local.log" 2>&1)
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q 'pip install "jurist\[local\]"' "$work/proxy-local.log"; then
  echo "clean install: without the local extra, jurist proxy (exit $code) should refuse to start naming jurist[local]:" >&2
  cat "$work/proxy-local.log" >&2
  exit 1
fi

set +e
(cd "$work" && JURIST_HOME="$work/cli-home" "$jurist" calibrate --rubrics "$examples/rubrics.json" \
  --labels "$examples/labels/labels.jsonl" --sessions "$examples/labels/sessions" >"$work/calibrate.log" 2>&1)
code=$?
set -e
if [ "$code" -ne 2 ] || ! grep -q 'pip install "jurist\[analysis\]"' "$work/calibrate.log" \
    || grep -q Traceback "$work/calibrate.log"; then
  echo "clean install: without the analysis extra, jurist calibrate (exit $code) should name jurist[analysis]:" >&2
  cat "$work/calibrate.log" >&2
  exit 1
fi
echo "clean install: jurist --help, serve and proxy (/api/health), /evaluation, and the jurist[local] (evaluate," \
  "proxy) and jurist[analysis] hints all work without extras"
