# Installation and the .deb (docs/deploy.md).
#   cmake --install build --prefix P   the programs, the controller and `exo` with their private
#                                      Python tree, systemd units, config examples and docs under P
#   (cd build && cpack)                 exoskeleton_<version>_amd64.deb, installed under /usr
# Only the three programs a deployment runs are installed: no tests, benches, emulator or mutants.
include(GNUInstallDirs)

set(EXO_VERSION 0.1.0)  # = the Python distributions' version (pyproject.toml files)
option(EXO_INSTALL_PYTHON
       "Install the controller and the exo CLI with their Python dependencies (fetched by pip)" ON)
if(EXISTS ${CMAKE_SOURCE_DIR}/.venv/bin/python)
  set(_exo_default_python ${CMAKE_SOURCE_DIR}/.venv/bin/python)
else()
  set(_exo_default_python python3)
endif()
set(EXO_PYTHON ${_exo_default_python} CACHE FILEPATH
    "Python whose pip builds the private Python tree and whose package versions it pins")

install(TARGETS exo-cache-node exo-db-node exo-proxy RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS packaging/bin/exo-controller packaging/bin/exo DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES docs/deploy.md docs/operations.md docs/security.md docs/config-reference.md
              docs/replication.md docs/etcd.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/configs FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY packaging/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# systemd units under <prefix>/lib/systemd/system. The files in packaging/systemd name /usr/bin
# (the .deb's prefix); another prefix gets its own bin directory in ExecStart, decided when
# installing (cmake --install --prefix), not when configuring.
file(GLOB EXO_UNITS ${CMAKE_SOURCE_DIR}/packaging/systemd/*.service)
install(CODE "
  set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/systemd/system\")
  file(MAKE_DIRECTORY \"\${_dir}\")
  foreach(_unit ${EXO_UNITS})
    file(READ \"\${_unit}\" _text)
    string(REPLACE \"=/usr/bin/\" \"=\${CMAKE_INSTALL_PREFIX}/bin/\" _text \"\${_text}\")
    get_filename_component(_name \"\${_unit}\" NAME)
    message(STATUS \"Installing: \${_dir}/\${_name}\")
    file(WRITE \"\${_dir}/\${_name}\" \"\${_text}\")
  endforeach()")

if(EXO_INSTALL_PYTHON)
  install(CODE "
    set(_dest \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/exoskeleton/python\")
    message(STATUS \"Installing: \${_dest} (packaging/python/bundle.py)\")
    execute_process(COMMAND ${EXO_PYTHON} ${CMAKE_SOURCE_DIR}/packaging/python/bundle.py --dest \"\${_dest}\"
                    RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR \"packaging/python/bundle.py failed (\${_rc}); -DEXO_INSTALL_PYTHON=OFF installs without the controller\")
    endif()")
endif()

# ---- CPack: one .deb ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME exoskeleton)
set(CPACK_PACKAGE_VERSION ${EXO_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Switch-routed cache-enabled key-value cluster: cache node, db node, proxy, controller")
set(CPACK_PACKAGE_CONTACT "Exoskeleton developers <exoskeleton@invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the RelWithDebInfo programs are ~20 MB each with their debug info
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Shared libraries (DPDK, RocksDB, gRPC, protobuf, ...) -> Depends, by dpkg-shlibdeps over every
# ELF file of the package: packaging/debian/shlibdeps.cmake (what CPACK_DEBIAN_PACKAGE_SHLIBDEPS
# does, ~50 s faster). Python: the private tree holds CPython 3.11 extension modules;
# cryptography is Debian's (packaging/python/bundle.py).
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_SOURCE_DIR}/packaging/debian/shlibdeps.cmake)
# DPDK loads its NIC drivers as plugins, which no ELF file names: the AF_PACKET one is what a cache
# node without eal_args runs on; `dpdk` has the others and dpdk-devbind.py (docs/deploy.md).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "python3 (>= 3.11), python3 (<< 3.12), python3-cryptography, adduser, librte-net-af-packet23")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "dpdk, prometheus")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/postinst ${CMAKE_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
