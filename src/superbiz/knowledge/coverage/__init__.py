"""What the knowledge covers and what it lacks: domains, the map the Planner reads, and
the questions it could not answer (gaps)."""
