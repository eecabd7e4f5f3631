"""What the seed documents fix, shared by the tests that check it."""

#: ``retrieval_details`` keys of seed 000 §4 (kept for recording, never shown to the model)
SEED_DETAIL_KEYS = frozenset(
    {
        "l0_match_count",
        "l0_titles",
        "l1_top_score",
        "l1_top_similarity",
        "l1_match_count",
        "l1_scores",
        "relevance_level",
        "completeness_hint",
        "retrieved_domains",
        "dedup_reason",
    }
)

#: the ``LookupResult`` the model sees (seed 000 §2)
RESULT_KEYS = frozenset(
    {
        "found",
        "primary",
        "supplement",
        "relevance_level",
        "completeness_hint",
        "retrieved_domains_this_session",
        "message",
        "dedup_reason",
    }
)
