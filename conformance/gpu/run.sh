#!/usr/bin/env bash
# The GPU lane, one prepared script: build (or load) vLLM v0.10.2's CUDA kernels, check them
# against the reference on the GPU, run a quick decode-kernel sweep (printing its progress, table
# and targets), end with one summary line and write conformance/gpu/reports/gpu-lane.json (the
# site's Conformance and Performance pages show it).
#
#   bash conformance/gpu/run.sh [--mode auto|vllm|build] [--csrc PATH] [--bench-full] [--skip-bench]
#                               [--budget-s 480] [--out PATH]
#
# Kernels: vllm._custom_ops when the installed vLLM has them, else our launcher compiled from the
# pinned v0.10.2 csrc/ (--csrc, $PASTUDY_VLLM_CSRC, or unpacked from the cached sha256-verified
# sdist), cached by content under ${PASTUDY_CACHE:-~/.cache/pagedattention-study}/gpu-build/.
# Needs torch with CUDA, triton, nvcc and ninja. Refuses (exit 2) without a GPU. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python}"
export PYTHONPATH="${PWD}${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m conformance.gpu.run "$@"
