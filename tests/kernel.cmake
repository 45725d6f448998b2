# The kernel backend (src/trace/kernel.c) against the kernel's own uprobe tracer:
# text and JSON lines of probes on a target program and on libc, uprobe_profile
# counts, refusals.  Needs root and tracefs; skipped (77) otherwise.  The tests share
# the event group uptest_kb, so they hold one resource lock.  Included by
# tests/CMakeLists.txt.

add_executable(kbackend_target ${CMAKE_CURRENT_LIST_DIR}/targets/kbackend_target.c)
set_target_properties(kbackend_target PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/targets
  COMPILE_OPTIONS "-O2;-g;-fno-pie;-Wall"
  LINK_OPTIONS "-no-pie")

add_executable(test_trace_kernel ${CMAKE_CURRENT_LIST_DIR}/unit/test_trace_kernel.c)
set_target_properties(test_trace_kernel PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
target_include_directories(test_trace_kernel PRIVATE ${UPROBE_PRIVATE_INCLUDE})
target_compile_definitions(test_trace_kernel PRIVATE _GNU_SOURCE
  KB_TARGET="$<TARGET_FILE:kbackend_target>")
target_link_libraries(test_trace_kernel PRIVATE uprobe PkgConfig::CMOCKA)
add_dependencies(test_trace_kernel kbackend_target)

set(UPROBE_KB_JSONL ${CMAKE_BINARY_DIR}/tests/kernel_trace.jsonl)
add_test(NAME kernel.text COMMAND test_trace_kernel text)
add_test(NAME kernel.json COMMAND test_trace_kernel json ${UPROBE_KB_JSONL})
add_test(NAME kernel.errors COMMAND test_trace_kernel errors)
set_tests_properties(kernel.text kernel.json kernel.errors PROPERTIES
  SKIP_RETURN_CODE 77 RESOURCE_LOCK uprobe_tracefs_uptest_kb TIMEOUT 120)
set_tests_properties(kernel.json PROPERTIES FIXTURES_SETUP kernel_jsonl)

find_program(UPROBE_PYTHON3 python3)
if(UPROBE_PYTHON3)
  add_test(NAME kernel.json_valid
    COMMAND ${UPROBE_PYTHON3} -m json.tool --json-lines ${UPROBE_KB_JSONL})
  add_test(NAME kernel.json_content
    COMMAND ${UPROBE_PYTHON3} -c [=[
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
n = len(ev) // 3
assert n > 0 and len(ev) == 3 * n, len(ev)
keys = ["time_ns", "pid", "tid", "cpu", "comm", "event", "addr", "args"]
work = [e for e in ev if e["event"] == "uptest_kb/kbwork"]
ret = [e for e in ev if e["event"] == "uptest_kb/kbret"]
name = [e for e in ev if e["event"] == "uptest_kb/kbname"]
assert len(work) == len(ret) == len(name) == n
for i, e in enumerate(work):
    assert list(e) == keys, list(e)
    assert e["args"] == {"n": i} and e["pid"] == e["tid"] and e["comm"] in ("kbackend_target", ""), e
for i, e in enumerate(ret):
    assert list(e) == keys[:7] + ["ret_addr", "args"], list(e)
    assert e["args"] == {"rv": 2 * i + 1} and e["addr"] == work[0]["addr"], e
    assert e["ret_addr"].startswith("0x") and e["ret_addr"] != e["addr"], e
for i, e in enumerate(name):
    a = e["args"]
    assert a["s"] == 'kb-%d "q"' % i and a["c"] == "kbackend_target", a
    assert a["a"].startswith("0x") and isinstance(a["b"], int) and 0 <= a["b"] < 256, a
t = [e["time_ns"] for e in ev]
assert t == sorted(t) and t[0] > 0, "time_ns not monotonic"
]=] ${UPROBE_KB_JSONL})
  set_tests_properties(kernel.json_valid kernel.json_content PROPERTIES
    FIXTURES_REQUIRED kernel_jsonl)
endif()
