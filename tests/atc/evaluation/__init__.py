"""Tests of ``atc/evaluation/``."""
