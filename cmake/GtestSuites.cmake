# trainhooks_gtest_suites(TARGET [TIMEOUT s]): registers one ctest test per GoogleTest suite of
# TARGET (`<binary> --gtest_filter=<Suite>.*`), listed from the binary when ctest starts. A suite
# named in TRAINHOOKS_TEST_COSTS ("Suite=seconds;...", set before the call) gets that COST.
#
# gtest_discover_tests registers one test per case, and ctest then starts one process per case:
# with LibTorch loaded by each (about 2 s), that was most of the suite's run time. One process
# per suite keeps a failure's name and output in ctest's report at a fraction of the cost.
set(_TRAINHOOKS_GTEST_SUITES_DIR ${CMAKE_CURRENT_LIST_DIR})

function(trainhooks_gtest_suites target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  file(GENERATE OUTPUT "${include_file}" CONTENT
"set(TRAINHOOKS_GTEST_BINARY \"$<TARGET_FILE:${target}>\")
set(TRAINHOOKS_GTEST_TARGET \"${target}\")
set(TRAINHOOKS_GTEST_WORKDIR \"${CMAKE_CURRENT_BINARY_DIR}\")
set(TRAINHOOKS_GTEST_TIMEOUT \"${ARG_TIMEOUT}\")
set(TRAINHOOKS_GTEST_COSTS \"${TRAINHOOKS_TEST_COSTS}\")
include(\"${_TRAINHOOKS_GTEST_SUITES_DIR}/GtestSuitesAdd.cmake\")
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
