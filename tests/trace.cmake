# Unit tests of the tracer front end (src/trace/): spec parsing, fetch arguments,
# output formats.  Included by tests/CMakeLists.txt.

function(uprobe_trace_unit name)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/unit/${name}.c)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_include_directories(${name} PRIVATE ${UPROBE_PRIVATE_INCLUDE})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_link_libraries(${name} PRIVATE uprobe PkgConfig::CMOCKA)
  add_test(NAME unit.${name} COMMAND ${name})
endfunction()

uprobe_trace_unit(test_trace_spec)
uprobe_trace_unit(test_trace_fetch)
uprobe_trace_unit(test_trace_format)
uprobe_trace_unit(test_trace_stack)
uprobe_trace_unit(test_trace_hist)
uprobe_trace_unit(test_trace_filter)

# JSON lines from the formatter must be JSON, and say what was fetched.
set(UPROBE_TRACE_JSONL ${CMAKE_BINARY_DIR}/tests/trace_format.jsonl)
add_test(NAME unit.trace_json_write
  COMMAND test_trace_format --json-out ${UPROBE_TRACE_JSONL})
set_tests_properties(unit.trace_json_write PROPERTIES FIXTURES_SETUP trace_jsonl)
find_program(UPROBE_PYTHON3 python3)
if(UPROBE_PYTHON3)
  add_test(NAME unit.trace_json_valid
    COMMAND ${UPROBE_PYTHON3} -m json.tool --json-lines ${UPROBE_TRACE_JSONL})
  add_test(NAME unit.trace_json_content
    COMMAND ${UPROBE_PYTHON3} -c [=[
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
assert len(ev) == 6, len(ev)
e = ev[0]
assert list(e) == ["time_ns", "pid", "tid", "cpu", "comm", "event", "addr", "args"], list(e)
assert (e["time_ns"], e["pid"], e["tid"], e["cpu"]) == (42, 100, 101, 3)
assert e["comm"] == 'json"test' and e["event"] == "trace/entry" and e["addr"] == "0x401010"
a = e["args"]
assert a["s"] == 'tab\there "quoted" back\\slash \x01 caf\u00e9 \u00ff', repr(a["s"])
assert a["n"] == -7 and a["u"] == 2**64 - 1 and a["x"] == "0x601000", a
assert a["f"] is None and a["e"] is None and a["c"] == 'json"test' and a["b"] == 2, a
r = ev[1]
assert r["event"] == "trace/exit" and r["ret_addr"] == "0x401800", r
assert r["args"] == {"rv": -1, "rvx": "0xffffffffffffffff"}, r["args"]
assert ev[2]["event"] == "uprobes/p_0x401000" and ev[2]["args"] == {}
assert ev[3]["type"] == "S" and ev[3]["data"] == "3805400000000000" "5468697320737472"
assert ev[4]["type"] == "D" and ev[4]["data"] is None and ev[4]["data_addr"] == "0x0"
assert ev[5]["args"] == ["0x%016x" % v for v in (4, 200, 0xff0000ed, 2**64 - 1, 0x48)]
]=] ${UPROBE_TRACE_JSONL})
  set_tests_properties(unit.trace_json_valid unit.trace_json_content
    PROPERTIES FIXTURES_REQUIRED trace_jsonl)
endif()

# the fast path's agent run natively: record layout, fault-safe reads, conditions, a
# full ring and its pad
uprobe_unit(test_agent)
