# cmake/CudaArchitectures.cmake - which GPUs the CUDA backend is compiled for (docs/cuda.md, "Supported GPUs").
#
# Included before enable_language(CUDA). The list is CMAKE_CUDA_ARCHITECTURES when
# the user gives it (-DCMAKE_CUDA_ARCHITECTURES="86;90a"), else every GPU
# generation megatrain supports: Ampere (80: A100, 86: RTX 30xx / A-series),
# Ada (89: RTX 40xx, L4, L40) and Hopper (90a: H100, H200). Each entry NN or NNa
# becomes machine code for sm_NN(a), NN-real machine code only, NN-virtual PTX
# only. PTX of the newest entry without a suffix is added (compute_90 for 90a:
# arch-specific PTX does not run on later chips), so a later GPU can still
# JIT-compile the kernels. Sets:
#   MEGATRAIN_CUDA_GENCODE   the nvcc -gencode flags (a list)
#   MEGATRAIN_CUDA_ARCH_LIST the list as given, for messages ("80;86;89;90a")
# Each target sets CUDA_ARCHITECTURES OFF and takes MEGATRAIN_CUDA_GENCODE, so
# CMake 3.25's own handling of arch-specific (90a) entries is never relied on.
set(MEGATRAIN_DEFAULT_CUDA_ARCHITECTURES "80;86;89;90a")
# A value CMake chose itself (enable_language(CUDA) in a build folder configured
# before this file existed caches the compiler's default, sm_75, with the help
# string "CUDA architectures") is not the user's: it is replaced.
get_property(_help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES STREQUAL ""
   AND NOT _help STREQUAL "CUDA architectures")
  set(MEGATRAIN_CUDA_ARCH_LIST "${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(MEGATRAIN_CUDA_ARCH_LIST "${MEGATRAIN_DEFAULT_CUDA_ARCHITECTURES}")
  # enable_language(CUDA) would otherwise pick the compiler's default (sm_75).
  set(CMAKE_CUDA_ARCHITECTURES "${MEGATRAIN_DEFAULT_CUDA_ARCHITECTURES}" CACHE STRING
      "GPU architectures of the CUDA backend (default: 80;86;89;90a)" FORCE)
endif()

set(MEGATRAIN_CUDA_GENCODE "")
set(_ptx_arch "")
foreach(_entry IN LISTS MEGATRAIN_CUDA_ARCH_LIST)
  if(NOT _entry MATCHES "^([0-9]+)(a?)(-real|-virtual)?$")
    message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES: '${_entry}' is not an architecture "
      "like 80, 90a or 86-real (the CUDA backend needs 80 or newer)")
  endif()
  set(_number "${CMAKE_MATCH_1}")
  set(_arch "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
  set(_kind "${CMAKE_MATCH_3}")
  if(_number LESS 80)
    message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES: ${_entry} is older than Ampere; the CUDA "
      "backend's bf16 kernels need compute capability 8.0 or newer (80, 86, 89, 90a)")
  endif()
  if(NOT _kind STREQUAL "-virtual")
    list(APPEND MEGATRAIN_CUDA_GENCODE "-gencode=arch=compute_${_arch},code=sm_${_arch}")
  endif()
  if(_kind STREQUAL "-virtual")
    list(APPEND MEGATRAIN_CUDA_GENCODE "-gencode=arch=compute_${_arch},code=compute_${_arch}")
  elseif(_kind STREQUAL "" AND (_ptx_arch STREQUAL "" OR _number GREATER _ptx_arch))
    set(_ptx_arch ${_number})
  endif()
endforeach()
if(NOT _ptx_arch STREQUAL "")
  list(APPEND MEGATRAIN_CUDA_GENCODE "-gencode=arch=compute_${_ptx_arch},code=compute_${_ptx_arch}")
endif()
list(REMOVE_DUPLICATES MEGATRAIN_CUDA_GENCODE)
string(REPLACE ";" ", " _shown "${MEGATRAIN_CUDA_ARCH_LIST}")
if(_ptx_arch STREQUAL "")
  message(STATUS "megatrain: CUDA backend for ${_shown}")
else()
  message(STATUS "megatrain: CUDA backend for ${_shown} (+ PTX compute_${_ptx_arch})")
endif()
