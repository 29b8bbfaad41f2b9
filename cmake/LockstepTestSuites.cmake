# Registers a GoogleTest binary with ctest, one ctest test per test suite or per test.
#
#   LOCKSTEP_CTEST_PER=suite (default)  one process per suite: `--gtest_filter=Suite.*`. Each
#       process loads LibTorch, which costs 0.5 s of CPU (2-3 s of wall time beside two busy
#       loops), so 116 suites instead of 670 tests take minutes off every run. Every test's
#       own outcome (passed, skipped, failed) is in BUILD/test-results/<suite>.xml (GoogleTest's
#       XML report; '/' in a suite name becomes '_'). A suite passes when all its tests passed
#       or skipped.
#   LOCKSTEP_CTEST_PER=test             one process per test (gtest_discover_tests), where each
#       test must not depend on what an earlier one did to the process (ci/gpu uses it: once a
#       test has used CUDA, the loader refuses to fork workers in that process).
set(LOCKSTEP_CTEST_PER "suite" CACHE STRING "ctest granularity of lockstep_tests: suite or test")
set_property(CACHE LOCKSTEP_CTEST_PER PROPERTY STRINGS suite test)

function(lockstep_register_tests target timeout)
  if(LOCKSTEP_CTEST_PER STREQUAL "test")
    include(GoogleTest)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${timeout})
    return()
  endif()
  if(NOT LOCKSTEP_CTEST_PER STREQUAL "suite")
    message(FATAL_ERROR "LOCKSTEP_CTEST_PER must be 'suite' or 'test', got '${LOCKSTEP_CTEST_PER}'")
  endif()
  set(generated "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(results "${CMAKE_BINARY_DIR}/test-results")
  # After each build, list the binary's suites and write one add_test() per suite.
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -D "RESULTS_DIR=${results}"
            -D "TIMEOUT=${timeout}"
            -D "OUTPUT=${generated}"
            -P "${PROJECT_SOURCE_DIR}/cmake/gtest_suites.cmake"
    VERBATIM)
  # ctest reads this file; before the first build the suites are not known yet.
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  file(WRITE "${include_file}"
       "if(EXISTS \"${generated}\")\n"
       "  include(\"${generated}\")\n"
       "else()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
