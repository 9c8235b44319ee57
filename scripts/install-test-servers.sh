#!/usr/bin/env bash
# Real third-party servers that tests run against (tests/test_thirdparty_*.py), installed from PyPI
# into their own venv (.cache/servers) so that their dependencies never mix with atc's. Idempotent
# and quiet; a server that cannot be installed only makes its tests skip (they say why).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/servers
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import jupyter_server" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check 'jupyter_server>=2,<3' \
    || echo "install-test-servers: jupyter_server could not be installed; its tests will skip" >&2
fi
if ! "$VENV/bin/python" -c "import httpbin, flasgger" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check 'httpbin>=0.10,<1' 'flasgger>=0.9' \
    || echo "install-test-servers: httpbin could not be installed; its tests will skip" >&2
fi
