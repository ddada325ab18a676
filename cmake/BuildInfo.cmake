# cmake/BuildInfo.cmake - writes BuildInfo.h (plan/BuildInfo.h.in): the version and the git commit
# every tool's --version prints. Run at configure time (included, for the first build) and before
# every build (cmake -P, target megatrain_build_info), so the commit is the build's, not the
# configure's; the file is rewritten only when its text changes, so nothing recompiles otherwise.
#   BUILD_INFO_SOURCE_DIR   the checkout ("unknown" commit outside a git checkout)
#   BUILD_INFO_INPUT        plan/BuildInfo.h.in
#   BUILD_INFO_OUTPUT       the header to write
#   PROJECT_VERSION         the project's version
execute_process(COMMAND git describe --always --dirty --tags
  WORKING_DIRECTORY ${BUILD_INFO_SOURCE_DIR}
  OUTPUT_VARIABLE MEGATRAIN_GIT_DESCRIBE OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _build_info_git ERROR_QUIET)
if(NOT _build_info_git EQUAL 0 OR MEGATRAIN_GIT_DESCRIBE STREQUAL "")
  set(MEGATRAIN_GIT_DESCRIBE "unknown")
endif()
configure_file(${BUILD_INFO_INPUT} ${BUILD_INFO_OUTPUT} @ONLY)
