"""Tests of ``sandbox/gateway/``."""
