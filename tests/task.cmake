# Tests of the ptrace engine (src/task/) against real programs: the victim program
# (tests/targets/task_victim.c), one behaviour per mode.  Included by tests/CMakeLists.txt.

set(UPROBE_TASK_TARGETS ${CMAKE_BINARY_DIR}/tests/targets)
find_package(Threads REQUIRED)

# Built with its own flags: no-PIE so symbol values are addresses, -O0 so the probed
# function stays a function.
add_executable(task_victim ${CMAKE_CURRENT_LIST_DIR}/targets/task_victim.c)
set_target_properties(task_victim PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${UPROBE_TASK_TARGETS}
  COMPILE_OPTIONS "-O0;-g;-fno-pie;-Wall"
  LINK_OPTIONS "-no-pie")
target_link_libraries(task_victim PRIVATE Threads::Threads)

uprobe_unit(test_task)
add_dependencies(test_task task_victim)
target_compile_definitions(test_task PRIVATE
  TASK_VICTIM="$<TARGET_FILE:task_victim>")
set_tests_properties(unit.test_task PROPERTIES TIMEOUT 120)
if(TARGET target32)
  add_dependencies(test_task target32)
  target_compile_definitions(test_task PRIVATE TASK_TARGET32="$<TARGET_FILE:target32>")
endif()
