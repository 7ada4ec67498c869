# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS, cmake/packaging.cmake): the .deb's Depends on
# shared libraries, from dpkg-shlibdeps over every ELF file in the staged package, as
# CPACK_DEBIAN_PACKAGE_SHLIBDEPS would compute them. Done here because CPack's own way runs
# `file` once per packaged file, ~50 s for the ~4,000 files of the private Python tree on this
# machine; reading 4 bytes of each file here takes well under a second.
set(_root "${CPACK_TEMPORARY_INSTALL_DIRECTORY}")
file(GLOB_RECURSE _files LIST_DIRECTORIES false RELATIVE "${_root}" "${_root}/*")
set(_elf "")
foreach(_f IN LISTS _files)
  if(IS_SYMLINK "${_root}/${_f}")
    continue()
  endif()
  file(READ "${_root}/${_f}" _magic LIMIT 4 HEX)
  if(_magic STREQUAL "7f454c46")
    list(APPEND _elf "${_f}")
  endif()
endforeach()
list(LENGTH _elf _n)
if(_n EQUAL 0)
  message(FATAL_ERROR "shlibdeps.cmake: no ELF file in ${_root}")
endif()
# dpkg-shlibdeps wants a debian/control beside the files it reads.
file(WRITE "${_root}/debian/control" "")
execute_process(COMMAND dpkg-shlibdeps -O ${_elf}
                WORKING_DIRECTORY "${_root}"
                OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
file(REMOVE_RECURSE "${_root}/debian")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "shlibdeps.cmake: dpkg-shlibdeps failed (${_rc}): ${_err}")
endif()
string(REGEX REPLACE "^.*shlibs:Depends=" "" _deps "${_out}")
string(STRIP "${_deps}" _deps)
message(STATUS "shlibdeps.cmake: ${_n} ELF files -> Depends: ${_deps}")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${CPACK_DEBIAN_PACKAGE_DEPENDS}, ${_deps}")
