#!/usr/bin/env bash
# A clean install of jurist alone (no extras) into a fresh venv: `jurist --help`
# works, `jurist serve` and `jurist proxy` start and answer /api/health, no GPU
# package came along, and a command that needs the offline judge says which
# extra to install.
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

serve_port="$(free_port)"
JURIST_HOME="$work/serve-home" "$jurist" serve --port "$serve_port" >"$work/serve.log" 2>&1 &
pids+=($!)
proxy_port="$(free_port)"
JURIST_HOME="$work/proxy-home" "$jurist" proxy --upstream "http://127.0.0.1:9/v1" --port "$proxy_port" \
  >"$work/proxy.log" 2>&1 &
pids+=($!)
health serve "$serve_port"
health proxy "$proxy_port"

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
echo "clean install: jurist --help, serve and proxy (/api/health), and the jurist[local] hint all work without extras"
