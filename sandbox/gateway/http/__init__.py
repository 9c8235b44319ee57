"""The HTTP transport of the gateway: one validated tool call -> requests on the wire -> a reply.

The room holds one concept per module, in the order a call passes through them:

- ``credentials``: which secret goes where (security schemes, and placements such as
  ``header:Authorization`` for specs that declare none), checked before a run;
- ``styles``: a value -> the text its parameter style asks for (OpenAPI ``style``/``explode``,
  Swagger ``collectionFormat``);
- ``request``: the request of a call (path, query, headers, cookies, JSON/form/multipart bodies),
  kept well-formed whatever the program passes;
- ``redirects``: which redirects are followed (same origin only) and how the next hop looks;
- ``decoding``: content encodings decoded in bounded steps under the size cap, then bytes ->
  JSON, text or a binary object;
- ``transport``: ``HttpTransport.send``, the exchange itself (timeouts, the per-run cookie jar,
  the watchdog that cuts slow bodies).

The gateway (``sandbox.gateway.core``) calls ``HttpTransport.send`` for every HTTP tool and does
everything transport-independent around it (budget, validation, redaction, the call log).
"""
