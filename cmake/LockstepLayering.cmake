# The layering rule, enforced at compile time (ARCHITECTURE.md). No target sees the source root:
# each library's public include folder, BUILD/include/<target>/, holds links to its own headers
# only, under their source paths (BUILD/include/lockstep_comm/harness/comm ->
# SOURCE/harness/comm). So `#include "harness/comm/types.h"` compiles only in a target that links
# lockstep_comm, directly or through a library that links it PUBLIC, and an include that runs
# upward fails to compile ("No such file or directory") even when it needs nothing at link time.
set(LOCKSTEP_INCLUDE_ROOT ${CMAKE_BINARY_DIR}/include)
# The folder holds links only (file(REMOVE_RECURSE) never follows them): a header or folder that
# moved leaves no stale link behind.
file(REMOVE_RECURSE ${LOCKSTEP_INCLUDE_ROOT})

# lockstep_expose(<target> <PUBLIC|PRIVATE|INTERFACE> <path>...): <target> exposes each <path>
# (a folder, or single headers of a folder that libraries share), relative to the source root.
function(lockstep_expose target scope)
  set(root ${LOCKSTEP_INCLUDE_ROOT}/${target})
  foreach(path IN LISTS ARGN)
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/${path})
      message(FATAL_ERROR "lockstep_expose(${target}): ${path} does not exist")
    endif()
    get_filename_component(parent ${root}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${path} ${root}/${path} SYMBOLIC)
  endforeach()
  target_include_directories(${target} ${scope} ${root})
endfunction()

# The generated headers (lockstep/config.h, lockstep/build_info.h), below every library.
add_library(lockstep_config INTERFACE)
target_include_directories(lockstep_config INTERFACE ${CMAKE_BINARY_DIR}/generated)
