"""One ingest run: files found, read, chunked, embedded and stored, and its report."""
