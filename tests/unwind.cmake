# Stacks by the unwind tables (src/sym/unwind.c, issue 31): a program built -O2
# -fomit-frame-pointer and a shared library it calls through the PLT; every stack a
# stacktrace hist key counts at leaf() equals gdb's bt at the same hits.
add_library(unwind_lib SHARED ${CMAKE_CURRENT_LIST_DIR}/targets/unwind_lib.c)
# their own flags replace the tree's (no sanitizers: a traced program's LeakSanitizer
# cannot run under ptrace), the link's too
set_target_properties(unwind_lib PROPERTIES
  COMPILE_OPTIONS "-O2;-g;-fPIC;-fomit-frame-pointer;-Wall"
  LINK_OPTIONS "")
add_executable(unwind_prog ${CMAKE_CURRENT_LIST_DIR}/targets/unwind_prog.c)
set_target_properties(unwind_prog PROPERTIES
  COMPILE_OPTIONS "-O2;-g;-fomit-frame-pointer;-Wall"
  LINK_OPTIONS "")
target_link_libraries(unwind_prog PRIVATE unwind_lib)
find_program(UPROBE_GDB gdb)
if(UPROBE_GDB)
  add_test(NAME trace.unwind_gdb
    COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/unwind_gdb.py
      $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:unwind_prog> 3)
  set_tests_properties(trace.unwind_gdb PROPERTIES TIMEOUT 600)
endif()

# The same program built without unwind tables (-g: its CFI in .debug_frame), stripped,
# its symbols and .debug_frame in a separate debug file beside it that .gnu_debuglink
# names: the tables take .debug_frame's CFI for the code .eh_frame does not cover
add_executable(unwind_dbgframe ${CMAKE_CURRENT_LIST_DIR}/targets/unwind_prog.c)
set_target_properties(unwind_dbgframe PROPERTIES
  COMPILE_OPTIONS "-O2;-g;-fomit-frame-pointer;-fno-asynchronous-unwind-tables;-fno-unwind-tables;-Wall"
  LINK_OPTIONS "")
target_link_libraries(unwind_dbgframe PRIVATE unwind_lib)
add_custom_command(TARGET unwind_dbgframe POST_BUILD
  COMMAND objcopy --only-keep-debug $<TARGET_FILE:unwind_dbgframe>
    $<TARGET_FILE:unwind_dbgframe>.debug
  COMMAND objcopy --strip-all --add-gnu-debuglink=$<TARGET_FILE:unwind_dbgframe>.debug
    $<TARGET_FILE:unwind_dbgframe>
  WORKING_DIRECTORY $<TARGET_FILE_DIR:unwind_dbgframe>
  VERBATIM)
if(UPROBE_GDB)
  add_test(NAME trace.unwind_debug_frame
    COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/unwind_gdb.py
      $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:unwind_dbgframe> 3 prog-only)
  set_tests_properties(trace.unwind_debug_frame PROPERTIES TIMEOUT 600)
endif()

# --format folded and --flamegraph: the folded lines are the stacktrace key's stacks, and
# the SVG opened in headless Chromium (skipped without it) shows and zooms its frames
add_test(NAME trace.flamegraph
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/flamegraph.py
    $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:unwind_prog>)
set_tests_properties(trace.flamegraph PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)

# Signals at a high rate at a hot function probed on the fast path: a signal that
# interrupts its trampoline, the agent's C code or the relocated instructions still
# shows the program's frames (the trampolines' rows, the agent's .eh_frame)
add_executable(unwind_sig ${CMAKE_CURRENT_LIST_DIR}/targets/unwind_sig.c)
set_target_properties(unwind_sig PROPERTIES
  COMPILE_OPTIONS "-O2;-g;-fomit-frame-pointer;-Wall"
  LINK_OPTIONS "-pthread")
target_link_libraries(unwind_sig PRIVATE pthread)
add_test(NAME trace.unwind_signal
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/unwind_signal.py
    $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:unwind_sig>)
set_tests_properties(trace.unwind_signal PROPERTIES TIMEOUT 300)
