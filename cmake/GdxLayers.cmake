# One OBJECT library per layer (README.md, "Layout"), each compiled against its own include view: a directory
# under ${CMAKE_BINARY_DIR}/views/<target>/ holding symbolic links to the headers of the layer's own folders and
# of the folders of the layers it USES (transitively), and nothing else. Includes stay written relative to src/
# ("transport/transport.h"), but a header of a layer above or beside is not in the view, so including it fails
# with "No such file or directory" (tests/layering/ keeps that true). libgdx.so, libuct_gdx.so and the tests link
# gdx_internal, the one static archive made of every layer's objects, so the layers change no link line.
#
# gdx_layer(<target> [OUTSIDE_INTERNAL] FOLDERS <folders under src/> [USES <lower layer targets>] SOURCES <files>)
#   FOLDERS  the folders whose headers the layer owns ("transport/tcp"); a folder's subfolders are separate
#            folders, so "transport" exposes src/transport/*.h and not src/transport/tcp/*.h.
#   USES     the layers it may call; their folders join the view. Linked PRIVATE: a layer's view already holds
#            everything its headers include, so nothing has to travel to its users.
#   OUTSIDE_INTERNAL  not part of gdx_internal (the UCX glue's bridge, which only libuct_gdx.so holds).
#   HEADERS  single headers of a layer above that this one may include (paths under src/): only the config
#            registry uses it, for the UCX glue's data-only config_vars.{h,inc}; the glue declares rows like every
#            layer, and its bridge sits above config, so the registry cannot USE it.
# The view is the target's PUBLIC include directory (the layering probes link a layer to compile as part of it).
# New headers reach the views at the next configure, which a CONFIGURE_DEPENDS glob triggers by itself.

# Usage requirements every layer shares: the public headers (include/gdx/), CUDA's headers when present, the
# third-party libraries. Linked by every layer and, PUBLIC, by gdx_internal.
add_library(gdx_flags INTERFACE)
target_include_directories(gdx_flags INTERFACE ${CMAKE_SOURCE_DIR}/include)
target_compile_definitions(gdx_flags INTERFACE GDX_HAVE_CUDA_H=$<BOOL:${GDX_HAVE_CUDA_H}>)
if(GDX_HAVE_CUDA_H)
  target_include_directories(gdx_flags SYSTEM INTERFACE ${GDX_CUDA_INCLUDE_DIR})
endif()
target_link_libraries(gdx_flags INTERFACE gdx::ibverbs gdx::hwloc Boost::headers Threads::Threads ${CMAKE_DL_LIBS})

set_property(GLOBAL PROPERTY GDX_LAYERS "")

function(gdx_layer target)
  cmake_parse_arguments(L "OUTSIDE_INTERNAL" "" "FOLDERS;USES;SOURCES;HEADERS" ${ARGN})
  set(folders ${L_FOLDERS})
  foreach(dep IN LISTS L_USES)
    get_target_property(dep_folders ${dep} GDX_LAYER_FOLDERS)
    if(NOT dep_folders)
      message(FATAL_ERROR "gdx_layer(${target}): ${dep} is not a layer defined before it")
    endif()
    list(APPEND folders ${dep_folders})
  endforeach()
  list(REMOVE_DUPLICATES folders)

  set(view ${CMAKE_BINARY_DIR}/views/${target})
  file(REMOVE_RECURSE ${view})
  foreach(folder IN LISTS folders)
    set(dir ${CMAKE_SOURCE_DIR}/src/${folder})
    if(NOT IS_DIRECTORY ${dir})
      message(FATAL_ERROR "gdx_layer(${target}): no folder src/${folder}")
    endif()
    file(GLOB headers CONFIGURE_DEPENDS ${dir}/*.h ${dir}/*.hpp ${dir}/*.inc)
    file(MAKE_DIRECTORY ${view}/${folder})
    foreach(h IN LISTS headers)
      get_filename_component(name ${h} NAME)
      file(CREATE_LINK ${h} ${view}/${folder}/${name} SYMBOLIC)
    endforeach()
  endforeach()

  foreach(h IN LISTS L_HEADERS)
    if(NOT EXISTS ${CMAKE_SOURCE_DIR}/src/${h})
      message(FATAL_ERROR "gdx_layer(${target}): no header src/${h}")
    endif()
    get_filename_component(hdir ${h} DIRECTORY)
    file(MAKE_DIRECTORY ${view}/${hdir})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${h} ${view}/${h} SYMBOLIC)
  endforeach()

  add_library(${target} OBJECT ${L_SOURCES})
  set_target_properties(${target} PROPERTIES GDX_LAYER_FOLDERS "${folders}" GDX_LAYER_VIEW ${view})
  target_include_directories(${target} PUBLIC ${view})
  target_link_libraries(${target} PUBLIC gdx_flags PRIVATE ${L_USES})
  if(NOT L_OUTSIDE_INTERNAL)
    set_property(GLOBAL APPEND PROPERTY GDX_LAYERS ${target})
  endif()
endfunction()

# gdx_internal: every layer's objects in one archive (call once all layers of libgdx.so are defined). Tests, the
# benches and the UCX module link it; it exports src/ itself, since tests may include any layer.
function(gdx_internal_library)
  get_property(layers GLOBAL PROPERTY GDX_LAYERS)
  set(objects "")
  foreach(l IN LISTS layers)
    list(APPEND objects $<TARGET_OBJECTS:${l}>)
  endforeach()
  add_library(gdx_internal STATIC ${objects})
  set_target_properties(gdx_internal PROPERTIES LINKER_LANGUAGE CXX)
  target_include_directories(gdx_internal PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(gdx_internal PUBLIC gdx_flags)
endfunction()
