# Replay builds of the libFuzzer targets in fuzz/ (scripts/fuzz.sh runs the real
# fuzzer): each fuzz/fuzz_<name>.c linked with fuzz/replay_main.c and the library,
# built with the normal compiler, and a ctest fuzz.replay.<name> that runs it over the
# whole checked-in corpus fuzz/corpus/<name>/ -- a fast regression of every input the
# fuzzer ever kept.  Included by tests/CMakeLists.txt.

set(UPROBE_FUZZ_DIR ${CMAKE_SOURCE_DIR}/fuzz)
file(GLOB UPROBE_FUZZ_TARGETS CONFIGURE_DEPENDS ${UPROBE_FUZZ_DIR}/fuzz_*.c)
list(SORT UPROBE_FUZZ_TARGETS)
foreach(src ${UPROBE_FUZZ_TARGETS})
  get_filename_component(stem ${src} NAME_WE)      # fuzz_<name>
  string(REGEX REPLACE "^fuzz_" "" name ${stem})
  add_executable(${stem}_replay ${src} ${UPROBE_FUZZ_DIR}/replay_main.c)
  set_target_properties(${stem}_replay PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  target_include_directories(${stem}_replay PRIVATE ${UPROBE_PRIVATE_INCLUDE})
  target_compile_definitions(${stem}_replay PRIVATE _GNU_SOURCE)
  target_link_libraries(${stem}_replay PRIVATE uprobe)
  if(IS_DIRECTORY ${UPROBE_FUZZ_DIR}/corpus/${name})
    add_test(NAME fuzz.replay.${name}
      COMMAND ${stem}_replay ${UPROBE_FUZZ_DIR}/corpus/${name})
    set_tests_properties(fuzz.replay.${name} PROPERTIES TIMEOUT 120
      ENVIRONMENT "UPROBE_DEBUG_DIRS=/nonexistent")
  endif()
endforeach()
