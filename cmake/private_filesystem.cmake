# yolo_private_filesystem(OUT): an archive of libstdc++'s std::filesystem objects (fs_dir, fs_ops,
# fs_path, C++11 ABI) taken from the compiler's own libstdc++.a, made at configure time into the
# build folder; OUT is its path, or empty (with a warning) where the toolchain has no such archive.
function(yolo_private_filesystem out)
  set(${out} "" PARENT_SCOPE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE static_lib OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(members fs_dir.o fs_ops.o fs_path.o)
  set(dir "${PROJECT_BINARY_DIR}/private_filesystem")
  set(archive "${dir}/libyolo_stdfs.a")
  if(NOT IS_ABSOLUTE "${static_lib}" OR NOT EXISTS "${static_lib}")
    message(WARNING "no libstdc++.a beside ${CMAKE_CXX_COMPILER}: programs bind std::filesystem "
                    "by load order only (check with ctest -R fs_binding)")
    return()
  endif()
  file(MAKE_DIRECTORY "${dir}")
  execute_process(COMMAND ${CMAKE_AR} x "${static_lib}" ${members} WORKING_DIRECTORY "${dir}"
                  RESULT_VARIABLE extracted ERROR_QUIET)
  if(extracted EQUAL 0)
    file(REMOVE "${archive}")
    execute_process(COMMAND ${CMAKE_AR} rcs "${archive}" ${members} WORKING_DIRECTORY "${dir}"
                    RESULT_VARIABLE archived)
  endif()
  if(NOT extracted EQUAL 0 OR NOT archived EQUAL 0)
    message(WARNING "${static_lib} has no ${members}: programs bind std::filesystem by load order "
                    "only (check with ctest -R fs_binding)")
    return()
  endif()
  set(${out} "${archive}" PARENT_SCOPE)
endfunction()
