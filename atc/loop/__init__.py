"""The solve loop: a model writes a program, the sandbox runs it, reflection repairs it, by a strategy."""
