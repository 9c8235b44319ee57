"""Which secret goes where: security schemes of the spec, and placements for specs that declare none.

``Toolset.credentials`` maps a KEY to where the secret is read on the host (``env:VAR``). A key is

- a security scheme of the spec (``api_key``): the spec says where it goes;
- a placement, for the many real specs that declare no scheme although the API wants a key:
  ``header:NAME`` (the value as it is: ``header:Authorization`` with ``token abc``),
  ``query:NAME``, ``cookie:NAME``, ``bearer`` (``Authorization: Bearer <value>``) or ``basic``
  (``Authorization: Basic``; the value is ``user:password`` or already base64);
- either of them prefixed by a collection of the run, ``NAME:KEY`` (``jupyter:bearer``,
  ``tmdb:api_key``), to send it to that collection's API only.

A placement is scoped to one API: with several collections in a run, an unprefixed placement is
refused (a secret meant for one API must not be sent to every other). A key that is neither a
scheme nor a placement is refused (``ConfigError``, exit 2), never silently dropped: the user
would otherwise get a 401 with no hint. ``check`` does all of this before a run starts.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass

from protocols.errors import ConfigError
from protocols.model import Collection, SecurityScheme

__all__ = ["Placement", "parse_placement", "split_key", "for_collection", "check", "env_var", "PLACEMENT_FORMS",
           "apply_secret"]

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
    """``(collection, rest)`` of a key: ``jupyter:bearer`` -> ``("jupyter", "bearer")`` when
    ``jupyter`` is a collection of the run; otherwise ``(None, key)``."""
    head, sep, rest = key.partition(":")
    if sep and head in collections and head.lower() not in _KINDS and rest:
        return head, rest
    return None, key


def env_var(source: str) -> str:
    """The environment variable of a credential source (``env:VAR``, or a bare ``VAR``)."""
    return source[4:] if source.startswith("env:") else source


def for_collection(credentials: Mapping[str, str], collection: Collection,
                   names: list[str]) -> tuple[dict[str, str], list[tuple[Placement, str]]]:
    """What ``collection`` gets: ``({scheme: source}, [(placement, source)])``. A key scoped to the
    collection wins over the same unscoped key."""
    schemes: dict[str, str] = {}
    placements: dict[Placement, str] = {}
    for scoped in (False, True):
        for key, source in credentials.items():
            owner, rest = split_key(key, names)
            if scoped != (owner is not None) or (owner is not None and owner != collection.name):
                continue
            if rest in collection.security_schemes:
                schemes[rest] = source
                continue
            placement = parse_placement(rest)
            if placement is not None:
                placements[placement] = source
    return schemes, list(placements.items())


def check(credentials: Mapping[str, str], collections: list[Collection], environ: Mapping[str, str]) -> None:
    """Refuse, before anything runs, a credential that would not be sent or cannot be read."""
    names = [c.name for c in collections]
    all_schemes = sorted({s for c in collections for s in c.security_schemes})
    for key, source in credentials.items():
        owner, rest = split_key(key, names)
        targets = [c for c in collections if owner is None or c.name == owner]
        is_scheme = any(rest in c.security_schemes for c in targets)
        placement = parse_placement(rest)
        if not is_scheme and placement is None:
            known = f"the tools' security schemes: {', '.join(all_schemes)}; " if all_schemes else \
                "the spec declares no security scheme; "
            raise ConfigError(f"--credential {key}: the tools have no security scheme {rest!r}, and it is not a "
                              "placement",
                              hint=f"{known}or say where the secret goes: {PLACEMENT_FORMS} "
                                   "(e.g. --credential header:Authorization=env:VAR)")
        if placement is not None and not is_scheme and owner is None and len(collections) > 1:
            raise ConfigError(f"--credential {key}: the run has {len(collections)} collections; say which API "
                              "this secret is for",
                              hint=f"prefix it with the collection: --credential {names[0]}:{key}=...")
        var = env_var(source)
        if not var or var not in environ:
            raise ConfigError(f"--credential {key}=env:{var}: environment variable {var} is not set",
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
