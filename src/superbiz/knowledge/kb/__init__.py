"""The knowledge base of one data directory and what it derives from its documents: the
exact index, who may read what, its measured statistics; each cache stamped with the
version it was built at."""
