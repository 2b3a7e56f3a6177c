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
# /usr/sbin), conf/config.toml as the conffile /etc/node-lifecycled/config.toml, the man pages
# (man/, gzipped) in /usr/share/man, the bash completion in /usr/share/bash-completion,
# rbac.yaml, the alerts and dashboard (conf/monitoring) and the scenario examples under
# /usr/share/doc/node-lifecycled/. The maintainer scripts only reload systemd: the unit is
# neither enabled nor started on install (it needs a kubeconfig first).
#
# Maintainer: "$DEBFULLNAME <$DEBEMAIL>" when set (as dch reads them); the default is a
# placeholder address, so set both when you build packages for others.
# lintian reports no error or warning on the result (tests/config_and_operator_files/debian_package.rs runs it); the
# one tag overridden is explained in packaging/lintian-overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-deb.sh: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (this script builds on Debian and derivatives)"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | sed -n 1p)
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
# As dh_strip does for an executable (Debian ships binaries stripped; debug information
# belongs in a separate -dbgsym package): no symbols, no .comment or .note sections.
strip --remove-section=.comment --remove-section=.note "$root/usr/sbin/node-lifecycled" \
  || die "strip failed (binutils)"
install -D -m 0644 systemd/node-lifecycled.service "$root/usr/lib/systemd/system/node-lifecycled.service"
install -D -m 0644 conf/config.toml "$root/etc/node-lifecycled/config.toml"
install -D -m 0644 conf/rbac.yaml "$doc/rbac.yaml"
install -D -m 0644 README.md "$doc/README.md"
for f in conf/scenarios/*.toml; do
  install -D -m 0644 "$f" "$doc/examples/scenarios/$(basename "$f")"
done
for f in alerts.yaml alerts_test.yaml dashboard.json; do
  install -D -m 0644 "conf/monitoring/$f" "$doc/monitoring/$f"
done
for page in man/*.[0-9]; do
  section=${page##*.}
  install -d "$root/usr/share/man/man$section"
  gzip -9n < "$page" > "$root/usr/share/man/man$section/$(basename "$page").gz"
  chmod 0644 "$root/usr/share/man/man$section/$(basename "$page").gz"
done
install -D -m 0644 completions/node-lifecycled.bash \
  "$root/usr/share/bash-completion/completions/node-lifecycled"
install -D -m 0644 packaging/lintian-overrides "$root/usr/share/lintian/overrides/node-lifecycled"

maintainer="${DEBFULLNAME:-node-lifecycled developers} <${DEBEMAIL:-node-lifecycled@example.org}>"
# A native package's changelog; its date is the commit's, so a rebuild of the same tree gives
# the same file.
date=$(git log -1 --format=%cD 2>/dev/null || date -R)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$out/changelog" <<CHANGELOG
node-lifecycled ($version) unstable; urgency=medium

  * Built from the node-lifecycled source tree at commit $commit.
    See /usr/share/doc/node-lifecycled/README.md.

 -- $maintainer  $date
CHANGELOG
gzip -9n < "$out/changelog" > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# The years of the first and the last commit.
first_year=$(git log --reverse --format=%cd --date=format:%Y 2>/dev/null | sed -n 1p || true)
last_year=$(git log -1 --format=%cd --date=format:%Y 2>/dev/null || date +%Y)
years=${first_year:-$last_year}
[ "$years" = "$last_year" ] || years="$years-$last_year"
cat > "$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: node-lifecycled

Files: *
Copyright: $years the node-lifecycled developers
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
Maintainer: $maintainer
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

# Checksums of every file but the conffile (dpkg tracks that one itself), as dh_md5sums writes.
(cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' \
  | LC_ALL=C sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"

deb="$out/node-lifecycled_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
echo "$deb"
