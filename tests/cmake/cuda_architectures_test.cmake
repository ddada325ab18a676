# tests/cmake/cuda_architectures_test.cmake - cmake/CudaArchitectures.cmake turns an architecture list into nvcc flags.
# Run as: cmake [-DARCHS=86-real,89] -DEXPECT=FLAGS -P cuda_architectures_test.cmake
# ARCHS (commas for semicolons) becomes CMAKE_CUDA_ARCHITECTURES; EXPECT is the expected
# MEGATRAIN_CUDA_GENCODE, entries joined with spaces.
if(DEFINED ARCHS)
  string(REPLACE "," ";" CMAKE_CUDA_ARCHITECTURES "${ARCHS}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/CudaArchitectures.cmake)
string(REPLACE ";" " " got "${MEGATRAIN_CUDA_GENCODE}")
if(NOT got STREQUAL EXPECT)
  message(FATAL_ERROR "for [${CMAKE_CUDA_ARCHITECTURES}]:\n  got      ${got}\n  expected ${EXPECT}")
endif()
message(STATUS "ok: [${MEGATRAIN_CUDA_ARCH_LIST}] -> ${got}")
