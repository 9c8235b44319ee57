#!/usr/bin/env bash
# The README's first command. On a fresh machine (Python 3.11+):
#   1. creates .venv at the repo root and installs atc into it (only when missing);
#   2. serves the bundled example API (atc/examples/bookshop) offline with `atc mock`;
#   3. runs the bundled example program against it with `atc run` (no model needed);
#   4. runs the main job, `atc solve`, on the same API: with no model configured it says what to set.
# Exits 0 when step 3 worked (a missing model is not a failure of the quickstart), 1 otherwise.
# Options: --skip-install (never create or install .venv), --sandbox docker|local (for run and solve).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

SKIP_INSTALL=0
SANDBOX_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-install) SKIP_INSTALL=1 ;;
    --sandbox) shift; SANDBOX_ARGS=(--sandbox "${1:?--sandbox needs docker or local}") ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "quickstart: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

ATC="$ROOT/.venv/bin/atc"
if [ ! -x "$ATC" ]; then
  if [ "$SKIP_INSTALL" = 1 ]; then
    echo "quickstart: $ATC is missing; run without --skip-install to create .venv" >&2
    exit 1
  fi
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "quickstart: atc needs Python 3.11 or newer as python3 (found: $(python3 --version 2>&1 || echo none))" >&2
    exit 1
  fi
  echo "== setting up .venv (one time)"
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -e .
fi

SPEC="$ROOT/atc/examples/bookshop/openapi.json"
PROGRAM="$ROOT/atc/examples/bookshop/program.py"
QUESTION="What is the cheapest book about gardens, who wrote it, and which shop has the most copies?"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/atc-quickstart.XXXXXX")"
MOCK_PID=""

cleanup() {
  if [ -n "$MOCK_PID" ] && kill -0 "$MOCK_PID" 2>/dev/null; then
    kill -TERM "$MOCK_PID" 2>/dev/null || true
    wait "$MOCK_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== atc mock $SPEC"
"$ATC" mock "$SPEC" --port 0 --json >"$WORK/mock.json" 2>"$WORK/mock.err" &
MOCK_PID=$!
URL=""
for _ in $(seq 1 150); do
  if [ -s "$WORK/mock.json" ]; then
    URL="$("$ROOT/.venv/bin/python" -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["url"])' \
      "$WORK/mock.json" 2>/dev/null || true)"
    [ -n "$URL" ] && break
  fi
  if ! kill -0 "$MOCK_PID" 2>/dev/null; then
    echo "quickstart: atc mock did not start:" >&2
    cat "$WORK/mock.err" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "quickstart: atc mock did not report its URL within 15 s" >&2
  exit 1
fi
echo "serving the bookshop example API on $URL (pid $MOCK_PID)"

echo
echo "== atc run $PROGRAM (no model needed)"
RUN_OK=0
if "$ATC" run "$PROGRAM" --tools "$SPEC" --base-url "$URL" ${SANDBOX_ARGS[@]+"${SANDBOX_ARGS[@]}"}; then
  RUN_OK=1
fi

echo
echo "== atc solve \"$QUESTION\""
set +e
"$ATC" solve "$QUESTION" --tools "$SPEC" --base-url "$URL" ${SANDBOX_ARGS[@]+"${SANDBOX_ARGS[@]}"}
SOLVE_RC=$?
set -e
if [ -z "${ATC_MODEL:-}" ] || [ -z "${OPENAI_API_KEY:-}${OPENAI_BASE_URL:-}" ]; then
  cat <<'EOF'

quickstart: `atc solve` needs a model, and none is configured. Set, for example:
  export OPENAI_API_KEY=sk-...                        # api.openai.com, or:
  export OPENAI_BASE_URL=http://localhost:11434/v1    # any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio)
  export ATC_MODEL=<model name>                       # e.g. gpt-4o-mini, or qwen2.5-coder:7b on Ollama
then run this script again.
EOF
elif [ "$SOLVE_RC" != 0 ]; then
  echo "quickstart: atc solve did not solve the task (exit $SOLVE_RC); see the lines above"
fi

echo
if [ "$RUN_OK" = 1 ]; then
  echo "quickstart: ok (atc run worked against the offline example API)"
  exit 0
fi
echo "quickstart: atc run of the example program failed; see the error above" >&2
exit 1
