"""Sandbox sessions: one isolated interpreter that keeps its globals across snippets."""
