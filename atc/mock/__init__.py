"""``atc mock``: a deterministic, schema-conforming fake of an API, served on 127.0.0.1.

The room of the mock: ``server`` (routing, the HTTP app and server), ``routes`` (path templates and
the entities their ids belong to), ``gen`` (the schema walker that makes bodies), ``data`` (id
spaces, seeds, names) and ``values`` (scalars per JSON Schema type and format).

    from atc.mock import MockServer
    with MockServer(collection) as api:
        print(api.url)
"""

from __future__ import annotations

from atc.mock.server import LOCAL_HOSTS, MockApp, MockRequest, MockResponse, MockServer, check_host

__all__ = ["MockApp", "MockServer", "MockResponse", "MockRequest", "LOCAL_HOSTS", "check_host"]
