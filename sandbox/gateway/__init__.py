"""The host-side tool gateway: a program's tool calls validated, sent (HTTP, MCP, Python
functions), written once (the write gate) and redacted on the way back."""
