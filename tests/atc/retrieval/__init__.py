"""Tests of ``atc/retrieval/``."""
