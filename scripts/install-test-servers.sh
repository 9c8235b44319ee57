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
# Third-party MCP servers (tests/test_thirdparty_mcp.py): mcp-server-time and mcp-server-git from PyPI
# in their own venv (they pin their own SDK), and the reference "everything" server from npm in a
# project-local folder (never installed globally). Under CI=true the tests fail when they are missing.
MCP_VENV=.cache/mcp-servers
if [ ! -x "$MCP_VENV/bin/python" ]; then
  python3 -m venv "$MCP_VENV"
fi
if [ ! -x "$MCP_VENV/bin/mcp-server-time" ] || [ ! -x "$MCP_VENV/bin/mcp-server-git" ]; then
  "$MCP_VENV/bin/python" -m pip install -q --disable-pip-version-check mcp-server-time mcp-server-git \
    || echo "install-test-servers: mcp-server-time/mcp-server-git could not be installed; their tests will skip" >&2
fi
# The reference memory and filesystem servers (tests/protocols/test_mcp_naming.py: two `mcp:"node ..."` sources
# in one run) go to the same folder.
for pkg in server-everything server-memory server-filesystem; do
  if [ ! -f ".cache/npm/node_modules/@modelcontextprotocol/$pkg/package.json" ]; then
    if command -v npm >/dev/null 2>&1; then
      mkdir -p .cache/npm
      npm install --silent --no-audit --no-fund --prefix .cache/npm "@modelcontextprotocol/$pkg" \
        || echo "install-test-servers: @modelcontextprotocol/$pkg could not be installed" >&2
    else
      echo "install-test-servers: npm is missing; the tests of @modelcontextprotocol/$pkg will skip" >&2
    fi
  fi
done
# A third-party MCP client for atc serve (tests/atc/serve/test_serve_inspector.py): the MCP inspector's
# command-line mode, from npm, in the same project-local folder (never installed globally).
if [ ! -f .cache/npm/node_modules/@modelcontextprotocol/inspector-cli/package.json ]; then
  if command -v npm >/dev/null 2>&1; then
    mkdir -p .cache/npm
    npm install --silent --no-audit --no-fund --prefix .cache/npm '@modelcontextprotocol/inspector-cli@^1.0.3' \
      || echo "install-test-servers: @modelcontextprotocol/inspector-cli could not be installed" >&2
  else
    echo "install-test-servers: npm is missing; the MCP inspector tests will skip" >&2
  fi
fi
