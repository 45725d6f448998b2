# Reliability: the tracer itself checked by valgrind.  Included by tests/CMakeLists.txt.
# (not in the ASan build: valgrind and ASan do not run together)
if(NOT UPROBE_SANITIZE)
  add_test(NAME reliability.valgrind.trace
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/valgrind_trace.sh
      $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:sample>)
  set_tests_properties(reliability.valgrind.trace PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()

# the tracer stopped by a signal while 4 threads hit int3 and fast-path probes flat out:
# every byte back, the target untraced, its output and status as unprobed
foreach(sig INT TERM HUP)
  add_test(NAME reliability.stop.${sig}
    COMMAND ${UPROBE_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/integration/reliability_stop.py
      $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:core_fast> ${sig})
  set_tests_properties(reliability.stop.${sig} PROPERTIES TIMEOUT 90)
endforeach()

# privilege: an unprivileged trace of a set-uid program says what the kernel does to it
add_test(NAME reliability.setid_exec
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/setid_exec.sh $<TARGET_FILE:uprobe-cli>)
set_tests_properties(reliability.setid_exec PROPERTIES SKIP_RETURN_CODE 77)

# detach with return probes live, threads trapping in the trampoline at that moment
add_test(NAME reliability.detach.returns
  COMMAND ${UPROBE_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/integration/reliability_detach_ret.py
    $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:core_threads> 12)
set_tests_properties(reliability.detach.returns PROPERTIES TIMEOUT 120)
