# assay's CMake helpers for projects that consume the installed package
# (loaded by find_package(assay); see cmake/install.cmake).
#
# assay_add_kernel_spec: a user's repository adds one spec file per kernel
# and one line, and gets its own assay executable (the assay CLI with its
# specs linked in) plus CTest entries:
#
#   assay_add_kernel_spec(NAME <exe>
#     SPECS <spec.cpp>...              one spec file per kernel: registers ops or variants
#     [KERNELS <src>...]               kernel sources built into the executable (.cu, .cpp)
#     [IMAGES <file>...]               kernels built elsewhere, loaded at run time through the
#                                      driver API (harness/gpu/module.h): .ptx, .cubin, .fatbin
#                                      files are used as they are; a .cu file is compiled here to
#                                      IMAGE_FORMAT. The specs see ASSAY_IMAGE_<STEM>="<absolute path>"
#                                      (STEM: the file name up to the first dot, upper case).
#     [IMAGE_FORMAT ptx|cubin|fatbin]  for .cu images (default ptx: JIT-compiled for any newer GPU)
#     [LINK <target>...]               more libraries for the specs and kernels
#     [OPS <op>...] [VARIANTS <v>...]  what CTest fuzzes; default: every op and variant the specs
#                                      add to those of the stock assay, found when ctest starts
#     [CASES <n>] [MAX_DIM <n>] [TIMEOUT <s>]   per fuzz test (default 1000 cases, dims <= 256, 900 s)
#     [CORPUS <dir>]                   stored cases that CTest replays (default <source dir>/corpora,
#                                      when it exists)
#     [NO_BUILTIN_OPS])                leave assay's own ops (gemm, ...) out of the executable; a spec
#                                      that adds a variant to one of them needs them
#
# It enables testing in the calling directory (enable_testing), unless
# BUILD_TESTING is set and off, and the CUDA language if a .cu file is listed
# and the project did not enable it.
#
# CTest entries (ctest -N lists them; -L cpu / -L gpu selects):
#   <exe>.selfcheck                  cpu  the host references' self-check
#   <exe>.fuzz.<op>.<variant>        gpu  <exe> fuzz <op> --variant <v> --cases N --require-gpu ...
#   <exe>.replay                     gpu  <exe> replay <corpus> --require-gpu
# A GPU entry without a GPU is reported as skipped, never as passed: it is
# skipped when its output carries the CLI's no-GPU line ("assay: no CUDA GPU
# present", or a replay that ran nothing for want of a GPU). We match that
# line (SKIP_REGULAR_EXPRESSION) rather than SKIP_RETURN_CODE 3, because exit
# code 3 also means a CUDA failure on a machine that has a GPU, and that must
# fail. Shrunk failures go to <build>/assay-corpus/<op>/<id>.json and JUnit /
# JSON reports to <build>/assay-reports/; each failure prints its replay command.
# GPU entries ask CTest for one GPU (RESOURCE_GROUPS gpus:1): with
# `ctest --resource-spec-file` they spread over the GPUs listed there.
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/assayAllocator.cmake")

# Architectures of ASSAY_CUDA_ARCHITECTURES as (number, suffix) pairs: "90a-real" -> 90a.
function(_assay_arch_list out)
  set(archs "")
  foreach(a IN LISTS ASSAY_CUDA_ARCHITECTURES)
    string(REGEX REPLACE "-(real|virtual)$" "" a "${a}")
    if(a MATCHES "^[0-9]+[a-z]?$")
      list(APPEND archs ${a})
    endif()
  endforeach()
  if(NOT archs)
    set(archs 80)
  endif()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# assay_add_kernel_image(<out_var> SOURCE <file.cu> [FORMAT ptx|cubin|fatbin] [OUTPUT <file>] [OPTIONS <nvcc flags>...])
# Compiles a kernel source into a file that module.h loads at run time, as a
# stand-in for a kernel built by another toolchain (Triton AOT, NVRTC). Sets
# <out_var> to the output's absolute path; the build makes it before anything
# that lists it as a source or dependency. ptx is for the lowest architecture
# of ASSAY_CUDA_ARCHITECTURES (the driver JIT-compiles it for the GPU); cubin
# is for the first one only (it loads on that architecture alone); fatbin
# holds a cubin for each plus PTX of the last.
function(assay_add_kernel_image out_var)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "SOURCE;FORMAT;OUTPUT" "OPTIONS")
  if(NOT A_SOURCE)
    message(FATAL_ERROR "assay_add_kernel_image: SOURCE is required")
  endif()
  if(NOT A_FORMAT)
    set(A_FORMAT ptx)
  endif()
  get_filename_component(src "${A_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  get_filename_component(stem "${src}" NAME_WE)
  if(NOT A_OUTPUT)
    set(A_OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/assay-images/${stem}.${A_FORMAT}")
  endif()
  if(CMAKE_CUDA_COMPILER)
    set(nvcc "${CMAKE_CUDA_COMPILER}")
  elseif(CUDAToolkit_NVCC_EXECUTABLE)
    set(nvcc "${CUDAToolkit_NVCC_EXECUTABLE}")
  else()
    message(FATAL_ERROR "assay_add_kernel_image: no nvcc (enable CUDA in project(), or find_package(CUDAToolkit))")
  endif()
  _assay_arch_list(archs)
  list(GET archs 0 first)
  list(GET archs -1 last)
  if(A_FORMAT STREQUAL "ptx")
    set(flags -ptx -arch=compute_${first})
  elseif(A_FORMAT STREQUAL "cubin")
    set(flags -cubin -arch=sm_${first})
  elseif(A_FORMAT STREQUAL "fatbin")
    set(flags -fatbin)
    foreach(a IN LISTS archs)
      list(APPEND flags -gencode=arch=compute_${a},code=sm_${a})
    endforeach()
    list(APPEND flags -gencode=arch=compute_${last},code=compute_${last})
  else()
    message(FATAL_ERROR "assay_add_kernel_image: FORMAT must be ptx, cubin or fatbin, not '${A_FORMAT}'")
  endif()
  get_filename_component(outdir "${A_OUTPUT}" DIRECTORY)
  add_custom_command(OUTPUT "${A_OUTPUT}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${outdir}"
    COMMAND "${nvcc}" ${flags} -std=c++17 -I${CMAKE_CURRENT_SOURCE_DIR} ${A_OPTIONS} "${src}" -o "${A_OUTPUT}"
    DEPENDS "${src}"
    COMMENT "assay: compiling ${stem} to ${A_FORMAT} (loaded at run time through the driver API)"
    VERBATIM)
  set(${out_var} "${A_OUTPUT}" PARENT_SCOPE)
endfunction()

# A macro, so that enable_testing() acts on the caller's directory (inside a
# function it would not); the work is done by the function below.
macro(assay_add_kernel_spec)
  if(NOT DEFINED BUILD_TESTING OR BUILD_TESTING)
    enable_testing()
  endif()
  # CUDA kernels in a project that declared only CXX: enable CUDA here (it
  # must happen at directory scope, so not in the function).
  cmake_parse_arguments(_assay_m "NO_BUILTIN_OPS" "NAME;IMAGE_FORMAT;CASES;MAX_DIM;TIMEOUT;CORPUS"
                        "SPECS;KERNELS;IMAGES;LINK;OPS;VARIANTS" ${ARGN})
  get_property(_assay_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("${_assay_m_KERNELS};${_assay_m_IMAGES}" MATCHES "\\.cu(;|$)" AND NOT "CUDA" IN_LIST _assay_langs)
    message(STATUS "assay: enabling CUDA for the kernels of ${_assay_m_NAME} (or: project(... LANGUAGES CXX CUDA))")
    enable_language(CUDA)
  endif()
  unset(_assay_langs)
  foreach(_assay_v NO_BUILTIN_OPS NAME IMAGE_FORMAT CASES MAX_DIM TIMEOUT CORPUS SPECS KERNELS IMAGES LINK OPS VARIANTS
                   UNPARSED_ARGUMENTS KEYWORDS_MISSING_VALUES)
    unset(_assay_m_${_assay_v})
  endforeach()
  unset(_assay_v)
  _assay_add_kernel_spec(${ARGN})
endmacro()

function(_assay_add_kernel_spec)
  cmake_parse_arguments(PARSE_ARGV 0 A "NO_BUILTIN_OPS" "NAME;IMAGE_FORMAT;CASES;MAX_DIM;TIMEOUT;CORPUS"
                        "SPECS;KERNELS;IMAGES;LINK;OPS;VARIANTS")
  if(NOT A_NAME OR NOT A_SPECS)
    message(FATAL_ERROR "assay_add_kernel_spec: NAME and SPECS are required, e.g.\n"
                        "  assay_add_kernel_spec(NAME my_assay SPECS specs/my_kernel.cpp KERNELS kernels/my_kernel.cu)")
  endif()
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "assay_add_kernel_spec(${A_NAME}): unknown arguments: ${A_UNPARSED_ARGUMENTS}")
  endif()
  foreach(var CASES MAX_DIM TIMEOUT)
    if(DEFINED A_${var} AND NOT A_${var} MATCHES "^[0-9]+$")
      message(FATAL_ERROR "assay_add_kernel_spec(${A_NAME}): ${var} must be a positive integer, not '${A_${var}}'")
    endif()
  endforeach()
  if(NOT A_CASES)
    set(A_CASES 1000)
  endif()
  if(NOT A_MAX_DIM)
    set(A_MAX_DIM 256)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 900)
  endif()
  if(NOT A_IMAGE_FORMAT)
    set(A_IMAGE_FORMAT ptx)
  endif()

  # Specs and kernels: an OBJECT library, so every spec's static registration is linked.
  set(objs ${A_NAME}_specs)
  add_library(${objs} OBJECT ${A_SPECS} ${A_KERNELS})
  target_link_libraries(${objs} PUBLIC assay::gpu ${A_LINK} PRIVATE assay::warnings)
  # Specs declare ops and variants as designated initializers that leave unnamed fields at
  # their defaults; GCC 12's -Wextra would flag every one.
  target_compile_options(${objs} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>"
                                         "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wno-missing-field-initializers>")
  target_include_directories(${objs} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  set_target_properties(${objs} PROPERTIES
    CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    CUDA_ARCHITECTURES "${ASSAY_CUDA_ARCHITECTURES}")

  # Kernels built elsewhere: paths handed to the specs as compile definitions.
  set(image_files "")
  foreach(img IN LISTS A_IMAGES)
    get_filename_component(path "${img}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(stem "${path}" NAME_WE)
    if(path MATCHES "\\.cu$")
      assay_add_kernel_image(path SOURCE "${path}" FORMAT ${A_IMAGE_FORMAT}
                             OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/assay-images/${A_NAME}/${stem}.${A_IMAGE_FORMAT}")
    endif()
    string(TOUPPER "${stem}" macro)
    string(MAKE_C_IDENTIFIER "${macro}" macro)
    target_compile_definitions(${objs} PRIVATE "ASSAY_IMAGE_${macro}=\"${path}\"")
    list(APPEND image_files "${path}")
  endforeach()
  if(image_files)
    add_custom_target(${A_NAME}_images DEPENDS ${image_files})
    add_dependencies(${objs} ${A_NAME}_images)
  endif()

  # The kernel sources' SHA-256, recorded in every corpus entry a failure of theirs writes.
  set(hashed "")
  foreach(src IN LISTS A_KERNELS A_IMAGES)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(RELATIVE_PATH rel "${CMAKE_CURRENT_SOURCE_DIR}" "${abs}")
    list(APPEND hashed "${rel}")
  endforeach()
  if(hashed)
    list(TRANSFORM hashed PREPEND "${CMAKE_CURRENT_SOURCE_DIR}/" OUTPUT_VARIABLE hashed_abs)
    string(REPLACE ";" "," hashed_csv "${hashed}")
    set(hash_cpp "${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_source_hashes.cpp")
    add_custom_command(OUTPUT "${hash_cpp}"
      COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_CURRENT_SOURCE_DIR} -DOUT=${hash_cpp} -DFILES=${hashed_csv} -DREGISTER=ON
              -P "${ASSAY_CMAKE_DIR}/hash_sources.cmake"
      DEPENDS ${hashed_abs} "${ASSAY_CMAKE_DIR}/hash_sources.cmake" VERBATIM)
    target_sources(${objs} PRIVATE "${hash_cpp}")
  endif()

  # The executable: assay's own CLI main (compiled once, installed as an object) with these
  # specs linked in.
  add_executable(${A_NAME} $<TARGET_OBJECTS:assay::main>)
  target_link_libraries(${A_NAME} PRIVATE ${objs} assay::cli assay::gpu CLI11::CLI11)
  assay_link_host_allocator(${A_NAME})
  if(NOT A_NO_BUILTIN_OPS)
    target_link_libraries(${A_NAME} PRIVATE assay::specs)
  endif()
  # The CUDA standard is explicit on every target here, so that it is not paired with C++20 (see
  # assayConfig.cmake): the executable links CUDA objects.
  set_target_properties(${A_NAME} PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
                                             CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)

  # ---- CTest (assay_add_kernel_spec enabled testing unless BUILD_TESTING is off) ---------
  if(DEFINED BUILD_TESTING AND NOT BUILD_TESTING)
    return()
  endif()
  set(corpus_out "${CMAKE_CURRENT_BINARY_DIR}/assay-corpus")
  set(report_dir "${CMAKE_CURRENT_BINARY_DIR}/assay-reports")
  add_test(NAME ${A_NAME}.selfcheck COMMAND ${A_NAME} selfcheck)
  set_tests_properties(${A_NAME}.selfcheck PROPERTIES LABELS "cpu;assay")

  if(NOT A_CORPUS AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/corpora")
    set(A_CORPUS "${CMAKE_CURRENT_SOURCE_DIR}/corpora")
  endif()
  if(A_CORPUS)
    get_filename_component(A_CORPUS "${A_CORPUS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    add_test(NAME ${A_NAME}.replay COMMAND ${A_NAME} replay "${A_CORPUS}" --require-gpu)
    # Skipped only when nothing was unreadable: a corrupt entry fails even without a GPU.
    set_tests_properties(${A_NAME}.replay PROPERTIES LABELS "gpu;assay" RESOURCE_GROUPS "gpus:1"
      SKIP_REGULAR_EXPRESSION " 0 unreadable \\(not run: no GPU\\)" TIMEOUT ${A_TIMEOUT})
  endif()

  set(fuzz_args --cases ${A_CASES} --max-dim ${A_MAX_DIM} --seed 1 --require-gpu --corpus "${corpus_out}")
  if(A_OPS)
    # Named ops: one entry each (all their non-mutant variants, or VARIANTS).
    foreach(op IN LISTS A_OPS)
      set(name ${A_NAME}.fuzz.${op})
      set(variant_args "")
      if(A_VARIANTS)
        set(variant_args --variant ${A_VARIANTS})
      endif()
      add_test(NAME ${name} COMMAND ${A_NAME} fuzz ${op} ${fuzz_args} ${variant_args}
               --junit "${report_dir}/${name}.xml" --json "${report_dir}/${name}.json")
      set_tests_properties(${name} PROPERTIES LABELS "gpu;assay" RESOURCE_GROUPS "gpus:1"
        SKIP_REGULAR_EXPRESSION "assay: no CUDA GPU present" TIMEOUT ${A_TIMEOUT})
    endforeach()
  else()
    # Discovered when ctest starts (like gtest_discover_tests PRE_TEST): the
    # (op, variant) pairs `<exe> list` shows beyond those of the stock assay.
    set(per_config "${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_assay_tests_$<CONFIG>.cmake")
    file(GENERATE OUTPUT "${per_config}" CONTENT
"include(\"${ASSAY_CMAKE_DIR}/assayDiscoverTests.cmake\")
assay_discover_tests(
  PREFIX \"${A_NAME}\"
  EXE \"$<TARGET_FILE:${A_NAME}>\"
  STOCK \"$<TARGET_FILE:assay::assay>\"
  CMAKE \"${CMAKE_COMMAND}\"
  VARIANTS \"${A_VARIANTS}\"
  FUZZ_ARGS \"${fuzz_args}\"
  REPORT_DIR \"${report_dir}\"
  TIMEOUT \"${A_TIMEOUT}\")
")
    set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_assay_tests.cmake")
    file(WRITE "${include_file}"
"# Generated by assay_add_kernel_spec(${A_NAME}): adds the fuzz tests when ctest starts.
if(CTEST_CONFIGURATION_TYPE)
  set(_assay_cfg \"\${CTEST_CONFIGURATION_TYPE}\")
else()
  set(_assay_cfg \"${CMAKE_BUILD_TYPE}\")
endif()
set(_assay_file \"${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}_assay_tests_\${_assay_cfg}.cmake\")
if(EXISTS \"\${_assay_file}\")
  include(\"\${_assay_file}\")
else()
  add_test(${A_NAME}.fuzz.NOT_CONFIGURED \"${CMAKE_COMMAND}\" -E echo \"no test list for configuration '\${_assay_cfg}' (ctest -C <config>)\")
  set_tests_properties(${A_NAME}.fuzz.NOT_CONFIGURED PROPERTIES WILL_FAIL TRUE)
endif()
")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
  endif()
endfunction()
