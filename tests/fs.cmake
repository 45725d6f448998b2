# The control filesystem (`uprobe mount`, src/fs/): seed 008's walkthrough run from plain
# shell against a mount, and each tracefs file's behaviour.  Also links libfuse3 in: the
# library `uprobe` (src/CMakeLists.txt) globs src/fs/*.c but links no fuse; its fs objects
# get the definition that turns them on here and resolve their fuse symbols when the
# CLI links.  Without libfuse3 they build to a stub and `uprobe mount` says so.
# Included by tests/CMakeLists.txt after tools/uprobe is added (uprobe-cli exists).

pkg_check_modules(FUSE3 IMPORTED_TARGET fuse3)
find_program(UPROBE_FS_FUSERMOUNT NAMES fusermount3)
if(FUSE3_FOUND)
  target_compile_definitions(uprobe PRIVATE UPROBE_HAVE_FUSE3=1)
  target_include_directories(uprobe PRIVATE ${FUSE3_INCLUDE_DIRS})
  target_link_libraries(uprobe-cli PRIVATE PkgConfig::FUSE3)
endif()

set(_fs_it ${CMAKE_CURRENT_LIST_DIR}/integration)
set(_fs_tests)
foreach(mode seed remove error_log pipe tracing_on event hist reach reach_none reach_scope command oracle hang_pid
    hang_write unmount sigterm)
  if(NOT FUSE3_FOUND)
    add_test(NAME fs.${mode} COMMAND sh -c
      "echo 'SKIP: built without libfuse3 (Debian package libfuse3-dev)'; exit 77")
  else()
    add_test(NAME fs.${mode} COMMAND sh ${_fs_it}/fs_walkthrough.sh ${mode}
      $<TARGET_FILE:uprobe-cli> $<TARGET_FILE:sample>)
  endif()
  list(APPEND _fs_tests fs.${mode})
endforeach()
set_tests_properties(${_fs_tests} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 30)

# The kernel's own ftrace selftests for uprobe events, by its ftracetest harness, against
# the mount (tests/ftrace/README): `uprobe mount DIR -- env FTRACE_MNT=DIR sh ./ftracetest
# ...` must pass 3/3.  Unpacked once into the build tree from Debian's linux-source-6.12.
if(NOT FUSE3_FOUND)
  add_test(NAME ftrace.uprobe COMMAND sh -c
    "echo 'SKIP: built without libfuse3 (Debian package libfuse3-dev)'; exit 77")
else()
  add_test(NAME ftrace.uprobe COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/ftrace/run.sh
    $<TARGET_FILE:uprobe-cli> ${CMAKE_CURRENT_BINARY_DIR}
    test.d/dynevent/add_remove_uprobe.tc test.d/dynevent/add_remove_uprobe_maps.tc
    test.d/kprobe/uprobe_syntax_errors.tc)
endif()
set_tests_properties(ftrace.uprobe PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 180)

# uprobe mount --listen: an event's hist trigger written from a shell, scraped
if(FUSE3_FOUND)
  add_test(NAME fs.metrics COMMAND python3 ${_fs_it}/fs_metrics.py $<TARGET_FILE:uprobe-cli>
    $<TARGET_FILE:metrics_prog>)
else()
  add_test(NAME fs.metrics COMMAND sh -c
    "echo 'SKIP: built without libfuse3 (Debian package libfuse3-dev)'; exit 77")
endif()
set_tests_properties(fs.metrics PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
