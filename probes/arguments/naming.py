"""Reading meaning out of names: which thing a parameter, a response field or an endpoint is about.

Probing without a model rests on one observation about APIs in general: identifiers travel under
predictable names. The ``movie_id`` a detail endpoint wants is the ``id`` of an object that a list
endpoint about movies returned (``/movie/popular`` -> ``results[].id``), or a field literally named
``movie_id`` somewhere; the ``{id}`` of ``/albums/{id}`` is the ``id`` of an album
(``albums.items[].id``). So every name is split into words, nouns are made singular, and

- a **parameter** becomes a role: the *entity* it identifies (``movie``) and the *attribute* it
  takes from it (``id``), from its own name (``movie_id``, ``artistId``, ``season_number``) or, for
  a bare ``{id}``, from the path segment before it;
- an **endpoint** gets the entity its root object is about (``/movie/{movie_id}`` -> movie) and
  the entity its lists hold (``/movie/{movie_id}/reviews`` -> review, ``/search/person`` -> person);
- a **response field** gets the entity of the object that holds it: the key of its container
  (``networks[].id`` -> network, ``production_companies[].id`` -> company), or the endpoint's entity
  when the container is a generic wrapper (``results``, ``items``, ``data``).

Nothing here is specific to one API; the word lists are the generic vocabulary of REST paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from protocols.model import Tool

__all__ = [
    "path_template",
    "parent_template",
    "words",
    "singular",
    "norm",
    "same_entity",
    "ParamRole",
    "param_role",
    "EndpointNouns",
    "endpoint_nouns",
    "key_entity",
    "GENERIC_CONTAINERS",
    "ID_WORDS",
    "PATH_PARAM_WORDS",
    "TEXT_PARAM_WORDS",
    "NAME_FIELDS",
    "IDENT_FIELDS",
    "SYNONYMS",
]

#: Keys of wrappers around "the list this endpoint returns"; they name no entity themselves.
GENERIC_CONTAINERS = frozenset(
    "results result items item data records entries list content elements values objects rows docs response "
    "payload matches hits nodes edges collection_items page_items body".split()
)
#: Path words that describe a view of a collection rather than a thing (``/movie/popular``).
VIEW_WORDS = frozenset(
    "search discover similar recommendations recommended popular top rated latest upcoming now playing on the "
    "air airing today trending new recent related featured me browse list all api find lookup query by current "
    "my stats count info details detail summary v1 v2 v3 v4 v5 public private of for and in week day get fetch "
    "show view random filter filters paginate".split()
)
#: Last words of parameter names that identify one instance of something.
ID_WORDS = frozenset("id ids uuid guid key slug code ref handle number no num sku isbn".split())
#: Last words of parameter names that take a path or a file: only a value the API handed out (a
#: listed file, an allowed directory) can work; a made-up one is a guess.
PATH_PARAM_WORDS = frozenset("path filepath filename file dir directory folder".split())
#: Words of parameter names that take free text.
TEXT_PARAM_WORDS = frozenset("q query search keyword keywords term terms text phrase search_term searchterm "
                             "s k find filter title name pattern".split())
#: Fields that identify their object, for a parameter named by a bare noun (``{owner}`` <- ``owner.login``),
#: with the belief in each: handles and slugs are what paths usually take, then ids, then names.
IDENT_FIELDS = {"login": 0.87, "username": 0.87, "handle": 0.87, "slug": 0.87, "id": 0.85, "uuid": 0.85,
                "key": 0.8, "code": 0.8, "name": 0.8}
#: Other spellings of a parameter's name that a response may use for the same value.
SYNONYMS = {"username": ("login", "handle", "screen_name", "user_name"), "user": ("login", "username"),
            "login": ("username", "handle")}
#: Response fields that hold a human-readable name of their object (good free-text search words).
NAME_FIELDS = frozenset("name title original_title original_name display_name full_name label username "
                        "screen_name headline".split())

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_PARAM = re.compile(r"^\{([^{}/]+)\}$")


def path_template(path: str) -> str:
    """A path template with its parameters written ``{}``, lower case, no trailing slash
    (``/Tables/movie/{row_id}/`` -> ``/tables/movie/{}``): two paths with the same template
    address the same place."""
    segments = [s for s in path.strip().strip("/").split("/") if s]
    return "/" + "/".join("{}" if _PARAM.match(s) else s.lower() for s in segments)


def parent_template(path: str, wire: str) -> str | None:
    """The template of the list a path parameter picks from: the path before ``{wire}``
    (``/tables/movie/{row_id}/`` -> ``/tables/movie``); None when ``wire`` is not in the path."""
    segments = [s for s in path.strip().strip("/").split("/") if s]
    for i, seg in enumerate(segments):
        m = _PARAM.match(seg)
        if m and m.group(1) == wire:
            return path_template("/".join(segments[:i])) if i else None
    return None


def words(name: str) -> list[str]:
    """``production_companies`` / ``relatedArtists`` / ``top-tracks`` / ``movieID`` -> lower-case words."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", str(name))
    name = _CAMEL.sub(r"\1_\2", name)
    return [w for w in _SPLIT.split(name.lower()) if w]


@lru_cache(maxsize=65536)
def norm(name: str) -> str:
    """A name in one canonical spelling: ``movieId``, ``movie-id`` and ``movie_id`` -> ``movie_id``."""
    return "_".join(words(name))


_IRREGULAR = {"people": "person", "children": "child", "men": "man", "women": "woman", "media": "media",
              "data": "data", "series": "series", "news": "news", "status": "status", "analysis": "analysis"}


def singular(word: str) -> str:
    """A crude singular for nouns of paths and keys: ``companies`` -> ``company``, ``boxes`` -> ``box``."""
    w = word.lower()
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "ches", "shes", "xes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _noun(name: str) -> str | None:
    """The entity a plural or compound key names: ``production_companies`` -> ``company``. Words
    after ``by``/``with`` qualify rather than name (``findByStatus`` names no entity)."""
    ws = words(name)
    for cut in ("by", "with"):
        if cut in ws:
            ws = ws[: ws.index(cut)]
    ws = [w for w in ws if w not in VIEW_WORDS]
    return singular(ws[-1]) if ws else None


@lru_cache(maxsize=65536)
def same_entity(a: str | None, b: str | None) -> bool:
    """Whether two entity nouns name the same kind of thing (``company`` ~ ``production_company``)."""
    if not a or not b:
        return False
    if a == b:
        return True
    aw, bw = [singular(w) for w in a.split("_")], [singular(w) for w in b.split("_")]
    return aw[-1] == bw[-1] or a in bw or b in aw


@dataclass(frozen=True)
class ParamRole:
    """What a parameter asks for. ``entity`` is the thing it identifies (None: no noun in its name),
    ``attribute`` what it takes from it (``id``, ``number``, ``name``; ``""`` for a bare noun such as
    ``{repo}``: any identifier of a repo), ``id_like`` whether only a
    value the API handed out can work (an id, a key, a path segment), ``text`` whether it takes
    free text (a search query)."""

    name: str
    entity: str | None
    attribute: str
    id_like: bool
    text: bool
    in_path: bool = False


def param_role(tool: Tool, pname: str) -> ParamRole:
    """The role of parameter ``pname`` of ``tool`` (see ``ParamRole``)."""
    binding = tool.bindings.get(pname)
    wire = binding.name if binding and binding.name else pname
    location = binding.location if binding else "query"
    schema = tool.properties.get(pname)
    schema = schema if isinstance(schema, dict) else {}
    ws = words(wire) or words(pname)
    has_choices = bool(schema.get("enum")) or "const" in schema
    kind = schema.get("type")
    attribute = ws[-1] if ws else pname
    if attribute == "ids":
        attribute = "id"
    elif kind == "array" and attribute.endswith("s"):
        attribute = singular(attribute)  # ``entityNames``, ``paths``: a list of what one item is
    entity: str | None = None
    textual = kind in (None, "string") and not has_choices and not schema.get("format")
    text = textual and location in ("query", "body") and (
        norm(wire) in TEXT_PARAM_WORDS or (bool(ws) and ws[-1] in TEXT_PARAM_WORDS and ws[-1] not in ("name", "title")))
    if len(ws) > 1:
        entity = "_".join(singular(w) for w in ws[:-1])
    elif location == "path" and ws and (ws[0] in ID_WORDS or ws[0] == "name"):
        # ``/work_pools/{name}``: the name of the thing the segment before names, not a "name" entity
        entity = _path_noun_before(tool.path, wire)
    elif location == "path" and ws and not has_choices and not text and kind != "boolean":
        # ``/repos/{owner}/{repo}``: a bare noun names the thing; any identifier of it will do.
        entity, attribute = singular(ws[0]), ""
    id_like = not has_choices and not text and (
        attribute in ID_WORDS or attribute == "" or location == "path" or norm(wire) in ("username", "user", "login")
        or attribute in PATH_PARAM_WORDS or (kind == "array" and attribute == "name"))
    if kind == "boolean":
        id_like = False
    return ParamRole(name=pname, entity=entity, attribute=attribute, id_like=id_like, text=text,
                     in_path=location == "path")


def _path_noun_before(path: str, wire: str) -> str | None:
    segments = [s for s in path.strip("/").split("/") if s]
    previous: str | None = None
    for seg in segments:
        m = _PARAM.match(seg)
        if m and m.group(1) == wire:
            return _noun(previous) if previous else None
        if not m:
            previous = seg
    return None


@dataclass(frozen=True)
class EndpointNouns:
    """``root``: what the response's root object is about; ``items``: what its lists hold."""

    root: str | None
    items: str | None


def endpoint_nouns(tool: Tool) -> EndpointNouns:
    """``/movie/{movie_id}`` -> (movie, movie); ``/movie/{movie_id}/reviews`` -> (movie, review);
    ``/search/person`` -> (person, person); ``/albums/{id}/tracks`` -> (album, track)."""
    segments = [s for s in tool.path.strip("/").split("/") if s]
    last_param = max((i for i, s in enumerate(segments) if _PARAM.match(s)), default=-1)
    parent: str | None = None
    if last_param >= 0:
        wire = _PARAM.match(segments[last_param]).group(1)  # type: ignore[union-attr]
        pname = next((p for p, b in tool.bindings.items() if b.location == "path" and b.name == wire), wire)
        role = param_role(tool, pname)
        parent = role.entity if role.id_like else None
    tail = [s for s in segments[last_param + 1:] if not _PARAM.match(s)]
    tail_noun = next((n for s in reversed(tail) if (n := _noun(s))), None)
    if last_param < 0:
        before = [s for s in segments if not _PARAM.match(s)]
        # ``/search`` says nothing; the operation's own name may (``searchItems`` -> item).
        noun = next((n for s in reversed(before) if (n := _noun(s))), None) or _noun(tool.name)
        return EndpointNouns(root=noun, items=noun)
    return EndpointNouns(root=parent, items=tail_noun or parent)


def key_entity(key: str) -> str | None:
    """The entity a container key names, or None for generic wrappers (``results``) and non-nouns."""
    if norm(key) in GENERIC_CONTAINERS or key == "":
        return None
    return _noun(key)
