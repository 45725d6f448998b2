# Reliability: the tracer itself checked by valgrind.  Included by tests/CMakeLists.txt.
add_test(NAME reliability.valgrind.trace
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/valgrind_trace.sh
    $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:sample>)
set_tests_properties(reliability.valgrind.trace PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
