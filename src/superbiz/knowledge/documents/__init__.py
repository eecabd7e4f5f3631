"""One document: read from its file (front matter, access, domain), cut into chunks,
described for the map, and read back once stored. Below the knowledge base: nothing here
writes to a store."""
