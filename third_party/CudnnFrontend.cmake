# third_party/CudnnFrontend.cmake - finds cuDNN 9 and the cuDNN frontend's C++ headers for the fused attention path.
#
# Included by runtime/cuda/CMakeLists.txt after find_package(CUDAToolkit). Nothing is
# vendored: cuDNN comes with the CUDA toolkit (or a system package), its header-only
# frontend with the PyPI package nvidia-cudnn-frontend (requirements-test.txt,
# scripts/setup.sh), whose wheel puts the headers in site-packages/include beside its
# `cudnn` Python package. Found here by asking python3 where that package lies (the
# package itself is not imported: it would load cuDNN); -DMEGATRAIN_CUDNN_FRONTEND_INCLUDE=DIR
# names the folder holding cudnn_frontend.h instead.
#
# Sets MEGATRAIN_HAVE_CUDNN and, when ON, the interface target megatrain::cudnn: the
# frontend and cuDNN include folders, libcudnn linked dynamically (like cuBLAS; the
# GPU machine has cuDNN 9 in the system library folder) and NVRTC, which the frontend's
# headers reference for their runtime-compiled engines. Missing pieces leave attention
# on its GEMM path, with one status line that says what was missing.
option(MEGATRAIN_CUDNN "Use cuDNN's fused attention when cuDNN and the frontend headers are found" ON)
set(MEGATRAIN_CUDNN_FRONTEND_INCLUDE "" CACHE PATH "folder holding cudnn_frontend.h (default: asked of python3)")
set(MEGATRAIN_HAVE_CUDNN OFF)

if(MEGATRAIN_CUDNN)
  set(_fe_include "${MEGATRAIN_CUDNN_FRONTEND_INCLUDE}")
  if(NOT _fe_include)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      execute_process(
        COMMAND ${Python3_EXECUTABLE} -c
          "import importlib.util, os; s = importlib.util.find_spec('cudnn'); print(os.path.join(os.path.dirname(list(s.submodule_search_locations)[0]), 'include') if s and s.submodule_search_locations else '')"
        OUTPUT_VARIABLE _fe_include OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    endif()
  endif()
  find_path(MEGATRAIN_CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} PATHS /usr/include /usr/include/x86_64-linux-gnu
    DOC "folder holding cudnn.h (cuDNN 9)")
  find_library(MEGATRAIN_CUDNN_LIBRARY cudnn
    HINTS ${CUDAToolkit_LIBRARY_DIR} PATHS /usr/lib/x86_64-linux-gnu
    DOC "libcudnn (cuDNN 9)")
  set(_cudnn_major "")
  if(MEGATRAIN_CUDNN_INCLUDE_DIR AND EXISTS "${MEGATRAIN_CUDNN_INCLUDE_DIR}/cudnn_version.h")
    file(STRINGS "${MEGATRAIN_CUDNN_INCLUDE_DIR}/cudnn_version.h" _line REGEX "^#define CUDNN_MAJOR [0-9]+")
    string(REGEX MATCH "[0-9]+" _cudnn_major "${_line}")
  endif()
  if(NOT _fe_include OR NOT EXISTS "${_fe_include}/cudnn_frontend.h")
    message(STATUS "cuDNN attention: disabled (no cudnn_frontend.h: pip install nvidia-cudnn-frontend, "
                   "or -DMEGATRAIN_CUDNN_FRONTEND_INCLUDE=DIR)")
  elseif(NOT MEGATRAIN_CUDNN_INCLUDE_DIR OR NOT MEGATRAIN_CUDNN_LIBRARY)
    message(STATUS "cuDNN attention: disabled (cuDNN's cudnn.h or libcudnn not found)")
  elseif(NOT _cudnn_major STREQUAL "9")
    message(STATUS "cuDNN attention: disabled (cuDNN ${_cudnn_major} found, 9 needed)")
  elseif(NOT TARGET CUDA::nvrtc)
    message(STATUS "cuDNN attention: disabled (the CUDA toolkit has no NVRTC)")
  else()
    set(MEGATRAIN_HAVE_CUDNN ON)
    add_library(megatrain_cudnn INTERFACE)
    add_library(megatrain::cudnn ALIAS megatrain_cudnn)
    # SYSTEM: the frontend's headers are not held to this project's warnings.
    target_include_directories(megatrain_cudnn SYSTEM INTERFACE ${_fe_include} ${MEGATRAIN_CUDNN_INCLUDE_DIR})
    target_link_libraries(megatrain_cudnn INTERFACE ${MEGATRAIN_CUDNN_LIBRARY} CUDA::nvrtc)
    target_compile_definitions(megatrain_cudnn INTERFACE MEGATRAIN_HAVE_CUDNN=1)
    message(STATUS "cuDNN attention: enabled (cuDNN ${MEGATRAIN_CUDNN_LIBRARY}, frontend ${_fe_include})")
  endif()
endif()
