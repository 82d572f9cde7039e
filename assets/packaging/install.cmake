# kvdesk installed as a Linux desktop program (cmake --install) and packed as a .deb (cpack):
# the programs, kvdesk's menu entry, icons and man pages in the GNU directories, Depends from the
# curated runtime-packages.txt. The desktop app reads no file of kvdesk's own at run time (its
# fonts are system ones, ui/fonts.cpp), so nothing of assets/ is installed for it.
include(GNUInstallDirs)

set(KVDESK_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})

install(TARGETS kvdesk-cli kvdesk-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${KVDESK_PACKAGING_DIR}/man/kvdesk-cli.1 ${KVDESK_PACKAGING_DIR}/man/kvdesk-bench.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# The text kvdesk-bench quality scores by default, for --text: the default path is the source tree's.
install(FILES ${CMAKE_SOURCE_DIR}/assets/quality/tinystories_sample.txt DESTINATION ${CMAKE_INSTALL_DATADIR}/kvdesk)

if(TARGET kvdesk)
  install(TARGETS kvdesk RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${KVDESK_PACKAGING_DIR}/man/kvdesk.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(FILES ${KVDESK_PACKAGING_DIR}/kvdesk.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${KVDESK_PACKAGING_DIR}/kvdesk.svg DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
  foreach(size 16 32 48 64 128 256)
    install(FILES ${KVDESK_PACKAGING_DIR}/icons/kvdesk-${size}.png
            DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/${size}x${size}/apps RENAME kvdesk.png)
  endforeach()
endif()

# Depends: every package of the list, those marked "gui" only when kvdesk is built.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KVDESK_PACKAGING_DIR}/runtime-packages.txt)
file(STRINGS ${KVDESK_PACKAGING_DIR}/runtime-packages.txt kvdesk_package_lines REGEX "^[^#]")
set(kvdesk_runtime_packages "")
foreach(kvdesk_package_line IN LISTS kvdesk_package_lines)
  if(NOT kvdesk_package_line MATCHES "^([a-z0-9][a-z0-9.+-]+)( +gui)?$")
    message(FATAL_ERROR "assets/packaging/runtime-packages.txt: '${kvdesk_package_line}' is not 'PACKAGE' or 'PACKAGE gui'")
  endif()
  if(NOT CMAKE_MATCH_2 OR TARGET kvdesk)
    list(APPEND kvdesk_runtime_packages ${CMAKE_MATCH_1})
  endif()
endforeach()

if(NOT CPACK_GENERATOR)
  set(CPACK_GENERATOR DEB)
endif()
set(CPACK_PACKAGE_NAME kvdesk)
# project() names no VERSION, so the package's version is given here.
set(CPACK_PACKAGE_VERSION 0.1.0)
set(CPACK_PACKAGE_CONTACT "kvdesk developers <kvdesk@localhost>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "desktop chat app for local LLMs with a paged KV cache")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "kvdesk chats with GGUF language models on this machine and shows where their\n"
    "memory goes: live panels of the paged KV cache (blocks, sharing, prefix cache,\n"
    "KV types, memory budget). kvdesk-cli runs the same engine headless and serves\n"
    "an OpenAI-compatible HTTP API; kvdesk-bench measures the cache.")
if(KVDESK_HAVE_CUDA)
  string(APPEND CPACK_PACKAGE_DESCRIPTION
         "\nBuilt with CUDA: uses an NVIDIA GPU where NVIDIA's driver is installed, the CPU elsewhere.")
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)
list(JOIN kvdesk_runtime_packages ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
# dpkg-shlibdeps stays off: Depends is the curated list, so it names exactly the Debian packages
# (fonts-nanum too, which no binary links). check_install.sh checks the list against the binaries.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
include(CPack)

add_test(NAME install_and_deb_package COMMAND ${CMAKE_SOURCE_DIR}/tests/packaging/check_install.sh ${CMAKE_BINARY_DIR})
set_tests_properties(install_and_deb_package PROPERTIES TIMEOUT 600)
