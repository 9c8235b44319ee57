"""Tests of ``sandbox/``: the backends, the jail, the limits."""
