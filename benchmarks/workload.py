"""The request stream that the capacity experiment serves, stated so anyone can rerun it.

Lengths are drawn from log-normal distributions whose means match the ShareGPT statistics the
PagedAttention paper reports for its workloads (Kwon et al., SOSP 2023, section 6.1: mean input
161.31 tokens, mean output 337.99 tokens), with the spread chosen to give ShareGPT's long tail,
and clipped so that prompt + output never exceeds the model's maximum length (2048 for the 13B
models of the paper). An Alpaca-like stream (mean input 19.31, output 58.45) is the short-request
contrast. The generator is seeded: the same arguments always give the same requests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    """One request: how many prompt tokens it brings and how many tokens it will generate."""

    rid: int
    prompt_len: int
    output_len: int

    @property
    def total_len(self) -> int:
        return self.prompt_len + self.output_len


@dataclass(frozen=True)
class LengthModel:
    """Log-normal lengths with a given mean and log-space spread (sigma)."""

    mean: float
    sigma: float

    def draw(self, rng: random.Random) -> int:
        mu = math.log(self.mean) - self.sigma**2 / 2  # so that E[X] == mean
        return max(1, round(rng.lognormvariate(mu, self.sigma)))


WORKLOADS = {
    "sharegpt": (LengthModel(161.31, 1.0), LengthModel(337.99, 0.9)),
    "alpaca": (LengthModel(19.31, 0.6), LengthModel(58.45, 0.8)),
}


def make_requests(n: int, workload: str = "sharegpt", max_len: int = 2048, seed: int = 0) -> list[Request]:
    """``n`` requests of the named workload, each with prompt + output <= ``max_len``."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; choose one of {sorted(WORKLOADS)}")
    if n < 1 or max_len < 2:
        raise ValueError(f"need n >= 1 and max_len >= 2, got n={n}, max_len={max_len}")
    prompt_model, output_model = WORKLOADS[workload]
    rng = random.Random(seed)
    out = []
    for rid in range(n):
        prompt = min(prompt_model.draw(rng), max_len - 1)
        output = min(output_model.draw(rng), max_len - prompt)
        out.append(Request(rid, prompt, output))
    return out
