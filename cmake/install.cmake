# Installs assay as a CMake package. Included once, at the end of the
# top-level CMakeLists.txt (after every target exists):
#
#   cmake --install build --prefix /opt/assay
#
# and in another project:
#
#   find_package(assay REQUIRED)            # -DCMAKE_PREFIX_PATH=/opt/assay
#   assay_add_kernel_spec(NAME my_assay SPECS my_spec.cpp KERNELS my_kernel.cu)
#
# Layout under the prefix:
#   bin/assay                                   the stock tool (assay::assay)
#   include/assay/{harness,references,kernels}/ headers; include "harness/spec.h"
#   lib/libassay_*.a, lib/assay/objects/        libraries; the built-in specs as objects
#   lib/cmake/assay/                            assayConfig.cmake, assayTargets.cmake,
#                                               assayHelpers.cmake (assay_add_kernel_spec)
#
# Exported targets (namespace assay::): core (host engine), gpu (GPU engine,
# references), kernels (the built-in kernels), specs (the built-in
# op specs, an OBJECT library: linking it registers the ops, e.g. gemm, so a
# consumer can add a variant to them), cli (the CLI's parts: listing, reports),
# main (the CLI's main, an OBJECT library each consumer's tool is linked from),
# warnings, and the assay executable.
# Everything they link inside this project is exported with them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ASSAY_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/assay" CACHE STRING
    "Where the assay CMake package files are installed, relative to the prefix")
set(_assay_include_dest "${CMAKE_INSTALL_INCLUDEDIR}/assay")

# ---- which targets: the roots and every project target they link ------------------------
# Walked rather than listed, so a library that another engineer links into
# assay_gpu later is exported too (otherwise install(EXPORT) fails to generate).
function(_assay_export_closure out)
  set(seen "")
  set(queue ${ARGN})
  while(queue)
    list(POP_FRONT queue t)
    if(t IN_LIST seen OR NOT TARGET ${t})
      continue()
    endif()
    get_target_property(imported ${t} IMPORTED)
    get_target_property(aliased ${t} ALIASED_TARGET)
    if(imported OR aliased)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(type ${t} TYPE)
    set(deps "")
    get_target_property(iface ${t} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(APPEND deps ${iface})
    endif()
    # Private dependencies of static and object libraries reach the consumer's link line.
    if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "OBJECT_LIBRARY")
      get_target_property(link ${t} LINK_LIBRARIES)
      if(link)
        list(APPEND deps ${link})
      endif()
    endif()
    foreach(d IN LISTS deps)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" d "${d}")
      if(NOT d MATCHES "[$<>]" AND NOT d MATCHES "::")
        list(APPEND queue ${d})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

_assay_export_closure(_assay_export_targets assay_core assay_gpu assay_kernels assay_specs assay_cli assay_main)

foreach(t IN LISTS _assay_export_targets)
  # assay_core -> assay::core
  string(REGEX REPLACE "^assay_" "" _name ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${_name})
  # The libraries put the source tree on their include path (assay_library);
  # installed, that is include/assay (INCLUDES DESTINATION below).
  get_target_property(_dirs ${t} INTERFACE_INCLUDE_DIRECTORIES)
  if(_dirs)
    set(_fixed "")
    foreach(d IN LISTS _dirs)
      string(FIND "${d}" "${PROJECT_SOURCE_DIR}" _in_src)
      string(FIND "${d}" "${PROJECT_BINARY_DIR}" _in_bin)
      if(NOT d MATCHES "^\\$<" AND (_in_src EQUAL 0 OR _in_bin EQUAL 0))
        list(APPEND _fixed "$<BUILD_INTERFACE:${d}>")
      else()
        list(APPEND _fixed "${d}")
      endif()
    endforeach()
    set_property(TARGET ${t} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
  endif()
endforeach()

# The headers use C++20 (the build sets CMAKE_CXX_STANDARD); consumers get it
# as a usage requirement of the installed core. No effect on this build.
set_property(TARGET assay_core APPEND PROPERTY INTERFACE_COMPILE_FEATURES "$<INSTALL_INTERFACE:cxx_std_20>")

# The installed tool finds cuBLAS where it was linked from.
set_target_properties(assay PROPERTIES EXPORT_NAME assay INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS ${_assay_export_targets} assay
  EXPORT assayTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/assay/objects
  INCLUDES DESTINATION ${_assay_include_dest})

install(EXPORT assayTargets
  NAMESPACE assay::
  FILE assayTargets.cmake
  DESTINATION ${ASSAY_INSTALL_CMAKEDIR})

# ---- headers, the helpers ---------------------------------------------------------------
# Same layout as the source tree, so `#include "harness/spec.h"` works against
# <prefix>/include/assay exactly as it does here.
foreach(_dir harness references kernels)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}/
    DESTINATION ${_assay_include_dest}/${_dir}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.cuh")
endforeach()

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/assayConfig.cmake.in
  ${PROJECT_BINARY_DIR}/assayConfig.cmake
  INSTALL_DESTINATION ${ASSAY_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the spec interface.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/assayConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/assayConfig.cmake
  ${PROJECT_BINARY_DIR}/assayConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/assayHelpers.cmake
  ${CMAKE_CURRENT_LIST_DIR}/assayAllocator.cmake
  ${CMAKE_CURRENT_LIST_DIR}/assayDiscoverTests.cmake
  ${CMAKE_CURRENT_LIST_DIR}/hash_sources.cmake
  DESTINATION ${ASSAY_INSTALL_CMAKEDIR})
