# third_party/Dependencies.cmake - finds protobuf, zlib, nlohmann-json, CLI11, MLIR, GoogleTest and CUDA
# (included at top level so the variables and imported targets they set are visible everywhere).

find_package(Protobuf REQUIRED)
find_package(Threads REQUIRED)
# zlib: the CRC-32 of the plan checksum (plan/lib/PlanChecksum.cpp) and of checkpoints
# (runtime/lib/Checksum.cpp).
find_package(ZLIB REQUIRED)
# nlohmann-json (header-only; Debian's nlohmann-json3-dev): every JSON the runtime reads,
# through plan/lib/Json.cpp (a token file's sidecar, the plan header's device profile,
# the --metrics rows a resumed run keeps).
find_package(nlohmann_json 3 REQUIRED)
message(STATUS "nlohmann-json ${nlohmann_json_VERSION} (${nlohmann_json_DIR})")
# CLI11 (header-only; Debian's libcli11-dev): every tool's command line, through
# plan/lib/ToolCli.cpp (help, --version, --config FILE.toml, "did you mean").
find_package(CLI11 CONFIG REQUIRED)
message(STATUS "CLI11 ${CLI11_VERSION} (${CLI11_DIR})")

if(MEGATRAIN_BUILD_COMPILER)
  find_package(MLIR REQUIRED CONFIG
    HINTS /usr/lib/llvm-19/lib/cmake/mlir)
  if(NOT LLVM_VERSION_MAJOR EQUAL 19)
    message(FATAL_ERROR "megatrain needs MLIR 19, found ${LLVM_PACKAGE_VERSION} (${MLIR_DIR})")
  endif()
  message(STATUS "MLIR ${MLIR_DIR}; LLVM ${LLVM_PACKAGE_VERSION}")
  list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
  include(TableGen)
  include(AddLLVM)
  include(AddMLIR)
endif()

if(MEGATRAIN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

if(MEGATRAIN_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(MEGATRAIN_HAVE_CUDA ON)
    message(STATUS "CUDA backend: enabled (${CMAKE_CUDA_COMPILER})")
  else()
    message(STATUS "CUDA backend: disabled (nvcc not found)")
  endif()
endif()
