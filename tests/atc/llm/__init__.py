"""Tests of ``atc/llm/``."""
