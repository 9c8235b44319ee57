"""What ``atc mock`` checks in a request: values against their full schemas, and credentials.

Values are checked with JSON Schema 2020-12 (the import already turned OpenAPI 3.0's dialect into
it) and a format checker for the formats specs use (``date``, ``date-time``, ``time``, ``email``,
``uuid``, ``uri``, ``hostname``, ``ipv4``/``ipv6``, ``byte``, ``int32``/``int64``...), written here
so that no optional package decides what is checked. ``pattern`` is checked in ECMA-262 syntax
(:mod:`atc.mock.patterns`), and only where matching is bounded: a client chooses the string, and
``re`` cannot be interrupted, so a pattern that could backtrack without end is not checked (the
mock then accepts a value a stricter server would refuse; docs/cli.md says so).

Credentials: an operation that declares ``security`` needs one of its alternatives, each scheme
of it present where the scheme says (header, query, cookie; ``Authorization: Bearer``/``Basic``
for HTTP schemes; a bearer token for OAuth 2 and OpenID Connect). With ``accepted`` values
configured, a present credential must also be one of them.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import threading
from datetime import date, datetime, time
from typing import Any

from atc.mock.patterns import compiled, is_safe
from protocols.model import Collection, SecurityScheme, Tool

__all__ = ["validator", "first_error", "is_valid", "credential_problem", "FORMATS"]

_VALIDATORS: dict[int, tuple[Any, Any]] = {}
_LOCK = threading.Lock()
_CLASS: Any = None

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                       r"[A-Za-z0-9])?)*\.?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$")
_URI_REF = re.compile(r"^[^\s]*$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|z|[+-]([01]\d|2[0-3]):[0-5]\d)$")
_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\d[Tt ]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|z|[+-]([01]\d|2[0-3]):"
                        r"[0-5]\d)$")


def _date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return bool(re.fullmatch(r"\d{4}-\d\d-\d\d", value))


def _date_time(value: str) -> bool:
    if not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", value.replace("t", "T")).replace(":60", ":59"))
    except ValueError:
        return False
    return True


def _time(value: str) -> bool:
    if not _TIME.match(value):
        return False
    try:
        time.fromisoformat(re.sub(r"[Zz]$", "+00:00", value).replace(":60", ":59"))
    except ValueError:
        return False
    return True


def _ip(version: int) -> Any:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False
    return check


def _byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _int_range(bits: int) -> Any:
    def check(value: Any) -> bool:
        return not isinstance(value, int) or isinstance(value, bool) or -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    return check


#: format -> check of a string value (numbers for int32/int64). Unknown formats are not checked.
FORMATS: dict[str, Any] = {
    "date": _date, "date-time": _date_time, "time": _time,
    "email": lambda v: bool(_EMAIL.match(v)), "idn-email": lambda v: bool(_EMAIL.match(v)),
    "uuid": lambda v: bool(_UUID.match(v)),
    "uri": lambda v: bool(_URI.match(v)), "url": lambda v: bool(_URI.match(v)), "iri": lambda v: bool(_URI.match(v)),
    "uri-reference": lambda v: bool(_URI_REF.match(v)), "iri-reference": lambda v: bool(_URI_REF.match(v)),
    "hostname": lambda v: bool(_HOSTNAME.match(v)),
    "ipv4": _ip(4), "ipv6": _ip(6), "byte": _byte,
}
_NUMERIC_FORMATS = {"int32": _int_range(32), "int64": _int_range(64)}


def _format_checker() -> Any:
    # jsonschema: about 100 ms to import; only a schema check needs it
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, check in FORMATS.items():
        checker.checks(name)(lambda value, check=check: not isinstance(value, str) or check(value))
    for name, check in _NUMERIC_FORMATS.items():
        checker.checks(name)(check)
    return checker


def _validator_class() -> Any:
    global _CLASS
    if _CLASS is None:
        # jsonschema: about 100 ms to import; only a schema check needs it
        import jsonschema

        def pattern(validator: Any, regex: Any, instance: Any, schema: Any) -> Any:
            if not isinstance(instance, str) or not isinstance(regex, str) or not is_safe(regex):
                return
            found = compiled(regex)
            if found is not None and not found.search(instance):
                yield jsonschema.ValidationError(f"{instance!r} does not match {regex!r}")

        _CLASS = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern})
    return _CLASS


def validator(schema: dict[str, Any]) -> Any:
    """The validator of a (resolved) schema, compiled once per schema object."""
    key = id(schema)
    hit = _VALIDATORS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    made = _validator_class()(schema, format_checker=_format_checker())
    with _LOCK:
        if len(_VALIDATORS) > 8192:
            _VALIDATORS.clear()
        _VALIDATORS[key] = (schema, made)
    return made


def is_valid(schema: Any, value: Any) -> bool:
    if not isinstance(schema, dict) or not schema:
        return True
    try:
        return bool(validator(schema).is_valid(value))
    except Exception:  # a schema jsonschema cannot use: nothing to hold the value to
        return True


def first_error(schema: Any, value: Any) -> str | None:
    """Why ``value`` does not conform (the first reason found), or None when it does."""
    if not isinstance(schema, dict) or not schema:
        return None
    try:
        for error in validator(schema).iter_errors(value):
            where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            return f"{where.lstrip('.') + ': ' if where else ''}{error.message}"[:300]
    except Exception:
        return None
    return None


# -- credentials -----------------------------------------------------------------------------


def _present(scheme: SecurityScheme, headers: dict[str, str], query: dict[str, list[str]],
             cookies: dict[str, str]) -> str | None:
    """The credential value a request carries for ``scheme``, or None."""
    if scheme.type == "apiKey":
        name = scheme.param or scheme.name
        if scheme.location == "query":
            values = query.get(name) or []
            return values[0] if values and values[0] else None
        if scheme.location == "cookie":
            return cookies.get(name) or None
        return headers.get(name.lower()) or None
    auth = headers.get("authorization", "")
    kind, _, value = auth.partition(" ")
    wanted = "basic" if scheme.type == "http" and scheme.scheme == "basic" else \
        (scheme.scheme or "bearer") if scheme.type == "http" else "bearer"
    if kind.lower() != wanted.lower() or not value.strip():
        return None
    return value.strip()


def credential_problem(tool: Tool, collection: Collection, headers: dict[str, str], query: dict[str, list[str]],
                       cookies: dict[str, str], accepted: dict[str, set[str]] | None = None) -> str | None:
    """Why the request's credentials do not satisfy the operation's ``security``, or None.
    ``accepted`` maps a scheme name to the values that are valid (absent: any value is)."""
    alternatives = [alt for alt in tool.security if alt]
    if not alternatives:
        return None
    reasons: list[str] = []
    for alt in alternatives:
        missing: list[str] = []
        for name in alt:
            scheme = collection.security_schemes.get(name)
            if scheme is None:
                continue  # a requirement naming no scheme cannot be checked
            value = _present(scheme, headers, query, cookies)
            if value is None:
                missing.append(f"{name} ({_where(scheme)})")
            elif accepted and name in accepted and value not in accepted[name]:
                missing.append(f"{name} (the value given is not valid)")
        if not missing:
            return None
        reasons.append(" and ".join(missing))
    return "missing or invalid credential: " + " or ".join(reasons)


def _where(scheme: SecurityScheme) -> str:
    if scheme.type == "apiKey":
        return f"{scheme.location or 'header'} {scheme.param or scheme.name}"
    if scheme.type == "http" and scheme.scheme == "basic":
        return "Authorization: Basic ..."
    return "Authorization: Bearer ..."
