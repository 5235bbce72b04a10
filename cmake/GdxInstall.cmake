# `cmake --install`: libgdx + headers + gdx.pc + a CMake package (find_package(gdx) -> gdx::gdx), the tools,
# and the UCX module where the installed UCX looks for it; CPack (`cpack -G DEB`) makes one .deb per UCX build,
# depending on exactly the libucx0 it was built against (the module fits that build only).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS gdx EXPORT gdxTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/gdx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS gdx_info gdx_perftest RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${CMAKE_SOURCE_DIR}/tools/gdx-run DESTINATION ${CMAKE_INSTALL_BINDIR})

file(RELATIVE_PATH GDX_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${CMAKE_SOURCE_DIR}/cmake/gdx.pc.in ${CMAKE_BINARY_DIR}/gdx.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/gdx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(_gdx_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/gdx)
install(EXPORT gdxTargets NAMESPACE gdx:: DESTINATION ${_gdx_cmakedir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/gdxConfig.cmake.in ${CMAKE_BINARY_DIR}/gdxConfig.cmake
                              INSTALL_DESTINATION ${_gdx_cmakedir})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/gdxConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/gdxConfig.cmake ${CMAKE_BINARY_DIR}/gdxConfigVersion.cmake
        DESTINATION ${_gdx_cmakedir})

set(CPACK_PACKAGE_NAME gdx)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gdx maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPUDirect-aware communication transport, and its UCX module")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)

if(TARGET uct_gdx)
  # UCX >= 1.22 scans <its libdir>/ucx/ for libuct_<name>.so.0: the module goes there, under its soname (the
  # scan matches UCX's own suffix, .so.0, not the versioned file). Older UCX loads only its configure-time
  # list: the module then goes to <libdir>/gdx/ucx/<version and configuration>/ with its manifest, and
  # libuct_gdx_loader.so (what gdx-run preloads) picks it from there (src/uct/README.md, "Loading").
  if(GDX_UCX_FULL_VERSION VERSION_GREATER_EQUAL 1.22)
    set(GDX_UCX_MODULE_DIR "${CMAKE_INSTALL_LIBDIR}/ucx" CACHE STRING
        "Where UCX >= 1.22 looks for modules: <UCX libdir>/ucx (relative: under the install prefix)")
    install(FILES $<TARGET_FILE:uct_gdx> RENAME libuct_gdx.so.0 DESTINATION ${GDX_UCX_MODULE_DIR})
  else()
    set(_gdx_moddir ${CMAKE_INSTALL_LIBDIR}/gdx/ucx/${GDX_UCX_BUILD_TAG})
    install(FILES $<TARGET_FILE:uct_gdx> RENAME libuct_gdx.so.0 DESTINATION ${_gdx_moddir})
    install(FILES ${CMAKE_BINARY_DIR}/src/uct/libuct_gdx.ucx DESTINATION ${_gdx_moddir})
    install(TARGETS uct_gdx_loader LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
  # The package of one UCX build: named after it, depending on exactly the package that ships the libucp.so.0
  # it was built against (Debian's or Ubuntu's libucx0, whether found through libucx-dev or as a runtime only).
  # A UCX that no package owns (a prefix, HPC-X, Spack): no such dependency, and its libraries are private to
  # dpkg-shlibdeps, which would otherwise fail to find a package for them.
  set(CPACK_DEBIAN_PACKAGE_NAME "gdx-ucx${GDX_UCX_FULL_VERSION}")
  get_filename_component(_gdx_libucp "${GDX_UCX_LIBDIR_RESOLVED}/libucp.so.0" REALPATH)
  execute_process(COMMAND dpkg-query -S "${_gdx_libucp}" OUTPUT_VARIABLE _gdx_owner RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND _gdx_owner MATCHES "^([^:, ]+)")
    set(_gdx_ucx_pkg "${CMAKE_MATCH_1}")
    execute_process(COMMAND dpkg-query -W -f=\${Version} "${_gdx_ucx_pkg}" OUTPUT_VARIABLE _gdx_debver RESULT_VARIABLE _rc
                    ERROR_QUIET)
  endif()
  if(_rc EQUAL 0 AND _gdx_debver)
    set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_gdx_ucx_pkg} (= ${_gdx_debver})")
  else()
    set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${GDX_UCX_LIBDIR_RESOLVED}")
  endif()
endif()
include(CPack)
