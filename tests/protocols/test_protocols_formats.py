"""ToolBench / RapidAPI and MCP import, and the loader registry seam."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from atc.errors import ProtocolError
from protocols import Binding, Collection, Loader, load_data, load_spec, register_loader
from protocols.loaders import LOADERS
from protocols.toolbench import template_schema

TOOL_FILE: dict[str, Any] = {
    "tool_name": "Weather Now", "tool_description": "Current weather.", "home_url": "https://rapidapi.com/x",
    "api_list": [
        {"name": "Current", "url": "https://weather-now.p.rapidapi.com/current/{city}", "description": "Now.",
         "method": "GET",
         "required_parameters": [{"name": "city", "type": "STRING", "description": "City", "default": "Oslo"}],
         "optional_parameters": [{"name": "units", "type": "ENUM", "description": "", "default": "metric"},
                                 {"name": "days", "type": "NUMBER", "description": "", "default": 3},
                                 {"name": "alerts", "type": "BOOLEAN", "description": "", "default": False},
                                 {"name": "date", "type": "DATE (YYYY-MM-DD)", "description": "", "default": ""}],
         "template_response": {"temp": "float", "tags": ["str"], "station": {"id": "int", "ok": "bool"}}},
        {"name": "Report Issue", "url": "", "description": "Post a report", "method": "POST",
         "required_parameters": [{"name": "text", "type": "STRING", "description": "what", "default": ""}],
         "optional_parameters": []},
        {"name": "Current", "url": "https://weather-now.p.rapidapi.com/current2", "description": "dup name",
         "method": "GET", "required_parameters": [], "optional_parameters": []},
    ],
}


def test_single_tool_file() -> None:
    c = load_data(TOOL_FILE, source="weather.json")
    assert c.source_format == "toolbench" and c.name == "weather_now"
    current, report = c.tools  # the same API name twice is one API
    assert current.name == "current_for_weather_now" and current.group == "Weather Now"
    assert current.path == "/current/{city}" and current.servers == ["https://weather-now.p.rapidapi.com"]
    assert current.bindings["city"] == Binding("path", "city") and current.required == ["city"]
    props = current.properties
    assert props["units"] == {"type": "string", "default": "metric"}
    assert props["days"] == {"type": "number", "default": 3, "description": ""} or props["days"]["type"] == "number"
    assert props["alerts"]["type"] == "boolean" and props["date"]["format"] == "date"
    assert current.response_schema == {"type": "object", "properties": {
        "temp": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
        "station": {"type": "object", "properties": {"id": {"type": "integer"}, "ok": {"type": "boolean"}}}}}
    assert report.method == "POST" and report.path == "/report_issue"
    assert report.bindings == {"text": Binding("body", "text")}


def test_folder_tree(tmp_path: Path) -> None:
    for cat, fname, doc in [("Weather", "weather_now.json", TOOL_FILE),
                            ("Data", "facts.json", {"tool_name": "Facts", "api_list": [
                                {"name": "Random fact", "method": "GET", "url": "https://f.io/random",
                                 "required_parameters": [], "optional_parameters": []}]})]:
        (tmp_path / "tools" / cat).mkdir(parents=True)
        (tmp_path / "tools" / cat / fname).write_text(json.dumps(doc))
    (tmp_path / "tools" / "Data" / "notes.json").write_text('{"not": "a tool"}')
    c = load_spec(tmp_path / "tools")
    assert c.name == "tools" and len(c.tools) == 3
    assert {t.category for t in c.tools} == {"Weather", "Data"}
    assert c.hierarchy()["Data"] == {"Facts": ["random_fact_for_facts"]}
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProtocolError, match="no operations"):
        load_spec(tmp_path / "empty")


def test_stabletoolbench_union(bench_data: Path) -> None:
    folder = bench_data / "toolbench/stabletoolbench/solvable_queries/test_instruction"
    expected = {"G1_instruction": 820, "G1_category": 364, "G1_tool": 500, "G2_instruction": 604,
                "G2_category": 433, "G3_instruction": 44}  # the README's per-file counts
    for stem, count in expected.items():
        c = load_spec(folder / f"{stem}.json")
        assert len(c.tools) == count, stem
        assert c.name == stem.lower()
    merged = load_data([q for stem in expected for q in json.loads((folder / f"{stem}.json").read_text())],
                       source="union", name="stb")
    assert len(merged.tools) == 2490  # measured, and what the README says: 2,490 APIs from 814 tools
    # 814 tools as the README counts them (category + tool); 811 distinct tool names
    assert len({(t.category, t.group) for t in merged.tools}) == 814
    assert len({t.group for t in merged.tools}) == 811
    names = [t.name for t in merged.tools]
    assert len(set(names)) == len(names) and all(n.isidentifier() for n in names)
    assert all(t.method == "GET" for t in merged.tools)
    assert sum(1 for t in merged.tools if t.response_schema) == 1658  # measured: APIs with a template_response


def test_toolbench_repo_examples(bench_data: Path) -> None:
    folder = bench_data / "toolbench/toolbench_repo/data_example/instruction"
    counts = {f.stem: len(load_spec(f).tools) for f in sorted(folder.glob("G*_query.json"))}
    assert counts == {"G1_query": 12, "G2_query": 7, "G3_query": 11}
    with pytest.raises(ProtocolError, match="not a recognised tool spec"):
        load_spec(folder / "inference_query_demo_open_domain.json")  # queries without api_list


def test_toolflow_examples(bench_data: Path) -> None:
    weather = load_spec(bench_data / "toolflow/example_ToolFlow_data_v0/weather.example.data.json")
    assert len(weather.tools) == 11
    movie = load_spec(bench_data / "toolflow/example_ToolFlow_data_v0/movie.example.data.json")
    assert len(movie.tools) == 54
    # ToolFlow's variant carries OpenAPI-like "in" and "schema"; path parameters come from the URL
    images = [t for t in movie.tools if t.path == "/3/network/{network_id}/images"][0]
    assert images.bindings["network_id"] == Binding("path", "network_id")
    # Not strict JSON (trailing commas): a clear ProtocolError is the accepted outcome.
    with pytest.raises(ProtocolError, match="invalid JSON") as info:
        load_spec(bench_data / "toolflow/food_api_spec_example.json")
    assert info.value.source and info.value.source.endswith("food_api_spec_example.json")


@pytest.mark.parametrize("template,schema", [
    ("str", {"type": "string"}), ("int", {"type": "integer"}), ("NoneType", {"type": "null"}),
    ("empty list", {"type": "array"}), ("list of str with length 3", {"type": "array", "items": {"type": "string"}}),
    ([{"a": "bool"}], {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "boolean"}}}}),
    ('{"x": "int"}', {"type": "object", "properties": {"x": {"type": "integer"}}}), (7, {"type": "integer"}),
    ("some words", {"type": "string"}),
])
def test_template_response(template: Any, schema: dict[str, Any]) -> None:
    assert template_schema(template) == schema


@pytest.mark.parametrize("wrap", [
    lambda tools: {"tools": tools},
    lambda tools: {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}},
    lambda tools: tools,
])
def test_mcp_tools_list(wrap: Any) -> None:
    tools = [{"name": "get-weather", "description": "Weather for a city.",
              "inputSchema": {"type": "object", "required": ["city"],
                              "properties": {"city": {"type": "string"}, "from": {"type": "string"}}},
              "outputSchema": {"type": "object", "properties": {"temp": {"type": "number"}}}},
             {"name": "ping", "inputSchema": {"type": "object"}}]
    c = load_data(wrap(tools), name="wx")
    assert c.source_format == "mcp" and c.name == "wx"
    w, p = c.tools
    assert w.name == "get_weather" and w.method == "MCP" and w.path == "get-weather"
    assert w.required == ["city"] and w.bindings["from_"] == Binding("body", "from")
    assert w.response_schema == {"type": "object", "properties": {"temp": {"type": "number"}}}
    assert p.name == "ping" and p.properties == {}


def test_mcp_errors() -> None:
    with pytest.raises(ProtocolError) as info:
        load_data({"tools": [{"name": "a", "inputSchema": []}]}, source="mcp.json")
    assert info.value.pointer == "/tools/0/inputSchema"
    with pytest.raises(ProtocolError, match="no operations"):
        load_data({"tools": []})
    with pytest.raises(ProtocolError) as info:
        load_data({"result": {"tools": [{"description": "nameless"}]}})
    assert info.value.pointer == "/result/tools/0"


def test_builtin_loaders_satisfy_the_protocol() -> None:
    assert [loader.name for loader in LOADERS][:3] == ["openapi", "toolbench", "mcp"]
    for loader in LOADERS:
        assert isinstance(loader, Loader)
        assert loader.detect(42, None) is False


def test_a_plugin_loader_registers_like_the_builtins() -> None:
    class CsvLoader:
        name = "csv-list"

        def detect(self, doc: Any, path: str | None = None) -> bool:
            return isinstance(doc, dict) and doc.get("format") == "tool-csv"

        def load(self, doc: Any, *, source: str, name: str | None = None) -> Collection:
            from protocols import Tool
            return Collection(name=name or "csv", source=source, source_format="csv",
                              tools=[Tool(name=n, collection=name or "csv") for n in doc["names"]])

    plugin = CsvLoader()
    register_loader(plugin)
    try:
        c = load_data({"format": "tool-csv", "names": ["a", "b"]})
        assert [t.name for t in c.tools] == ["a", "b"] and c.source_format == "csv"
    finally:
        LOADERS.remove(plugin)
    with pytest.raises(TypeError):
        register_loader(object())  # type: ignore[arg-type]
