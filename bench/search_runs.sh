#!/usr/bin/env bash
# End-to-end checks of `ctune search` on the GPU machine (issue "Search and objectives"):
#  1. the main job: a p99 search over the hand-written GEMM, from the installed CLI;
#  2. a two-objective search (p99 and energy) under a power cap;
#  3. a search killed mid-run (SIGKILL, as a crash) and resumed from its journal.
# Result files land in bench/results/artifacts/ for `ctune registry import`.
set -uo pipefail
cd "$(dirname "$0")/.."
ART=bench/results/artifacts
mkdir -p "$ART"
LOG=${LOGS:-/tmp}
status=0
command -v ctune >/dev/null || ctune() { python3 -m ctune "$@"; }

echo "--- 1. ctune search kernels/hand_gemm.cu --objective p99"
ctune search kernels/hand_gemm.cu --objective p99 --problem sq4096 --budget "${GEMM_BUDGET:-48}" \
  --seed 7 --out "$ART/gemm-sq4096.json" || status=1

echo "--- 2. two objectives with a power constraint"
ctune search kernels/hand_attention.cu --objective p99 --objective energy --constraint "power<=650W" \
  --problem prefill-s4096-d128-causal --budget "${PARETO_BUDGET:-16}" --seed 3 \
  --out "$ART/attention-pareto.json" --json >"$LOG/search-pareto.json" || status=1
tail -c 2000 "$LOG/search-pareto.json"

echo "--- 3. kill mid-run, then resume"
journal=/tmp/ctune-resume-$$.jsonl
ctune search kernels/hand_gemm.cu --objective p50 --problem llm8b-o-t128 --budget 40 --seed 11 \
  --journal "$journal" --out "$ART/gemm-resume.json" >"$LOG/search-killed.txt" 2>&1 &
pid=$!
sleep "${KILL_AFTER_S:-25}"
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "killed after ${KILL_AFTER_S:-25} s; journal: $journal ($(wc -l <"$journal") lines)"
ctune search kernels/hand_gemm.cu --objective p50 --problem llm8b-o-t128 --budget 40 --seed 11 \
  --resume "$journal" --out "$ART/gemm-resume.json" || status=1
exit $status
