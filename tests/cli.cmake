# Tests of the uprobe command (decode, list) and the ELF reader behind it, and the test
# target programs they run on.  Included by tests/CMakeLists.txt.

find_program(UPROBE_PYTHON3 NAMES python3)
find_program(UPROBE_OBJDUMP NAMES objdump)
set(UPROBE_BIN $<TARGET_FILE:uprobe-cli>)
set(UPROBE_IT ${CMAKE_CURRENT_LIST_DIR}/integration)
set(UPROBE_TARGETS_DIR ${CMAKE_BINARY_DIR}/tests/targets)

# ---- target programs -------------------------------------------------------------------
# Their code is what the goldens and the tracer tests look at, so they are built with
# their own flags only: not the project's warnings-as-errors, not the sanitizers.

# The seed's sample, at static addresses as in 2010: -O0, no PIE.
add_executable(sample ${CMAKE_CURRENT_LIST_DIR}/targets/sample.c)
set_target_properties(sample PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${UPROBE_TARGETS_DIR}
  COMPILE_OPTIONS "-O0;-g;-fno-pie;-Wall;-Wno-unused-variable;-Wno-unused-parameter"
  LINK_OPTIONS "-no-pie")

include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_FLAGS -m32)
set(CMAKE_REQUIRED_LINK_OPTIONS -m32)
set(CMAKE_REQUIRED_QUIET ON)
check_c_source_compiles("#include <stdio.h>
int main(void) { puts(\"32\"); return 0; }" UPROBE_HAVE_M32)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
unset(CMAKE_REQUIRED_QUIET)
if(UPROBE_HAVE_M32)
  add_executable(target32 ${CMAKE_CURRENT_LIST_DIR}/targets/target32.c)
  set_target_properties(target32 PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${UPROBE_TARGETS_DIR}
    COMPILE_OPTIONS "-m32;-O2;-g;-fno-pie;-Wall"
    LINK_OPTIONS "-m32;-no-pie")
else()
  message(STATUS "uprobe: gcc -m32 cannot build a program here (install gcc-multilib): "
                 "no 32-bit target, its tests will report SKIP")
endif()

# ---- the command line ------------------------------------------------------------------

add_test(NAME cli.help COMMAND ${UPROBE_BIN} --help)
set_tests_properties(cli.help PROPERTIES
  PASS_REGULAR_EXPRESSION "usage: uprobe .*decode .*list ")
add_test(NAME cli.help_decode COMMAND ${UPROBE_BIN} help decode)
set_tests_properties(cli.help_decode PROPERTIES
  PASS_REGULAR_EXPRESSION "usage: uprobe decode \\[-m 32\\|64\\]")
add_test(NAME cli.version COMMAND ${UPROBE_BIN} --version)
set_tests_properties(cli.version PROPERTIES
  PASS_REGULAR_EXPRESSION "^uprobe ${PROJECT_VERSION}\n$")

# decode's error paths: exit status 2 and a message naming what is wrong.
set(_expect ${UPROBE_IT}/expect_exit.sh)
set(_sample $<TARGET_FILE:sample>)
add_test(NAME cli.usage_no_command COMMAND ${_expect} 2 "usage: uprobe" ${UPROBE_BIN})
add_test(NAME cli.unknown_command
  COMMAND ${_expect} 2 "no such command 'frobnicate'" ${UPROBE_BIN} frobnicate)
add_test(NAME cli.decode.missing_file
  COMMAND ${_expect} 2 "^uprobe decode: /nonexistent/prog: No such file or directory$"
          ${UPROBE_BIN} decode /nonexistent/prog)
add_test(NAME cli.decode.not_elf
  COMMAND ${_expect} 2 "^uprobe decode: /etc/passwd: not an ELF file$"
          ${UPROBE_BIN} decode /etc/passwd)
add_test(NAME cli.decode.directory
  COMMAND ${_expect} 2 "^uprobe decode: /tmp: Is a directory$" ${UPROBE_BIN} decode /tmp)
add_test(NAME cli.decode.unknown_symbol
  COMMAND ${_expect} 2 "^uprobe decode: .*/sample: no function symbol 'no_such_function'$"
          ${UPROBE_BIN} decode ${_sample} no_such_function)
add_test(NAME cli.decode.bad_mode
  COMMAND ${_expect} 2 "^uprobe decode: bad mode '16': expected 32 or 64$"
          ${UPROBE_BIN} decode -m 16 ${_sample})
add_test(NAME cli.decode.no_file COMMAND ${_expect} 2 "no FILE given" ${UPROBE_BIN} decode)
add_test(NAME cli.decode.bad_elf COMMAND ${UPROBE_IT}/bad_elf.sh ${UPROBE_BIN} ${_sample})
add_test(NAME cli.list.missing_file
  COMMAND ${_expect} 2 "^uprobe list: /nonexistent/lib.so: No such file or directory$"
          ${UPROBE_BIN} list /nonexistent/lib.so)

# decode -s: the counts add up to the lines decode prints.
add_test(NAME cli.decode.summary
  COMMAND sh -c "n=$(\"$0\" decode \"$1\" main | wc -l) && \"$0\" decode -s \"$1\" main | tee /dev/stderr | grep -qx \"total $n\""
          ${UPROBE_BIN} ${_sample})

# decode 0xVADDR decodes the function holding VADDR (up_sym_elf_enclosing_func): the
# address inside foo that nm gives, plus 4, must decode exactly as "foo" does.
add_test(NAME cli.decode.by_address
  COMMAND sh -c "a=$(nm \"$1\" | awk '$3 == \"foo\" { print $1 }') && a=$(printf 0x%x $((0x$a + 4))) && echo \"foo+4 = $a\" && \"$0\" decode \"$1\" foo > foo.by-name && \"$0\" decode \"$1\" $a > foo.by-addr && test -s foo.by-name && cmp foo.by-name foo.by-addr && echo PASS"
          ${UPROBE_BIN} ${_sample})

# golden output of decode --asm on the sample's foo and main (UPROBE_REGEN=1 rewrites)
add_test(NAME cli.decode.golden
  COMMAND ${UPROBE_IT}/golden.sh ${UPROBE_BIN} ${CMAKE_CURRENT_LIST_DIR}/golden sample
          ${_sample} foo main)

# ---- oracles: objdump and readelf ------------------------------------------------------

set(_libc /lib/x86_64-linux-gnu/libc.so.6)
if(UPROBE_PYTHON3)
  add_test(NAME decode.objdump.libc
    COMMAND ${UPROBE_PYTHON3} ${UPROBE_IT}/objdump_diff.py --uprobe ${UPROBE_BIN}
            --max-slow-pct 0.5 ${_libc})
  add_test(NAME decode.objdump.self
    COMMAND ${UPROBE_PYTHON3} ${UPROBE_IT}/objdump_diff.py --uprobe ${UPROBE_BIN}
            ${UPROBE_BIN})
  add_test(NAME decode.objdump.sample
    COMMAND ${UPROBE_PYTHON3} ${UPROBE_IT}/objdump_diff.py --uprobe ${UPROBE_BIN} ${_sample})
  if(UPROBE_HAVE_M32)
    add_test(NAME decode.objdump.target32
      COMMAND ${UPROBE_PYTHON3} ${UPROBE_IT}/objdump_diff.py --uprobe ${UPROBE_BIN}
              $<TARGET_FILE:target32>)
  else()
    add_test(NAME decode.objdump.target32
      COMMAND sh -c "echo 'SKIP: no 32-bit target: gcc -m32 cannot link (gcc-multilib)'; exit 77")
  endif()
  add_test(NAME cli.list.sample
    COMMAND ${UPROBE_PYTHON3} ${UPROBE_IT}/list_check.py --uprobe ${UPROBE_BIN}
            --expect foo --expect main ${_sample})
  add_test(NAME cli.list.libc
    COMMAND ${UPROBE_PYTHON3} ${UPROBE_IT}/list_check.py --uprobe ${UPROBE_BIN}
            --expect malloc --expect memcpy ${_libc})
  set_tests_properties(decode.objdump.libc decode.objdump.self decode.objdump.sample
    decode.objdump.target32 cli.list.sample cli.list.libc PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 300)
else()
  message(STATUS "uprobe: python3 not found: the objdump/readelf differential tests "
                 "will report SKIP")
  add_test(NAME decode.objdump
    COMMAND sh -c "echo 'SKIP: python3 not found (Debian package python3)'; exit 77")
  set_tests_properties(decode.objdump PROPERTIES SKIP_RETURN_CODE 77)
endif()
