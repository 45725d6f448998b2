# The trust boundary (docs/design.md, "The trust boundary"): the tracer built hardened,
# the agent blob freestanding, and traced programs that attack the shared region the
# agent writes while the tracer reads it.  Included by tests/CMakeLists.txt (after
# core.cmake: uprobe_core_target).

if(UPROBE_SANITIZE)
  set(_fortify OFF)
else()
  set(_fortify ON)
endif()
add_test(NAME build.hardening
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/hardening.sh $<TARGET_FILE:uprobe-cli>
    ${CMAKE_BINARY_DIR}/src/agent/agent.o ${CMAKE_BINARY_DIR}/src/agent/agent.elf ${_fortify})
set_tests_properties(build.hardening PROPERTIES SKIP_RETURN_CODE 77)

# hostile targets: the shared region attacked while the tracer reads it as records, as
# in-process histograms, and as raw output (tests/integration/hostile.py)
uprobe_core_target(hostile hostile.c THREADS)
target_include_directories(hostile PRIVATE ${UPROBE_PRIVATE_INCLUDE})
foreach(kind records hist raw)
  add_test(NAME trust.hostile.${kind}
    COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/hostile.py $<TARGET_FILE:uprobe-cli>
      $<TARGET_FILE:hostile> ${kind})
  set_tests_properties(trust.hostile.${kind} PROPERTIES TIMEOUT 300)
endforeach()
