"""Tests of ``sandbox/attribution/``."""
