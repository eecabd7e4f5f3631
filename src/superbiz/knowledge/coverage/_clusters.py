"""Greedy clustering of unit vectors by cosine: pure numpy, no I/O.

Questions come most-asked first; each joins the first cluster whose leader it resembles
(cosine ≥ ``threshold``) or leads a new one. One pass, ``n × clusters`` dot products: a
few hundred questions cluster in a millisecond, and the most-asked wording of a cluster
is its leader, so a cluster never drifts away from what people actually asked.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def leader_clusters(vectors: npt.NDArray[np.float32], threshold: float) -> list[list[int]]:
    """Row indices grouped into clusters, in the rows' order (callers sort by weight).

    >>> v = np.array([[1, 0], [0.99, 0.141], [0, 1]], dtype=np.float32)
    >>> leader_clusters(v, 0.9)
    [[0, 1], [2]]
    """
    clusters: list[list[int]] = []
    leaders: list[int] = []
    for index in range(len(vectors)):
        if leaders:
            similarities = vectors[leaders] @ vectors[index]
            best = int(np.argmax(similarities))
            if float(similarities[best]) >= threshold:
                clusters[best].append(index)
                continue
        leaders.append(index)
        clusters.append([index])
    return clusters
