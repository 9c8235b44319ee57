"""MCP servers written for the tests with the official SDK (``mcp``), run as real processes."""
