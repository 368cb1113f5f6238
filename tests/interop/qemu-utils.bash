# What the interop scripts against qemu-img and qemu-io share (sourced,
# not run, with $build set): both sides' tools ($QB_IMG, $QB_IO; $Q_IMG,
# $Q_IO), and a work folder ($work, the current directory from here on)
# that goes when the script exits.  Exits 77 (a skip) without qemu-utils.
QB_IMG=$build/qblock-img
QB_IO=$build/qblock-io
if ! Q_IMG=$(command -v qemu-img) || ! Q_IO=$(command -v qemu-io); then
    echo "skipped: qemu-img/qemu-io are not installed (Debian qemu-utils)"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
