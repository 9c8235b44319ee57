"""What the tests share: APIs and MCP servers to run, fakes at the seams, process helpers."""
