# Locates what libuct_gdx.so.0 is compiled against: the installed UCX (public headers and libraries), the
# *internal* headers of exactly that version (Debian's source package, unpacked by scripts/fetch-ucx-src.sh),
# and the installed build's config.h (printed verbatim by `ucx_info -b`).
#
# Why all three must agree: UCT 1.13 has no plugin API, so the module fills in UCX's internal structs
# (uct_component_t, uct_base_iface_t, ...). Their layout depends on the exact release and on config.h
# (ENABLE_STATS, ENABLE_DEBUG_DATA, ...). A mismatch compiles cleanly and corrupts memory at run time, so it is
# refused here with a message that says what differs.
#
# Any UCX from 1.13 on: Debian 12's (headers and libraries installed, sources from `apt-get source`), a
# source-built UCX (-DGDX_UCX_PREFIX=<its prefix>), or a UCX that is only a runtime (no headers, no .so
# links: the GPU machine, a chroot), given as -DGDX_UCX_LIBDIR=<dir of libuct.so.0> with its ucx_info
# (-DGDX_UCX_INFO=<path or wrapper script>) and, where that ucx_info cannot run here, its `ucx_info -b` output
# (-DGDX_UCX_CONFIG_H=<file>). The internal headers always come from -DGDX_UCX_SRC_DIR=<source tree of exactly
# that version>. What differs between releases is probed from that tree's headers (UCT_GDX_HAVE_*, read by
# src/uct/uct_gdx_compat.h).
#
# Sets, for src/uct/CMakeLists.txt:
#   GDX_UCX_MODULE_OK        TRUE when the module can be built; FALSE (with a STATUS line saying why) otherwise
#   GDX_UCX_FULL_VERSION     "1.13.1", the installed UCX
#   GDX_UCX_SRC_DIR          the matching source tree (its src/ holds uct/base/*.h)
#   GDX_UCX_CONFIG_DIR       a directory holding the installed build's config.h
#   GDX_UCT_BUILT_VERSION    the version the load-time guard compares against (GDX_UCT_FAKE_BUILD_VERSION if set)
#   GDX_UCX_INFO             path of ucx_info
#   GDX_UCX_LIBS             link targets for libuct and libucs; GDX_UCP_LIBS adds libucp (test programs)
#   GDX_UCX_FEATURE_DEFS     UCT_GDX_HAVE_*=0|1 compile definitions (the feature probes)
#   GDX_UCX_BUILD_TAG        "1.16.0" or "1.16.0-stats-debugdata": version and the layout-changing options of the
#                            build (ENABLE_STATS, ENABLE_DEBUG_DATA, ENABLE_ASSERT=0 as "noassert")
#   GDX_UCX_LIBDIR_RESOLVED  where the runtime's libuct.so.0 is (for tests and the loader's manifest)

set(GDX_UCX_SRC_DIR "" CACHE PATH
  "UCX source tree of exactly the UCX built against (empty: Debian's, <GDX_UCX_SRC_CACHE>/<dpkg version>/ucx-<v>)")
set(GDX_UCX_SRC_CACHE "/var/cache/gdx/ucx-src" CACHE PATH "Where scripts/fetch-ucx-src.sh unpacks UCX sources")
set(GDX_UCX_PREFIX "" CACHE PATH "Prefix of a UCX installation to build against (source-built UCX, HPC-X, Spack)")
set(GDX_UCX_LIBDIR "" CACHE PATH
  "Runtime-only UCX (no headers or .so links installed): the directory holding its libuct.so.0, libucs.so.0")
set(GDX_UCX_CONFIG_H "" CACHE FILEPATH "The target UCX's `ucx_info -b` output, when its ucx_info cannot run here")
set(GDX_UCT_FAKE_BUILD_VERSION "" CACHE STRING
  "Testing aid: pretend libuct_gdx was built against this UCX version (e.g. 1.13.9): its load-time guard refuses")

set(GDX_UCX_MODULE_OK FALSE)

macro(gdx_ucx_skip why)
  message(STATUS "gdx: libuct_gdx.so.0 not built: ${why}")
  return()
endmacro()

if(GDX_UCX_PREFIX)
  list(PREPEND CMAKE_PREFIX_PATH "${GDX_UCX_PREFIX}")
endif()

# ---- the runtime: its version and its build's config.h ---------------------------------------------------
# From ucx_info where the UCX has it (it loads the same libraries every application will, and prints config.h
# verbatim); for a runtime-only UCX without it (a distribution's libucx0 without ucx-utils: the GPU machine),
# from the libraries themselves: gdx_ucx_probe (src/uct/gdx_ucx_probe.c), compiled and run here, asks
# libucp for its version and reconstructs config.h from traces the configure options leave in the libraries,
# saying for each value how it was read, and refusing in one line what it cannot tell.
if(NOT GDX_UCX_INFO)
  find_program(GDX_UCX_INFO ucx_info HINTS ${GDX_UCX_PREFIX}/bin NO_CACHE)
  set(GDX_UCX_INFO "${GDX_UCX_INFO}" CACHE FILEPATH "ucx_info of the UCX built against (may be a wrapper script)")
endif()
set(GDX_UCX_PROBED FALSE)
if(NOT GDX_UCX_INFO AND GDX_UCX_LIBDIR)
  set(_gdx_probe_dir "${CMAKE_BINARY_DIR}/ucx-probe")
  file(MAKE_DIRECTORY "${_gdx_probe_dir}")
  set(_gdx_probe_src "${CMAKE_SOURCE_DIR}/src/uct")
  set(_gdx_dl "")
  foreach(_l IN LISTS CMAKE_DL_LIBS)
    list(APPEND _gdx_dl "-l${_l}")
  endforeach()
  execute_process(COMMAND ${CMAKE_C_COMPILER} -std=gnu11 -O1 -o "${_gdx_probe_dir}/gdx_ucx_probe"
                          "${_gdx_probe_src}/gdx_ucx_probe.c" "${_gdx_probe_src}/uct_gdx_ucxbuild.c" ${_gdx_dl}
                  RESULT_VARIABLE _gdx_rc OUTPUT_VARIABLE _gdx_out ERROR_VARIABLE _gdx_out)
  if(NOT _gdx_rc EQUAL 0)
    message(FATAL_ERROR "gdx: compiling gdx_ucx_probe (reads a runtime-only UCX) failed: ${_gdx_out}")
  endif()
  execute_process(COMMAND "${_gdx_probe_dir}/gdx_ucx_probe" --libdir "${GDX_UCX_LIBDIR}"
                          --config-h "${_gdx_probe_dir}/config.h"
                  RESULT_VARIABLE _gdx_rc OUTPUT_VARIABLE _gdx_probe_out ERROR_VARIABLE _gdx_err)
  file(WRITE "${_gdx_probe_dir}/probe.txt" "${_gdx_probe_out}${_gdx_err}")
  if(NOT _gdx_rc EQUAL 0)
    string(STRIP "${_gdx_err}" _gdx_err)
    message(FATAL_ERROR "gdx: ${GDX_UCX_LIBDIR} has no ucx_info and its UCX cannot be read from the libraries "
      "(gdx_ucx_probe exit ${_gdx_rc}): ${_gdx_err} (give -DGDX_UCX_INFO=<its ucx_info> or -DGDX_UCX_CONFIG_H=<its "
      "ucx_info -b output> instead)")
  endif()
  if(NOT _gdx_probe_out MATCHES "(^|\n)version=([0-9]+\\.[0-9]+\\.[0-9]+)")
    message(FATAL_ERROR "gdx: gdx_ucx_probe printed no version: ${_gdx_probe_out}")
  endif()
  set(_gdx_runtime_version "${CMAKE_MATCH_2}")
  set(_gdx_configured "unknown (no ucx_info: configuration read from the libraries)")
  # How each value was determined, in the configure log (and in ucx-probe/probe.txt).
  string(REPLACE "\t" " <- " _gdx_probe_log "${_gdx_probe_out}")
  string(REGEX REPLACE "\n$" "" _gdx_probe_log "${_gdx_probe_log}")
  string(REPLACE "\n" "\n-- gdx:   " _gdx_probe_log "${_gdx_probe_log}")
  message(STATUS "gdx: no ucx_info: UCX in ${GDX_UCX_LIBDIR} read by gdx_ucx_probe:\n-- gdx:   ${_gdx_probe_log}")
  if(NOT GDX_UCX_CONFIG_H)
    set(GDX_UCX_PROBED TRUE)
  endif()
elseif(NOT GDX_UCX_INFO)
  gdx_ucx_skip("ucx_info not found (it says which UCX runs and prints its build's config.h): apt-get install "
               "ucx-utils, or -DGDX_UCX_PREFIX=<UCX prefix>, or -DGDX_UCX_INFO=<path>, or -DGDX_UCX_LIBDIR=<dir of "
               "libucp.so.0> for a UCX without ucx_info")
else()
  execute_process(COMMAND ${GDX_UCX_INFO} -v OUTPUT_VARIABLE _gdx_ucx_v RESULT_VARIABLE _gdx_rc ERROR_VARIABLE _gdx_err)
  # 1.13 prints "# Version 1.13.1", 1.14 and later "# Library version: 1.16.0".
  if(NOT _gdx_rc EQUAL 0 OR NOT _gdx_ucx_v MATCHES "# (Library version:|Version) ([0-9]+\\.[0-9]+\\.[0-9]+)")
    message(FATAL_ERROR "gdx: '${GDX_UCX_INFO} -v' (rc ${_gdx_rc}) did not print '# Version x.y.z' nor "
      "'# Library version: x.y.z': ${_gdx_ucx_v}${_gdx_err}")
  endif()
  set(_gdx_runtime_version "${CMAKE_MATCH_2}")
  set(_gdx_configured "")
  if(_gdx_ucx_v MATCHES "# Configured with: ([^\n]*)")
    set(_gdx_configured "${CMAKE_MATCH_1}")
  endif()
endif()

# ---- config.h of that build: sets struct layouts (ENABLE_STATS, ENABLE_DEBUG_DATA, ENABLE_ASSERT, ...) -------
if(GDX_UCX_CONFIG_H)
  file(READ "${GDX_UCX_CONFIG_H}" _gdx_cfg)
  set(_gdx_cfg_from "${GDX_UCX_CONFIG_H}")
elseif(GDX_UCX_PROBED)
  file(READ "${_gdx_probe_dir}/config.h" _gdx_cfg)
  set(_gdx_cfg_from "gdx_ucx_probe (reconstructed from the libraries in ${GDX_UCX_LIBDIR})")
else()
  execute_process(COMMAND ${GDX_UCX_INFO} -b OUTPUT_VARIABLE _gdx_cfg RESULT_VARIABLE _gdx_rc ERROR_VARIABLE _gdx_err)
  if(NOT _gdx_rc EQUAL 0)
    message(FATAL_ERROR "gdx: '${GDX_UCX_INFO} -b' failed (rc ${_gdx_rc}): ${_gdx_err}")
  endif()
  set(_gdx_cfg_from "${GDX_UCX_INFO} -b")
endif()
if(NOT _gdx_cfg MATCHES "#define UCX_CONFIG_H" OR NOT (_gdx_cfg MATCHES "uct_MODULES" OR
   _gdx_cfg MATCHES "#define GDX_UCX_CONFIG_RECONSTRUCTED"))
  message(FATAL_ERROR "gdx: ${_gdx_cfg_from} is not UCX's config.h (no UCX_CONFIG_H / uct_MODULES)")
endif()
string(REGEX MATCH "#define VERSION +\"([0-9.]+)\"" _m "${_gdx_cfg}")
set(_gdx_cfg_version "${CMAKE_MATCH_1}")
string(FIND "${_gdx_runtime_version}" "${_gdx_cfg_version}." _gdx_pos)
if(NOT _gdx_cfg_version OR NOT _gdx_pos EQUAL 0)
  message(FATAL_ERROR "gdx: config.h from ${_gdx_cfg_from} says VERSION '${_gdx_cfg_version}', which is not UCX "
    "${_gdx_runtime_version} (what ${GDX_UCX_INFO} runs): give the config.h of that build")
endif()
# The options that change layouts or inline code, as a tag: the module's install directory and the loader's
# manifest carry it, and messages name it.
set(GDX_UCX_BUILD_TAG "${_gdx_runtime_version}")
set(_gdx_cfg_summary "")
foreach(_opt ENABLE_STATS ENABLE_DEBUG_DATA ENABLE_ASSERT)
  set(_v 0)
  if(_gdx_cfg MATCHES "#define ${_opt} +([01])")
    set(_v ${CMAKE_MATCH_1})
  endif()
  string(APPEND _gdx_cfg_summary " ${_opt}=${_v}")
  set(GDX_UCX_CFG_${_opt} ${_v})
endforeach()
if(GDX_UCX_CFG_ENABLE_STATS)
  string(APPEND GDX_UCX_BUILD_TAG "-stats")
endif()
if(GDX_UCX_CFG_ENABLE_DEBUG_DATA)
  string(APPEND GDX_UCX_BUILD_TAG "-debugdata")
endif()
if(NOT GDX_UCX_CFG_ENABLE_ASSERT)
  string(APPEND GDX_UCX_BUILD_TAG "-noassert")
endif()
set(_gdx_need "UCX ${_gdx_runtime_version} (${_gdx_cfg_summary} ; configured with: ${_gdx_configured})")

# ---- the libraries to link: an installed development package, or a runtime-only UCX -------------------------
if(GDX_UCX_LIBDIR)
  foreach(_l ucs uct ucp)
    if(NOT EXISTS "${GDX_UCX_LIBDIR}/lib${_l}.so.0")
      message(FATAL_ERROR "gdx: GDX_UCX_LIBDIR=${GDX_UCX_LIBDIR} has no lib${_l}.so.0")
    endif()
    if(NOT TARGET gdx_ucx_${_l})
      add_library(gdx_ucx_${_l} SHARED IMPORTED GLOBAL)
      set_target_properties(gdx_ucx_${_l} PROPERTIES IMPORTED_LOCATION "${GDX_UCX_LIBDIR}/lib${_l}.so.0"
        IMPORTED_NO_SONAME FALSE)
    endif()
  endforeach()
  set(GDX_UCX_FULL_VERSION "${_gdx_runtime_version}")
  set(GDX_UCX_LIBS gdx_ucx_uct gdx_ucx_ucs CACHE INTERNAL "")
  set(GDX_UCP_LIBS gdx_ucx_ucp gdx_ucx_uct gdx_ucx_ucs CACHE INTERNAL "")
  set(_gdx_ucx_incdir "")   # public headers come from the source tree (below)
  set(GDX_UCX_LIBDIR_RESOLVED "${GDX_UCX_LIBDIR}")
else()
  find_package(ucx CONFIG QUIET GLOBAL)
  set(_gdx_cmake_pkg_ok FALSE)
  if(ucx_FOUND AND TARGET ucx::uct AND TARGET ucx::ucs AND TARGET ucx::ucp)
    get_target_property(_gdx_ucx_incdir ucx::uct INTERFACE_INCLUDE_DIRECTORIES)
    if(EXISTS "${_gdx_ucx_incdir}/uct/api/uct.h")
      set(_gdx_cmake_pkg_ok TRUE)
    else()
      # Debian 13's ucx-targets.cmake computes its prefix one level short (/usr/lib/include): pkg-config is right.
      message(STATUS "gdx: UCX's CMake package names include directory '${_gdx_ucx_incdir}', which lacks "
                     "uct/api/uct.h: using pkg-config's UCX instead")
    endif()
  endif()
  if(_gdx_cmake_pkg_ok)
    set(GDX_UCX_FULL_VERSION "${ucx_VERSION}")
    set(GDX_UCX_LIBS ucx::uct ucx::ucs CACHE INTERNAL "")
    set(GDX_UCP_LIBS ucx::ucp ucx::uct ucx::ucs CACHE INTERNAL "")
    get_target_property(_gdx_ucx_incdir ucx::uct INTERFACE_INCLUDE_DIRECTORIES)
    get_target_property(_gdx_uct_loc ucx::uct LOCATION)
  else()
    pkg_check_modules(GDX_UCT_PC QUIET IMPORTED_TARGET GLOBAL ucx-uct ucx-ucs)
    pkg_check_modules(GDX_UCP_PC QUIET IMPORTED_TARGET GLOBAL ucx)
    if(NOT GDX_UCT_PC_FOUND OR NOT GDX_UCP_PC_FOUND)
      gdx_ucx_skip("${_gdx_need} runs, but its development files are not installed (neither find_package(ucx "
        "CONFIG) nor pkg-config ucx-uct): apt-get install libucx-dev, or -DGDX_UCX_PREFIX=<prefix>, or "
        "-DGDX_UCX_LIBDIR=<dir of libuct.so.0> for a runtime-only UCX")
    endif()
    set(GDX_UCX_FULL_VERSION "${GDX_UCT_PC_ucx-uct_VERSION}")
    set(GDX_UCX_LIBS PkgConfig::GDX_UCT_PC CACHE INTERNAL "")
    set(GDX_UCP_LIBS PkgConfig::GDX_UCP_PC PkgConfig::GDX_UCT_PC CACHE INTERNAL "")
    set(_gdx_ucx_incdir "${GDX_UCT_PC_ucx-uct_INCLUDEDIR}")
    set(_gdx_uct_loc "${GDX_UCT_PC_ucx-uct_LIBDIR}/libuct.so")
  endif()
  get_filename_component(GDX_UCX_LIBDIR_RESOLVED "${_gdx_uct_loc}" DIRECTORY)
  if(NOT _gdx_runtime_version VERSION_EQUAL GDX_UCX_FULL_VERSION)
    message(FATAL_ERROR "gdx: UCX headers/libraries are version ${GDX_UCX_FULL_VERSION} but ${GDX_UCX_INFO} (the "
      "runtime libraries) reports ${_gdx_runtime_version}: refusing to build libuct_gdx against a mismatched UCX. "
      "Install one UCX (libucx-dev, libucx0 and ucx-utils of the same version), point -DGDX_UCX_INFO at the "
      "ucx_info of the UCX being built against, or set -DGDX_BUILD_UCT=OFF.")
  endif()
endif()

# ---- the internal headers: a source tree of exactly this version ----------------------------------------
set(_gdx_how "for Debian's UCX run scripts/fetch-ucx-src.sh; for another UCX build pass "
  "-DGDX_UCX_SRC_DIR=<the source tree of exactly that UCX ${GDX_UCX_FULL_VERSION}>")
if(NOT GDX_UCX_SRC_DIR)
  execute_process(COMMAND dpkg-query -W -f=\${Version} libucx0 OUTPUT_VARIABLE _gdx_debver RESULT_VARIABLE _gdx_rc
                  ERROR_QUIET)
  if(_gdx_rc EQUAL 0 AND _gdx_debver AND NOT GDX_UCX_PREFIX AND NOT GDX_UCX_LIBDIR)
    set(_gdx_candidate "${GDX_UCX_SRC_CACHE}/${_gdx_debver}/ucx-${GDX_UCX_FULL_VERSION}")
  else()
    set(_gdx_candidate "<not given>")
  endif()
  if(NOT EXISTS "${_gdx_candidate}/src/uct/base/uct_iface.h")
    gdx_ucx_skip("needs the internal headers of ${_gdx_need}; none in ${_gdx_candidate}: ${_gdx_how}")
  endif()
  set(_gdx_src "${_gdx_candidate}")
else()
  set(_gdx_src "${GDX_UCX_SRC_DIR}")
  if(NOT EXISTS "${_gdx_src}/src/uct/base/uct_iface.h")
    message(FATAL_ERROR "gdx: GDX_UCX_SRC_DIR=${_gdx_src} is not a UCX source tree (no src/uct/base/uct_iface.h); "
      "needed: the sources of ${_gdx_need}: ${_gdx_how}")
  endif()
endif()

# The tree's own version (configure.ac) must be the installed one.
file(STRINGS "${_gdx_src}/configure.ac" _gdx_ver_lines REGEX "^define\\(\\[ucx_ver_(major|minor|patch)\\]")
set(_gdx_src_version "")
foreach(_part major minor patch)
  foreach(_l IN LISTS _gdx_ver_lines)
    if(_l MATCHES "ucx_ver_${_part}\\], *([0-9]+)\\)")
      list(APPEND _gdx_src_version "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endforeach()
list(JOIN _gdx_src_version "." _gdx_src_version)
if(NOT _gdx_src_version VERSION_EQUAL GDX_UCX_FULL_VERSION)
  message(FATAL_ERROR "gdx: the UCX source tree ${_gdx_src} is version '${_gdx_src_version}', but libuct_gdx is "
    "being built for ${_gdx_need}: internal struct layouts differ between releases. ${_gdx_how}")
endif()

# Same version is not enough if a distribution patched headers: the installed public headers that also exist in
# the tree must be byte-identical to it. (A runtime-only UCX uses the tree's public headers themselves.)
if(_gdx_ucx_incdir)
  foreach(_h uct/api/uct.h uct/api/tl.h uct/api/uct_def.h ucs/type/status.h ucs/type/class.h ucs/config/types.h
             ucs/datastruct/list.h ucs/sys/compiler_def.h)
    if(NOT EXISTS "${_gdx_ucx_incdir}/${_h}")
      message(FATAL_ERROR "gdx: ${_gdx_ucx_incdir}/${_h} is missing: the UCX development headers are incomplete")
    endif()
    file(SHA256 "${_gdx_ucx_incdir}/${_h}" _a)
    file(SHA256 "${_gdx_src}/src/${_h}" _b)
    if(NOT _a STREQUAL _b)
      message(FATAL_ERROR "gdx: installed ${_gdx_ucx_incdir}/${_h} differs from ${_gdx_src}/src/${_h}: that source "
        "tree is not the one the installed UCX ${GDX_UCX_FULL_VERSION} was built from. Refusing to build libuct_gdx.")
    endif()
  endforeach()
endif()
set(GDX_UCX_SRC_DIR_RESOLVED "${_gdx_src}")

set(GDX_UCX_CONFIG_DIR "${CMAKE_BINARY_DIR}/ucx-build-config")
file(WRITE "${GDX_UCX_CONFIG_DIR}/config.h.tmp" "${_gdx_cfg}")
# COPYONLY rewrites config.h only when it changed, so reconfiguring does not rebuild the module.
configure_file("${GDX_UCX_CONFIG_DIR}/config.h.tmp" "${GDX_UCX_CONFIG_DIR}/config.h" COPYONLY)
# The two generated version headers a source tree lacks (its *.h.in), for a UCX without installed headers.
string(REPLACE "." ";" _gdx_vparts "${GDX_UCX_FULL_VERSION}")
list(GET _gdx_vparts 0 MAJOR_VERSION)
list(GET _gdx_vparts 1 MINOR_VERSION)
list(GET _gdx_vparts 2 PATCH_VERSION)
set(VERSION "${MAJOR_VERSION}.${MINOR_VERSION}")
set(SCM_VERSION "${_gdx_runtime_version}")
set(SCM_BRANCH "release sources")
foreach(_vh ucp/api/ucp_version.h uct/api/version.h)
  if(EXISTS "${_gdx_src}/src/${_vh}.in")
    configure_file("${_gdx_src}/src/${_vh}.in" "${GDX_UCX_CONFIG_DIR}/${_vh}" @ONLY)
  endif()
endforeach()

if(GDX_UCX_LIBDIR)
  foreach(_l ucs uct ucp)
    set_target_properties(gdx_ucx_${_l} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${GDX_UCX_CONFIG_DIR};${_gdx_src}/src")
  endforeach()
endif()

# ---- feature probes: what this release's internal headers declare (uct_gdx_compat.h) ------------------------
file(READ "${_gdx_src}/src/uct/base/uct_md.h" _gdx_md_h)
file(READ "${_gdx_src}/src/uct/base/uct_component.h" _gdx_comp_h)
file(READ "${_gdx_src}/src/uct/base/uct_iface.h" _gdx_iface_h)
set(_gdx_v2_h "")
if(EXISTS "${_gdx_src}/src/uct/api/v2/uct_v2.h")
  file(READ "${_gdx_src}/src/uct/api/v2/uct_v2.h" _gdx_v2_h)
endif()
set(GDX_UCX_FEATURE_DEFS "")
function(gdx_ucx_probe name text_var regex)
  if("${${text_var}}" MATCHES "${regex}")
    list(APPEND GDX_UCX_FEATURE_DEFS UCT_GDX_HAVE_${name}=1)
  else()
    list(APPEND GDX_UCX_FEATURE_DEFS UCT_GDX_HAVE_${name}=0)
  endif()
  set(GDX_UCX_FEATURE_DEFS "${GDX_UCX_FEATURE_DEFS}" PARENT_SCOPE)
endfunction()
set(_ws "[ \t\r\n]*")
gdx_ucx_probe(MD_ATTR_V2 _gdx_md_h "\\(\\*uct_md_query_func_t\\)\\(uct_md_h md,${_ws}uct_md_attr_v2_t")
gdx_ucx_probe(MEM_REG_PARAMS _gdx_md_h "size_t length,${_ws}const uct_md_mem_reg_params_t \\*params")
gdx_ucx_probe(MKEY_PACK_ADDR _gdx_md_h "uct_md_mkey_pack_func_t\\)\\(${_ws}uct_md_h md, uct_mem_h memh, void \\*address")
gdx_ucx_probe(MEM_ATTACH _gdx_md_h "uct_md_mem_attach_func_t +mem_attach;")
gdx_ucx_probe(MEM_ELEM_PACK _gdx_md_h "uct_md_mem_elem_pack_func_t +mem_elem_pack;")
gdx_ucx_probe(MEM_QUERY_V2 _gdx_md_h "size_t length,${_ws}uct_md_mem_attr_v2_t \\*mem_attr\\)")
gdx_ucx_probe(RKEY_COMPARE _gdx_comp_h "uct_component_rkey_compare_func_t +rkey_compare;")
gdx_ucx_probe(RKEY_UNPACK_PARAMS _gdx_comp_h "rkey_buffer,${_ws}const uct_rkey_unpack_params_t \\*params")
gdx_ucx_probe(IFACE_V2_OPS _gdx_iface_h "uct_ep_connect_to_ep_v2_func_t +ep_connect_to_ep_v2;")
gdx_ucx_probe(IFACE_QUERY_V2 _gdx_iface_h "uct_iface_query_v2_func_t +iface_query_v2;")
gdx_ucx_probe(MD_BASE_QUERY _gdx_md_h "void uct_md_base_md_query\\(uct_md_attr_v2_t")
gdx_ucx_probe(MD_REG_ALIGNMENT _gdx_v2_h "size_t +reg_alignment;")

if(GDX_UCT_FAKE_BUILD_VERSION)
  set(GDX_UCT_BUILT_VERSION "${GDX_UCT_FAKE_BUILD_VERSION}")
  message(WARNING "gdx: libuct_gdx built with GDX_UCT_FAKE_BUILD_VERSION=${GDX_UCT_FAKE_BUILD_VERSION}: its load-time "
    "guard will refuse to register against UCX ${GDX_UCX_FULL_VERSION} (a test of the guard, not a usable build)")
else()
  set(GDX_UCT_BUILT_VERSION "${GDX_UCX_FULL_VERSION}")
endif()

set(GDX_UCX_MODULE_OK TRUE)
# Seen by the top level (install rules, CPack) and by tests/uct, not only by src/uct.
set(GDX_UCX_FULL_VERSION "${GDX_UCX_FULL_VERSION}" CACHE INTERNAL "")
set(GDX_UCX_BUILD_TAG "${GDX_UCX_BUILD_TAG}" CACHE INTERNAL "")
foreach(_v GDX_UCX_CONFIG_DIR GDX_UCX_SRC_DIR_RESOLVED GDX_UCX_FEATURE_DEFS GDX_UCX_LIBDIR_RESOLVED GDX_UCX_PROBED)
  set(${_v} "${${_v}}" CACHE INTERNAL "")
endforeach()
message(STATUS "gdx: libuct_gdx.so.0 for ${_gdx_need}, internal headers ${_gdx_src}, config.h from ${_gdx_cfg_from}, "
               "libraries in ${GDX_UCX_LIBDIR_RESOLVED}; probes: ${GDX_UCX_FEATURE_DEFS}")
