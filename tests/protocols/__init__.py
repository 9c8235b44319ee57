"""Tests of ``protocols/``."""
