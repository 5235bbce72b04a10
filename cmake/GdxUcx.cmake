# Locates what libuct_gdx.so.0 is compiled against: the installed UCX (public headers and libraries), the
# *internal* headers of exactly that version (Debian's source package, unpacked by scripts/fetch-ucx-src.sh),
# and the installed build's config.h (printed verbatim by `ucx_info -b`).
#
# Why all three must agree: UCT 1.13 has no plugin API, so the module fills in UCX's internal structs
# (uct_component_t, uct_base_iface_t, ...). Their layout depends on the exact release and on config.h
# (ENABLE_STATS, ENABLE_DEBUG_DATA, ...). A mismatch compiles cleanly and corrupts memory at run time, so it is
# refused here with a message that says what differs.
#
# Sets, for src/transport/uct/CMakeLists.txt:
#   GDX_UCX_MODULE_OK        TRUE when the module can be built; FALSE (with a STATUS line saying why) otherwise
#   GDX_UCX_FULL_VERSION     "1.13.1", the installed UCX
#   GDX_UCX_SRC_DIR          the matching source tree (its src/ holds uct/base/*.h)
#   GDX_UCX_CONFIG_DIR       a directory holding the installed build's config.h
#   GDX_UCT_BUILT_VERSION    the version the load-time guard compares against (GDX_UCT_FAKE_BUILD_VERSION if set)
#   GDX_UCX_INFO             path of ucx_info
#   GDX_UCX_LIBS             link targets for libuct and libucs; GDX_UCP_LIBS adds libucp (test programs)

set(GDX_UCX_SRC_DIR "" CACHE PATH
  "UCX source tree matching the installed UCX (empty: <GDX_UCX_SRC_CACHE>/<dpkg version>/ucx-<version>)")
set(GDX_UCX_SRC_CACHE "/var/cache/gdx/ucx-src" CACHE PATH "Where scripts/fetch-ucx-src.sh unpacks UCX sources")
set(GDX_UCT_FAKE_BUILD_VERSION "" CACHE STRING
  "Testing aid: pretend libuct_gdx was built against this UCX version (e.g. 1.13.9): its load-time guard refuses")

set(GDX_UCX_MODULE_OK FALSE)

macro(gdx_ucx_skip why)
  message(STATUS "gdx: libuct_gdx.so.0 not built: ${why}")
  return()
endmacro()

# ---- the installed UCX: CMake package first, pkg-config as the fallback ---------------------------------
# GLOBAL: tests/uct links the same targets (libucp for its UCP test programs).
find_package(ucx CONFIG QUIET GLOBAL)
if(ucx_FOUND AND TARGET ucx::uct AND TARGET ucx::ucs AND TARGET ucx::ucp)
  set(GDX_UCX_FULL_VERSION "${ucx_VERSION}")
  set(GDX_UCX_LIBS ucx::uct ucx::ucs CACHE INTERNAL "")
  set(GDX_UCP_LIBS ucx::ucp ucx::uct ucx::ucs CACHE INTERNAL "")
  get_target_property(_gdx_ucx_incdir ucx::uct INTERFACE_INCLUDE_DIRECTORIES)
else()
  pkg_check_modules(GDX_UCT_PC QUIET IMPORTED_TARGET GLOBAL ucx-uct ucx-ucs)
  pkg_check_modules(GDX_UCP_PC QUIET IMPORTED_TARGET GLOBAL ucx)
  if(NOT GDX_UCT_PC_FOUND OR NOT GDX_UCP_PC_FOUND)
    gdx_ucx_skip("UCX not found (neither find_package(ucx CONFIG) nor pkg-config ucx-uct): apt-get install libucx-dev")
  endif()
  set(GDX_UCX_FULL_VERSION "${GDX_UCT_PC_ucx-uct_VERSION}")
  set(GDX_UCX_LIBS PkgConfig::GDX_UCT_PC CACHE INTERNAL "")
  set(GDX_UCP_LIBS PkgConfig::GDX_UCP_PC PkgConfig::GDX_UCT_PC CACHE INTERNAL "")
  set(_gdx_ucx_incdir "${GDX_UCT_PC_ucx-uct_INCLUDEDIR}")
endif()
if(NOT GDX_UCX_FULL_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+")
  gdx_ucx_skip("cannot tell the installed UCX version (got '${GDX_UCX_FULL_VERSION}')")
endif()

# ---- the runtime: ucx_info loads the same libraries every application will ------------------------------
find_program(GDX_UCX_INFO ucx_info)
if(NOT GDX_UCX_INFO)
  gdx_ucx_skip("ucx_info not found (it prints the installed build's config.h): apt-get install ucx-utils")
endif()
execute_process(COMMAND ${GDX_UCX_INFO} -v OUTPUT_VARIABLE _gdx_ucx_v RESULT_VARIABLE _gdx_rc ERROR_VARIABLE _gdx_err)
if(NOT _gdx_rc EQUAL 0 OR NOT _gdx_ucx_v MATCHES "# Version ([0-9]+\\.[0-9]+\\.[0-9]+)")
  gdx_ucx_skip("'${GDX_UCX_INFO} -v' failed (rc ${_gdx_rc}): ${_gdx_err}")
endif()
set(_gdx_runtime_version "${CMAKE_MATCH_1}")
if(NOT _gdx_runtime_version VERSION_EQUAL GDX_UCX_FULL_VERSION)
  message(FATAL_ERROR "gdx: UCX headers/libraries are version ${GDX_UCX_FULL_VERSION} but ucx_info (the runtime "
    "libraries) reports ${_gdx_runtime_version}: refusing to build libuct_gdx against a mismatched UCX. Install one "
    "UCX (libucx-dev, libucx0 and ucx-utils of the same version), or set -DGDX_BUILD_UCT=OFF.")
endif()

# ---- the internal headers: Debian's source package of exactly this version ------------------------------
if(NOT GDX_UCX_SRC_DIR)
  execute_process(COMMAND dpkg-query -W -f=\${Version} libucx0 OUTPUT_VARIABLE _gdx_debver RESULT_VARIABLE _gdx_rc
                  ERROR_QUIET)
  if(_gdx_rc EQUAL 0 AND _gdx_debver)
    set(_gdx_candidate "${GDX_UCX_SRC_CACHE}/${_gdx_debver}/ucx-${GDX_UCX_FULL_VERSION}")
  else()
    set(_gdx_candidate "${GDX_UCX_SRC_CACHE}/<dpkg version of libucx0>/ucx-${GDX_UCX_FULL_VERSION}")
  endif()
  if(NOT EXISTS "${_gdx_candidate}/src/uct/base/uct_iface.h")
    gdx_ucx_skip("UCX ${GDX_UCX_FULL_VERSION} internal headers not found in ${_gdx_candidate}: run "
                 "scripts/fetch-ucx-src.sh (or scripts/setup.sh --ucx-src), or set -DGDX_UCX_SRC_DIR=<ucx source tree>")
  endif()
  set(_gdx_src "${_gdx_candidate}")
else()
  set(_gdx_src "${GDX_UCX_SRC_DIR}")
  if(NOT EXISTS "${_gdx_src}/src/uct/base/uct_iface.h")
    message(FATAL_ERROR "gdx: GDX_UCX_SRC_DIR=${_gdx_src} is not a UCX source tree (no src/uct/base/uct_iface.h)")
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
  message(FATAL_ERROR "gdx: the UCX source tree ${_gdx_src} is version '${_gdx_src_version}' but the installed UCX is "
    "${GDX_UCX_FULL_VERSION}: refusing to build libuct_gdx against internal headers of another release (struct "
    "layouts differ). Run scripts/fetch-ucx-src.sh to fetch the matching sources, or point GDX_UCX_SRC_DIR at them.")
endif()

# Same version is not enough if a distribution patched headers: the installed public headers that also exist in
# the tree must be byte-identical to it.
foreach(_h uct/api/uct.h uct/api/tl.h uct/api/uct_def.h ucs/type/status.h ucs/type/class.h ucs/config/types.h
           ucs/datastruct/list.h ucs/sys/compiler_def.h)
  if(NOT EXISTS "${_gdx_ucx_incdir}/${_h}")
    message(FATAL_ERROR "gdx: ${_gdx_ucx_incdir}/${_h} is missing: the UCX development headers are incomplete")
  endif()
  file(SHA256 "${_gdx_ucx_incdir}/${_h}" _a)
  file(SHA256 "${_gdx_src}/src/${_h}" _b)
  if(NOT _a STREQUAL _b)
    message(FATAL_ERROR "gdx: installed ${_gdx_ucx_incdir}/${_h} differs from ${_gdx_src}/src/${_h}: that source "
      "tree is not the one the installed UCX was built from. Refusing to build libuct_gdx.")
  endif()
endforeach()
set(GDX_UCX_SRC_DIR_RESOLVED "${_gdx_src}")

# ---- config.h of the installed build ---------------------------------------------------------------------
execute_process(COMMAND ${GDX_UCX_INFO} -b OUTPUT_VARIABLE _gdx_cfg RESULT_VARIABLE _gdx_rc ERROR_VARIABLE _gdx_err)
if(NOT _gdx_rc EQUAL 0 OR NOT _gdx_cfg MATCHES "#define UCX_CONFIG_H" OR NOT _gdx_cfg MATCHES "uct_MODULES")
  message(FATAL_ERROR "gdx: '${GDX_UCX_INFO} -b' did not print UCX's config.h (rc ${_gdx_rc}): ${_gdx_err}")
endif()
string(REGEX MATCH "#define VERSION +\"([0-9.]+)\"" _m "${_gdx_cfg}")
set(_gdx_cfg_version "${CMAKE_MATCH_1}")
string(FIND "${GDX_UCX_FULL_VERSION}" "${_gdx_cfg_version}." _gdx_pos)
if(NOT _gdx_cfg_version OR NOT _gdx_pos EQUAL 0)
  message(FATAL_ERROR "gdx: config.h from ucx_info -b says VERSION '${_gdx_cfg_version}', not a prefix of "
    "${GDX_UCX_FULL_VERSION}: refusing to build libuct_gdx")
endif()
set(GDX_UCX_CONFIG_DIR "${CMAKE_BINARY_DIR}/ucx-build-config")
file(WRITE "${GDX_UCX_CONFIG_DIR}/config.h.tmp" "${_gdx_cfg}")
# COPYONLY rewrites config.h only when it changed, so reconfiguring does not rebuild the module.
configure_file("${GDX_UCX_CONFIG_DIR}/config.h.tmp" "${GDX_UCX_CONFIG_DIR}/config.h" COPYONLY)

if(GDX_UCT_FAKE_BUILD_VERSION)
  set(GDX_UCT_BUILT_VERSION "${GDX_UCT_FAKE_BUILD_VERSION}")
  message(WARNING "gdx: libuct_gdx built with GDX_UCT_FAKE_BUILD_VERSION=${GDX_UCT_FAKE_BUILD_VERSION}: its load-time "
    "guard will refuse to register against UCX ${GDX_UCX_FULL_VERSION} (a test of the guard, not a usable build)")
else()
  set(GDX_UCT_BUILT_VERSION "${GDX_UCX_FULL_VERSION}")
endif()

set(GDX_UCX_MODULE_OK TRUE)
message(STATUS "gdx: libuct_gdx.so.0 against UCX ${GDX_UCX_FULL_VERSION}, internal headers ${_gdx_src}, "
               "config.h from ${GDX_UCX_INFO} -b")
