# Fails when a Catch2 test name would be run as something else under CTest: catch_discover_tests
# splits a name at ';', Catch reads a leading '-' as an option and a leading '\' as an escape,
# and the test then runs nothing (or is an error) while CTest may count it as passed.
# Usage: cmake -DTESTS_DIR=<dir> -P check_test_names.cmake
file(GLOB_RECURSE sources "${TESTS_DIR}/*.cpp")
set(bad "")
foreach(source IN LISTS sources)
  file(STRINGS "${source}" lines REGEX "TEST_CASE\\(\"")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "TEST_CASE\\(\"([^\"]*)\"" found "${line}")
    set(name "${CMAKE_MATCH_1}")
    if(name MATCHES "^[-\\\\]" OR name MATCHES ";")
      string(APPEND bad "\n  ${source}: ${line}")
    endif()
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "test names CTest cannot run as written (no ';', no leading '-' or '\\'):${bad}")
endif()
