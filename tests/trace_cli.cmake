# End-to-end tests of `uprobe trace` (tools/uprobe/trace.c, src/trace/session.c) on real
# programs: the seed's sample traced as seed 008 shows, every class of spec error, the
# p:/r: event form with fetch arguments, JSON, counts, dlopen, fork/exec, signals and
# exit statuses.  Included by tests/CMakeLists.txt after cli.cmake and core.cmake (the
# sample target and UPROBE_* variables come from there).

set(UPROBE_TRACE_BIN $<TARGET_FILE:uprobe-cli>)
set(UPROBE_TRACE_IT ${CMAKE_CURRENT_LIST_DIR}/integration)
set(UPROBE_TRACE_TDIR ${CMAKE_BINARY_DIR}/tests/targets)
find_program(UPROBE_TRACE_PY NAMES python3)

# ---- target programs: their own flags, static addresses -------------------------------
function(uprobe_trace_target name)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/targets/${name}.c)
  set_target_properties(${name} PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${UPROBE_TRACE_TDIR}
    COMPILE_OPTIONS "-O2;-g;-fno-pie;-Wall"
    LINK_OPTIONS "-no-pie")
endfunction()
uprobe_trace_target(trace_args)
uprobe_trace_target(trace_fork)
uprobe_trace_target(trace_loop)
uprobe_trace_target(trace_dlopen)
uprobe_trace_target(metrics_prog)
target_link_libraries(trace_dlopen PRIVATE ${CMAKE_DL_LIBS})
add_library(trace_lib SHARED ${CMAKE_CURRENT_LIST_DIR}/targets/trace_lib.c)
set_target_properties(trace_lib PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${UPROBE_TRACE_TDIR}
  PREFIX "" OUTPUT_NAME trace_lib
  COMPILE_OPTIONS "-O2;-g;-fPIC;-Wall"
  LINK_OPTIONS "")

set(_trS $<TARGET_FILE:sample>)
set(_trargs $<TARGET_FILE:trace_args>)
set(_trlibc /lib/x86_64-linux-gnu/libc.so.6)
set(_tr_tests)

# tests that need python3 (and nm/objdump for the seed); a SKIP with the reason otherwise
function(uprobe_trace_py name)
  if(UPROBE_TRACE_PY)
    add_test(NAME ${name} COMMAND ${UPROBE_TRACE_PY} ${ARGN})
  else()
    add_test(NAME ${name}
      COMMAND sh -c "echo 'SKIP: python3 not found (Debian package python3)'; exit 77")
  endif()
  set(_tr_tests ${_tr_tests} ${name} PARENT_SCOPE)
endfunction()

# ---- 1. the seed's sample, as seed 008 traces it --------------------------------------
# trace.seed.sample: PID 0 and -- SAMPLE, against tests/golden/trace-seed-sample.txt
# (UPROBE_REGEN=1 rewrites it); trace.seed.pid: -p PID; trace.seed.badaddr: D 0x10 8
if(UPROBE_OBJDUMP)
  foreach(pair sample:launch pid:pid badaddr:badaddr)
    string(REPLACE ":" ";" pair ${pair})
    list(GET pair 0 name)
    list(GET pair 1 mode)
    uprobe_trace_py(trace.seed.${name} ${UPROBE_TRACE_IT}/trace_seed.py
      --uprobe ${UPROBE_TRACE_BIN} --sample ${_trS}
      --golden ${CMAKE_CURRENT_LIST_DIR}/golden/trace-seed-sample.txt ${mode})
  endforeach()
else()
  add_test(NAME trace.seed
    COMMAND sh -c "echo 'SKIP: objdump not found (Debian package binutils)'; exit 77")
  list(APPEND _tr_tests trace.seed)
endif()

# ---- 2. errors -------------------------------------------------------------------------
# every class of spec error: exit 2, the spec repeated, a caret under TOKEN, nothing run
function(uprobe_trace_spec_error name spec token regex)
  uprobe_trace_py(trace.errors.spec.${name} ${UPROBE_TRACE_IT}/trace_spec_error.py
    ${UPROBE_TRACE_BIN} "${spec}" "${token}" "${regex}")
  set(_tr_tests ${_tr_tests} PARENT_SCOPE)
endfunction()
uprobe_trace_spec_error(empty "   " "-" "Empty probe spec")
uprobe_trace_spec_error(command "frob x" "frob" "Unknown probe command")
uprobe_trace_spec_error(seed_no_pid "up" "$END" "Expected PID")
uprobe_trace_spec_error(seed_pid "up x 0x401126 A 5" "x" "Invalid PID")
uprobe_trace_spec_error(seed_addr "up 0 zz A 5" "zz" "Invalid probe address")
uprobe_trace_spec_error(seed_type "up 0 0x401126 Q 5" "Q" "Invalid dump type")
uprobe_trace_spec_error(seed_nargs "up 0 0x401126 A 9" "9" "Invalid NARGS")
uprobe_trace_spec_error(seed_no_daddr "up 0 0x401126 D" "$END" "Expected DADDR")
uprobe_trace_spec_error(seed_daddr "up 0 0x401126 D zz 8" "zz" "Invalid data address")
uprobe_trace_spec_error(seed_no_size "up 0 0x401126 D 0x404020" "$END" "Expected SIZE")
uprobe_trace_spec_error(seed_size "up 0 0x401126 S 1000000" "1000000" "Invalid SIZE")
uprobe_trace_spec_error(seed_extra "up 0 0x401126 A 5 extra" "extra" "Unexpected argument")
uprobe_trace_spec_error(no_event "p: ${_trS}:foo" " " "Event name is not specified")
uprobe_trace_spec_error(no_group "p:/ev ${_trS}:foo" "/" "Group name is not specified")
uprobe_trace_spec_error(event_name "p:1bad ${_trS}:foo" "1bad" "Event name must follow")
uprobe_trace_spec_error(no_target "p" "$END" "Expected the probe target")
uprobe_trace_spec_error(target "p ${_trS}" "${_trS}" "Invalid probe target")
uprobe_trace_spec_error(no_path "p :foo" ":" "The file path is missing")
uprobe_trace_spec_error(no_symbol "p ${_trS}:" "$END" "Expected the offset or the symbol")
uprobe_trace_spec_error(offset "p ${_trS}:0xzz" "0xzz" "Invalid uprobe offset")
uprobe_trace_spec_error(symbol_offset "p ${_trS}:foo+zz" "+zz" "Invalid offset after the symbol")
uprobe_trace_spec_error(register "p ${_trS}:foo %zz" "%zz" "Invalid register name")
uprobe_trace_spec_error(type "p ${_trS}:foo x=%di:u7" "u7" "Unknown type")
uprobe_trace_spec_error(bitfield "p ${_trS}:foo b=%di:b9@60/64" "b9@60/64" "Invalid bitfield")
uprobe_trace_spec_error(retval_on_entry "p ${_trS}:foo $retval" "$retval" "retval is not available")
uprobe_trace_spec_error(dollar_var "p ${_trS}:foo $stackx" "$stackx" "Invalid [$]-variable")
uprobe_trace_spec_error(memory "p ${_trS}:foo @zz" "@zz" "expected @ADDR")
uprobe_trace_spec_error(deref_offset "p ${_trS}:foo +zz(%di)" "+zz" "Invalid dereference offset")
uprobe_trace_spec_error(deref_brace "p ${_trS}:foo +0(%di" "$END" "brace is not closed")
uprobe_trace_spec_error(comm_deref "p ${_trS}:foo +0($comm)" "$comm" "comm can not be dereferenced")
uprobe_trace_spec_error(comm_type "p ${_trS}:foo $comm:u8" "u8" "comm accepts only the string")
uprobe_trace_spec_error(string_reg "p ${_trS}:foo %di:string" "string" "String accepts only memory")
uprobe_trace_spec_error(arg_name "p ${_trS}:foo 1bad=%di" "1bad" "Argument name must follow")
uprobe_trace_spec_error(arg_empty "p ${_trS}:foo x=" "$END" "No argument expression")

# the command line and what the specs name
set(_ex ${UPROBE_TRACE_IT}/trace_expect.sh)
set(_ran sh -c "echo RAN")
add_test(NAME trace.errors.no_spec
  COMMAND ${_ex} 2 "no probe: give -e SPEC" ${UPROBE_TRACE_BIN} trace -- ${_ran})
add_test(NAME trace.errors.pid_and_command
  COMMAND ${_ex} 2 "-p and a COMMAND exclude each other"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:foo" -p 1 -- ${_ran})
add_test(NAME trace.errors.nothing_to_trace
  COMMAND ${_ex} 2 "nothing to trace: give -p PID or -- COMMAND"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:foo")
add_test(NAME trace.errors.unknown_option
  COMMAND ${_ex} 2 "unrecognized option '--frob';;unknown option;;^usage: uprobe trace"
          ${UPROBE_TRACE_BIN} trace --frob -e "p ${_trS}:foo" -- ${_ran})
add_test(NAME trace.errors.bad_pid
  COMMAND ${_ex} 2 "'12x' is not a process id" ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:foo" -p 12x)
# 4194304 is past pid_max's ceiling (PID_MAX_LIMIT): no process has it
add_test(NAME trace.errors.no_such_pid
  COMMAND ${_ex} 1 "cannot trace process 4194304: No such process"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:foo" -p 4194304)
add_test(NAME trace.errors.no_such_file
  COMMAND ${_ex} 2 "bad probe spec:;;/nonexistent/prog: No such file or directory"
          ${UPROBE_TRACE_BIN} trace -e "p /nonexistent/prog:foo" -- ${_ran})
add_test(NAME trace.errors.not_elf
  COMMAND ${_ex} 2 "bad probe spec:;;/etc/passwd: not an x86 ELF file"
          ${UPROBE_TRACE_BIN} trace -e "p /etc/passwd:foo" -- ${_ran})
add_test(NAME trace.errors.unknown_symbol
  COMMAND ${_ex} 2 "no function 'no_such_function' in .*sample"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:no_such_function" -- ${_ran})
add_test(NAME trace.errors.bad_spec_file
  COMMAND ${_ex} 2 "/nonexistent/specs: No such file or directory"
          ${UPROBE_TRACE_BIN} trace -f /nonexistent/specs -- ${_ran})
add_test(NAME trace.errors.mid_instruction
  COMMAND ${UPROBE_TRACE_IT}/trace_midinsn.sh ${UPROBE_TRACE_BIN} ${_trS})
add_test(NAME trace.errors.no_such_command
  COMMAND ${_ex} 127 "cannot run /nonexistent/cmd: No such file or directory"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:foo" -- /nonexistent/cmd)
add_test(NAME trace.errors.not_executable
  COMMAND ${_ex} 126 "cannot run /etc/passwd: Permission denied"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trS}:foo" -- /etc/passwd)
# what would corrupt the program or never fire is refused before anything is written into
# it (src/sym/place.c): a return probe off a function's entry, by symbol and by offset;
# an offset in no loaded segment or outside the code; and a zero-size symbol
# (__restore_rt, whose FDE starts a byte early) is the boundary it is
add_test(NAME trace.errors.return_off_entry
  COMMAND ${_ex} 2 "a return probe must be at a function's entry, and 0x[0-9a-f]+ \\(.*malloc\\+0x4\\)"
          ${UPROBE_TRACE_BIN} trace -e "r ${_trlibc}:malloc+4" -- ${_ran})
add_test(NAME trace.errors.return_off_entry_offset
  COMMAND sh -c "off=$(${UPROBE_TRACE_BIN} list ${_trlibc} malloc | awk '$4==\"malloc\"{print $1; exit}') && exec ${_ex} 2 'a return probe must be at a function.s entry' ${UPROBE_TRACE_BIN} trace -e \"r ${_trlibc}:$(printf 0x%x $((off + 4)))\" -- sh -c 'echo RAN'")
add_test(NAME trace.errors.no_segment
  COMMAND ${_ex} 2 "offset 0x12345678 is in no loaded segment of"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trlibc}:0x12345678" -- ${_ran})
add_test(NAME trace.errors.outside_code
  COMMAND ${_ex} 2 "0x100 is outside the file's code"
          ${UPROBE_TRACE_BIN} trace -e "p ${_trlibc}:0x100" -- ${_ran})
add_test(NAME trace.zero_size_symbol
  COMMAND sh -c "out=$(${UPROBE_TRACE_BIN} trace -c -e 'p:t/restore ${_trlibc}:__restore_rt' -- true 2>&1) && echo \"$out\" && echo \"$out\" | grep -q 't/restore' && ! echo \"$out\" | grep -q 'not an instruction boundary'")
add_test(NAME trace.arming COMMAND ${UPROBE_TRACE_IT}/trace_arming.sh ${UPROBE_TRACE_BIN})
list(APPEND _tr_tests trace.arming)
# it probes libc's malloc through ptrace: not while the kernel's int3s are in libc (a
# kernel-backend or bpftrace test's), which it would find there ("an int3 is already")
set_tests_properties(trace.arming PROPERTIES RESOURCE_LOCK uprobe_tracefs_uptest_kb)
list(APPEND _tr_tests trace.errors.return_off_entry trace.errors.return_off_entry_offset
  trace.errors.no_segment trace.errors.outside_code trace.zero_size_symbol)
list(APPEND _tr_tests trace.errors.no_spec trace.errors.pid_and_command
  trace.errors.nothing_to_trace trace.errors.unknown_option trace.errors.bad_pid
  trace.errors.no_such_pid trace.errors.no_such_file trace.errors.not_elf
  trace.errors.unknown_symbol trace.errors.bad_spec_file trace.errors.mid_instruction
  trace.errors.no_such_command trace.errors.not_executable)

# ---- 3. events: fetch arguments, return probes, JSON, -o, -c, libc -------------------
foreach(mode text retval json output count libc)
  uprobe_trace_py(trace.event.${mode} ${UPROBE_TRACE_IT}/trace_event.py
    --uprobe ${UPROBE_TRACE_BIN} --target ${_trargs} --libc ${_trlibc} ${mode})
endforeach()

# ---- 4-7. processes: dlopen, fork, exec, signals, exit status, output unchanged --------
foreach(pair dlopen:dlopen fork:fork fork.no_follow:nofork exec:exec signals.sigterm:sigterm
    signals.sigint:sigint exit.status:exit3 exit.sigsegv:segv output.ls:ls)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 name)
  list(GET pair 1 mode)
  uprobe_trace_py(trace.${name} ${UPROBE_TRACE_IT}/trace_proc.py
    --uprobe ${UPROBE_TRACE_BIN} --targets ${UPROBE_TRACE_TDIR} ${mode})
endforeach()
# it counts libc's malloc through ptrace: not while a kernel-backend test has its int3s
# in libc
set_tests_properties(trace.output.ls PROPERTIES RESOURCE_LOCK uprobe_tracefs_uptest_kb)

# 77: a prerequisite is missing (python3, objdump, libc at the Debian path), said why
set_tests_properties(${_tr_tests} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 20)

# dlopen, dlclose, dlopen again (maybe elsewhere): the probe follows the library back
add_test(NAME trace.dlopen.again
  COMMAND ${UPROBE_BIN} trace -c -e "p:t/libf $<TARGET_FILE:trace_lib>:lib_func"
    -- $<TARGET_FILE:trace_dlopen> $<TARGET_FILE:trace_lib> 3 4)
set_tests_properties(trace.dlopen.again PROPERTIES
  PASS_REGULAR_EXPRESSION "t/libf +12\n")
# dlopen/dlclose 100 and 1,000 times with probes live: output, counts, no growth
add_test(NAME trace.dlopen.loop
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/dlclose_loop.sh ${UPROBE_BIN}
    $<TARGET_FILE:trace_dlopen> $<TARGET_FILE:trace_lib>)
set_tests_properties(trace.dlopen.loop PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240)
if(UPROBE_SANITIZE)
  # ASan keeps freed memory in quarantine (up to 256 MiB): the tracer's RSS would grow
  # with the rounds however well it frees.  Even without, its allocator and shadow
  # pages leave the peak ~600 KB apart between runs now and then (the plain build
  # keeps the 512 KB bound; LeakSanitizer checks for leaks here)
  set_tests_properties(trace.dlopen.loop PROPERTIES ENVIRONMENT
    "ASAN_OPTIONS=quarantine_size_mb=0:detect_leaks=1;RSS_SLACK_KB=2048")
endif()

# the kernel's uprobe tracer as the oracle of the ptrace backend: same events, same values
add_test(NAME trace.backends.agree
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/integration/trace_backends.sh ${UPROBE_BIN}
    $<TARGET_FILE:trace_args>)
set_tests_properties(trace.backends.agree PROPERTIES SKIP_RETURN_CODE 77
  RESOURCE_LOCK uprobe_tracefs_uptest_kb)

# --filter and --ring-size refused cleanly, with nothing run
add_test(NAME trace.errors.filter_syntax
  COMMAND ${_ex} 2 "bad filter:;;^a >> 4$;;^   \\^$;;expected a number"
          ${UPROBE_TRACE_BIN} trace --filter "a >> 4" -e "p ${_trS}:foo a=%di" -- ${_ran})
add_test(NAME trace.errors.filter_name
  COMMAND ${_ex} 2 "the filter's 'zz' is not an argument of uprobes/"
          ${UPROBE_TRACE_BIN} trace --filter "zz > 1" -e "p ${_trS}:foo a=%di" -- ${_ran})
add_test(NAME trace.errors.filter_seed
  COMMAND ${_ex} 2 "--filter needs named arguments"
          ${UPROBE_TRACE_BIN} trace --filter "a > 1" -e "up 0 0x401126 A 1" -- ${_ran})
add_test(NAME trace.errors.filter_quotes
  COMMAND ${_ex} 2 "bad filter:;;invalid value \\(did you forget quotes\\?\\)"
          ${UPROBE_TRACE_BIN} trace --filter "a == 1 || comm == ls" -e "p ${_trS}:foo a=%di" -- ${_ran})
add_test(NAME trace.errors.filter_string_op
  COMMAND ${_ex} 2 "the filter's 'comm' is a string: it takes == != ~ only"
          ${UPROBE_TRACE_BIN} trace --filter "comm < \"ls\"" -e "p ${_trS}:foo a=%di" -- ${_ran})

# the kernel's filter language (|| ! ( ) strings, comm) against Python over an unfiltered
# run, fast path and trap path, a hist's `if`, and the kernel's own filter as the oracle
add_test(NAME trace.filter.language
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/integration/trace_filter.py ${UPROBE_BIN}
    $<TARGET_FILE:trace_args>)
set_tests_properties(trace.filter.language PROPERTIES TIMEOUT 180
  RESOURCE_LOCK uprobe_tracefs_upt_filter)

add_test(NAME trace.errors.ring_size
  COMMAND ${_ex} 2 "--ring-size '12': expected KiB, 64 to 1048576"
          ${UPROBE_TRACE_BIN} trace --ring-size 12 -e "p ${_trS}:foo" -- ${_ran})
add_test(NAME trace.errors.when_full
  COMMAND ${_ex} 2 "--when-full 'wait': expected block or drop"
          ${UPROBE_TRACE_BIN} trace --when-full wait -e "p ${_trS}:foo" -- ${_ran})
add_test(NAME trace.errors.spool_size
  COMMAND ${_ex} 2 "--spool-size '12X': expected a size"
          ${UPROBE_TRACE_BIN} trace --spool-size 12X -e "p ${_trS}:foo" -- ${_ran})

# ---- hostile targets: files the traced process names (src/sym/file.c) -------------------
# a target running as nobody unlinks the library it mapped and plants a FIFO, a device
# node or a symlink to /dev/zero at its name: trace -p and list end at once, the target
# is unharmed (the tracer used to hang in open(2))
uprobe_trace_target(hostile_files)
target_link_libraries(hostile_files PRIVATE ${CMAKE_DL_LIBS})
uprobe_trace_py(trace.hostile.files ${UPROBE_TRACE_IT}/hostile_files.py ${UPROBE_TRACE_BIN}
  $<TARGET_FILE:hostile_files> $<TARGET_FILE:trace_lib>)
set_tests_properties(trace.hostile.files PROPERTIES TIMEOUT 180)
# -o FILE as root where another user prepared a symlink, a file or a FIFO in a sticky
# world-writable directory: refused, nothing written; -o -, /dev/stdout, /dev/null work
uprobe_trace_py(trace.output.files ${UPROBE_TRACE_IT}/output_files.py ${UPROBE_TRACE_BIN}
  ${_trargs})
set_tests_properties(trace.output.files PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

# --listen: the metrics against promtool and a Prometheus server, hostile clients
# (tests/integration/metrics.py); prometheus/promtool come from the test set-up
uprobe_trace_py(trace.metrics ${UPROBE_TRACE_IT}/metrics.py ${UPROBE_TRACE_BIN}
  $<TARGET_FILE:metrics_prog>)
set_tests_properties(trace.metrics PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)
# an int3 not ours at the probed address (the kernel's uprobe, through tracefs): said as
# such, not "File exists"; alone it fails with status 2, beside another probe the
# program runs as unprobed (issue 29 item 4), on the fast path and with --no-fast
uprobe_trace_py(trace.foreign_int3 ${UPROBE_TRACE_IT}/trace_foreign_int3.py ${UPROBE_TRACE_BIN}
  $<TARGET_FILE:trace_loop>)
set_tests_properties(trace.foreign_int3 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
