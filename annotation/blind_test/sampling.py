"""Drawing a blind-test sample: a share of the questions, stratified by scene and difficulty, from a seed. No Django.

Strata are (primary scene, difficulty) pairs. The sample holds ``round(share * N)``
questions (at least one), allocated to strata in proportion to their size by the
largest-remainder method (Hamilton): each stratum first gets the floor of its quota,
and the questions left over go to the strata with the largest fractional parts (ties to
the stratum that sorts first). Within a stratum the questions, sorted by external id,
are drawn with ``random.Random(seed)`` (Mersenne Twister, whose output for an integer
seed is fixed across Python versions) visiting the strata in sorted order. The same
questions, share and seed therefore always give the same sample.
"""
from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence

Stratum = tuple[str, str]


def allocate(sizes: dict[Stratum, int], total: int) -> dict[Stratum, int]:
    """How many questions to draw from each stratum: ``total`` split in proportion to ``sizes`` (Hamilton)."""
    population = sum(sizes.values())
    if population == 0 or total <= 0:
        return {key: 0 for key in sizes}
    keys = sorted(sizes)
    quotas = {key: total * sizes[key] / population for key in keys}
    counts = {key: min(sizes[key], math.floor(quotas[key])) for key in keys}
    left = total - sum(counts.values())
    order = sorted(keys, key=lambda k: (-(quotas[k] - math.floor(quotas[k])), k))
    for key in order:
        if left <= 0:
            break
        if counts[key] < sizes[key]:
            counts[key] += 1
            left -= 1
    return counts


def sample_size(n_questions: int, share: float) -> int:
    """round(share x N), at least one question when there is any (half rounds up)."""
    if n_questions == 0:
        return 0
    return max(1, min(n_questions, math.floor(share * n_questions + 0.5)))


def draw(questions: Iterable[tuple[str, str, str]], *, share: float, seed: int) -> list[str]:
    """The external ids drawn from ``questions`` = (external id, scene, difficulty), sorted."""
    strata: dict[Stratum, list[str]] = defaultdict(list)
    for external_id, scene, difficulty in questions:
        strata[(scene or "", difficulty or "")].append(external_id)
    members: dict[Stratum, Sequence[str]] = {key: sorted(ids) for key, ids in strata.items()}
    total = sample_size(sum(len(ids) for ids in members.values()), share)
    counts = allocate({key: len(ids) for key, ids in members.items()}, total)
    rng = random.Random(seed)
    chosen: list[str] = []
    for key in sorted(members):
        chosen.extend(rng.sample(list(members[key]), counts[key]))
    return sorted(chosen)
