#!/usr/bin/env bash
# scripts/stage_device.sh - builds every binary a GPU round needs and stages it, stripped, in build-gpu/.
#
#   bash scripts/stage_device.sh        # then carry build-gpu to the GPU machine
#
# Builds in a separate build folder (default build-static) with MEGATRAIN_STATIC_MLIR=ON,
# so megatrain-compile holds its MLIR/LLVM code and runs on a machine with no LLVM
# (cmake/StaticMLIR.cmake); the CUDA binaries link the CUDA runtime statically and
# cuBLAS dynamically, as always (runtime/cuda/CMakeLists.txt). Then, into STAGE
# (default build-gpu, git-ignored):
#   bin/   megatrain megatrain-compile megatrain-run megatrain-inspect megatrain-profile
#          gpu_kernel_tests gpu_executor_tests gpu_kernel_bench gpu_copy_queue_probe runtime_adamw_bench (stripped)
#   tt.plan, fortunes.bin   the demo plan and corpus bench/device.sh takes as PLAN and DATA
# and checks: megatrain-compile needs no shared library beyond libc, libstdc++, libm,
# libgcc_s, libprotobuf and libz (ldd); it compiles the tiny model to the same plan as
# build/bin/megatrain-compile (when that exists); the stage is under LIMIT_MIB (60) MiB.
# The GPU machine is an H200, so the stage holds sm_90a code only (CUDA_ARCHITECTURES,
# default 90a): the four architectures a release binary holds (docs/cuda.md, "Supported
# GPUs") would more than double each CUDA binary, past what a device call carries.
# Settings: BUILD_DIR, STAGE, LIMIT_MIB, JOBS (default nproc), CUDA_ARCHITECTURES.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-static}
STAGE=${STAGE:-build-gpu}
LIMIT_MIB=${LIMIT_MIB:-60}
JOBS=${JOBS:-$(nproc)}
TARGETS=(megatrain megatrain-compile megatrain-run megatrain-inspect megatrain-profile
         gpu_kernel_tests gpu_executor_tests gpu_kernel_bench gpu_copy_queue_probe runtime_adamw_bench
         runtime_adamw_tests)

if [[ ! -f $BUILD_DIR/build.ninja ]] || ! grep -q '^MEGATRAIN_STATIC_MLIR:BOOL=ON' "$BUILD_DIR/CMakeCache.txt"; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGATRAIN_STATIC_MLIR=ON
fi
# Configure again: `--version`'s commit (plan/BuildInfo.h.in) is fixed when the build is
# configured, and the staged binaries must name the commit they are built from.
cmake "$BUILD_DIR" >/dev/null
CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES:-90a}
if ! grep -q "^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=$CUDA_ARCHITECTURES\$" "$BUILD_DIR/CMakeCache.txt"; then
  cmake "$BUILD_DIR" -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHITECTURES" >/dev/null
fi
if ! grep -q '^MEGATRAIN_CUDA_BUILT' "$BUILD_DIR/megatrain-features.txt"; then
  echo "stage_device.sh: $BUILD_DIR has no CUDA backend (nvcc not found?); the GPU binaries need it" >&2
  exit 1
fi
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}"

rm -rf "$STAGE/bin"
mkdir -p "$STAGE/bin"
for t in "${TARGETS[@]}"; do strip -o "$STAGE/bin/$t" "$BUILD_DIR/bin/$t"; done

# The compiler must not need LLVM or MLIR there.
allowed='^(linux-vdso|ld-linux-x86-64|ld-linux-aarch64|libc|libstdc\+\+|libm|libgcc_s|libprotobuf|libz|libpthread|libdl|librt)\.'
extra=$(ldd "$STAGE/bin/megatrain-compile" | awk '{ print $1 }' | sed 's|.*/||' | grep -vE "$allowed" || true)
if [[ -n $extra ]]; then
  echo "stage_device.sh: megatrain-compile needs libraries the GPU machine lacks: $extra" >&2
  exit 1
fi
echo "megatrain-compile needs: $(ldd "$STAGE/bin/megatrain-compile" | awk '{ print $1 }' | sed 's|.*/||' | tr '\n' ' ')"

# The demo plan, from the staged compiler; the same bytes as the shared-library build's.
demo=(frontends/models/tiny_transformer.onnx --shape input_ids=8x64 --lr 3e-3 --weight-decay 0.01)
# (The output path is in the plan's header, so both write the same path in turn.)
if [[ -x build/bin/megatrain-compile ]]; then
  build/bin/megatrain-compile "${demo[@]}" -o "$STAGE/tt.plan"
  mv "$STAGE/tt.plan" "$STAGE/tt.dynamic.plan"
fi
"$STAGE/bin/megatrain-compile" "${demo[@]}" -o "$STAGE/tt.plan"
if [[ -f $STAGE/tt.dynamic.plan ]]; then
  if cmp -s "$STAGE/tt.plan" "$STAGE/tt.dynamic.plan"; then
    echo "tt.plan: the static compiler's plan is byte-identical to build/bin/megatrain-compile's"
  else
    echo "stage_device.sh: the static and shared-library compilers made different plans" >&2
    exit 1
  fi
  rm -f "$STAGE/tt.dynamic.plan"
fi
source=/usr/share/games/fortunes
[[ -d $source ]] || source=docs
python3 frontends/python/make_corpus.py --source "$source" --out "$STAGE/fortunes.bin" > /dev/null

total=$(du -sb "$STAGE" | awk '{ print $1 }')
ls -l "$STAGE/bin" | awk 'NR > 1 { printf "  %-22s %6.1f MiB\n", $9, $5 / 1048576 }'
printf 'staged %s: %.1f MiB (limit %s MiB)\n' "$STAGE" "$(awk -v b="$total" 'BEGIN { print b / 1048576 }')" "$LIMIT_MIB"
if (( total > LIMIT_MIB * 1048576 )); then
  echo "stage_device.sh: $STAGE is over $LIMIT_MIB MiB" >&2
  exit 1
fi
cat <<EOF
on the GPU machine (carrying $STAGE):
  BIN=$STAGE/bin PLAN=$STAGE/tt.plan DATA=$STAGE/fortunes.bin STEPS=30 bash bench/device.sh
  OUT=\$OUT bash bench/llama1b3.sh      # BIN defaults to $STAGE/bin
EOF

# Plans for tests/gpu/streams_runs.sh: the demo with no budget, about half its arena and the
# smallest budget the planner reaches (offload and prefetch on the h2d/d2h streams).
mkdir -p "$STAGE/streams"
cp frontends/models/tiny_transformer.onnx "$STAGE/streams/model.onnx"
cp "$STAGE/fortunes.bin" "$STAGE/streams/corpus.bin"
for budget in none 1100000 803328; do
  "$STAGE/bin/megatrain-compile" "$STAGE/streams/model.onnx" -o "$STAGE/streams/demo-$budget.plan" \
    --shape input_ids=4x64 --loss next-token-ce --lr 3e-3 --precision fp32 \
    $([[ $budget != none ]] && echo --device-memory $budget) > /dev/null
done
echo "staged $STAGE/streams: $(ls "$STAGE/streams" | tr '\n' ' ')"
