# Unit tests of the x86 instruction analyzer (src/arch/x86/): vectors, emulation
# against the CPU, relocation over libc, random bytes at a page's end.
# Included by tests/CMakeLists.txt.

set(UPROBE_TEST_LIBC /lib/x86_64-linux-gnu/libc.so.6 CACHE FILEPATH
  "The C library the relocation sweep runs over")

function(uprobe_unit name)
  cmake_parse_arguments(U "" "" "SOURCES" ${ARGN})
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/unit/${name}.c ${U_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_include_directories(${name} PRIVATE ${UPROBE_PRIVATE_INCLUDE}
    ${CMAKE_CURRENT_LIST_DIR}/unit)
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_link_libraries(${name} PRIVATE uprobe PkgConfig::CMOCKA)
  add_test(NAME unit.${name} COMMAND ${name})
endfunction()

enable_language(ASM)
uprobe_unit(test_insn_vectors)
uprobe_unit(test_insn_emulate SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/emu_native_x86_64.S)
uprobe_unit(test_insn_reloc SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/emu_native_x86_64.S)
target_compile_definitions(test_insn_reloc PRIVATE UPROBE_TEST_LIBC="${UPROBE_TEST_LIBC}")
uprobe_unit(test_insn_bounds)
