"""Tests of ``atc/mock/``."""
