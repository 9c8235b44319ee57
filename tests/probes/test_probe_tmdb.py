"""The issue's acceptance run: ``atc probe --no-llm`` against ``atc mock`` serving the RestBench TMDB
spec, with every response schema and example removed from the copy the prober gets. The mock
answers 404 for ids no response contained, so most tools are only reachable through chains.

Floors: at least 50 of the 54 tools documented, at least 90% of the true leaf paths in the
inferred schemas, at most 3 requests per tool on average."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atc.mock import MockServer
from probes import probe
from probes.results.document import leaf_paths
from protocols import load_data, load_spec


def stripped(doc: dict[str, Any]) -> dict[str, Any]:
    """The spec without anything that says what a response looks like."""
    for item in doc["paths"].values():
        for op in item.values():
            if isinstance(op, dict) and isinstance(op.get("responses"), dict):
                for response in op["responses"].values():
                    if isinstance(response, dict):
                        for key in ("content", "schema", "examples"):
                            response.pop(key, None)
    return doc


def test_tmdb_without_response_schemas(bench_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = bench_data / "restbench" / "specs" / "tmdb_oas.json"
    truth = load_spec(spec)
    blind = load_data(stripped(json.loads(spec.read_text())), source="tmdb-stripped")
    assert len(blind.tools) == 54 and all(t.response_schema is None and not t.examples for t in blind.tools)
    with MockServer(truth, keep_requests=10_000) as mock:
        # TMDB declares an api_key on every operation, and the mock wants one (any value).
        monkeypatch.setenv("TMDB_TEST_KEY", "any-key")
        report = probe(blind, base_url=mock.url, no_llm=True, credentials={"api_key": "env:TMDB_TEST_KEY"})
        sent = len(mock.requests)
    documented = [t for t in report.tools if t.status == "documented"]
    assert len(documented) >= 50, [(t.name, t.reason) for t in report.tools if t.status != "documented"]
    assert report.calls == sent and report.calls / 54 <= 3.0

    true_paths = found = 0
    for tool in documented:
        expected = leaf_paths(truth.tool(tool.name).response_schema)  # type: ignore[union-attr]
        true_paths += len(expected)
        found += len(expected & leaf_paths(tool.response_schema))
    assert true_paths > 500 and found / true_paths >= 0.9

    # Tools whose ids only other tools hand out, through chains of up to four steps.
    by_name = {t.name: t for t in report.tools}
    review = by_name["get_review_review_id"]
    assert review.status == "documented" and review.depends_on == ["get_movie_movie_id_reviews"]
    episode = by_name["get_tv_tv_id_season_season_number_episode_episode_number"]
    assert episode.status == "documented" and len(episode.depends_on) >= 2
    assert by_name["get_credit_credit_id"].status == "documented"
    assert by_name["get_trending_media_type_time_window"].mapping["media_type"] == {"source": "enum"}
