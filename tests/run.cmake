# `uprobe run` (tools/uprobe/run.c, src/bt/): bpftrace programs against bpftrace itself
# on deterministic workloads, Debian's bpftrace tools unchanged, a run without root,
# the errors, -l, scripts, intervals, -o and -p.  tests/integration/run_bpftrace.py
# says what each compares; each skips (77) with the reason where bpftrace is missing.

set(_run_tdir ${CMAKE_BINARY_DIR}/tests/targets)
add_executable(run_work ${CMAKE_CURRENT_LIST_DIR}/targets/run_work.c)
add_executable(run_host ${CMAKE_CURRENT_LIST_DIR}/targets/run_host.c)
# the traced programs' own flags, no sanitizer (linked with ASan's runtime, LeakSanitizer
# ends a traced program with status 1: "does not work under ptrace")
foreach(t run_work run_host)
  set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_run_tdir}
    COMPILE_OPTIONS "-O2;-g;-Wall" LINK_OPTIONS "")
endforeach()
target_link_libraries(run_host PRIVATE pthread)
target_link_libraries(run_work PRIVATE pthread)
# sslsnoop.bt's and ssllatency.bt's workload: libssl's calls, the same each run
find_package(OpenSSL QUIET)
if(OPENSSL_FOUND)
  add_executable(run_ssl ${CMAKE_CURRENT_LIST_DIR}/targets/run_ssl.c)
  set_target_properties(run_ssl PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_run_tdir}
    COMPILE_OPTIONS "-O2;-g;-Wall" LINK_OPTIONS "")
  target_link_libraries(run_ssl PRIVATE OpenSSL::SSL OpenSSL::Crypto)
endif()

find_program(UPROBE_RUN_PY NAMES python3)
set(_run_tests)
foreach(mode compare fast tools nonroot errors misc tracecomm)
  if(UPROBE_RUN_PY)
    add_test(NAME run.${mode} COMMAND ${UPROBE_RUN_PY}
      ${CMAKE_CURRENT_LIST_DIR}/integration/run_bpftrace.py ${mode}
      $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:run_work> $<TARGET_FILE:run_host>
      $<$<TARGET_EXISTS:usdt_prog>:$<TARGET_FILE:usdt_prog>>
      $<$<TARGET_EXISTS:run_ssl>:$<TARGET_FILE:run_ssl>>)
  else()
    add_test(NAME run.${mode}
      COMMAND sh -c "echo 'SKIP: python3 not found (Debian package python3)'; exit 77")
  endif()
  list(APPEND _run_tests run.${mode})
endforeach()
# bpftrace's uprobes are system-wide: one of these at a time sees only its own workload;
# and their int3s in libc are in every process's libc while placed, which a test probing
# libc through ptrace would find there (uprobe_tracefs_uptest_kb, as the kernel backend's)
set_tests_properties(${_run_tests} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 240
  RESOURCE_LOCK "uprobe_run_bpftrace;uprobe_tracefs_uptest_kb")

# --listen: the maps as Prometheus metrics while the program runs
if(UPROBE_RUN_PY)
  add_test(NAME run.metrics COMMAND ${UPROBE_RUN_PY}
    ${CMAKE_CURRENT_LIST_DIR}/integration/run_metrics.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:metrics_prog>)
  set_tests_properties(run.metrics PROPERTIES TIMEOUT 120)
endif()
