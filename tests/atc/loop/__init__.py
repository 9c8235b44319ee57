"""Tests of ``atc/loop/``."""
