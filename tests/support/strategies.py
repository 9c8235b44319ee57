"""Fixtures the tests of solving share (the strategies, ``atc.solve`` and ``atc.Solver``): the
scripted OpenAI-compatible server, a client of it, the model configured from the environment as a
user configures it -- once with each real client, atc's HTTP client and the ``openai`` package
(``ATC_MODEL_CLIENT``) -- the library API as a collection, and ``fence`` (a reply holding a program).

A test module takes them by importing them under their own names
(``from tests.support.strategies import model as model``), so that pytest finds them there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from atc.llm.client import OpenAIModel
from protocols.loaders import load_data
from protocols.model import Collection
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

__all__ = ["server", "client", "model", "library", "fence"]


def fence(code: str) -> str:
    """A model's reply holding ``code`` as its program."""
    return f"Here is the program.\n\n```python\n{code.strip()}\n```\n"


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


@pytest.fixture()
def client(server: ScriptedOpenAI) -> OpenAIModel:
    return OpenAIModel("scripted-model", base_url=server.base_url, backoff=0.01)


@pytest.fixture(params=["http", "openai"])
def model(request: pytest.FixtureRequest, server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch) -> str:
    """The model configured from the environment; the client is the param."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("ATC_MODEL", "scripted-model")
    monkeypatch.setenv("ATC_MODEL_CLIENT", request.param)
    return str(request.param)


@pytest.fixture()
def library(api: LibraryAPI) -> Collection:
    return load_data(api.spec(), name="library")
