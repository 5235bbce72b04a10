# Finds gdx's dependencies the way Debian 12 ships them. CUDA is headers only: libcuda is opened at run time.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
add_library(gdx::ibverbs ALIAS PkgConfig::IBVERBS)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
add_library(gdx::hwloc ALIAS PkgConfig::HWLOC)
pkg_check_modules(UCX IMPORTED_TARGET ucx)
set(GDX_UCX_VERSION "${UCX_VERSION}")
if(NOT UCX_FOUND)
  set(GDX_UCX_VERSION "none")
endif()

find_package(Boost 1.74 REQUIRED) # Asio is header-only: Boost::headers

find_path(GDX_CUDA_INCLUDE_DIR cuda.h
  HINTS $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include /usr/local/cuda/include
  NO_DEFAULT_PATH)
if(GDX_CUDA_INCLUDE_DIR)
  set(GDX_HAVE_CUDA_H ON)
else()
  set(GDX_HAVE_CUDA_H OFF)
  set(GDX_CUDA_INCLUDE_DIR "")
  message(STATUS "gdx: cuda.h not found: building without the CUDA memory backend")
endif()

if(GDX_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND AND EXISTS /usr/src/googletest/CMakeLists.txt)
    # Distributions that ship GoogleTest as sources only (e.g. the GPU machine's Ubuntu).
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/_googletest EXCLUDE_FROM_ALL)
    add_library(GTest::gtest ALIAS gtest)
    add_library(GTest::gtest_main ALIAS gtest_main)
    add_library(GTest::gmock ALIAS gmock)
  elseif(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found: run scripts/setup.sh (installs libgtest-dev)")
  endif()
  include(GoogleTest)
endif()
