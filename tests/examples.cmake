# The examples, run as a user would.  Included by tests/CMakeLists.txt.
if(TARGET count_hits)
  add_test(NAME examples.count_hits
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/count_hits.sh
      $<TARGET_FILE:count_hits> $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:sample>)
  set_tests_properties(examples.count_hits PROPERTIES TIMEOUT 60)
endif()
