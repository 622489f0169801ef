# tessera's CMake module: a network tessera generates inside your build.
#
#   find_package(tessera REQUIRED)       # CMAKE_PREFIX_PATH=$(tessera --cmake-dir)
#   # or: include(<the folder `tessera --cmake-dir` prints>/tessera.cmake)
#   tessera_add_network(<name> TARGET <target> MODEL <model>
#                       [OUT <dir>] [OPTIONS var=value ...])
#   target_link_libraries(app PRIVATE <name>)
#
# TARGET and MODEL are tessera's bundled names (`tessera list`) or YAML files
# (relative to the calling CMakeLists.txt). OUT (default
# ${CMAKE_CURRENT_BINARY_DIR}/tessera) holds <target>/<model>/, as tessera's
# own build lays it out; OPTIONS are tessera's build variables (fusion=,
# overlap=, ram_cap=, cmsis_nn=, ...: `tessera build --help`; a relative
# path in them is relative to the calling CMakeLists.txt too).
#
# When CMake configures, tessera reads the model (cached) to learn the
# network's files (`tessera cmake`). At build time a custom command runs
# `tessera build --export-only`, which regenerates what the target YAML, the
# model YAML, the files the model reads (ONNX, TFLite, reference data) or
# tessera itself changed, writing only the files whose content changed:
# `cmake --build` then recompiles those and relinks (Ninja and Make). A
# change that can change which files there are (a target or model YAML, a
# model file) also makes CMake configure again, within the same build.
#
# <name> is a static library: the network's layers and network.c; PUBLIC
# include directory with "<prefix>/network.h" (<prefix>_init, _input, _run,
# _output); it links the kernel and HAL targets (tessera::kernels_<library>,
# tessera::hal_<platform>, defined once per project however many networks
# it has) and gives the linker the folder of tessera_sections.ld (INCLUDE it
# in your linker script; docs/embedding.md). Its properties: TESSERA_PREFIX,
# TESSERA_HEADER ("<prefix>/network.h"), TESSERA_LINKER_FRAGMENT,
# TESSERA_TEST_VECTORS (the golden input<i>.bin and output<i>.bin),
# TESSERA_OUTDIR. tessera chooses no compiler and sets no flag of yours:
# your toolchain file does (its ABI flags must agree with the target's).

cmake_minimum_required(VERSION 3.13)

if(NOT TESSERA_EXECUTABLE)
  # pip installs the command beside the interpreter: <prefix>/bin/tessera for
  # <prefix>/lib/pythonX.Y/site-packages/tessera/data/cmake (this folder)
  find_program(TESSERA_EXECUTABLE tessera
               HINTS "${CMAKE_CURRENT_LIST_DIR}/../../../../../../bin" NO_DEFAULT_PATH)
  find_program(TESSERA_EXECUTABLE tessera)
endif()
if(NOT TESSERA_EXECUTABLE)
  message(FATAL_ERROR "tessera: the `tessera` command is not found (pip install tessera into the environment "
                      "whose bin/ is on PATH, or give -DTESSERA_EXECUTABLE=<path to tessera>)")
endif()

function(tessera_add_network name)
  cmake_parse_arguments(PARSE_ARGV 1 _tsr_arg "" "TARGET;MODEL;OUT" "OPTIONS")
  if(_tsr_arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tessera_add_network(${name}): unknown arguments ${_tsr_arg_UNPARSED_ARGUMENTS} "
                        "(TARGET <target> MODEL <model> [OUT <dir>] [OPTIONS var=value ...])")
  endif()
  if(NOT _tsr_arg_TARGET OR NOT _tsr_arg_MODEL)
    message(FATAL_ERROR "tessera_add_network(${name}): give TARGET and MODEL (bundled names: `tessera list`, "
                        "or YAML files)")
  endif()
  if(TARGET ${name})
    message(FATAL_ERROR "tessera_add_network(${name}): a target named ${name} exists already")
  endif()
  if(NOT _tsr_arg_OUT)
    set(_tsr_arg_OUT "${CMAKE_CURRENT_BINARY_DIR}/tessera")
  endif()
  get_filename_component(_tsr_out "${_tsr_arg_OUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  # a YAML file is relative to this CMakeLists.txt; a bundled name stays a name
  foreach(_tsr_kind TARGET MODEL)
    set(_tsr_value "${_tsr_arg_${_tsr_kind}}")
    if(_tsr_value MATCHES "[/\\]" OR _tsr_value MATCHES "\\.ya?ml$")
      get_filename_component(_tsr_value "${_tsr_value}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
    set(_tsr_${_tsr_kind} "${_tsr_value}")
  endforeach()
  set(_tsr_args --target "${_tsr_TARGET}" --model "${_tsr_MODEL}" --out "${_tsr_out}")

  # configure: the network's files, the kernel and HAL targets (_tsr_* below)
  set(_tsr_listing "${CMAKE_CURRENT_BINARY_DIR}/tessera_${name}.cmake")
  execute_process(COMMAND "${TESSERA_EXECUTABLE}" cmake ${_tsr_args} --write "${_tsr_listing}" ${_tsr_arg_OPTIONS}
                  WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
                  RESULT_VARIABLE _tsr_status ERROR_VARIABLE _tsr_error)
  if(NOT _tsr_status EQUAL 0)
    string(STRIP "${_tsr_error}" _tsr_error)
    message(FATAL_ERROR "tessera_add_network(${name}): ${_tsr_error}")
  endif()
  include("${_tsr_listing}")

  # build: regenerate what changed (only changed files are rewritten)
  set(_tsr_stamp "${CMAKE_CURRENT_BINARY_DIR}/tessera_${name}.stamp")
  add_custom_command(
    OUTPUT "${_tsr_stamp}"
    BYPRODUCTS ${_tsr_sources} "${_tsr_header}" "${_tsr_fragment}" ${_tsr_vectors}
    COMMAND "${TESSERA_EXECUTABLE}" build --export-only ${_tsr_args} ${_tsr_arg_OPTIONS}
    COMMAND "${CMAKE_COMMAND}" -E touch "${_tsr_stamp}"
    # the file above is rewritten only when it changes: with another TARGET,
    # MODEL, OUT or OPTIONS, Make regenerates too (Ninja also sees the command change)
    DEPENDS ${_tsr_depends} "${_tsr_listing}"
    WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
    COMMENT "tessera: network ${name} (${_tsr_model} on ${_tsr_target})"
    VERBATIM)
  add_custom_target(${name}_tessera DEPENDS "${_tsr_stamp}")

  add_library(${name} STATIC ${_tsr_sources})
  add_dependencies(${name} ${name}_tessera)
  # public: "<prefix>/network.h" (and the kernel headers, through the kernel
  # targets); private: network.c includes its header as "network.h"
  target_include_directories(${name} PUBLIC "${_tsr_export_dir}/include" PRIVATE "${_tsr_export_dir}/include/${_tsr_prefix}")
  target_link_libraries(${name} PUBLIC ${_tsr_links})
  # `INCLUDE tessera_sections.ld` in the firmware's linker script finds it here
  target_link_directories(${name} INTERFACE "${_tsr_export_dir}/ld")
  set_property(TARGET ${name} APPEND PROPERTY INTERFACE_LINK_DEPENDS "${_tsr_fragment}")
  set_target_properties(${name} PROPERTIES
    TESSERA_PREFIX "${_tsr_prefix}"
    TESSERA_HEADER "${_tsr_prefix}/network.h"
    TESSERA_LINKER_FRAGMENT "${_tsr_fragment}"
    TESSERA_TEST_VECTORS "${_tsr_vectors}"
    TESSERA_OUTDIR "${_tsr_outdir}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_tsr_configure_depends})
endfunction()
