"""A client process for the disconnect tests: ``python -m tests.support.serve_client stdio|http ...``.

``stdio ARGS...`` starts ``atc ARGS`` through the SDK's stdio client; ``http URL`` connects to a
running server with the bearer token of ``tests.support.serve``. Either way it prints
``connected`` and then calls ``run_program`` with a program that never ends, so that the test can
kill this process mid-run (a host that crashed, a closed laptop) and check what the server does.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from tests.support.serve import SPIN, http_client, stdio_client


async def main(argv: list[str]) -> None:
    import os

    client: Any
    if argv[0] == "stdio":
        client = stdio_client(argv[1:], dict(os.environ))
    else:
        client = http_client(argv[1])
    async with client as c:
        print("connected", flush=True)
        await c.call_tool("run_program", {"program": SPIN})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
