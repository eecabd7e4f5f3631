"""Response bodies and stream events: the HTTP contract, as ``/docs`` shows it.

These models are the wire format, kept apart from the agents' and governance's own
types so those can change without changing what clients read. A field with a default
is one that may be absent: routes serialise with ``exclude_unset``, so a body carries
exactly the keys it was built with. Each stream event names itself (``event_name``);
its model is the JSON of the event's ``data:`` line.

One module per route group: ``chat`` (a turn and the stream's events), ``sessions``,
``documents`` (documents, uploads and the knowledge map), ``status`` (info and health),
``auth`` (sign-in, people and the audit trail) and ``errors`` (every failure's body). The
gaps and sources reports are the knowledge base's own shapes (``superbiz.knowledge.coverage.gaps``,
``superbiz.knowledge.sources.source_list``), served as they are.
"""
