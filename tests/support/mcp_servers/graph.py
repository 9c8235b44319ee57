"""A knowledge-graph memory as an MCP server (official SDK), for the probing tests:
``python -m tests.support.mcp_servers.graph``. It behaves like the reference memory server: entities with
observations, and relations between them, kept in a file.

- ``create_entities``, ``create_relations``, ``add_observations`` create (they answer what they
  created; an entity whose name exists is not created again and is left out of the answer);
- ``delete_entities`` (by name, with their relations), ``delete_observations``,
  ``delete_relations`` delete; ``clear_graph`` deletes everything (a bulk delete);
- ``read_graph``, ``search_nodes``, ``open_nodes`` read, annotated ``readOnlyHint``, with an
  ``outputSchema`` that describes every field (descriptions, an item schema for each list, a
  nullable ``note``) -- richer than anything a probe could learn from the answers.

``GRAPH_FILE`` (env): the JSON file holding the graph (read at start, written after every
change), so a test can compare it before and after a probe. ``GRAPH_LOG`` (env): every
``tools/call`` appended as a JSON line (tool, arguments), as the server saw it.
"""

import json
import os
from typing import Any

from pydantic import BaseModel, Field

FILE = os.environ.get("GRAPH_FILE", "")
LOG = os.environ.get("GRAPH_LOG", "")


class Entity(BaseModel):
    name: str = Field(description="The entity's unique name")
    entityType: str = Field(description="What kind of thing it is (person, project...)")
    observations: list[str] = Field(description="Facts about it, one sentence each")
    note: str | None = Field(default=None, description="A remark, when there is one")


class Relation(BaseModel):
    source: str = Field(alias="from", description="The name of the entity the relation starts at")
    to: str = Field(description="The name of the entity it points to")
    relationType: str = Field(description="The relation, in active voice")


class NewEntity(BaseModel):
    name: str = Field(description="The entity's name")
    entityType: str = Field(description="What kind of thing it is")
    observations: list[str] = Field(description="Facts about it")


class NewObservations(BaseModel):
    entityName: str = Field(description="The entity to add them to")
    contents: list[str] = Field(description="The observations to add")


class Deletion(BaseModel):
    entityName: str = Field(description="The entity to delete them from")
    observations: list[str] = Field(description="The observations to delete")


class Graph(BaseModel):
    entities: list[Entity] = Field(description="Every entity of the graph (or of the answer)")
    relations: list[Relation] = Field(description="The relations between them")


def _load() -> dict[str, Any]:
    if FILE and os.path.exists(FILE):
        with open(FILE) as f:
            data: dict[str, Any] = json.load(f)
            return data
    return {"entities": [], "relations": []}


def _save(graph: dict[str, Any]) -> None:
    if FILE:
        with open(FILE, "w") as f:
            json.dump(graph, f, indent=1)


def _log(tool: str, args: dict[str, Any]) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps({"tool": tool, "args": args}) + "\n")


def build() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer("graph")
    read_only = ToolAnnotations(readOnlyHint=True)

    def names() -> set[str]:
        return {e["name"] for e in _load()["entities"]}

    @server.tool(structured_output=False)
    def create_entities(entities: list[NewEntity]) -> str:
        """Create entities; answers the ones created."""
        _log("create_entities", {"entities": [e.model_dump() for e in entities]})
        graph = _load()
        have = {e["name"] for e in graph["entities"]}
        new = [{"name": e.name, "entityType": e.entityType, "observations": list(e.observations)}
               for e in entities if e.name not in have]
        graph["entities"] += new
        _save(graph)
        return json.dumps(new)

    @server.tool(structured_output=False)
    def create_relations(relations: list[Relation]) -> str:
        """Create relations between existing entities."""
        relations = [r.model_dump(by_alias=True) for r in relations]  # type: ignore[misc]
        _log("create_relations", {"relations": relations})
        graph = _load()
        known = {e["name"] for e in graph["entities"]}
        for r in relations:
            if r.get("from") not in known or r.get("to") not in known:
                raise ToolError(f"Entity with name {r.get('from') if r.get('from') not in known else r.get('to')} "
                                "not found")
        new = [r for r in relations if r not in graph["relations"]]
        graph["relations"] += new
        _save(graph)
        return json.dumps(new)

    @server.tool(structured_output=False)
    def add_observations(observations: list[NewObservations]) -> str:
        """Add observations to existing entities."""
        observations = [o.model_dump() for o in observations]  # type: ignore[misc]
        _log("add_observations", {"observations": observations})
        graph = _load()
        added = []
        for o in observations:
            entity = next((e for e in graph["entities"] if e["name"] == o.get("entityName")), None)
            if entity is None:
                raise ToolError(f"Entity with name {o.get('entityName')} not found")
            fresh = [c for c in o.get("contents", []) if c not in entity["observations"]]
            entity["observations"] += fresh
            added.append({"entityName": entity["name"], "addedObservations": fresh})
        _save(graph)
        return json.dumps(added)

    @server.tool(structured_output=False)
    def delete_entities(entityNames: list[str]) -> str:
        """Delete entities by name, and their relations."""
        _log("delete_entities", {"entityNames": entityNames})
        graph = _load()
        graph["entities"] = [e for e in graph["entities"] if e["name"] not in entityNames]
        graph["relations"] = [r for r in graph["relations"] if r["from"] not in entityNames and r["to"] not in entityNames]
        _save(graph)
        return "Entities deleted successfully"

    @server.tool(structured_output=False)
    def delete_observations(deletions: list[Deletion]) -> str:
        """Delete observations from entities."""
        deletions = [d.model_dump() for d in deletions]  # type: ignore[misc]
        _log("delete_observations", {"deletions": deletions})
        graph = _load()
        for d in deletions:
            for e in graph["entities"]:
                if e["name"] == d.get("entityName"):
                    e["observations"] = [o for o in e["observations"] if o not in d.get("observations", [])]
        _save(graph)
        return "Observations deleted successfully"

    @server.tool(structured_output=False)
    def delete_relations(relations: list[Relation]) -> str:
        """Delete relations."""
        relations = [r.model_dump(by_alias=True) for r in relations]  # type: ignore[misc]
        _log("delete_relations", {"relations": relations})
        graph = _load()
        graph["relations"] = [r for r in graph["relations"] if r not in relations]
        _save(graph)
        return "Relations deleted successfully"

    @server.tool(structured_output=False)
    def clear_graph() -> str:
        """Delete every entity and relation."""
        _log("clear_graph", {})
        _save({"entities": [], "relations": []})
        return "Graph cleared"

    @server.tool(annotations=read_only)
    def read_graph() -> Graph:
        """The whole knowledge graph."""
        _log("read_graph", {})
        return Graph.model_validate(_load())

    @server.tool(annotations=read_only)
    def search_nodes(query: str) -> Graph:
        """Entities whose name, type or observations contain the query, and the relations between them."""
        _log("search_nodes", {"query": query})
        graph = _load()
        hits = [e for e in graph["entities"] if query.lower() in json.dumps(e).lower()]
        found = {e["name"] for e in hits}
        return Graph.model_validate({"entities": hits, "relations": [r for r in graph["relations"]
                                                                      if r["from"] in found and r["to"] in found]})

    @server.tool(annotations=read_only)
    def open_nodes(names: list[str]) -> Graph:
        """The entities of these names, and the relations between them."""
        _log("open_nodes", {"names": names})
        graph = _load()
        hits = [e for e in graph["entities"] if e["name"] in names]
        if not hits:
            raise ToolError(f"no entity named {', '.join(names)}")
        found = {e["name"] for e in hits}
        return Graph.model_validate({"entities": hits, "relations": [r for r in graph["relations"]
                                                                      if r["from"] in found and r["to"] in found]})

    del names
    return server


if __name__ == "__main__":
    build().run()
