"""Fixtures the strategy tests share (``test_strategies``, ``test_strategy_agents``,
``test_strategy_codeact``): the scripted OpenAI-compatible server, the model configured from the
environment as a user configures it -- once with each real client, atc's HTTP client and the
``openai`` package (``ATC_MODEL_CLIENT``) -- and the library API as a collection.

A test module takes them by importing them under their own names
(``from tests.support.strategies import model as model``), so that pytest finds them there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocols.loaders import load_data
from protocols.model import Collection
from tests.support.apis.library import LibraryAPI
from tests.support.fakes.openai_server import ScriptedOpenAI

__all__ = ["server", "model", "library"]


@pytest.fixture()
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as s:
        yield s


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
