"""A file server as an MCP server (official SDK), for the probing tests:
``python -m tests.support.mcp_servers.files ROOT``. It behaves like the reference filesystem server:
every answer is text, and only paths inside ROOT may be touched.

- ``list_allowed_directories`` answers ``Allowed directories:`` and ROOT on the next line (the
  only way to learn where files are);
- ``list_directory`` answers ``[FILE] name`` / ``[DIR] name`` lines; ``read_text_file`` the
  file's text; ``get_file_info`` ``key: value`` lines; ``search_files`` one full path per line;
  ``directory_tree`` JSON (as text); ``read_multiple_files`` several files at once;
  ``list_directory_with_sizes`` ``[FILE] name   12 B`` lines;
- ``write_file``, ``create_directory``, ``edit_file``, ``move_file`` change files (not read-only);
- a path outside ROOT is an ``isError`` result ("Access denied - path outside allowed
  directories"), a missing one ``ENOENT``; ``file_checksum`` answers a missing file with an
  ordinary text that says "Error: ..." (no ``isError``), as some servers do.

Read tools are annotated ``readOnlyHint``. ``FILES_LOG`` (env): every ``tools/call`` appended as
a JSON line (tool, arguments, whether it answered an error).
"""

import hashlib
import json
import os
import sys
from typing import Any

from pydantic import BaseModel, Field

ROOT = os.path.realpath(sys.argv[1]) if len(sys.argv) > 1 else os.path.realpath(".")
LOG = os.environ.get("FILES_LOG", "")


class Edit(BaseModel):
    oldText: str = Field(description="The text to replace (must match exactly)")
    newText: str = Field(description="What replaces it")


def _log(tool: str, args: dict[str, Any], error: bool = False) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps({"tool": tool, "args": args, "error": error}) + "\n")


def build() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer("files")
    read_only = ToolAnnotations(readOnlyHint=True)

    def inside(tool: str, path: str, args: dict[str, Any]) -> str:
        real = os.path.realpath(os.path.expanduser(path))
        if real != ROOT and not real.startswith(ROOT + os.sep):
            _log(tool, args, True)
            raise ToolError(f"Access denied - path outside allowed directories: {real} not in {ROOT}")
        return real

    def existing(tool: str, path: str, args: dict[str, Any]) -> str:
        real = inside(tool, path, args)
        if not os.path.exists(real):
            _log(tool, args, True)
            raise ToolError(f"ENOENT: no such file or directory, stat '{real}'")
        return real

    @server.tool(structured_output=False, annotations=read_only)
    def list_allowed_directories() -> str:
        """The directories this server may read and write."""
        _log("list_allowed_directories", {})
        return f"Allowed directories:\n{ROOT}"

    @server.tool(structured_output=False, annotations=read_only)
    def list_directory(path: str) -> str:
        """The entries of a directory, [FILE] or [DIR] and the name, one a line."""
        real = existing("list_directory", path, {"path": path})
        if not os.path.isdir(real):
            _log("list_directory", {"path": path}, True)
            raise ToolError(f"ENOTDIR: not a directory, scandir '{real}'")
        _log("list_directory", {"path": path})
        return "\n".join(f"[{'DIR' if os.path.isdir(os.path.join(real, n)) else 'FILE'}] {n}"
                         for n in sorted(os.listdir(real)))

    @server.tool(structured_output=False, annotations=read_only)
    def list_directory_with_sizes(path: str) -> str:
        """The entries of a directory with their sizes."""
        real = existing("list_directory_with_sizes", path, {"path": path})
        _log("list_directory_with_sizes", {"path": path})
        lines = []
        for n in sorted(os.listdir(real)):
            full = os.path.join(real, n)
            lines.append(f"[DIR] {n}" if os.path.isdir(full) else f"[FILE] {n:<20} {os.path.getsize(full)} B")
        return "\n".join(lines)

    @server.tool(structured_output=False, annotations=read_only)
    def read_text_file(path: str) -> str:
        """The text of a file."""
        real = existing("read_text_file", path, {"path": path})
        if os.path.isdir(real):
            _log("read_text_file", {"path": path}, True)
            raise ToolError(f"EISDIR: illegal operation on a directory, read '{real}'")
        _log("read_text_file", {"path": path})
        with open(real) as f:
            return f.read()

    @server.tool(structured_output=False, annotations=read_only)
    def read_multiple_files(paths: list[str]) -> str:
        """Several files at once, each under its path."""
        parts = []
        for p in paths:
            real = existing("read_multiple_files", p, {"paths": paths})
            if os.path.isfile(real):
                with open(real) as f:
                    parts.append(f"{p}:\n{f.read()}")
            else:
                parts.append(f"{p}: Error - not a file")
        _log("read_multiple_files", {"paths": paths})
        return "\n---\n".join(parts)

    @server.tool(structured_output=False, annotations=read_only)
    def get_file_info(path: str) -> str:
        """Size, type and times of a file or directory, as key: value lines."""
        real = existing("get_file_info", path, {"path": path})
        _log("get_file_info", {"path": path})
        st = os.stat(real)
        return (f"size: {st.st_size}\nisDirectory: {str(os.path.isdir(real)).lower()}\n"
                f"isFile: {str(os.path.isfile(real)).lower()}\npermissions: {oct(st.st_mode)[-3:]}")

    @server.tool(structured_output=False, annotations=read_only)
    def search_files(path: str, pattern: str) -> str:
        """Paths under a directory whose name contains the pattern, one a line."""
        real = existing("search_files", path, {"path": path, "pattern": pattern})
        _log("search_files", {"path": path, "pattern": pattern})
        found = [os.path.join(d, n) for d, dirs, files in os.walk(real) for n in dirs + files
                 if pattern.lower() in n.lower()]
        return "\n".join(sorted(found)) or "No matches found"

    @server.tool(structured_output=False, annotations=read_only)
    def directory_tree(path: str) -> str:
        """The tree under a directory, as JSON."""
        real = existing("directory_tree", path, {"path": path})
        _log("directory_tree", {"path": path})

        def tree(p: str) -> list[dict[str, Any]]:
            return [{"name": n, "type": "directory", "children": tree(os.path.join(p, n))}
                    if os.path.isdir(os.path.join(p, n)) else {"name": n, "type": "file"} for n in sorted(os.listdir(p))]

        return json.dumps(tree(real), indent=2)

    @server.tool(structured_output=False, annotations=read_only)
    def file_checksum(path: str) -> str:
        """The sha256 of a file (a missing file is answered with an error text, not an MCP error)."""
        real = inside("file_checksum", path, {"path": path})
        if not os.path.isfile(real):
            _log("file_checksum", {"path": path}, True)
            return f"Error: ENOENT: no such file '{real}'"
        _log("file_checksum", {"path": path})
        with open(real, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    @server.tool(structured_output=False)
    def write_file(path: str, content: str) -> str:
        """Create or overwrite a file."""
        real = inside("write_file", path, {"path": path, "content": content})
        _log("write_file", {"path": path, "content": content})
        with open(real, "w") as f:
            f.write(content)
        return f"Successfully wrote to {path}"

    @server.tool(structured_output=False)
    def create_directory(path: str) -> str:
        """Create a directory (and its parents)."""
        real = inside("create_directory", path, {"path": path})
        _log("create_directory", {"path": path})
        os.makedirs(real, exist_ok=True)
        return f"Successfully created directory {path}"

    @server.tool(structured_output=False)
    def edit_file(path: str, edits: list[Edit]) -> str:
        """Replace text in a file."""
        edits = [e.model_dump() for e in edits]  # type: ignore[misc]
        real = existing("edit_file", path, {"path": path, "edits": edits})
        with open(real) as f:
            text = f.read()
        for e in edits:
            if e.get("oldText", "") not in text:
                _log("edit_file", {"path": path, "edits": edits}, True)
                raise ToolError(f"Could not find exact match for edit: {e.get('oldText')}")
            text = text.replace(e["oldText"], e.get("newText", ""), 1)
        _log("edit_file", {"path": path, "edits": edits})
        with open(real, "w") as f:
            f.write(text)
        return "Edited"

    @server.tool(structured_output=False)
    def move_file(source: str, destination: str) -> str:
        """Move or rename a file or directory."""
        real = existing("move_file", source, {"source": source, "destination": destination})
        target = inside("move_file", destination, {"source": source, "destination": destination})
        _log("move_file", {"source": source, "destination": destination})
        os.rename(real, target)
        return f"Successfully moved {source} to {destination}"

    return server


if __name__ == "__main__":
    build().run()
