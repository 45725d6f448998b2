# The probes people already have (issue 20): USDT probes (SDT notes, with semaphores),
# wildcard symbols and DWARF variables, each checked against the kernel's own uprobe
# tracer (--backend kernel) where tracefs is there.  Included by tests/CMakeLists.txt.
# The traced programs set their own compile and link options: no sanitizer in them
# (LeakSanitizer does not run under ptrace).

include(CheckIncludeFile)
check_include_file(sys/sdt.h UPROBE_HAVE_SDT_H)

if(UPROBE_HAVE_SDT_H)
  add_executable(usdt_prog ${CMAKE_CURRENT_LIST_DIR}/targets/usdt_prog.c)
  set_target_properties(usdt_prog PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/targets
    COMPILE_OPTIONS "-O2;-g;-Wall" LINK_OPTIONS "")
  set(_usdt_prog $<TARGET_FILE:usdt_prog>)
  # a library's probe, found through the program that needs it
  add_library(usdt_lib SHARED ${CMAKE_CURRENT_LIST_DIR}/targets/usdt_lib.c)
  set_target_properties(usdt_lib PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/targets
    COMPILE_OPTIONS "-O2;-g;-Wall" LINK_OPTIONS "")
  add_executable(usdt_libuser ${CMAKE_CURRENT_LIST_DIR}/targets/usdt_lib.c)
  target_compile_definitions(usdt_libuser PRIVATE USDT_LIB_MAIN)
  target_link_libraries(usdt_libuser PRIVATE usdt_lib)
  # RUNPATH: the library found as ld.so finds it
  set_target_properties(usdt_libuser PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/targets
    COMPILE_OPTIONS "-O2;-g;-Wall" LINK_OPTIONS "-Wl,--enable-new-dtags")
  set(_usdt_libuser $<TARGET_FILE:usdt_libuser>)
else()
  # the test says why it skips
  set(_usdt_prog "missing:sys/sdt.h (apt-get install systemtap-sdt-dev)")
  set(_usdt_libuser "${_usdt_prog}")
endif()

add_test(NAME probes.usdt
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/probes_usdt.sh ${UPROBE_BIN} ${_usdt_prog}
    ${_usdt_libuser})
add_test(NAME probes.usdt.python
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/probes_python.sh ${UPROBE_BIN})
set_tests_properties(probes.usdt probes.usdt.python PROPERTIES SKIP_RETURN_CODE 77
  RESOURCE_LOCK uprobe_tracefs_uptest_kb TIMEOUT 120)

add_test(NAME probes.glob
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/probes_glob.sh ${UPROBE_BIN})
set_tests_properties(probes.glob PROPERTIES SKIP_RETURN_CODE 77
  RESOURCE_LOCK uprobe_tracefs_uptest_kb TIMEOUT 180)

# DWARF: one program at -O0 (variables on the stack) and at -O2 (in registers, or
# optimized out)
foreach(_o 0 2)
  add_executable(dwarf_prog_O${_o} ${CMAKE_CURRENT_LIST_DIR}/targets/dwarf_prog.c)
  set_target_properties(dwarf_prog_O${_o} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/targets
    COMPILE_OPTIONS "-O${_o};-g;-Wall" LINK_OPTIONS "")
endforeach()
add_test(NAME probes.dwarf
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/probes_dwarf.sh ${UPROBE_BIN}
    $<TARGET_FILE:dwarf_prog_O0> $<TARGET_FILE:dwarf_prog_O2>)
set_tests_properties(probes.dwarf PROPERTIES SKIP_RETURN_CODE 77
  RESOURCE_LOCK uprobe_tracefs_uptest_kb TIMEOUT 120)

# USDT operand strings, unit by unit
uprobe_unit(test_usdt)
