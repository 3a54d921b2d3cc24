#!/usr/bin/env bash
# Checks of deploy/ and the packaging (ctest deploy_test; docs/deployment.md):
#   1. promtool: the scrape config, the alert rules and their unit tests;
#   2. the Grafana dashboards: stable uid, id null, a datasource variable,
#      $instance from rowan_build_info, $peer chained on it, a unit on every
#      panel, and every expression (variables substituted) valid PromQL
#      (`promtool check rules` on each wrapped as a recording rule);
#   3. CPack builds the four .debs (librowan0, librowan-dev, rowand,
#      rowan-tools), each with its files (the library in the multiarch
#      libdir), its machine-readable copyright file, and no placeholder contact; rowand's dependencies are satisfied
#      on this host (dpkg --dry-run -i); it unpacks (dpkg -x) into a temp root
#      whose rowand runs `--check-config` (0 on the example, 78 on a bad file);
#      where no rowand package is installed yet (CI), it is really installed
#      with dpkg -i, the installed rowand checks the example, and it is purged;
#   4. `systemd-analyze verify` prints nothing for the packaged units (their
#      /usr paths pointed into the temp root), and
#      `systemd-analyze security --offline=true` scores rowand.service.
#
#   tests/deploy/deploy_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?usage: deploy_test.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: deploy_test.sh SOURCE_DIR BUILD_DIR}
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/rowan-deploy-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
step() { echo "== $*"; }

step "promtool check config / check rules / test rules"
promtool check config "$src/deploy/prometheus/prometheus.yml" || fail "promtool check config"
promtool check rules "$src/deploy/prometheus/rowan.rules.yml" || fail "promtool check rules"
promtool test rules "$src/deploy/prometheus/tests/rowan.rules.test.yml" || fail "promtool test rules"

step "dashboards"
"$py" - "$src/deploy/grafana/dashboards" "$tmp/panels.rules.yml" <<'PY' || fail "dashboard lint"
import json, pathlib, re, sys
root, out = pathlib.Path(sys.argv[1]), sys.argv[2]
errors, rules, uids = [], [], set()
for f in sorted(root.glob("*.json")):
    d = json.loads(f.read_text())
    name = f.name
    if d.get("id") is not None: errors.append(f"{name}: id must be null")
    uid = d.get("uid", "")
    if not re.fullmatch(r"[a-z0-9-]{1,40}", uid) or uid in uids: errors.append(f"{name}: bad or duplicate uid {uid!r}")
    uids.add(uid)
    var = {v["name"]: v for v in d["templating"]["list"]}
    if var.get("datasource", {}).get("type") != "datasource": errors.append(f"{name}: no datasource variable")
    if "label_values(rowan_build_info, instance)" not in json.dumps(var.get("instance", {})):
        errors.append(f"{name}: $instance must come from label_values(rowan_build_info, instance)")
    if "peer" in var and "$instance" not in json.dumps(var["peer"]["query"]):
        errors.append(f"{name}: $peer must be chained on $instance")
    for p in d["panels"]:
        t = p.get("title", "?")
        if not p["fieldConfig"]["defaults"].get("unit"): errors.append(f"{name}/{t}: no unit")
        if p.get("datasource", {}).get("uid") != "${datasource}": errors.append(f"{name}/{t}: datasource is not $datasource")
        for tg in p["targets"]:
            e = tg["expr"]
            if "rate(" in e and "[$__rate_interval]" not in e and "[5m]" not in e:
                errors.append(f"{name}/{t}: rate without $__rate_interval: {e}")
            e = e.replace("$__rate_interval", "1m").replace("$instance", "gw-a").replace("$peer", "site-b")
            if "$" in e: errors.append(f"{name}/{t}: unsubstituted variable in {e}")
            rules.append((f"panel_{len(rules)}", e))
with open(out, "w") as o:
    o.write("groups:\n  - name: dashboards\n    rules:\n")
    for rec, e in rules:
        o.write(f"      - record: {rec}\n        expr: {json.dumps(e)}\n")
print(f"{len(uids)} dashboards, {len(rules)} panel expressions")
for e in errors: print("  " + e, file=sys.stderr)
sys.exit(1 if errors or not rules else 0)
PY
promtool check rules "$tmp/panels.rules.yml" || fail "a dashboard expression is not valid PromQL"

step "cpack: the .debs"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" \
  -D "CPACK_PACKAGE_CONTACT=deploy_test <root@localhost>" >"$tmp/cpack.log" 2>&1) || {
  cat "$tmp/cpack.log" >&2
  fail "cpack"
}
deb_of() {
  local f
  for f in "$tmp"/pkg/"$1"_*.deb; do
    [[ -e $f ]] && echo "$f"
    return 0
  done
}
for p in librowan0 librowan-dev rowand rowan-tools; do
  [[ -n $(deb_of "$p") ]] || fail "cpack made no ${p}_*.deb"
done
deb=$(deb_of rowand)
if [[ -z $deb ]]; then
  ls -R "$tmp/pkg" >&2 || true
  exit 1
fi
# has PACKAGE FILE...: each file is in that package.
has() {
  local p=$1 f
  shift
  dpkg-deb --contents "$(deb_of "$p")" >"$tmp/$p.contents"
  for f in "$@"; do
    grep -q " $f\( -> .*\)\?\$" "$tmp/$p.contents" || fail "$p lacks $f"
  done
}
has librowan0 "./usr/lib/$multiarch/librowan.so.0"
has librowan-dev "./usr/lib/$multiarch/librowan.so" ./usr/include/rowan/rowan.h \
  "./usr/lib/$multiarch/pkgconfig/rowan.pc" "./usr/lib/$multiarch/cmake/rowan/rowanConfig.cmake"
has rowan-tools ./usr/bin/rowan-wanem ./usr/bin/rowan-sim ./usr/bin/rowan-perf
if ! grep -q "librowan.so" "$tmp/librowan0.contents" ||
  grep -q "include/rowan\|librowan.so -> \|pkgconfig" "$tmp/librowan0.contents"; then
  fail "librowan0 holds development files"
fi
for p in librowan0 librowan-dev rowand rowan-tools; do
  dpkg-deb --fsys-tarfile "$(deb_of "$p")" | tar -xO "./usr/share/doc/$p/copyright" \
    >"$tmp/$p.copyright" 2>/dev/null || fail "$p lacks /usr/share/doc/$p/copyright"
  if ! grep -qx "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" \
    "$tmp/$p.copyright" || ! grep -qx "License: Apache-2.0" "$tmp/$p.copyright"; then
    fail "$p: its copyright file is not machine-readable Apache-2.0"
  fi
done
dpkg-deb --field "$(deb_of librowan-dev)" Depends | grep -q "librowan0 (= " ||
  fail "librowan-dev does not depend on librowan0"
dpkg-deb --field "$(deb_of rowan-tools)" Depends | grep -q "librowan0" ||
  fail "rowan-tools does not depend on librowan0"
for p in librowan0 librowan-dev rowand rowan-tools; do
  dpkg-deb --field "$(deb_of "$p")" Maintainer | grep -q "localhost" ||
    fail "$p: the maintainer is not the one cpack was given"
done
dpkg-deb -x "$(deb_of librowan-dev)" "$tmp/dev"
! grep -q "^URL: .*github.com/rowan" "$tmp/dev/usr/lib/$multiarch/pkgconfig/rowan.pc" ||
  fail "rowan.pc carries a placeholder URL"
echo "built $(basename "$deb")"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb" >"$tmp/contents"
for f in ./usr/sbin/rowand ./usr/bin/rowanctl ./usr/lib/systemd/system/rowand.service \
  ./usr/lib/systemd/system/rowand@.service ./usr/lib/systemd/system/rowan-hugepages.service \
  ./usr/lib/sysusers.d/rowan.conf ./usr/lib/tmpfiles.d/rowan.conf ./usr/lib/rowan/rowan-hugepages \
  ./usr/share/doc/rowan/examples/rowand.toml ./usr/share/doc/rowan/examples/nic/mlx5.toml \
  ./usr/share/rowan/grafana/dashboards/rowan-peer.json \
  ./usr/share/rowan/grafana/provisioning/dashboards/rowan.yaml \
  ./usr/share/rowan/prometheus/rowan.rules.yml; do
  grep -q " $f\$" "$tmp/contents" || fail "the .deb lacks $f"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst | grep -q "deb-systemd-invoke try-restart" ||
  fail "postinst does not try-restart the running daemons on upgrade"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./prerm | grep -q "deb-systemd-invoke stop" ||
  fail "prerm does not stop the daemons on remove"
dpkg-deb --field "$deb" Depends | grep -q libc6 || fail "no shlibs dependencies (CPACK_DEBIAN_PACKAGE_SHLIBDEPS)"
dpkg --dry-run -i "$deb" >"$tmp/dryrun.log" 2>&1 || {
  cat "$tmp/dryrun.log" >&2
  fail "dpkg --dry-run -i: the package does not install here"
}

root=$tmp/root
dpkg -x "$deb" "$root"
# The example names /etc/rowan/private.key: check it with a key of its own,
# as an operator would after `rowanctl genkey`.
(umask 077 && "$root/usr/bin/rowanctl" genkey >"$tmp/private.key") || fail "rowanctl genkey"
sed "s|^private_key_file = .*|private_key_file = \"$tmp/private.key\"|" \
  "$root/usr/share/doc/rowan/examples/rowand.toml" >"$tmp/example.toml"
"$root/usr/sbin/rowand" --check-config -c "$tmp/example.toml" ||
  fail "the packaged rowand rejects the packaged example config"
printf '[local]\nbogus = 1\n' >"$tmp/bad.toml"
rc=0
"$root/usr/sbin/rowand" --check-config -c "$tmp/bad.toml" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 78 ]] || fail "rowand --check-config on a bad file exited $rc, not 78"
"$root/usr/bin/rowanctl" --help >/dev/null || fail "the packaged rowanctl does not run"

# A real install, when no rowan package is installed already (CI machines):
# dpkg -i, the installed rowand checks the installed example, then purge.
if ! dpkg-query -W -f='${Status}' rowand 2>/dev/null | grep -q 'install ok installed'; then
  step "dpkg -i / --check-config from the installed package / dpkg --purge"
  if dpkg -i "$deb" >"$tmp/install.log" 2>&1; then
    sed "s|^private_key_file = .*|private_key_file = \"$tmp/private.key\"|" \
      /usr/share/doc/rowan/examples/rowand.toml >"$tmp/installed.toml"
    /usr/sbin/rowand --check-config -c "$tmp/installed.toml" ||
      fail "the installed rowand rejects the installed example config"
    getent passwd rowan >/dev/null || fail "the package did not create the rowan user"
    [[ -d /etc/rowan && $(stat -c %a:%G /etc/rowan) == 750:rowan ]] ||
      fail "the package's tmpfiles entry did not make /etc/rowan (0750, group rowan)"
    dpkg --purge rowand >>"$tmp/install.log" 2>&1 || fail "dpkg --purge rowand"
    [[ ! -e /usr/sbin/rowand ]] || fail "dpkg --purge left /usr/sbin/rowand behind"
  else
    cat "$tmp/install.log" >&2
    fail "dpkg -i: the package does not install"
    dpkg --purge rowand >/dev/null 2>&1 || true
  fi
fi

step "systemd-analyze verify / security"
mkdir -p "$tmp/units"
for u in "$root"/usr/lib/systemd/system/*.service; do
  sed -e "s|/usr/sbin/rowand|$root/usr/sbin/rowand|g" \
    -e "s|/usr/lib/rowan/|$root/usr/lib/rowan/|g" "$u" >"$tmp/units/$(basename "$u")"
done
# A template is verified as an instance of it.
cp "$tmp/units/rowand@.service" "$tmp/units/rowand@site-a.service"
out=$(cd "$tmp/units" && systemd-analyze verify --man=no rowand.service rowand@site-a.service \
  rowan-hugepages.service 2>&1) || fail "systemd-analyze verify failed"
if [[ -n $out ]]; then
  echo "$out" >&2
  fail "systemd-analyze verify printed the above"
fi
systemd-analyze security --offline=true "$tmp/units/rowand.service" | tail -n 1

if ((failures)); then
  echo "deploy_test: $failures failure(s)" >&2
  exit 1
fi
echo "deploy_test: ok"
