"""``atc mock``: a deterministic, schema-conforming fake of an API, served on 127.0.0.1.

The room of the mock: ``server`` (the HTTP server), ``app`` (what a request gets: routing,
credentials, validation, negotiation, writes), ``parsing`` and ``checks`` (reading and checking
a request), ``answers`` (statuses, error bodies, media types, headers), ``state`` (what clients
wrote, the spec's examples), ``routes`` (path templates and the entities their ids belong to),
``gen`` (the schema walker that makes bodies), ``keywords`` (what several values meet together:
extra object keys, distinct items), ``satisfy`` (schemas no value meets, and the header that says
so), ``data`` (id spaces, seeds, names), ``values`` and
``patterns`` (scalars per JSON Schema type, format and pattern).

    from atc.mock import MockServer
    with MockServer(collection) as api:
        print(api.url)
"""

from __future__ import annotations

from atc.mock.server import LOCAL_HOSTS, MockApp, MockRequest, MockResponse, MockServer, check_host

__all__ = ["MockApp", "MockServer", "MockResponse", "MockRequest", "LOCAL_HOSTS", "check_host"]
