# cmake --install BUILD --prefix P: the programs in P/bin, the public library's static archives in
# P/lib/yolo_cpp, its headers in P/include/yolo, the model, data and hyp YAMLs in
# P/share/yolo_cpp (where an installed program looks for bare config names, relative to itself)
# and the CMake package: find_package(yolo_cpp) gives yolo_cpp::yolo (and yolo_cpp::detector).
include(CMakePackageConfigHelpers)
set(YOLO_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/yolo_cpp")

foreach(program train val detect export yolo_cli)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

install(TARGETS yolo yolo_detector yolo_common yolo_core yolo_models yolo_data yolo_viz yolo_eval
                yolo_distributed yolo_engine
        EXPORT yolo_cppTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}/yolo_cpp")
if(YOLO_STDFS_ARCHIVE)
  install(FILES "${YOLO_STDFS_ARCHIVE}" DESTINATION "${CMAKE_INSTALL_LIBDIR}/yolo_cpp")
endif()
install(DIRECTORY include/yolo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY configs/models configs/data DESTINATION "${YOLO_INSTALL_DATADIR}/configs"
        FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY hyp/ DESTINATION "${YOLO_INSTALL_DATADIR}/hyp" FILES_MATCHING PATTERN "*.yaml")

install(EXPORT yolo_cppTargets NAMESPACE yolo_cpp:: DESTINATION "${YOLO_INSTALL_CMAKEDIR}")
# What the package's targets link besides its own: found again by find_package(yolo_cpp), the
# same LibTorch first (its folder is a hint; CMAKE_PREFIX_PATH or Torch_DIR may name another).
set(YOLO_OPENCV_COMPONENTS core imgproc imgcodecs)
if(YOLO_HAS_OPENCV_DNN)
  list(APPEND YOLO_OPENCV_COMPONENTS dnn)
endif()
if(YOLO_HAS_OPENCV_VIDEOIO)
  list(APPEND YOLO_OPENCV_COMPONENTS videoio)
endif()
set(YOLO_NEEDS_JPEG ${YOLO_HAS_LIBJPEG})
set(YOLO_NEEDS_CURL ${YOLO_HAS_CURL})
set(YOLO_NEEDS_LIBARCHIVE ${YOLO_HAS_LIBARCHIVE})
configure_package_config_file(cmake/yolo_cppConfig.cmake.in
                              "${PROJECT_BINARY_DIR}/yolo_cppConfig.cmake"
                              INSTALL_DESTINATION "${YOLO_INSTALL_CMAKEDIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/yolo_cppConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/yolo_cppConfig.cmake"
              "${PROJECT_BINARY_DIR}/yolo_cppConfigVersion.cmake"
        DESTINATION "${YOLO_INSTALL_CMAKEDIR}")

# cpack -G DEB (in the build folder): a Debian package of the same tree, installed under /usr.
# Its programs find LibTorch where the build found it (their run path), so the package suits
# machines that have that LibTorch at the same place (Debian's libtorch-dev for a --torch system
# build).
set(CPACK_PACKAGE_NAME yolo-cpp)
set(CPACK_PACKAGE_VENDOR yolo-cpp)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Native YOLOv5-style object detection trainer on LibTorch")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "yolo-cpp developers")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libopencv-dev, libyaml-cpp-dev, libsimdjson-dev, libjpeg62-turbo-dev")
set(CPACK_GENERATOR DEB)
include(CPack)
