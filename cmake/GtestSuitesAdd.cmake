# Included by ctest (see GtestSuites.cmake): lists the suites of one GoogleTest binary and adds a
# test for each. A binary that is missing or cannot list its tests becomes one failing test.
if(NOT EXISTS "${TRAINHOOKS_GTEST_BINARY}")
  add_test("${TRAINHOOKS_GTEST_TARGET}_NOT_BUILT" "${TRAINHOOKS_GTEST_BINARY}")
  return()
endif()
execute_process(
  COMMAND "${TRAINHOOKS_GTEST_BINARY}" --gtest_list_tests
  WORKING_DIRECTORY "${TRAINHOOKS_GTEST_WORKDIR}"
  OUTPUT_VARIABLE _listing ERROR_VARIABLE _errors RESULT_VARIABLE _rc TIMEOUT 120)
if(NOT _rc EQUAL 0)
  message(WARNING "${TRAINHOOKS_GTEST_BINARY} --gtest_list_tests failed (${_rc}): ${_errors}")
  add_test("${TRAINHOOKS_GTEST_TARGET}_LIST_FAILED" "${TRAINHOOKS_GTEST_BINARY}" --gtest_list_tests)
  return()
endif()
string(REPLACE "\n" ";" _lines "${_listing}")
foreach(_line IN LISTS _lines)
  # Suite lines start in column 0 and end with '.', optionally followed by a "# TypeParam" note.
  if(_line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    set(_suite "${CMAKE_MATCH_1}")
    add_test("${_suite}" "${TRAINHOOKS_GTEST_BINARY}" "--gtest_filter=${_suite}.*")
    set_tests_properties("${_suite}" PROPERTIES
      WORKING_DIRECTORY "${TRAINHOOKS_GTEST_WORKDIR}"
      TIMEOUT "${TRAINHOOKS_GTEST_TIMEOUT}"
      LABELS "${TRAINHOOKS_GTEST_TARGET}")
    foreach(_cost IN LISTS TRAINHOOKS_GTEST_COSTS)
      if(_cost MATCHES "^(.+)=([0-9.]+)$" AND CMAKE_MATCH_1 STREQUAL _suite)
        set_tests_properties("${_suite}" PROPERTIES COST "${CMAKE_MATCH_2}")
      endif()
    endforeach()
  endif()
endforeach()
