#!/usr/bin/env bash
# The whole test suite, from a bare machine: the Python environment, then (as root on Debian) the
# Docker engine and the offline sandbox image, then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,dev,all]'
bash scripts/install-test-servers.sh   # real third-party servers for tests/test_thirdparty_*.py
if [ "$(id -u)" = 0 ] && [ "${ATC_SKIP_DOCKER_SETUP:-0}" != 1 ]; then
  bash scripts/setup-docker.sh
fi
# openssl makes the certificate of a test's https server (tests/test_startup.py); a bare image may lack it.
if [ "$(id -u)" = 0 ] && ! command -v openssl >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  apt-get install -y -q --no-install-recommends openssl >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends openssl >/dev/null; }
fi
# Lint and types first (fast), so that the last line printed is pytest's summary.
.venv/bin/ruff check --quiet .
.venv/bin/mypy --strict --no-error-summary atc protocols sandbox probes
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
