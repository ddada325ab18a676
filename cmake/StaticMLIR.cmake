# cmake/StaticMLIR.cmake - MEGATRAIN_STATIC_MLIR: link the compiler against the static
# MLIR and LLVM archives instead of Debian's shared libMLIR / libLLVM.
#
# Debian's exported MLIR targets (MLIRIR, MLIRPass, ...) are static archives whose link
# interface names the shared `LLVM` library. This module walks that interface from the
# MLIR libraries the compiler uses, collects every MLIR archive reached, and replaces
# `LLVM` by the LLVM component archives they need. The archives are linked as one
# rescanned group, so their order does not matter. The result, stripped, needs only
# libc, libstdc++, libm and libprotobuf (and libz through it): it runs on a machine
# with no LLVM installed (the GPU machine, docs/cuda.md).
#
# Sets MEGATRAIN_MLIR_LIBS to the interface target megatrain_mlir_static.

set(_mt_seeds
  MLIRIR MLIRSupport MLIRFuncDialect MLIRPass MLIRTransforms MLIRTransformUtils
  MLIRParser MLIRAsmParser MLIRBytecodeReader MLIRBytecodeWriter MLIRSideEffectInterfaces
  MLIRInferTypeOpInterface MLIRRewrite MLIRAnalysis
  # megatrain-opt's driver (MlirOptMain), so a static build folder builds every target.
  MLIROptLib)
# LLVM components the MLIR archives above use (Support's compression, z3 and zstd
# parts are not reached, so their shared libraries are not needed).
set(_mt_llvm_components LLVMSupport LLVMDemangle)

set(_mt_seen "")
set(_mt_queue ${_mt_seeds})
while(_mt_queue)
  list(POP_FRONT _mt_queue _mt_lib)
  if(NOT _mt_lib MATCHES "^MLIR" OR _mt_lib IN_LIST _mt_seen)
    continue()
  endif()
  if(NOT TARGET ${_mt_lib})
    message(FATAL_ERROR "MEGATRAIN_STATIC_MLIR: MLIR has no library ${_mt_lib}")
  endif()
  list(APPEND _mt_seen ${_mt_lib})
  get_target_property(_mt_deps ${_mt_lib} INTERFACE_LINK_LIBRARIES)
  if(_mt_deps)
    list(APPEND _mt_queue ${_mt_deps})
  endif()
endwhile()

# Archive paths, not the targets: the targets would bring the shared LLVM back.
set(_mt_archives "")
foreach(_mt_lib IN LISTS _mt_seen _mt_llvm_components)
  set(_mt_path "${LLVM_LIBRARY_DIR}/lib${_mt_lib}.a")
  if(NOT EXISTS "${_mt_path}")
    message(FATAL_ERROR "MEGATRAIN_STATIC_MLIR: ${_mt_path} not found (the static MLIR/LLVM archives of llvm-19)")
  endif()
  list(APPEND _mt_archives "${_mt_path}")
endforeach()
list(LENGTH _mt_archives _mt_count)
message(STATUS "MLIR: static, ${_mt_count} archives from ${LLVM_LIBRARY_DIR}")

add_library(megatrain_mlir_static INTERFACE)
string(REPLACE ";" "," _mt_group "${_mt_archives}")
target_link_libraries(megatrain_mlir_static INTERFACE
  "$<LINK_GROUP:RESCAN,${_mt_group}>" Threads::Threads ${CMAKE_DL_LIBS} m)
set(MEGATRAIN_MLIR_LIBS megatrain_mlir_static)
