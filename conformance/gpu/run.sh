#!/usr/bin/env bash
# The GPU lane: conformance of vLLM's CUDA/Triton kernels vs the reference, then the decode-kernel
# benchmark sweep (conformance/gpu/bench.py; --bench-quick for a one-minute subset, --skip-bench to leave it out).
#
#   conformance/gpu/run.sh [--mode auto|vllm|build] [--csrc PATH] [--out reports/gpu-lane.json]
#
# On a machine with vLLM installed the kernels come from vllm._custom_ops; on a bare GPU machine
# pass --csrc with an unpacked vLLM v0.10.2 csrc/ to compile them (see conformance/gpu/build.py).
# Refuses (exit 2) without a GPU. Run from anywhere; it runs from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${PWD}${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m conformance.gpu.run "$@"
