"""``--tools`` forms that name live MCP servers, and their tools as collections.

- ``mcp:COMMAND ARGS...`` (one argument, split like a shell does): a stdio server atc starts;
- ``mcp+http://HOST:PORT/PATH`` (or ``mcp+https://``): a streamable HTTP server; ``mcp+sse://...``
  an SSE one;
- a JSON file ``{"mcpServers": {NAME: {"command", "args"?, "env"?, "cwd"?} | {"url", "type"?}}}``
  (the shape MCP clients share; ``type`` ``"sse"``, or a URL ending in ``/sse``, picks SSE).

``load_source`` starts/connects each server (``connections.servers()``), reads its ``tools/list``
(all pages) and returns one ``Collection`` per server, named after the server, that carries the
``McpServer`` so that every later call goes back to it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocols.errors import ConfigError, UsageError
from protocols.mcp import MCPLoader
from protocols.model import Collection, McpServer

if TYPE_CHECKING:
    from sandbox.gateway.mcp.connections import McpServers

__all__ = ["is_mcp_source", "servers_from_source", "servers_from_config", "load_source", "load_mcp",
           "resolve_env", "collection_from_listing", "check_names", "check_ready"]

_SCHEMES = {"mcp+http://": ("http", "http://"), "mcp+https://": ("http", "https://"),
            "mcp+sse://": ("sse", "http://")}
_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]+")


def _is_config_file(text: str) -> bool:
    path = Path(text).expanduser()
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if b'"mcpServers"' not in head:
            return False  # the common case (a spec) decides on the first megabyte, unparsed
        doc = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "mcpServers" in doc


def is_mcp_source(text: str) -> bool:
    """Does this ``--tools`` value name live MCP servers?"""
    return text.startswith("mcp:") or text.startswith(tuple(_SCHEMES)) or _is_config_file(text)


def _slug(text: str, fallback: str = "mcp") -> str:
    slug = _NAME_OK.sub("-", text).strip("-.")[:60]
    return slug if slug and slug[0].isalnum() else fallback


#: Programs that run a script or package named later on their command line: the collection is
#: named after that, not after the interpreter (two ``node ...`` servers are not both "node").
_RUNNERS = frozenset({"node", "nodejs", "deno", "bun", "tsx", "ts-node", "python", "python3", "pypy3", "ruby",
                      "perl", "php", "bash", "sh", "java", "dotnet", "go", "uv", "poetry", "pipenv", "npm", "pnpm",
                      "yarn", "bunx", "npx", "uvx", "pipx", "run", "exec", "start", "x", "dlx", "tool", "docker", "env",
                      "podman"})
#: Options of those runners that take a value (``uv run --with mcp server.py``).
_VALUE_OPTIONS = frozenset({"--with", "--from", "-p", "--package", "--python", "--project", "--directory", "--cwd",
                            "-w", "--workspace", "-e", "--env", "-v", "--volume", "--name", "--publish", "--network",
                            "--mount", "--workdir", "--env-file", "--user", "-u", "--entrypoint", "--platform",
                            "--config", "-c"})
#: File and folder names that say nothing about the server: look one level up instead.
_GENERIC = frozenset({"index", "main", "server", "cli", "app", "__main__", "run", "start", "mod", "dist", "build",
                      "lib", "src", "bin", "out", "build-js", "esm", "cjs", "target", "release", "debug", "scripts"})


def _package_name(script: Path) -> str | None:
    """The ``name`` of the nearest ``package.json`` (or ``pyproject.toml``) above ``script``,
    within a few levels: what ``node node_modules/@scope/server-x/dist/index.js`` runs."""
    for folder in list(script.parents)[:5]:
        manifest = folder / "package.json"
        try:
            if manifest.is_file():
                name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
                return name.rsplit("/", 1)[-1] if isinstance(name, str) and name else None
        except (OSError, ValueError, AttributeError):
            return None
    return None


def _script_name(arg: str, cwd: str | None) -> str:
    """A name for a script path: its package's name when it has one, else its own name, or that
    of the first folder above it that says something (``weather/server.py`` -> ``weather``)."""
    path = Path(arg).expanduser()
    if not path.is_absolute() and cwd:
        path = Path(cwd) / path
    found = _package_name(path)
    if found:
        return found
    for part in [path.stem, *(p.name for p in path.parents)]:
        if part and part.lower() not in _GENERIC:
            return part
    return path.stem or arg


def _command_name(argv: list[str], cwd: str | None = None) -> str:
    """A collection name for a command line: the module of ``python -m pkg.mod``, the package of
    ``npx pkg``/``uvx pkg``, the script (or its package) that an interpreter runs (``node
    .../server-memory/dist/index.js`` -> ``server-memory``), else the program's file name."""
    if "-m" in argv[:-1]:
        return _slug(argv[argv.index("-m") + 1].rsplit(".", 1)[-1])
    rest = list(argv)
    while rest and (Path(rest[0]).name.lower() in _RUNNERS or re.match(r"python3?\.\d+$", Path(rest[0]).name)):
        rest.pop(0)
        while rest and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", rest[0]):  # env VAR=value ... COMMAND
            rest.pop(0)
        while rest and rest[0].startswith("-"):  # the runner's own options: what it runs comes after
            option = rest.pop(0)
            if option in _VALUE_OPTIONS and rest:
                rest.pop(0)
    if not rest:
        return _slug(Path(argv[0]).stem)
    target = rest[0]
    if Path(argv[0]).name.lower() in ("docker", "podman"):  # an image: its last path part, no tag
        return _slug(re.sub(r"[:@].*$", "", target.rsplit("/", 1)[-1]))
    if Path(argv[0]).name.lower() in ("npx", "uvx", "pipx", "bunx") or not re.search(r"[/\\]|\.\w+$", target):
        package = target.rsplit("/", 1)[-1] if not target.startswith("@") else target.split("/", 1)[-1]
        return _slug(re.sub(r"(?<=.)@[^@/]*$", "", package))  # a pinned version (pkg@1.2.3) is not the name
    return _slug(_script_name(target, cwd))


def servers_from_source(text: str) -> list[McpServer]:
    """The servers a ``--tools`` value names (``UsageError``/``ConfigError`` when malformed). A
    ``mcp:`` command runs in the current directory."""
    if text.startswith("mcp:"):
        try:
            argv = shlex.split(text[4:])
        except ValueError as exc:
            raise UsageError(f"--tools {text!r}: cannot split the command line: {exc}",
                             hint='example: --tools mcp:"python -m my_server --flag"') from exc
        if not argv:
            raise UsageError("--tools mcp: needs a command line", hint='example: --tools mcp:"python -m my_server"')
        # The command line was written relative to this directory: it runs there, also when a
        # stored collection starts it again from somewhere else.
        return [McpServer(name=_command_name(argv, os.getcwd()), command=argv[0], args=argv[1:], cwd=os.getcwd())]
    for prefix, (transport, scheme) in _SCHEMES.items():
        if text.startswith(prefix):
            url = scheme + text[len(prefix):]
            if not re.match(r"^https?://[^/\s]+", url):
                raise UsageError(f"--tools {text!r} is not an MCP server URL",
                                 hint="example: --tools mcp+http://127.0.0.1:8000/mcp")
            host = url.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
            return [McpServer(name=_slug(host), transport=transport, url=url)]
    path = Path(text).expanduser()
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{text}: not a readable JSON MCP server configuration: {exc}") from exc
    return servers_from_config(doc, source=text, base=path.resolve().parent)


def servers_from_config(doc: Any, *, source: str = "<config>", base: Path | None = None) -> list[McpServer]:
    """``{"mcpServers": {NAME: {...}}}`` -> servers, in the file's order."""
    table = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{source}: expected {{\"mcpServers\": {{NAME: {{\"command\": ...}} | {{\"url\": ...}}}}}}")
    out: list[McpServer] = []
    for name, entry in table.items():
        where = f"{source}: mcpServers.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be an object with 'command' or 'url'")
        env = entry.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) for v in env.values()):
            raise ConfigError(f"{where}.env must map variable names to string values")
        if isinstance(entry.get("command"), str) and entry["command"]:
            args = entry.get("args") or []
            if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
                raise ConfigError(f"{where}.args must be a list of strings")
            cwd = entry.get("cwd")
            if cwd is not None and base is not None:
                cwd = str((base / str(cwd)).resolve())
            out.append(McpServer(name=_slug(str(name)), command=entry["command"], args=[str(a) for a in args],
                                 env={str(k): str(v) for k, v in env.items()}, cwd=cwd))
        elif isinstance(entry.get("url"), str) and re.match(r"^https?://[^/\s]+", entry["url"]):
            kind = str(entry.get("type") or entry.get("transport") or "")
            sse = kind == "sse" or (not kind and entry["url"].rstrip("/").endswith("/sse"))
            out.append(McpServer(name=_slug(str(name)), transport="sse" if sse else "http", url=entry["url"]))
        else:
            raise ConfigError(f"{where} needs 'command' (a stdio server) or an http(s) 'url'")
    return out


def resolve_env(server: McpServer, environ: Mapping[str, str]) -> McpServer:
    """``server`` with every environment value known: a stored server keeps only the names, and
    gets the values from the host environment now (``ConfigError`` naming a missing one)."""
    if all(v is not None for v in server.env.values()):
        return server
    env: dict[str, str | None] = {}
    for key, value in server.env.items():
        if value is None:
            if key not in environ:
                raise ConfigError(f"MCP server {server.name!r} needs environment variable {key}, which is not set",
                                  hint=f"export {key}=... (its value goes to the server process only)")
            value = environ[key]
        env[key] = value
    return McpServer(name=server.name, transport=server.transport, command=server.command, args=list(server.args),
                     env=env, cwd=server.cwd, url=server.url)


def check_ready(server: McpServer, environ: Mapping[str, str], *, collection: str | None = None) -> None:
    """What a server needs before a program runs (``ConfigError``, exit 2): every environment
    variable a stored server reads from the host, its command (on ``PATH`` or a file that is
    there) and its working directory. Said for every server before anything starts, so that a
    run never fails at its first call to one server after it has already called others."""
    label = f"MCP server {collection or server.name!r} ({server.describe()})"
    missing = sorted(k for k, v in server.env.items() if v is None and k not in environ)
    if missing:
        names = ", ".join(missing)
        raise ConfigError(f"{label} needs environment variable{'s' if len(missing) > 1 else ''} {names}, "
                          f"which {'are' if len(missing) > 1 else 'is'} not set",
                          hint=f"export {missing[0]}=... (its value goes to the server process only)")
    if server.transport != "stdio" or not server.command:
        return
    if server.cwd and not Path(server.cwd).is_dir():
        raise ConfigError(f"{label}: its working directory {server.cwd} is not there",
                          hint="import the server again from where it runs")
    command = server.command
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command).expanduser()
        found = (path if path.is_absolute() else Path(server.cwd or os.getcwd()) / path).is_file()
    else:
        found = shutil.which(command, path=environ.get("PATH", os.defpath)) is not None
    if not found:
        raise ConfigError(f"{label}: command {command!r} is not found",
                          hint="install it, or give its full path")


def collection_from_listing(listing: dict[str, Any], server: McpServer, *, name: str | None = None,
                            source: str = "") -> Collection:
    """A collection from a live ``tools/list`` result of ``server``."""
    cname = name or server.name
    collection = MCPLoader().load(listing, source=source or server.describe(), name=cname)
    collection.mcp_server = server
    info = listing.get("serverInfo")
    label = " ".join(str(info.get(k) or "") for k in ("name", "version")).strip() if isinstance(info, dict) else ""
    collection.description = f"MCP server {server.describe()}" + (f" ({label})" if label else "")
    return collection


def check_names(sources: list[str]) -> None:
    """Refuse, before any server starts, two MCP sources of one run whose servers would get the
    same collection name (``ConfigError`` naming both; ``Toolset`` refuses any other clash)."""
    seen: dict[str, str] = {}
    for text in sources:
        for server in servers_from_source(text):
            described = f"{text!r}" if text.startswith("mcp") else f"{text!r} ({server.name})"
            first = seen.setdefault(server.name, described)
            if first is described:
                continue
            what = f"{first} is given twice" if first == described else f"{first} and {described}"
            raise ConfigError(f"two MCP servers of this run would both be named {server.name!r}: {what}",
                              hint="give each its own name: a key of its own in an mcpServers file, or "
                                   "'atc tools import SOURCE --name NAME' and then --tools NAME")


def load_source(text: str, *, name: str | None = None, servers: McpServers | None = None,
                environ: Mapping[str, str] | None = None) -> list[Collection]:
    """One collection per server the ``--tools`` value names, from each server's live ``tools/list``.
    ``name`` renames the collection (only when the source names one server).

    Args:
        text: ``mcp:COMMAND ARGS``, ``mcp+http://...`` or an ``mcpServers`` file.
        name: the collection's name (one server only).
        servers: the connections to use (default: the process-wide ones).
        environ: the environment the servers get (default: this process's).

    Returns:
        One ``Collection`` per server.

    Raises:
        UsageError: a bad source.
        ConfigError: a server that cannot start or answer.
    """
    # lazy: the connections bring asyncio (the MCP SDK's loop), which a run without MCP servers
    # never loads (tests/test_startup.py)
    from sandbox.gateway.mcp.connections import McpFailure
    from sandbox.gateway.mcp.connections import servers as default_servers

    found = servers_from_source(text)
    if name and len(found) > 1:
        raise UsageError(f"{text} names {len(found)} servers; --name fits one", hint="import them without --name")
    manager = servers or default_servers()
    env = os.environ if environ is None else environ
    out = []
    for server in found:
        try:
            listing = manager.list_tools(resolve_env(server, env))
        except McpFailure as exc:  # a server that cannot be started or read is the run's configuration
            raise ConfigError(exc.message, hint=exc.hint) from None
        out.append(collection_from_listing(listing, server, name=name, source=text))
    return out


#: ``atc.load_mcp``: every server of a source as a collection.
load_mcp = load_source
