"""Which secret goes where: security schemes of the spec, and placements for specs that declare none.

``Toolset.credentials`` (``sandbox.api.Credentials``) maps a KEY to the host's environment
variable the secret is read from. A key is

- a security scheme of the spec (``api_key``): the spec says where it goes;
- a placement, for the many real specs that declare no scheme although the API wants a key:
  ``header:NAME`` (the value as it is: ``header:Authorization`` with ``token abc``),
  ``query:NAME``, ``cookie:NAME``, ``bearer`` (``Authorization: Bearer <value>``) or ``basic``
  (``Authorization: Basic``; the value is ``user:password`` or already base64);
- either of them prefixed by a collection of the run, ``NAME.KEY`` or ``NAME:KEY``
  (``petstore.api_key``, ``jupyter:bearer``), to send it to that collection's API only.

Every credential is BOUND to one collection before anything is sent (``bind``), and goes to that
collection's API only. Scheme names collide all the time across specs (``api_key``,
``bearerAuth``, ``HeaderKey``): a bare scheme name that two collections of the run declare is
refused, naming them, rather than handing a key given for one API to another. In the same way, an
unprefixed placement is refused when the run has several collections, and a key that is neither a
scheme nor a placement is refused too, never silently dropped (the user would otherwise get a 401
with no hint). All of these are ``ConfigError`` (exit 2), said by ``check`` before a run starts.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocols.errors import ConfigError
from protocols.model import Collection, SecurityScheme
from sandbox.api import Credentials

if TYPE_CHECKING:
    from sandbox.api import ToolCall, Toolset

__all__ = ["Placement", "Bound", "bind", "parse_placement", "split_key", "for_collection", "check", "env_var",
           "PLACEMENT_FORMS", "apply_secret", "auth_hint"]

PLACEMENT_FORMS = "header:NAME, query:NAME, cookie:NAME, bearer, basic"
_KINDS = ("header", "query", "cookie")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)


@dataclass(frozen=True)
class Placement:
    """Where a secret goes when no security scheme says so: ``kind`` is header, query, cookie,
    bearer or basic; ``name`` the header, query parameter or cookie name ("" for bearer/basic)."""

    kind: str
    name: str = ""

    def scheme(self) -> SecurityScheme:
        """The same thing as a security scheme, so that one code path places every secret."""
        if self.kind in _KINDS:
            return SecurityScheme(name=f"{self.kind}:{self.name}", type="apiKey", location=self.kind,
                                  param=self.name)
        return SecurityScheme(name=self.kind, type="http", scheme=self.kind)


def parse_placement(key: str) -> Placement | None:
    """The placement a credential key names, or None when it is not one."""
    lowered = key.strip().lower()
    if lowered in ("bearer", "basic"):
        return Placement(lowered)
    kind, sep, name = key.partition(":")
    if sep and kind.lower() in _KINDS and name:
        if kind.lower() == "header" and not _TOKEN.match(name):
            return None
        return Placement(kind.lower(), name)
    return None


def split_key(key: str, collections: list[str]) -> tuple[str | None, str]:
    """``(collection, rest)`` of a key scoped to a collection of the run: ``petstore.api_key`` ->
    ``("petstore", "api_key")``, ``jupyter:bearer`` -> ``("jupyter", "bearer")``; otherwise
    ``(None, key)``. The longest collection name that prefixes the key wins (names may hold dots)."""
    for name in sorted(collections, key=len, reverse=True):
        if len(key) > len(name) + 1 and key.startswith(name) and key[len(name)] in ".:":
            if key[len(name)] == ":" and name.lower() in _KINDS:
                continue  # ``header:X`` is a placement, even beside a collection named "header"
            return name, key[len(name) + 1:]
    return None, key


def env_var(source: str) -> str:
    """The environment variable of a credential source (``env:VAR``, or a bare ``VAR``: what a
    ``Credentials`` holds), by the one parser (``sandbox.api.Credentials``)."""
    return Credentials.reference(source) or source


@dataclass(frozen=True)
class Bound:
    """One credential bound to the one collection it was given for: a security ``scheme`` of that
    collection, or a ``placement``; ``source`` is where the secret is read (``env:VAR``)."""

    key: str
    collection: str
    source: str
    scheme: str | None = None
    placement: Placement | None = None
    scoped: bool = False  # the key named its collection (``NAME.KEY``)


def _resolve(key: str, source: str, collections: list[Collection]) -> Bound:
    """The collection ``key`` is for, and what it names there (``ConfigError`` when that is not
    exactly one thing)."""
    names = [c.name for c in collections]
    by_name = {c.name: c for c in collections}
    owner, rest = split_key(key, names)
    if owner is not None:
        target = by_name[owner]
        if rest in target.security_schemes:
            return Bound(key, owner, source, scheme=rest, scoped=True)
        placement = parse_placement(rest)
        if placement is not None:
            return Bound(key, owner, source, placement=placement, scoped=True)
        if not any(key in c.security_schemes for c in collections):
            schemes = ", ".join(sorted(target.security_schemes)) or "none"
            raise ConfigError(f"--credential {key}: collection {owner!r} has no security scheme {rest!r}, and it "
                              "is not a placement",
                              hint=f"its schemes: {schemes}; or say where the secret goes: {PLACEMENT_FORMS} "
                                   f"(e.g. --credential {owner}.header:Authorization=env:VAR)")
    owners = [c.name for c in collections if key in c.security_schemes]
    if len(owners) > 1:
        raise ConfigError(f"--credential {key}: collections {', '.join(repr(n) for n in owners)} all declare a "
                          f"security scheme {key!r}; a key given for one API is never sent to another",
                          hint="say which API it is for: "
                               + ", ".join(f"--credential {n}.{key}=env:VAR" for n in owners))
    if owners:
        return Bound(key, owners[0], source, scheme=key)
    placement = parse_placement(key)
    if placement is not None and len(collections) == 1:
        return Bound(key, names[0], source, placement=placement)
    if placement is not None and collections:
        raise ConfigError(f"--credential {key}: the run has {len(collections)} collections; say which API "
                          "this secret is for",
                          hint=f"prefix it with the collection: --credential {names[0]}.{key}=... "
                               f"(collections: {', '.join(names)})")
    all_schemes = sorted({s for c in collections for s in c.security_schemes})
    known = f"the tools' security schemes: {', '.join(all_schemes)}; " if all_schemes else \
        "the spec declares no security scheme; "
    raise ConfigError(f"--credential {key}: the tools have no security scheme {key!r}, and it is not a placement",
                      hint=f"{known}or say where the secret goes: {PLACEMENT_FORMS} "
                           "(e.g. --credential header:Authorization=env:VAR)")


def bind(credentials: Mapping[str, str], collections: list[Collection]) -> list[Bound]:
    """Every credential bound to its collection (see the module docstring); ``ConfigError`` for a
    key that names no scheme or placement, or could be meant for more than one collection."""
    return [_resolve(key, source, collections) for key, source in credentials.items()]


def for_collection(credentials: Mapping[str, str], collection: Collection,
                   collections: list[Collection]) -> tuple[dict[str, str], list[tuple[Placement, str]]]:
    """What ``collection`` gets: ``({scheme: source}, [(placement, source)])``, only the credentials
    bound to it. A key scoped to the collection wins over the same unscoped key."""
    schemes: dict[str, str] = {}
    placements: dict[Placement, str] = {}
    bound = [b for b in bind(credentials, collections) if b.collection == collection.name]
    for b in sorted(bound, key=lambda b: b.scoped):
        if b.scheme is not None:
            schemes[b.scheme] = b.source
        elif b.placement is not None:
            placements[b.placement] = b.source
    return schemes, list(placements.items())


def check(credentials: Mapping[str, str], collections: list[Collection], environ: Mapping[str, str]) -> None:
    """Refuse, before anything runs, a credential that would not be sent, could reach the wrong
    API, or cannot be read."""
    for b in bind(credentials, collections):
        var = env_var(b.source)
        if not var or var not in environ:
            raise ConfigError(f"--credential {b.key}=env:{var}: environment variable {var} is not set",
                              hint=f"export {var}=... before running")


def apply_secret(scheme: SecurityScheme, secret: str, headers: dict[str, str],
                 query: list[tuple[str, str]], cookies: list[tuple[str, str]]) -> None:
    """Put ``secret`` where ``scheme`` says (query pairs are raw here; the caller encodes them)."""
    if scheme.type == "apiKey" and scheme.param:
        if scheme.location == "query":
            query.append((scheme.param, secret))
        elif scheme.location == "cookie":
            cookies.append((scheme.param, secret))
        else:
            headers[scheme.param] = secret
        return
    kind = (scheme.scheme or "").lower()
    if scheme.type == "http" and kind == "basic":
        token = base64.b64encode(secret.encode()).decode() if ":" in secret else secret
        headers["Authorization"] = f"Basic {token}"
    elif scheme.type == "http" and kind and kind != "bearer":
        headers["Authorization"] = f"{scheme.scheme} {secret}"
    else:
        # bearer, and oauth2/openIdConnect tokens obtained elsewhere; a value that already says
        # "Bearer ..." is not prefixed twice.
        headers["Authorization"] = secret if secret[:7].lower() == "bearer " else f"Bearer {secret}"


def _where(scheme: SecurityScheme) -> str:
    if scheme.type == "apiKey" and scheme.param:
        return f"{scheme.location or 'header'} {scheme.param}"
    if scheme.type == "http":
        return f"Authorization: {(scheme.scheme or 'bearer').capitalize()}"
    return scheme.type


def auth_hint(toolset: Toolset, calls: Sequence[ToolCall]) -> str | None:
    """What to do about the first call an API refused with 401 or 403, fitted to what was given:
    the spec's schemes and how to pass one; the placement syntax when the spec declares none;
    or, when a credential was given, that the API refused it. None when no call was refused."""
    call = next((c for c in calls if c.status in (401, 403)), None)
    if call is None or call.tool not in toolset.tools:
        return None
    collection = toolset.collection_of(call.tool)
    several = len(toolset.collections) > 1
    prefix = f"{collection.name}." if several else ""
    try:
        given = [b for b in bind(toolset.credentials, toolset.collections) if b.collection == collection.name]
    except ConfigError:
        given = []
    said = f"{call.tool} got HTTP {call.status}"
    if given:
        keys = ", ".join(b.key for b in given)
        return (f"{said} although --credential {keys} was given for {collection.name!r}: the API refused it; check "
                "the secret's value, and that it goes where the API wants it")
    schemes = collection.security_schemes
    if schemes:
        listed = "; ".join(f"{name} ({_where(s)})" for name, s in schemes.items())
        first = next(iter(schemes))
        return (f"{said} and no credential was given for {collection.name!r}: its spec declares {listed}; pass "
                f"--credential {prefix}{first}=env:VAR")
    return (f"{said} and no credential was given for {collection.name!r}, whose spec declares no security scheme: "
            f"say where the secret goes, e.g. --credential {prefix}header:Authorization=env:VAR "
            f"(or {prefix}query:NAME, {prefix}cookie:NAME, {prefix}bearer, {prefix}basic)")
