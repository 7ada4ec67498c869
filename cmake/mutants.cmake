# Mutant test builds (docs/chaos.md, "Mutants"): exo-db-node-mutant and exo-cache-node-mutant,
# beside the production binaries in build/db-node and build/cache-node. Each is its production
# executable rebuilt with EXO_FAULTS, which adds the --fault flag and the fenced hooks
# (common/cpp/fault_switch.h); the production targets and libraries are not touched.
#
# Only the files that hold a hook are compiled again: exo_add_mutant lists them after the
# executable's own sources, so their objects come before the production library on the link
# line and define every symbol of the same file's object in that library, which the linker
# then never pulls from the archive. (Were it pulled, the link would fail on duplicate symbols,
# not pass silently.) The chaos tests show the hooks are live: a mutant round must fail.

# exo_add_mutant(NAME BASE HOOK_SOURCE...): NAME = BASE's sources + HOOK_SOURCEs (paths
# relative to BASE's source dir), compiled with EXO_FAULTS, linked like BASE.
function(exo_add_mutant name base)
  get_target_property(dir ${base} SOURCE_DIR)
  get_target_property(bin ${base} BINARY_DIR)
  get_target_property(srcs ${base} SOURCES)
  get_target_property(libs ${base} LINK_LIBRARIES)
  get_target_property(opts ${base} COMPILE_OPTIONS)
  set(all)
  foreach(s IN LISTS srcs ARGN)
    cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${dir})
    list(APPEND all ${s})
  endforeach()
  add_executable(${name} ${all})
  target_compile_definitions(${name} PRIVATE EXO_FAULTS)
  target_link_libraries(${name} PRIVATE ${libs})
  if(opts)
    target_compile_options(${name} PRIVATE ${opts})
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${bin})
endfunction()

exo_add_mutant(exo-db-node-mutant exo-db-node src/propagator.cc         # --fault skip-prepare
               src/replication/chain_runtime.cc)                          # --fault ack-at-head
exo_add_mutant(exo-cache-node-mutant exo-cache-node src/control_tx.cc)  # --fault serve-stale
