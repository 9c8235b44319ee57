"""Tests of ``atc/``."""
