# Selects the LibTorch line and defines the imported target lockstep::torch.
#
#   LOCKSTEP_TORCH=debian  Debian's libtorch-dev 1.13 (default; see README "LibTorch lines")
#   LOCKSTEP_TORCH=wheel   the LibTorch inside the PyTorch wheel that ci/setup installs
#   LOCKSTEP_TORCH=<dir>   any torch package directory (the one holding include/ and lib/)
#
# Only libtorch_cpu and libc10 are linked: lockstep needs ATen and c10d, and the wheel's
# libtorch.so would drag in libtorch_cuda and its CUDA libraries. NCCL is used directly.
set(LOCKSTEP_TORCH "debian" CACHE STRING "LibTorch line: debian, wheel, or a torch package dir")
set(LOCKSTEP_TORCH_WHEEL_VERSION "2.11.0" CACHE STRING "PyTorch wheel version ci/setup installs")

if(LOCKSTEP_TORCH STREQUAL "debian")
  find_path(LOCKSTEP_TORCH_INCLUDE torch/csrc/distributed/c10d/ProcessGroupGloo.hpp
            PATHS /usr/include NO_DEFAULT_PATH)
  find_library(LOCKSTEP_TORCH_CPU_LIB torch_cpu PATHS /usr/lib/x86_64-linux-gnu /usr/lib NO_DEFAULT_PATH)
  find_library(LOCKSTEP_C10_LIB c10 PATHS /usr/lib/x86_64-linux-gnu /usr/lib NO_DEFAULT_PATH)
  find_library(LOCKSTEP_GLOO_LIB gloo)
  if(NOT LOCKSTEP_TORCH_INCLUDE OR NOT LOCKSTEP_TORCH_CPU_LIB OR NOT LOCKSTEP_C10_LIB OR NOT LOCKSTEP_GLOO_LIB)
    message(FATAL_ERROR "LOCKSTEP_TORCH=debian: libtorch-dev and libgloo-dev are not installed; run ci/setup")
  endif()
  set(_torch_libs ${LOCKSTEP_TORCH_CPU_LIB} ${LOCKSTEP_C10_LIB} ${LOCKSTEP_GLOO_LIB})
  set(_torch_libdir "")
  get_filename_component(LOCKSTEP_TORCH_LIBDIR "${LOCKSTEP_TORCH_CPU_LIB}" DIRECTORY)
else()
  if(LOCKSTEP_TORCH STREQUAL "wheel")
    set(_deps "$ENV{LOCKSTEP_DEPS}")
    if(NOT _deps)
      set(_deps "$ENV{HOME}/.cache/lockstep")
    endif()
    set(_candidates "${_deps}/torch-${LOCKSTEP_TORCH_WHEEL_VERSION}/torch")
    # A torch importable by python3 also qualifies (located without importing it, since the
    # wheel's own import needs its CUDA dependencies).
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      execute_process(
        COMMAND ${Python3_EXECUTABLE} -c
          "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s else '')"
        OUTPUT_VARIABLE _py_torch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_py_torch)
        list(APPEND _candidates "${_py_torch}")
      endif()
    endif()
  else()
    set(_candidates "${LOCKSTEP_TORCH}")
  endif()
  set(_torch_dir "")
  foreach(_c IN LISTS _candidates)
    if(EXISTS "${_c}/include/torch/csrc/distributed/c10d/ProcessGroupGloo.hpp" AND EXISTS "${_c}/lib/libtorch_cpu.so")
      set(_torch_dir "${_c}")
      break()
    endif()
  endforeach()
  if(NOT _torch_dir)
    message(FATAL_ERROR "LOCKSTEP_TORCH=${LOCKSTEP_TORCH}: no torch package with c10d headers in: ${_candidates}; run ci/setup")
  endif()
  # The wheel ships c10d but not Gloo's headers: Debian's libgloo-dev provides them (only
  # declarations are used; the Gloo code itself is inside libtorch_cpu).
  find_path(LOCKSTEP_GLOO_INCLUDE gloo/algorithm.h)
  if(NOT LOCKSTEP_GLOO_INCLUDE)
    message(FATAL_ERROR "Gloo headers not found (libgloo-dev); run ci/setup")
  endif()
  set(LOCKSTEP_TORCH_INCLUDE "${_torch_dir}/include")
  set(_torch_libdir "${_torch_dir}/lib")
  set(LOCKSTEP_TORCH_LIBDIR "${_torch_libdir}")
  set(_torch_libs "${_torch_libdir}/libtorch_cpu.so" "${_torch_libdir}/libc10.so")
endif()

# 1.13 keeps version.h under csrc/api; 2.x moved it to torch/headeronly.
set(_version_h "${LOCKSTEP_TORCH_INCLUDE}/torch/headeronly/version.h")
if(NOT EXISTS "${_version_h}")
  set(_version_h "${LOCKSTEP_TORCH_INCLUDE}/torch/csrc/api/include/torch/version.h")
endif()
foreach(_part MAJOR MINOR PATCH)
  file(STRINGS "${_version_h}" _tv REGEX "#define TORCH_VERSION_${_part} ")
  string(REGEX REPLACE ".*TORCH_VERSION_${_part} +([0-9]+).*" "\\1" LOCKSTEP_TORCH_VERSION_${_part} "${_tv}")
endforeach()
set(LOCKSTEP_TORCH_VERSION
    "${LOCKSTEP_TORCH_VERSION_MAJOR}.${LOCKSTEP_TORCH_VERSION_MINOR}.${LOCKSTEP_TORCH_VERSION_PATCH}")
if(NOT LOCKSTEP_TORCH_VERSION_MAJOR MATCHES "^[0-9]+$")
  message(FATAL_ERROR "cannot read the LibTorch version from ${_version_h}")
endif()
message(STATUS "lockstep: LibTorch ${LOCKSTEP_TORCH_VERSION} (${LOCKSTEP_TORCH}) from ${LOCKSTEP_TORCH_INCLUDE}")

add_library(lockstep_torch INTERFACE)
add_library(lockstep::torch ALIAS lockstep_torch)
target_include_directories(lockstep_torch SYSTEM INTERFACE "${LOCKSTEP_TORCH_INCLUDE}"
                           "${LOCKSTEP_TORCH_INCLUDE}/torch/csrc/api/include")
if(LOCKSTEP_GLOO_INCLUDE)
  target_include_directories(lockstep_torch SYSTEM INTERFACE "${LOCKSTEP_GLOO_INCLUDE}")
endif()
target_compile_definitions(lockstep_torch INTERFACE USE_C10D_GLOO USE_DISTRIBUTED)
target_link_libraries(lockstep_torch INTERFACE ${_torch_libs})
if(_torch_libdir)
  set(CMAKE_BUILD_RPATH "${_torch_libdir}")
  set(CMAKE_INSTALL_RPATH "${_torch_libdir}")
endif()
