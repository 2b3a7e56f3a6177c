#!/usr/bin/env bash
# Builds the Debian package with dpkg-deb alone (no debhelper, no cargo-deb: nothing to install
# on a Debian or Ubuntu machine beyond cargo and dpkg):
#
#   packaging/build-deb.sh            -> ${CARGO_TARGET_DIR:-target}/debian/node-lifecycled_VERSION_ARCH.deb
#
# NODE_LIFECYCLED_BINARY=path uses an already built binary instead of `cargo build --release`.
# Prints the path of the package on its last line.
#
# Layout: the daemon in /usr/sbin, the unit in /usr/lib/systemd/system (ExecStart points at
# /usr/sbin), conf/config.toml as the conffile /etc/node-lifecycled/config.toml, rbac.yaml and the
# scenario examples under /usr/share/doc/node-lifecycled/. The maintainer scripts only reload
# systemd: the unit is neither enabled nor started on install (it needs a kubeconfig first).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-deb.sh: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (this script builds on Debian and derivatives)"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || die "no version = \"...\" line in Cargo.toml"
arch=$(dpkg --print-architecture)
target_dir=${CARGO_TARGET_DIR:-target}

binary=${NODE_LIFECYCLED_BINARY:-}
if [ -z "$binary" ]; then
  cargo build --release --locked --bin node-lifecycled >&2
  binary="$target_dir/release/node-lifecycled"
fi
[ -x "$binary" ] || die "$binary: not an executable"

grep -q '^ExecStart=/usr/sbin/node-lifecycled ' systemd/node-lifecycled.service \
  || die "systemd/node-lifecycled.service: ExecStart does not start /usr/sbin/node-lifecycled"

out="$target_dir/debian"
root="$out/node-lifecycled_${version}_${arch}"
rm -rf "$root"
mkdir -p "$root/DEBIAN"
doc="$root/usr/share/doc/node-lifecycled"

install -D -m 0755 "$binary" "$root/usr/sbin/node-lifecycled"
strip --strip-debug "$root/usr/sbin/node-lifecycled" 2>/dev/null || true
install -D -m 0644 systemd/node-lifecycled.service "$root/usr/lib/systemd/system/node-lifecycled.service"
install -D -m 0644 conf/config.toml "$root/etc/node-lifecycled/config.toml"
install -D -m 0644 conf/rbac.yaml "$doc/rbac.yaml"
install -D -m 0644 README.md "$doc/README.md"
for f in conf/scenarios/*.toml; do
  install -D -m 0644 "$f" "$doc/examples/scenarios/$(basename "$f")"
done
cat > "$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: node-lifecycled

Files: *
License: Apache-2.0
 On Debian systems the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
COPYRIGHT

echo /etc/node-lifecycled/config.toml > "$root/DEBIAN/conffiles"

libc=$(dpkg-query -W -f='${Version}' libc6 2>/dev/null | sed 's/-.*//') || libc=""
depends="libc6${libc:+ (>= $libc)}, libgcc-s1"
installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: node-lifecycled
Version: $version
Architecture: $arch
Maintainer: node-lifecycled developers <root@localhost>
Installed-Size: $installed_size
Depends: $depends
Section: admin
Priority: optional
Description: standalone Kubernetes node lifecycle controller
 A single-threaded daemon that replaces kube-controller-manager's node lifecycle
 and taint eviction controllers: node health, NoExecute taints, zone
 disruption handling and taint-based pod eviction.
 .
 The unit is installed but not enabled: disable kube-controller-manager's own
 controllers, apply /usr/share/doc/node-lifecycled/rbac.yaml, install a
 kubeconfig as /etc/kubernetes/node-lifecycled.conf, run
 "node-lifecycled doctor", then "systemctl enable --now node-lifecycled".
CONTROL

# Maintainer scripts: make systemd see (or forget) the unit; never enable or start it.
for script in postinst postrm; do
  cat > "$root/DEBIAN/$script" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl --system daemon-reload >/dev/null 2>&1 || true
fi
exit 0
SCRIPT
  chmod 0755 "$root/DEBIAN/$script"
done

deb="$out/node-lifecycled_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
