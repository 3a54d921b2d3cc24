# Installation layout and Debian packages (docs/deployment.md).
#
#   cmake -S . -B build && cmake --build build         # installs under /usr by default
#   cmake --install build --component rowand            # daemon, CLI, units, examples
#   (cd build && cpack -G DEB)                          # the four .debs below
#
# Components and the Debian packages they become:
#   lib    -> librowan0     librowan.so.0 (the runtime applications depend on)
#   dev    -> librowan-dev  headers, the librowan.so link, rowan.pc, CMake config
#   rowand -> rowand        rowand, rowanctl, systemd units, sysusers and tmpfiles
#                           entries, hugepage set-up, example configs, dashboards,
#                           Prometheus rules, docs
# Each package also has its /usr/share/doc/<package>/copyright.
#   tools  -> rowan-tools   rowan-wanem, rowan-sim, rowan-perf
# Programs installed without a component (bench and test tools) are not packaged.
#
# Paths follow Debian: binaries in /usr/sbin and /usr/bin, the library in the
# multiarch libdir (/usr/lib/x86_64-linux-gnu: GNUInstallDirs under /usr),
# units in /usr/lib/systemd/system, the user in /usr/lib/sysusers.d, runtime
# directories in /usr/lib/tmpfiles.d, data in /usr/share/rowan, examples in
# /usr/share/doc/rowan/examples. The package puts no file in /etc:
# /etc/rowan/rowand.toml is the operator's to write (the unit does not start
# without it); the tmpfiles entry creates /etc/rowan (root:rowan 0750) and
# /run/rowan.

set(ROWAN_DATADIR ${CMAKE_INSTALL_DATADIR}/rowan)
set(ROWAN_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/rowan)
set(ROWAN_UNITDIR lib/systemd/system)  # under the prefix: /usr/lib/systemd/system
set(_deploy ${PROJECT_SOURCE_DIR}/deploy)

install(FILES ${_deploy}/systemd/rowand.service ${_deploy}/systemd/rowand@.service
              ${_deploy}/systemd/rowan-hugepages.service
        DESTINATION ${ROWAN_UNITDIR} COMPONENT rowand)
install(FILES ${_deploy}/systemd/rowan.sysusers DESTINATION lib/sysusers.d RENAME rowan.conf
        COMPONENT rowand)
install(FILES ${_deploy}/systemd/rowan.tmpfiles DESTINATION lib/tmpfiles.d RENAME rowan.conf
        COMPONENT rowand)
install(PROGRAMS ${_deploy}/hugepages/rowan-hugepages DESTINATION lib/rowan COMPONENT rowand)
install(FILES ${PROJECT_SOURCE_DIR}/config/rowand.toml ${_deploy}/hugepages/hugepages.conf
        DESTINATION ${ROWAN_DOCDIR}/examples COMPONENT rowand)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/config/two-site ${PROJECT_SOURCE_DIR}/config/nic
        DESTINATION ${ROWAN_DOCDIR}/examples COMPONENT rowand)
install(DIRECTORY ${_deploy}/grafana/dashboards ${_deploy}/grafana/provisioning
        DESTINATION ${ROWAN_DATADIR}/grafana COMPONENT rowand)
install(FILES ${_deploy}/prometheus/prometheus.yml ${_deploy}/prometheus/rowan.rules.yml
        DESTINATION ${ROWAN_DATADIR}/prometheus COMPONENT rowand)
foreach(doc IN ITEMS README.md docs/gateway.md docs/configuration.md docs/telemetry.md
                     docs/deployment.md)
  install(FILES ${PROJECT_SOURCE_DIR}/${doc} DESTINATION ${ROWAN_DOCDIR} COMPONENT rowand)
endforeach()
# Each package's /usr/share/doc/<package>/copyright, in Debian's
# machine-readable format (LICENSE holds the license's text).
foreach(_pair IN ITEMS "lib;librowan0" "dev;librowan-dev" "rowand;rowand" "tools;rowan-tools")
  list(GET _pair 0 _component)
  list(GET _pair 1 _package)
  install(FILES ${_deploy}/debian/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_package}
          COMPONENT ${_component})
endforeach()
# rowan-sim's own CMakeLists installs it without a component; the tools package
# takes it from here.
if(TARGET rowan-sim)
  install(TARGETS rowan-sim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
endif()

# --- CPack: Debian packages ---------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rowan)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA over WAN gateway")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev rowand tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The packages' maintainer: whoever builds them says so (-DROWAN_PACKAGE_MAINTAINER=
# "Name <address>"); without it, cpack -G DEB stops and asks (no invented contact).
set(ROWAN_PACKAGE_MAINTAINER "" CACHE STRING "Maintainer of the .debs: \"Name <address>\"")
if(ROWAN_PACKAGE_MAINTAINER)
  set(CPACK_PACKAGE_CONTACT "${ROWAN_PACKAGE_MAINTAINER}")
endif()
# rowan-perf needs librowan.so.0, which no installed package provides yet:
# dpkg-shlibdeps finds it in the build tree; the dependency on librowan0 is
# stated below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib/src/api)
set(_rowan_runtime "librowan0 (= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME librowan0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_COMPONENT_LIB_DESCRIPTION
    "librowan: RDMA over WAN for applications (runtime)\n The librowan shared library: path telemetry, WAN-sized RDMA QP\n attributes and a message channel over rowan's WAN transport.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME librowan-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_rowan_runtime}, libibverbs-dev, librdmacm-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "librowan: RDMA over WAN for applications (development files)\n Headers, the librowan.so link, rowan.pc and the CMake package\n (find_package(rowan), target rowan::rowan).")

set(CPACK_DEBIAN_ROWAND_PACKAGE_NAME rowand)
set(CPACK_COMPONENT_ROWAND_DESCRIPTION
    "RDMA over WAN gateway daemon\n rowand carries RoCEv2 traffic between sites over a paced,\n congestion-controlled transport; rowanctl controls it. Includes the\n systemd units, hugepage set-up, Grafana dashboards and Prometheus rules.")
set(CPACK_DEBIAN_ROWAND_PACKAGE_DEPENDS "adduser | systemd, init-system-helpers (>= 1.54)")
set(CPACK_DEBIAN_ROWAND_PACKAGE_SUGGESTS "prometheus")
# rowan: the single package that held the daemon and the library together.
set(CPACK_DEBIAN_ROWAND_PACKAGE_REPLACES "rowan")
set(CPACK_DEBIAN_ROWAND_PACKAGE_BREAKS "rowan")
set(_pkg ${PROJECT_BINARY_DIR}/debian-rowand)
foreach(script IN ITEMS postinst prerm postrm)
  configure_file(${_deploy}/debian/${script} ${_pkg}/${script} COPYONLY)
endforeach()
set(CPACK_DEBIAN_ROWAND_PACKAGE_CONTROL_EXTRA ${_pkg}/postinst ${_pkg}/prerm ${_pkg}/postrm)
set(CPACK_DEBIAN_ROWAND_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME rowan-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${_rowan_runtime}")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
    "rowan's test tools: link emulator, simulator, goodput test\n rowan-wanem (a DPDK long-haul link emulator), rowan-sim (the WAN\n transport and congestion control over a simulated bottleneck) and\n rowan-perf (goodput over librowan, like iperf3).")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)

include(CPack)
