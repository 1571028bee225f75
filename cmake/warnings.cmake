# Project-wide warning set, applied per target with minfer_warnings(target).
function(minfer_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wno-unused-parameter
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
endfunction()

# minfer_library(name SOURCES... DEPS... [UNITY_BATCH n]): one src/ folder = one static library,
# target minfer_<name>; code includes "core/status.h", "gguf/reader.h"... and only the listed
# dependencies are visible, which keeps the layering one-way. UNITY_BATCH n compiles the sources
# n to a translation unit (for libraries whose files each parse the same heavy headers: CLI11,
# nlohmann/json, cpp-httplib); their file-local names must then be unique across the library.
function(minfer_library name)
  cmake_parse_arguments(ARG "" "UNITY_BATCH" "SOURCES;DEPS" ${ARGN})
  string(REPLACE "/" "_" tname ${name})
  add_library(minfer_${tname} STATIC ${ARG_SOURCES})
  # A library sees its own folder and its dependencies' folders only: its include root is a
  # build-tree folder holding a single link, inc/<name>/<name> -> src/<name>.
  set(root ${CMAKE_BINARY_DIR}/inc/${name})
  file(MAKE_DIRECTORY ${root})
  get_filename_component(parent ${name} DIRECTORY)
  if(parent)
    file(MAKE_DIRECTORY ${root}/${parent})
  endif()
  if(NOT EXISTS ${root}/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
  endif()
  target_include_directories(minfer_${tname} PUBLIC ${root})
  set_target_properties(minfer_${tname} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(minfer_${tname} PUBLIC ${ARG_DEPS})
  minfer_warnings(minfer_${tname})
  if(ARG_UNITY_BATCH)
    set_target_properties(minfer_${tname} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ARG_UNITY_BATCH})
    # gcc flags a class in an #included .cpp that holds a file-local type; in a unity batch every
    # .cpp is #included, so the warning says nothing there.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(minfer_${tname} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()

# minfer_embed_files(OUT_VAR NAMESPACE ns FILES a b ...): generates a .cpp that holds the files'
# bytes, found by `std::string_view ns::embedded_file(std::string_view name)` (the page of viz,
# the chat page of serve); OUT_VAR gets its path, to list among a library's sources.
function(minfer_embed_files out_var)
  cmake_parse_arguments(ARG "" "NAMESPACE;NAME" "FILES" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}-assets.cpp)
  string(REPLACE ";" "|" files_arg "${ARG_FILES}")
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DNAMESPACE=${ARG_NAMESPACE} "-DFILES=${files_arg}"
      -P ${PROJECT_SOURCE_DIR}/cmake/embed-files.cmake
    DEPENDS ${ARG_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed-files.cmake
    COMMENT "Embedding ${ARG_NAME}" VERBATIM)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
