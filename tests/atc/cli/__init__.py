"""Tests of ``atc/cli/``."""
