"""The metadata store's repositories: one per aggregate, all over one transaction's connection.

``MetadataTx`` (storage/metadata.py) holds them: ``tx.memories``, ``tx.changes``, ``tx.counters``,
``tx.versions``, ``tx.tasks`` and ``tx.keys`` (each user's content cipher). SQL lives here and in
the query modules of ``storage/``; nothing above the storage layer writes any (tests/support/layers.py).
"""
