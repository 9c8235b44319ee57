"""Fakes at the seams atc owns: a scripted OpenAI-compatible server and an in-process sandbox backend."""
