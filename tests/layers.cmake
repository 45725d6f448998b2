# The layering of the library, checked mechanically: the probe-site layer (src/site/)
# never includes the arbiter's header nor refers to a symbol uprobes.c defines.
# Included by tests/CMakeLists.txt.
add_test(NAME layers.site
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/integration/site_layer.sh ${CMAKE_SOURCE_DIR}
          "$<TARGET_OBJECTS:uprobe>"
  COMMAND_EXPAND_LISTS)
