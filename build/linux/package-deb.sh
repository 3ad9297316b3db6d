#!/usr/bin/env bash
# The Debian package: build/linux/package-deb.sh [--binary bin/suzuran] [--out bin] [--arch amd64]
#
# Writes OUT/suzuran_VERSION_ARCH.deb, VERSION from wails.json, with
#
#   /usr/bin/suzuran                                     the app (and its command line)
#   /usr/share/applications/suzuran.desktop              its entry in the app launcher
#   /usr/share/icons/hicolor/NxN/apps/suzuran.png        the icon, 16 to 512 px
#   /usr/share/icons/hicolor/scalable/apps/suzuran.svg   and its SVG source
#   /usr/share/doc/suzuran/copyright                     the licence
#
# Install it with `sudo apt install ./bin/suzuran_VERSION_ARCH.deb`, which
# also installs WebKitGTK and GTK; remove it with `sudo apt remove suzuran`.
# There are no maintainer scripts: the launcher and icon caches are refreshed
# by the dpkg triggers of desktop-file-utils and hicolor-icon-theme, so
# removing the package leaves nothing behind but the user's own files
# (~/.config/suzuran, ~/.local/state/suzuran, ~/.cache/suzuran).
#
# Needs dpkg-deb, objdump, ImageMagick's convert (the icon sizes) and
# desktop-file-validate (Debian's desktop-file-utils); `make deps` installs them.
set -euo pipefail
cd "$(dirname "$0")/../.."

binary=bin/suzuran
out=bin
arch=
while [ $# -gt 0 ]; do
	case "$1" in
	--binary) binary=${2:?--binary needs a file}; shift 2 ;;
	--out) out=${2:?--out needs a folder}; shift 2 ;;
	--arch) arch=${2:?--arch needs a Debian architecture such as amd64}; shift 2 ;;
	-h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "package-deb: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

fail() { echo "package-deb: $*" >&2; exit 1; }
for tool in dpkg-deb objdump convert desktop-file-validate; do
	command -v "$tool" >/dev/null || fail "$tool is missing: run make deps (Debian packages dpkg, binutils, imagemagick, desktop-file-utils)"
done
[ -f "$binary" ] || fail "$binary does not exist: build it first (make build)"
[ -x "$binary" ] || fail "$binary is not executable"

version=$(sed -n 's/.*"productVersion": *"\([^"]*\)".*/\1/p' wails.json)
[ -n "$version" ] || fail "wails.json has no info.productVersion"
# Debian versions must start with a digit; a pre-release (1.0.0-rc.1) sorts
# before its release only with a tilde (1.0.0~rc.1).
deb_version=${version/-/\~}
[[ $deb_version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || fail "wails.json's version $version does not make a Debian version"
if [ -z "$arch" ]; then
	arch=$(dpkg --print-architecture)
fi

# File times are the commit's, which dpkg-deb and ImageMagick honour
# through SOURCE_DATE_EPOCH: two builds of one commit give the same bytes.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/applications" "$root/usr/share/doc/suzuran" \
	"$root/usr/share/icons/hicolor/scalable/apps"
install -m 0755 "$binary" "$root/usr/bin/suzuran"

# The usual sizes of the hicolor theme's fixed-size folders; launchers pick
# the nearest, and the SVG serves every other size.
for size in 16 22 24 32 48 64 128 256 512; do
	dir=$root/usr/share/icons/hicolor/${size}x${size}/apps
	install -d "$dir"
	convert assets/icons/appicon.png -resize "${size}x${size}" -strip "PNG32:$dir/suzuran.png"
done
install -m 0644 assets/icons/appicon.svg "$root/usr/share/icons/hicolor/scalable/apps/suzuran.svg"

install -m 0644 build/linux/suzuran.desktop "$root/usr/share/applications/suzuran.desktop"
desktop-file-validate "$root/usr/share/applications/suzuran.desktop" ||
	fail "build/linux/suzuran.desktop does not pass desktop-file-validate (above)"

{
	echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
	echo "Upstream-Name: Suzuran"
	echo "Source: https://github.com/suzuran-app/suzuran"
	echo
	echo "Files: *"
	echo "Copyright: 2026 Suzuran authors"
	echo "License: MIT"
	sed 's/^$/./; s/^/ /' LICENSE
} >"$root/usr/share/doc/suzuran/copyright"
chmod 0644 "$root/usr/share/doc/suzuran/copyright"

installed_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
# The window is WebKitGTK 4.1 on GTK 3 (the binary is built with the
# webkit2_41 tag). The cgo parts link glibc: the package needs at least the
# newest glibc symbol version the binary uses, which depends on where it was
# built (the release workflow builds on an older glibc for that reason). The
# tray needs a StatusNotifierItem host, which is the desktop's, not a package's.
# Ubuntu 24.04 renamed GTK's library package libgtk-3-0t64 (the 64-bit
# time_t transition), hence the alternative.
glibc=$(objdump -T "$binary" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -n 1 || true)
libc=libc6${glibc:+ (>= $glibc)}
cat >"$root/DEBIAN/control" <<CONTROL
Package: suzuran
Version: $deb_version
Architecture: $arch
Maintainer: Suzuran authors <https://github.com/suzuran-app/suzuran/issues>
Installed-Size: $installed_kb
Depends: $libc, libgtk-3-0 (>= 3.24) | libgtk-3-0t64, libwebkit2gtk-4.1-0
Section: utils
Priority: optional
Homepage: https://github.com/suzuran-app/suzuran
Description: chat with Qwen3.6-35B-A3B on your own computer
 Suzuran runs the Qwen3.6-35B-A3B language model locally, with its own
 inference engine, and offers it as a chat window, from an icon in the
 panel, and as an OpenAI-compatible API on this computer. It comes with a
 small demo model and downloads the real one on request.
CONTROL

mkdir -p "$out"
deb=$out/suzuran_${deb_version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "wrote $deb"
