"""The knowledge layer, in floors that import only downward (``knowledge-floors`` in
pyproject.toml): sources → ingest → coverage → kb → documents → formats."""
