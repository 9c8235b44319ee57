"""Black-box probing of undocumented tools (planned; see the project issues)."""
