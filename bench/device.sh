#!/usr/bin/env bash
# The one script for the GPU machine (no network there): install ctune and what the
# machine lacks from carried wheels, then run the requested stages, logging under $OUT.
#
#   bash bench/device.sh [STAGE ...]      default: install doctor tests aa
#
# Stages:
#   install   pip install the wheels in .device/wheels (make wheels) and ctune itself, then
#             unpack every carried build archive .device/carry/*.tgz into the build cache
#             (builds made on a CPU machine, e.g. `ctune gate --build-only`, tarred by key)
#   doctor    ctune doctor + nvidia-smi
#   tests     the GPU and NVML tiers, required (a missing GPU fails, never skips)
#   aa        bench/aa_repeatability.py          (A/A noise, overhead, fault recovery)
#   gt        bench/ga_sample_efficiency.py record (exhaustive ground truth for replay)
#   gtmap     bench/ground_truth.py map     (GT_PRESET: one preset or several, space-separated:
#             tiled_matmul gemm cutlass_gemm cutlass_gemm_up cutlass_gemm_qkv cutlass_gemm_down
#             pb_gesummv pb_atax pb_2mm rd_hotspot): compile every candidate,
#             group by binary identity; ~3 min on 16 cores for tiled_matmul or gemm (the
#             external presets' maps are committed, made on a CPU machine with the same nvcc)
#   gtmeasure bench/ground_truth.py measure (GT_PRESET, GT_PROCESSES: "1 2 3" or one of them;
#             GT_ARGS, e.g. "--min-samples 30"): each distinct binary once per fresh process,
#             each process over every preset before the next process starts; ~0.1 s per
#             binary plus ~15 s per process and preset (python bench/ground_truth.py sizes
#             prints the binaries); tiled_matmul and gemm ~2.5 min per process on an H200
#   gtfinish  bench/ground_truth.py finish  (GT_PRESET): tests/data/ground_truth/<preset>-*.json.gz,
#             only for a preset measured in all 3 processes (GT_FINISH_ARGS: e.g.
#             "--out-dir tests/data/ground_truth/sm90-nvidia-h200", a preset recorded again)
#             (every gt* stage is resumable and starts nothing new once GT_MAX_S, 480 s by
#             default, have passed since the call began, nor a measure process with less than
#             30 s left; its progress, bench/results/ground_truth/, comes back in results.tgz:
#             unpack that into the checkout and carry bench/results/ground_truth on the next call)
#             The external presets need their sources: carry bench/external/src.
#   quality   bench/search_quality.py (CPU only: the replay of the recorded ground truths)
#   overhead  bench/search_overhead.py: ctune vs Kernel Tuner brute force, s per candidate
#             (needs the kernel_tuner wheels; OVERHEAD_ARGS, e.g. "--repeat 1"; ~4 min with
#             its default 3 runs a space)
#   timeline  bench/search_timeline.py: where those searches' wall time goes, step by step
#             (TIMELINE_ARGS, e.g. "--runs 5"; ~1 min)
#   profile   bench/measure_profile.py: where one measurement's time goes, by phase (~1 min)
#   search    ctune search on the GEMM, end to end, plus a two-objective search
#   kernels   bench/kernels_vs_vendor.py          (tuned vs default vs cuBLAS / SDPA)
#   own       bench/own_kernels.py                (kernels written elsewhere, tuned unmodified;
#             the external set's sources must be carried: bench/external/src, git-ignored;
#             one set per call: OWN_ARGS="--set own", then "--set external --merge")
#   busy      a CUTLASS GEMM search on 16 cores: the share of wall time the GPU measured
#   gate      ctune check with the GPU's fields, then ctune gate on the committed registry
#   retune    every stale artifact's recorded search again, result files into
#             bench/results/retuned/ (then, here: ctune registry import bench/results/retuned/*)
#   import    those result files into this copy's registry without a commit (so that a
#             `gate` stage after it gates the re-tuned artifacts; commit them here later)
#   staleness bench/staleness.py (CPU only; runs anywhere nvcc is)
#   acf       bench/acf.py: controls files on pinned artifacts (ACF_WHAT: run, h2h or "run h2h";
#             ACF_ARGS, e.g. "--only gemm/sq4096 --pool 32 --prune-margin off")
#   regen     docs/regen.py --gpu: the README's and docs' transcripts, the GPU ones included
#             (REGEN_FILES: only these, e.g. README.md)
#   devicegenes bench/device_gene_values.py: the clocks and power limits --device-genes would
#             offer here, READ ONLY (a proxy refuses every NVML setter; nothing is changed)
#   dispatch  one step of the CUTLASS problem-set search (ctune search --problem-set): the set's
#             state in .device/sets/$DISPATCH_SET, its finalist builds in .device/carry/builds.tgz
#             (carry both back and forth); run it again until the summary says complete
#             (DISPATCH_KERNEL: another kernel's set, e.g. kernels/attention.cu with
#             DISPATCH_SET=prefill; the whole set state comes back in $OUT/sets.tgz;
#             DISPATCH_ARGS: more options, e.g. "--warm-start bench/pools/gemm-decode.t4.json";
#             DEADLINE_S: the call's limit in s, the step shrinks to end 70 s before it)
#   setbench  bench/kernels_vs_vendor.py --problem-set: per-shape default and tuned re-measured
#             beside cuBLAS (torch) or SDPA in this run, and bench/results/dispatch-<gpu>.json
#   scaleout  bench/scale_out.py: CUTLASS compile throughput on 1-16 Dask compile workers,
#             GPU busy of a CUTLASS search through the engine, engine vs local front
#             (SCALEOUT_ARGS, e.g. "--part compile" and "--part search,front" in two calls)
#   multigpu  bench/multi_gpu.py (>= 2 GPUs): the same CUTLASS search on GPU 0 and on all GPUs
#             (scaling efficiency, fronts, each binary once), then one whose GPU worker is
#             killed; its builds compile first, or come carried (.device/carry/multigpu.tgz,
#             from `bench/multi_gpu.py --part prebuild --pack` on a CPU machine); MULTIGPU_ARGS
#
# Everything that should come back is packed into $OUT/results.tgz (the device tool
# returns at most 8 files), the logs into $OUT/logs.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-/tmp/ctune-device-out}
# the logs stay out of $OUT (at most 8 files come back: the results and builds come first)
LOGS=${CTUNE_DEVICE_LOGS:-/tmp/ctune-device-logs}
mkdir -p "$LOGS" bench/results
# CUTLASS 3.x candidates take 45-60 s and ~3.5 GB each to compile: give them room
export PYTHONUNBUFFERED=1 CTUNE_CACHE_DIR=${CTUNE_CACHE_DIR:-/tmp/ctune-cache} \
  CTUNE_COMPILE_TIMEOUT_S=${CTUNE_COMPILE_TIMEOUT_S:-600}
# CuPy's JIT cache (the references' and the harness's helper kernels: 13-17 s per new problem
# on a bare machine) comes back in $OUT/cupy.tgz; carry .device on the next call
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-$PWD/.device/cupy-cache}
PY=${PY:-python3}
PATH="$(dirname "$(command -v "$PY")"):$PATH"  # where pip puts the `ctune` script
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the checkout, even if the install failed
STAGES=("$@")
[ ${#STAGES[@]} -gt 0 ] || STAGES=(install doctor tests aa)
STATUS=0

run() {  # run NAME CMD...: log to $LOGS/NAME.log, remember failures, keep going
  local name=$1; shift
  local limit_var="LIMIT_${name^^}"
  limit_var=${limit_var//[^A-Z0-9_]/_}
  # per-stage wall limit (s), e.g. LIMIT_TESTS=200; STAGE_LIMIT: set by the stage itself
  local limit=${STAGE_LIMIT:-${!limit_var:-1800}}
  echo "=== $name (limit ${limit} s): $*" | tee -a "$LOGS/summary.txt"
  local start=$SECONDS
  timeout --signal=INT --kill-after=15 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - start)) s" | tee -a "$LOGS/summary.txt"
  tail -n 25 "$LOGS/$name.log"
  [ $rc -eq 0 ] || STATUS=1
  return 0
}

gt_left() {  # gt_left [MIN_S]: GT_LEFT, the seconds left of GT_MAX_S (from the call's start)
  GT_LEFT=$(( ${GT_MAX_S:-480} - SECONDS ))
  [ "$GT_LEFT" -gt "${1:-0}" ] && return 0
  echo "=== GT_MAX_S (${GT_MAX_S:-480} s) reached at ${SECONDS} s: the rest is left for the next call" \
    | tee -a "$LOGS/summary.txt"
  STATUS=1
  return 1
}

for stage in "${STAGES[@]}"; do
  case $stage in
    install)
      # --no-deps: the wheels are exactly what the image lacks (nvidia-cutlass's own
      # dependency on cuda-python serves its Python API, which ctune does not use)
      run install bash -c "$PY -m pip install --no-index --no-deps .device/wheels/*.whl \
        && $PY -m pip install --no-deps --no-build-isolation -e . \
        && $PY -c 'import ctune, deap, git, cupy, pynvml, cutlass_library' \
        && command -v ctune \
        && { for a in .device/carry/*.tgz; do [ ! -f \"\$a\" ] || $PY bench/carry_builds.py unpack \"\$a\"; done; }" ;;
    doctor)
      run doctor bash -c "nvidia-smi; $PY -m ctune doctor" ;;
    tests)
      run tests $PY -m pytest -q -m "gpu or nvml" --require nvcc,gpu,nvml -p no:cacheprovider \
        --junitxml="$LOGS/gpu-tests.xml" ${TESTS_ARGS:-} ;;
    aa)
      run aa $PY bench/aa_repeatability.py --out bench/results ${AA_ARGS:-} ;;
    gt)
      run gt $PY bench/ga_sample_efficiency.py record ;;
    search)
      run search bash bench/search_runs.sh ;;
    kernels)
      run kernels $PY bench/kernels_vs_vendor.py --out bench/results ${KERNELS_ARGS:-} ;;
    own)
      run own $PY bench/own_kernels.py --out bench/results ${OWN_ARGS:-} ;;
    busy)
      run busy bash -c "ctune search kernels/gemm.cu --objective p99 \
        --problem ${BUSY_PROBLEM:-llm8b-o-t16} --budget ${BUSY_BUDGET:-40} --seed 5 \
        --jobs ${BUSY_JOBS:-16} ${BUSY_ARGS:-} --out bench/results/artifacts/busy-cutlass.json \
        --json >$LOGS/busy.json; rc=\$?; $PY bench/busy_summary.py $LOGS/busy.json \
        bench/results; exit \$rc" ;;
    gate)
      run gate bash -c "ctune check --gpu; ctune gate ${GATE_ARGS:-}" ;;
    retune)
      run retune ctune registry retune --run --results bench/results/retuned ${RETUNE_ARGS:-} ;;
    import)
      run import bash -c 'for f in bench/results/retuned/*.json; do \
        ctune registry import --no-commit "$f" || exit 1; done' ;;
    staleness)
      run staleness $PY bench/staleness.py ;;
    acf)
      # advanced-controls files on pinned artifacts (ACF_WHAT=run, or h2h for CompileIQ's own
      # loop; ACF_ARGS e.g. "--only gemm/sq4096"): the split path, ptxas 13.3 carried xz'd in
      # .device/carry, CompileIQ and its dependencies in .device/wheels, its spaces in
      # .device/ciq-spaces; the searches' result files and controls files come back in acf.tgz
      run acf bash -c "xz -dc .device/carry/ptxas-13.3.73.xz >/tmp/ptxas-13.3 \
        && chmod +x /tmp/ptxas-13.3 && /tmp/ptxas-13.3 --version | tail -1 \
        && for what in ${ACF_WHAT:-run}; do $PY bench/acf.py \$what --ptxas /tmp/ptxas-13.3 \
        --spaces .device/ciq-spaces --work .device/acf ${ACF_ARGS:-} || exit 1; done" ;;
    regen)
      run regen $PY docs/regen.py --gpu ${REGEN_FILES:-} ;;
    devicegenes)
      run devicegenes $PY bench/device_gene_values.py ;;
    gtmap)
      for preset in ${GT_PRESET:-tiled_matmul}; do
        gt_left || break
        STAGE_LIMIT=$((GT_LEFT + 90)) run "gtmap-$preset" $PY bench/ground_truth.py map \
          --preset "$preset" --max-s "$GT_LEFT"
      done ;;
    gtmeasure)
      for p in ${GT_PROCESSES:-1}; do
        for preset in ${GT_PRESET:-tiled_matmul}; do
          gt_left 30 || break 2
          STAGE_LIMIT=$((GT_LEFT + 90)) run "gtmeasure-$preset-p$p" $PY bench/ground_truth.py \
            measure --preset "$preset" --process "$p" --max-s "$GT_LEFT" ${GT_ARGS:-}
        done
      done ;;
    gtfinish)
      for preset in ${GT_PRESET:-tiled_matmul}; do
        run "gtfinish-$preset" $PY bench/ground_truth.py finish --preset "$preset" ${GT_FINISH_ARGS:-}
      done ;;
    quality)
      run quality $PY bench/search_quality.py ${QUALITY_ARGS:-} ;;
    overhead)
      run overhead $PY bench/search_overhead.py ${OVERHEAD_ARGS:-} ;;
    timeline)
      run timeline $PY bench/search_timeline.py ${TIMELINE_ARGS:-} ;;
    profile)
      run profile $PY bench/measure_profile.py --out bench/results --profile ${PROFILE_ARGS:-} ;;
    dispatch|dispatch:*)
      # DISPATCH_STEP: the search's own wall budget (s); the stage limit leaves room for the
      # shape in flight and the packing. Builds: ~40 s and ~3.4 GB each, 16 at a time.
      # dispatch:SET names the set in the stage (several sets in one call); DISPATCH_ARGS_SET
      # DISPATCH_BUDGET_SET and DISPATCH_STEP_SET (SET with - as _) override the plain ones
      set_name=${DISPATCH_SET:-llm8b-fp16}
      [ "$stage" = dispatch ] || set_name=${stage#dispatch:}
      suffix=${set_name//-/_}
      args_var="DISPATCH_ARGS_$suffix" budget_var="DISPATCH_BUDGET_$suffix"
      set_args=${!args_var:-${DISPATCH_ARGS:-}}
      set_budget=${!budget_var:-${DISPATCH_BUDGET:-10}}
      stage_limit=${LIMIT_DISPATCH:-560}
      step_var="DISPATCH_STEP_$suffix"
      step=${!step_var:-${DISPATCH_STEP:-390}}
      if [ -n "${DEADLINE_S:-}" ]; then  # the call's own limit: leave 70 s to finish and pack
        left=$((DEADLINE_S - SECONDS - 70))
        [ "$left" -lt "$step" ] && step=$left
        [ "$step" -lt 30 ] && step=30
        [ "$((step + 60))" -lt "$stage_limit" ] && stage_limit=$((step + 60))
        echo "dispatch: step ${step} s (DEADLINE_S ${DEADLINE_S}, ${SECONDS} s gone)"
      fi
      STAGE_LIMIT=$stage_limit run "dispatch-$set_name" bash -c "$PY bench/carry_builds.py unpack .device/carry/builds.tgz; \
        ctune search ${DISPATCH_KERNEL:-kernels/gemm.cu} --objective p99 \
        --problem-set $set_name \
        --set-dir .device/sets/$set_name --budget $set_budget --seed 0 --jobs 16 \
        --step-time $step --dispatch-margin ${DISPATCH_MARGIN:-3%} \
        --cross-processes ${DISPATCH_CROSS:-1} --reuse-share ${DISPATCH_REUSE:-0.25} $set_args \
        --json >$LOGS/dispatch-$set_name.json; rc=\$?; \
        $PY bench/carry_builds.py pack .device/carry/builds.tgz .device/sets/*/finalists.json; \
        cat $LOGS/dispatch-$set_name.json; exit \$rc" ;;
    setbench|setbench:*)
      set_name=${DISPATCH_SET:-llm8b-fp16}
      [ "$stage" = setbench ] || set_name=${stage#setbench:}
      run "setbench-$set_name" bash -c "$PY bench/carry_builds.py unpack .device/carry/builds.tgz; \
        $PY bench/kernels_vs_vendor.py --out bench/results --problem-set $set_name \
        --set-dir .device/sets/$set_name --kernel ${DISPATCH_KERNEL:-kernels/gemm.cu} \
        --merge ${KERNELS_ARGS:-}" ;;
    scaleout)
      run scaleout $PY bench/scale_out.py --out bench/results ${SCALEOUT_ARGS:-} ;;
    multigpu)
      run multigpu $PY bench/multi_gpu.py --out bench/results ${MULTIGPU_ARGS:-} ;;
    *)
      echo "unknown stage $stage" | tee -a "$LOGS/summary.txt"; STATUS=1 ;;
  esac
done

tar czf "$OUT/results.tgz" bench/results registry tests/data/ground_truth docs README.md \
  $(ls -d .device/sets/*/dispatch.* .device/sets/*/matrix.json 2>/dev/null) 2>/dev/null
# a problem-set search's whole state (journals, winners, result files), and its carried builds
# in parts of 15 MiB (a file over 16 MiB does not come back). Here:
#   tar xzf sets.tgz; mkdir -p .device/carry; cat builds.part.* >.device/carry/builds.tgz
# and carry .device on the next call
[ -d .device/sets ] && tar czf "$OUT/sets.tgz" .device/sets
[ -f .device/carry/builds.tgz ] && split -b 15m .device/carry/builds.tgz "$OUT/builds.part."
[ -d .device/acf ] && tar czf "$OUT/acf.tgz" .device/acf "$CTUNE_CACHE_DIR/controls" 2>/dev/null
[ -d "$CUPY_CACHE_DIR" ] && tar czf "$OUT/cupy.tgz" -C "$(dirname "$CUPY_CACHE_DIR")" "$(basename "$CUPY_CACHE_DIR")"
tar czf "$OUT/logs.tgz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")"
cat "$LOGS/summary.txt"
exit $STATUS
