"""Tests of ``probes/``."""
