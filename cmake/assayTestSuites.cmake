# Run by ctest when it starts (a TEST_INCLUDE_FILES entry of the top-level CMakeLists.txt): one
# CTest entry per GoogleTest suite of ASSAY_TEST_EXE, labelled "gpu" where the suite's name says
# it needs one and "cpu" otherwise. One process per suite rather than per test: each start of
# the test binary loads cuBLASLt (about 0.15 s of page faults), which was a third of the CPU
# suite's time. A failing entry's output names the failing tests; tests/test_main.cpp makes an
# entry with a skipped test report as skipped. In this script add_test has ctest's plain form:
# add_test(<name> <command> <args>...).
if(NOT EXISTS "${ASSAY_TEST_EXE}")
  add_test(assay_tests.NOT_BUILT "${ASSAY_TEST_EXE}")
  return()
endif()
execute_process(COMMAND "${ASSAY_TEST_EXE}" --gtest_list_tests OUTPUT_VARIABLE text ERROR_VARIABLE err
                RESULT_VARIABLE rc TIMEOUT 120)
if(NOT rc EQUAL 0)
  # The listing failed: one failing entry that shows why, instead of no entries.
  add_test(assay_tests.list "${ASSAY_TEST_EXE}" --gtest_list_tests)
  return()
endif()
string(REPLACE ";" "," text "${text}")
string(REPLACE "\n" ";" lines "${text}")
foreach(line IN LISTS lines)
  # A suite's line is unindented: "Suite." or "Prefix/Suite/0.  # TypeParam = ..."; its tests follow, indented.
  if(line MATCHES "^([^ #][^ ]*)\\.( |$)")
    set(suite "${CMAKE_MATCH_1}")
    add_test("${suite}" "${ASSAY_TEST_EXE}" "--gtest_filter=${suite}.*")
    if(suite MATCHES "Gpu")
      set(label gpu)
    else()
      set(label cpu)
    endif()
    set_tests_properties("${suite}" PROPERTIES SKIP_RETURN_CODE 77 LABELS "${label}")
  endif()
endforeach()
