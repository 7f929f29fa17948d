"""The Qdrant collection alias ``production``: which collection a promoted config serves from.

On a Qdrant server the alias is moved in one ``update_collection_aliases`` request (delete + create), so readers see
the old or the new target, never none. The embedded Edge engine has no aliases: they are kept in
``<home>/qdrant-edge/aliases.json``, rewritten atomically (``os.replace``). A BM25 config has no collection: its
promotion removes the alias.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragbench.core.atomic import write_text_atomically
from ragbench.core.errors import RagbenchError
from ragbench.core.settings import Settings

#: the alias production is reached by, in Qdrant and in the MLflow model registry
ALIAS = "production"


def edge_aliases_path(home: Path) -> Path:
    """Where the embedded Qdrant Edge engine keeps its aliases (it has none of its own)."""
    return Path(home) / "qdrant-edge" / "aliases.json"


def collection_alias(settings: Settings, alias: str = ALIAS) -> str | None:
    """The collection ``alias`` points at (on the Qdrant server when the settings name one, else Edge)."""
    if settings.qdrant_url:
        from ragbench.index.qdrant import ClientIndex

        idx = ClientIndex(settings.qdrant_url, settings.qdrant_api_key)
        try:
            return next((a.collection_name for a in idx.client.get_aliases().aliases if a.alias_name == alias),
                        None)
        finally:
            idx.close()
    path = edge_aliases_path(settings.home)
    try:
        return json.loads(path.read_text()).get(alias)
    except FileNotFoundError:
        return None


def set_collection_alias(settings: Settings, collection: str | None, alias: str = ALIAS) -> None:
    """Point ``alias`` at ``collection`` atomically (None removes the alias)."""
    if settings.qdrant_url:
        from qdrant_client import models

        from ragbench.index.qdrant import ClientIndex

        idx = ClientIndex(settings.qdrant_url, settings.qdrant_api_key)
        try:
            ops = []
            if any(a.alias_name == alias for a in idx.client.get_aliases().aliases):
                ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
            if collection:
                ops.append(models.CreateAliasOperation(create_alias=models.CreateAlias(
                    collection_name=collection, alias_name=alias)))
            if ops:  # one request: readers see the old or the new target, never none
                idx.client.update_collection_aliases(change_aliases_operations=ops)
        finally:
            idx.close()
        return
    path = edge_aliases_path(settings.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        aliases = json.loads(path.read_text())
    except FileNotFoundError:
        aliases = {}
    if collection:
        if not (path.parent / collection).is_dir():
            raise RagbenchError(f"Qdrant Edge collection {collection} does not exist under {path.parent}")
        aliases[alias] = collection
    else:
        aliases.pop(alias, None)
    write_text_atomically(path, json.dumps(aliases, indent=2, sort_keys=True), durable=True)
