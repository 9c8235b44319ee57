"""Tests of ``atc/serve/``."""
