# Tests of the probing core (src/uprobes.c, src/ubp.c, src/xol.c): exact hit counts
# with threads, every instruction of real functions against a single-step oracle,
# fork/vfork/exec/clone/exit, signals, handlers that change registers or (un)register
# probes, and the API's errors.  Included by tests/CMakeLists.txt.

set(UPROBE_CORE_TARGETS_DIR ${CMAKE_BINARY_DIR}/tests/targets)

# ---- target programs: their own flags (not -Werror, no sanitizers), static addresses --
function(uprobe_core_target name src)
  cmake_parse_arguments(T "THREADS;M32;STATIC" "" "" ${ARGN})
  set(copts -O2 -g -fno-pie -Wall)
  set(lopts -no-pie)
  if(T_STATIC)
    list(APPEND lopts -static)
  endif()
  if(T_M32)
    list(PREPEND copts -m32 -msse2)
    list(PREPEND lopts -m32)
  endif()
  if(T_THREADS)
    list(APPEND copts -pthread)
    list(APPEND lopts -pthread)
  endif()
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/targets/${src})
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${UPROBE_CORE_TARGETS_DIR}
    COMPILE_OPTIONS "${copts}"
    LINK_OPTIONS "${lopts}")
endfunction()

uprobe_core_target(core_threads core_threads.c THREADS)
uprobe_core_target(core_threads_static core_threads.c THREADS STATIC)
uprobe_core_target(core_insns core_insns.c)
uprobe_core_target(core_fork core_fork.c THREADS)
uprobe_core_target(core_signals core_signals.c)
uprobe_core_target(core_calls core_calls.c)
uprobe_core_target(core_ret core_ret.c)
set(UPROBE_CORE_TARGET_LIST core_threads core_threads_static core_insns core_fork core_signals core_calls core_ret)
if(UPROBE_HAVE_M32)
  uprobe_core_target(core_insns32 core_insns.c M32)
  list(APPEND UPROBE_CORE_TARGET_LIST core_insns32)
endif()

# ---- the oracle: raw ptrace single-stepping, independent of the library ----------------
add_executable(sstep_count ${CMAKE_CURRENT_LIST_DIR}/tools/sstep_count.c)
set_target_properties(sstep_count PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/tools)
target_compile_definitions(sstep_count PRIVATE _GNU_SOURCE)

# ---- the tests (only once the probing core exists) -----------------------------------
option(UPROBE_CORE_FORCE_TESTS "Configure the probing core tests even without src/uprobes.c" OFF)
if(EXISTS ${CMAKE_SOURCE_DIR}/src/uprobes.c OR UPROBE_CORE_FORCE_TESTS)
  function(uprobe_core_test name)
    add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/unit/${name}.c
      ${CMAKE_CURRENT_LIST_DIR}/unit/test_core_util.c)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/unit)
    target_compile_definitions(${name} PRIVATE _GNU_SOURCE
      CORE_TARGETS="${UPROBE_CORE_TARGETS_DIR}"
      CORE_UPROBE_CLI="$<TARGET_FILE:uprobe-cli>"
      CORE_SSTEP_COUNT="$<TARGET_FILE:sstep_count>"
      CORE_HAVE_M32=$<BOOL:${UPROBE_HAVE_M32}>)
    target_link_libraries(${name} PRIVATE uprobe PkgConfig::CMOCKA)
    add_dependencies(${name} uprobe-cli sstep_count ${UPROBE_CORE_TARGET_LIST})
  endfunction()
  # core_case(EXE CMOCKA_TEST CTEST_NAME): one ctest per cmocka test
  function(core_case exe test ctest_name)
    add_test(NAME ${ctest_name} COMMAND ${exe} ${test})
    set_tests_properties(${ctest_name} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77)
  endfunction()

  uprobe_core_test(test_core_threads)
  foreach(n 1 2 8)
    core_case(test_core_threads threads_${n} core.threads.${n})
  endforeach()
  core_case(test_core_threads records_2 core.threads.records-2)
  core_case(test_core_threads records_static core.threads.records-static)

  uprobe_core_test(test_core_insns)
  core_case(test_core_insns insns_all64 core.insns.all64)
  core_case(test_core_insns insns_all32 core.insns.all32)
  core_case(test_core_insns insns_noxol core.insns.noxol)
  core_case(test_core_insns insns_segv_oracle core.insns.segv_oracle)

  uprobe_core_test(test_core_fork)
  foreach(t fork fork_follow vfork vfork_follow vfork_exec exec clone clone_vm
            clone_vm_follow thread_exit leader_exit)
    string(REPLACE "_" "-" tname ${t})
    core_case(test_core_fork ${t} core.fork.${tname})
  endforeach()

  uprobe_core_test(test_core_signals)
  foreach(t alarm_restart alarm_norestart segv stop trap)
    string(REPLACE "_" "-" tname ${t})
    core_case(test_core_signals ${t} core.signals.${tname})
  endforeach()

  uprobe_core_test(test_core_handlers)
  foreach(t set_rdi set_rax skip_function unregister_self register_other order plan
            slot_after)
    string(REPLACE "_" "-" tname ${t})
    core_case(test_core_handlers ${t} core.handlers.${tname})
  endforeach()

  uprobe_core_test(test_core_ret)
  foreach(t calls recurse longjmp_frames tail detach_pending)
    string(REPLACE "_" "-" tname ${t})
    core_case(test_core_ret ${t} core.ret.${tname})
  endforeach()

  uprobe_core_test(test_core_errors)
  foreach(t attach_nopid attach_busy register_midinsn register_nonexec register_int3
            register_ud2 register_untraced unregister_unregistered reaped_detached)
    string(REPLACE "_" "-" tname ${t})
    core_case(test_core_errors ${t} core.errors.${tname})
  endforeach()
endif()

# ---- extra core tests: attach refused by uid, probes on libc's fork/vfork syscall,
#      the kernel's uprobes as an oracle (skips, 77, without tracefs) ------------------
if(EXISTS ${CMAKE_SOURCE_DIR}/src/uprobes.c OR UPROBE_CORE_FORCE_TESTS)
  uprobe_core_test(test_core_extra_eperm)
  core_case(test_core_extra_eperm attach_eperm core.errors.attach-eperm)
  set_tests_properties(core.errors.attach-eperm PROPERTIES SKIP_RETURN_CODE 77)

  uprobe_core_test(test_core_extra_forksys)
  foreach(t fork vfork fork_follow vfork_follow)
    string(REPLACE "_" "-" tname ${t})
    core_case(test_core_extra_forksys ${t} core.fork.syscall-probe-${tname})
  endforeach()

  uprobe_core_test(test_core_extra_kernel)
  core_case(test_core_extra_kernel kernel_oracle core.kernel.oracle)
  set_tests_properties(core.kernel.oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60
    RESOURCE_LOCK uprobe_tracefs_uptest_kb)
endif()

# ---- the fast path (counting probes as jmps to in-process trampolines) ----------------
uprobe_core_target(core_fast core_fast.c THREADS)
add_test(NAME core.fast.paths
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/core_fast.sh $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:core_fast>)
set_tests_properties(core.fast.paths PROPERTIES TIMEOUT 120)

# ---- the fast path's records (an in-process agent, a shared ring) ---------------------
uprobe_core_target(fast_rec fast_rec.c THREADS)
add_test(NAME trace.fast.records
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_fast.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:fast_rec>)
set_tests_properties(trace.fast.records PROPERTIES TIMEOUT 180)
# threads born after the probe: all their records, and the first ones' rings present
# before they were (issue 30 item 3)
add_test(NAME trace.fast.born
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_born.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:fast_rec>)
set_tests_properties(trace.fast.born PROPERTIES TIMEOUT 300)
# output for people and programs: json parses to the last line, lost records per probe
# in the output and on stderr, -c's counts never among a launched command's output
add_test(NAME trace.output
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_output.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:fast_rec>)
set_tests_properties(trace.output PROPERTIES TIMEOUT 300)
# raw records (--format raw, uprobe report): what live tracing prints, and none lost
add_test(NAME trace.raw
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_raw.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:fast_rec> $<TARGET_FILE:bench_target>)
set_tests_properties(trace.raw PROPERTIES TIMEOUT 300)
# the spool: every record of a hot loop in every format; --when-full=block holds a
# thread and lets it go; a tracer's death does not leave it waiting
add_test(NAME trace.spool
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_spool.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:fast_rec> $<TARGET_FILE:bench_target>)
set_tests_properties(trace.spool PROPERTIES TIMEOUT 600 RESOURCE_LOCK uprobe_tracefs_uptest_kb)
# forged records and blocks in a raw file: skipped, counted, every real one reported
add_test(NAME trace.raw.forged
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/raw_forged.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:fast_rec>)
set_tests_properties(trace.raw.forged PROPERTIES TIMEOUT 120)

# ---- histograms: in-process aggregation against the trap path and the kernel -----------
uprobe_core_target(hist_prog hist_prog.c THREADS)
uprobe_core_target(tactics tactics.c THREADS)
set_property(TARGET hist_prog APPEND PROPERTY COMPILE_OPTIONS -fno-omit-frame-pointer)
add_test(NAME trace.hist
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_hist.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:hist_prog>)
set_tests_properties(trace.hist PROPERTIES TIMEOUT 300)
add_test(NAME trace.ustack
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_ustack.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:hist_prog>)
set_tests_properties(trace.ustack PROPERTIES TIMEOUT 180)
# every instruction of real libc functions on the fast path's tactics, against the kernel
add_test(NAME fast.every
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/fast_every.py $<TARGET_FILE:uprobe-cli>)
set_tests_properties(fast.every PROPERTIES TIMEOUT 300)
# every libc function entry: the tactics' coverage, live, and the trap path's counts
add_test(NAME fast.entries
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/fast_entries.py $<TARGET_FILE:uprobe-cli>)
# (a kernel-backend test's uprobes on libc are in every process's libc while placed:
# a test counting libc through ptrace waits for them)
set_tests_properties(fast.entries PROPERTIES TIMEOUT 300 RESOURCE_LOCK uprobe_tracefs_uptest_kb)
# each tactic on its code shape, under threads and signals; removal restores every byte
add_test(NAME fast.tactics
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/fast_tactics.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:tactics>)
set_tests_properties(fast.tactics PROPERTIES TIMEOUT 300)

# ---- flags across a return probe's in-process return trampoline --------------------------
uprobe_core_target(ret_flags ret_flags.c)
add_test(NAME trace.fast.ret_flags
  COMMAND sh -c "want=$($1) && got=$($0 trace -v -e \"r:t/r $1:retflags f=%flags\" -e \"r:t/r2 $1:retflags2\" -t t/r2:hist:keys=\\$duration.log2 -o /dev/null -- $1 2>/tmp/ret_flags.$$) && grep -c 'on the fast path' /tmp/ret_flags.$$ | grep -qx 2 && rm -f /tmp/ret_flags.$$ && test \"$want\" = \"$got\" && echo \"flags $got, both returns on the fast path\""
    $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:ret_flags>)

# The fast path on real programs other than libc: every entry of bash and postgres, and
# every instruction of their hottest functions (issue 19)
add_test(NAME fast.binary.bash
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/fast_binary.py $<TARGET_FILE:uprobe-cli> bash)
add_test(NAME fast.binary.postgres
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/fast_binary.py $<TARGET_FILE:uprobe-cli> postgres)
set_tests_properties(fast.binary.bash fast.binary.postgres PROPERTIES TIMEOUT 400)
