"""The prefix-cache hit rate, kept per block of 1000 queries so the counters never overflow.

Every lookup of a full page in the cache is one query, a hit or a miss. Rather than summing
forever, the metric folds each completed group of ``group_size`` queries into a running average
and keeps only the open group's counts; the reported rate weighs the open group by how full it is.
Same arithmetic, in the same order, as vLLM's ``CacheMetricData`` (``vllm/core/block/common.py:
297-346``), so the floats agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class HitRateMetric:
    num_completed_groups: int = 0
    completed_hit_rate: float = 0.0
    open_queries: int = 0
    open_hits: int = 0
    group_size: int = 1000

    def query(self, hit: bool) -> None:
        self.open_queries += 1
        self.open_hits += 1 if hit else 0
        if self.open_queries == self.group_size:
            rate = self.open_hits / self.open_queries
            self.completed_hit_rate = (self.completed_hit_rate * self.num_completed_groups
                                       + rate) / (self.num_completed_groups + 1)
            self.open_queries = 0
            self.open_hits = 0
            self.num_completed_groups += 1

    def hit_rate(self) -> float:
        open_ratio = self.open_queries / self.group_size
        total = self.num_completed_groups + open_ratio
        if total == 0:
            return 0.0
        completed, open_part = 0.0, 0.0
        if self.num_completed_groups > 0:
            completed = self.completed_hit_rate * self.num_completed_groups
        if self.open_queries > 0:
            open_part = (self.open_hits / self.open_queries) * open_ratio
        return (completed + open_part) / total
