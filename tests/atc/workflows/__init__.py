"""Tests of ``atc/workflows/``."""
