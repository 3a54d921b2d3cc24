# Installation layout and Debian packages (docs/deployment.md).
#
#   cmake -S . -B build -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build
#   cmake --install build --component rowand      # daemon, CLI, units, examples
#   (cd build && cpack -G DEB)                     # rowan_*.deb and rowan-dev_*.deb
#
# Components: `rowand` (rowand, rowanctl, systemd units, hugepage set-up,
# example configs, dashboards, Prometheus rules, docs) becomes the `rowan`
# package; `dev` (librowan headers, librowan.so, rowan.pc, CMake config;
# install rules in lib/src/api) becomes `rowan-dev`. Programs installed
# without a component (bench and test tools) are not packaged.
#
# Paths follow Debian: binaries in /usr/sbin and /usr/bin, units in
# /usr/lib/systemd/system, the user in /usr/lib/sysusers.d, data in
# /usr/share/rowan, examples in /usr/share/doc/rowan/examples. The units name
# /usr/sbin/rowand: install with CMAKE_INSTALL_PREFIX=/usr (CPack does). The
# package puts nothing in /etc: /etc/rowan/rowand.toml is the operator's to
# write (the unit does not start without it), /etc/rowan/hugepages.conf is
# optional (example in the docs).

set(ROWAN_DATADIR ${CMAKE_INSTALL_DATADIR}/rowan)
set(ROWAN_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/rowan)
set(ROWAN_UNITDIR lib/systemd/system)  # under the prefix: /usr/lib/systemd/system
set(_deploy ${PROJECT_SOURCE_DIR}/deploy)

install(FILES ${_deploy}/systemd/rowand.service ${_deploy}/systemd/rowand@.service
              ${_deploy}/systemd/rowan-hugepages.service
        DESTINATION ${ROWAN_UNITDIR} COMPONENT rowand)
install(FILES ${_deploy}/systemd/rowan.sysusers DESTINATION lib/sysusers.d RENAME rowan.conf
        COMPONENT rowand)
install(PROGRAMS ${_deploy}/hugepages/rowan-hugepages DESTINATION lib/rowan COMPONENT rowand)
install(FILES ${PROJECT_SOURCE_DIR}/config/rowand.toml ${_deploy}/hugepages/hugepages.conf
        DESTINATION ${ROWAN_DOCDIR}/examples COMPONENT rowand)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/config/two-site DESTINATION ${ROWAN_DOCDIR}/examples
        COMPONENT rowand)
install(DIRECTORY ${_deploy}/grafana/dashboards ${_deploy}/grafana/provisioning
        DESTINATION ${ROWAN_DATADIR}/grafana COMPONENT rowand)
install(FILES ${_deploy}/prometheus/prometheus.yml ${_deploy}/prometheus/rowan.rules.yml
        DESTINATION ${ROWAN_DATADIR}/prometheus COMPONENT rowand)
foreach(doc IN ITEMS README.md docs/gateway.md docs/configuration.md docs/telemetry.md
                     docs/deployment.md)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${doc})
    install(FILES ${PROJECT_SOURCE_DIR}/${doc} DESTINATION ${ROWAN_DOCDIR} COMPONENT rowand)
  endif()
endforeach()

# --- CPack: Debian packages ---------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rowan)
set(CPACK_PACKAGE_VENDOR "rowan")
set(CPACK_PACKAGE_CONTACT "rowan maintainers <rowan@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "RDMA over WAN gateway")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL rowand dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)

set(CPACK_DEBIAN_ROWAND_PACKAGE_NAME rowan)
set(CPACK_COMPONENT_ROWAND_DESCRIPTION
    "RDMA over WAN gateway daemon\n rowand carries RoCEv2 traffic between sites over a paced,\n congestion-controlled transport; rowanctl controls it. Includes the\n systemd units, hugepage set-up, Grafana dashboards and Prometheus rules.")
set(CPACK_DEBIAN_ROWAND_PACKAGE_DEPENDS "adduser | systemd")
set(CPACK_DEBIAN_ROWAND_PACKAGE_SUGGESTS "prometheus")
set(_pkg ${PROJECT_BINARY_DIR}/debian-rowan)
foreach(script IN ITEMS postinst prerm postrm)
  configure_file(${_deploy}/debian/${script} ${_pkg}/${script} COPYONLY)
endforeach()
set(CPACK_DEBIAN_ROWAND_PACKAGE_CONTROL_EXTRA ${_pkg}/postinst ${_pkg}/prerm ${_pkg}/postrm)
set(CPACK_DEBIAN_ROWAND_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME rowan-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "librowan: RDMA over WAN for applications\n The librowan shared library, its headers, rowan.pc and CMake package.")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)

include(CPack)
