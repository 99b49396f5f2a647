# The host allocator of the assay tool: gperftools' tcmalloc (tcmalloc_minimal, Debian's
# libgoogle-perftools-dev), linked statically so that the tool runs on GPU machines without it.
#
# Why: a case's generation (RapidCheck's gen::exec and the op model's generator) is a stream of
# small allocations on the process's one drawing thread, and 16 lanes allocate beside it. With
# glibc's malloc the small fp32 GEMM spent half its lanes' time waiting for the drawing thread;
# with tcmalloc, on an H200 in the same call, it ran 26,174 and 24,373 cases/s against 19,436 and
# 16,901 (docs/results.md). Where the archive is missing the tool links glibc's malloc and says so.
#
#   assay_link_host_allocator(<executable>)
include_guard(GLOBAL)
find_library(ASSAY_TCMALLOC_LIBRARY NAMES libtcmalloc_minimal.a
             DOC "Static tcmalloc_minimal (gperftools) for the assay tool's host allocations")

function(assay_link_host_allocator target)
  if(ASSAY_TCMALLOC_LIBRARY)
    find_package(Threads REQUIRED)
    target_link_libraries(${target} PRIVATE "${ASSAY_TCMALLOC_LIBRARY}" Threads::Threads)
  else()
    message(STATUS "assay: ${target} uses glibc's malloc (no libtcmalloc_minimal.a: install "
                   "libgoogle-perftools-dev for faster case generation)")
  endif()
endfunction()
