# Top-level convenience driver: installs missing Debian build dependencies
# (when run as root), configures a meson build directory and drives it.
# The real build description is meson.build.

BUILD ?= build
PREFIX ?= /usr/local

# Debian packages needed to build, and the ones only the tests need (the
# real QEMU tools are the compatibility oracle of tests/interop).  librbd,
# libssh and libfuse3 are optional to meson (the rbd and ssh drivers then
# say they are missing, the fuse export is not available), but installed
# here so that they are built and tested.
BUILD_DEPS := meson ninja-build pkg-config libglib2.0-dev libjson-glib-dev \
              zlib1g-dev libzstd-dev libbz2-dev libaio-dev liburing-dev libgcrypt20-dev \
              nettle-dev libgnutls28-dev python3 librbd-dev librados-dev \
              libssh-dev libfuse3-dev
# The rbd tests run a throw-away Ceph cluster (tests/ceph/: ceph-mon,
# ceph-osd, ceph-common, uuidgen) and use QEMU's rbd driver as the oracle
# (qemu-block-extra has block-rbd.so, and block-ssh.so for the ssh tests,
# which run a throw-away sshd: openssh-server, ssh-keygen and ssh-agent
# of openssh-client).  fsck.fat (dosfstools) checks the vvfat driver's FAT
# volumes; mtools changes them as a guest would for vvfat-rw.sh.
TEST_DEPS  := qemu-utils qemu-system-x86 libnbd-bin python3-libnbd nbdkit \
              busybox-static strace cryptsetup-bin gnutls-bin fio \
              ceph-mon ceph-osd ceph-common uuid-runtime qemu-block-extra \
              openssh-server openssh-client dosfstools mtools
# What QEMU's iotests need besides the tools: dpkg-source to unpack them,
# certtool (233).
UPSTREAM_DEPS := dpkg-dev xz-utils gnutls-bin
QEMU ?= 0
UPSTREAM_SETS ?=
# libFuzzer and the sanitizers' runtimes come with clang (make fuzz).
FUZZ_DEPS  := clang-14 libclang-rt-14-dev

# make fuzz: a build directory of its own (instrumented, clang), and how
# long each harness runs (seconds).  FUZZ_HARNESSES picks some of them.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES ?= fuzz-qcow2 fuzz-nbd-server fuzz-vhost-user fuzz-qmp \
                  fuzz-options fuzz-blkdebug fuzz-vmstate fuzz-luks \
                  fuzz-nbd-client fuzz-nbd-tls fuzz-bochs fuzz-cloop \
                  fuzz-parallels fuzz-vmdk fuzz-vpc fuzz-vdi fuzz-vhdx \
                  fuzz-qed fuzz-qcow fuzz-dmg fuzz-vvfat-parse

.PHONY: all deps test-deps configure check check-unit check-iotests \
        check-iotests-qemu check-interop check-daemon check-guest check-upstream \
        check-crash check-asan bench demo run install clean fuzz-deps fuzz \
        fuzz-build

all: $(BUILD)/build.ninja
	ninja -C $(BUILD)

define install_missing
	@missing=""; for p in $(1); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    if [ "$$(id -u)" = 0 ]; then \
	        echo "Installing missing Debian packages:$$missing"; \
	        (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing) >/tmp/qblock-apt.log 2>&1 \
	            || { cat /tmp/qblock-apt.log; exit 1; }; \
	    else \
	        echo "Missing Debian packages. Run as root:"; \
	        echo "  apt-get install -y$$missing"; \
	        exit 1; \
	    fi; \
	fi
endef

deps:
	$(call install_missing,$(BUILD_DEPS))

test-deps: deps
	$(call install_missing,$(TEST_DEPS))

$(BUILD)/build.ninja: | deps
	./configure --builddir=$(BUILD)

configure: deps
	./configure --builddir=$(BUILD)

check: test-deps all
	bash tests/run-all.sh $(BUILD)

check-unit: all
	bash tests/run-all.sh $(BUILD) unit

check-iotests: test-deps all
	bash tests/run-all.sh $(BUILD) iotests

# The same iotests run against the real qemu-img/qemu-io/qemu-nbd: any
# difference not explained in tests/qemu-iotests/qemu-differences fails.
check-iotests-qemu: test-deps all
	bash tests/run-all.sh $(BUILD) iotests-qemu

check-interop: test-deps all
	bash tests/run-all.sh $(BUILD) interop

check-daemon: test-deps all
	bash tests/run-all.sh $(BUILD) daemon

# The comparisons with QEMU that run no code of qblock's: our own iotests
# against the real QEMU tools (their reference output must be QEMU's
# behaviour, check-iotests-qemu), then QEMU 7.2's own qemu-iotests against
# the tools just built (QEMU=1: against the real QEMU tools, for the other
# column of docs/compatibility.md).  The tests are fetched from Debian's
# source package on first use and cached.
check-upstream: test-deps all
	$(call install_missing,$(UPSTREAM_DEPS))
	bash tests/run-all.sh $(BUILD) iotests-qemu
	QEMU=$(QEMU) bash tests/upstream/run.sh $(BUILD) $(UPSTREAM_SETS)

# The real Linux guest (also part of check); its kernel is fetched with
# apt-get download at test time, see tests/guest/build-guest.py.
check-guest: test-deps all
	bash tests/run-all.sh $(BUILD) guest

fuzz-deps: deps
	$(call install_missing,$(FUZZ_DEPS))

$(FUZZ_BUILD)/build.ninja: | fuzz-deps
	CC=clang-14 ./configure --builddir=$(FUZZ_BUILD) --enable-fuzzing

# Only the harnesses: the tools and unit tests are not needed instrumented.
fuzz-build: $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) $(addprefix tests/fuzz/,$(FUZZ_HARNESSES))

# Runs each harness for FUZZ_SECONDS (docs/fuzzing.md); not part of check.
fuzz: fuzz-build
	bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

# Power cuts at every request of every qcow2 metadata operation (also part
# of check); the matrix is in docs/reliability.md.
check-crash: test-deps all
	bash tests/run-all.sh $(BUILD) crash

# The whole of check built with AddressSanitizer and UndefinedBehaviorSanitizer
# in a second build directory.  A UBSan finding stops the program with a
# trap (meson.build), so that it fails its test instead of scrolling past;
# ASan prints the stack of the trap, with its line (util/asan-build.c).
ASAN_BUILD ?= build-asan
# Every layer that runs qblock's code; the iotests against the real QEMU
# tools and the docs check run none of it.
ASAN_LAYERS ?= unit qtest crash iotests interop daemon guest demo
# The crash layer cuts at every other request under ASan (the matrix runs
# whole in check; under ASan it looks for memory errors on the error paths
# a cut opens, and took 400 s of the step's 2,000 whole)
ASAN_CRASH_STRIDE ?= 2
# Likewise qcow2-interop's cluster sizes and luks-interop's ciphers, every
# other one: the sizes and ciphers between take the same paths through
# qblock, and QEMU's share of those scripts (its qemu-img and its PBKDF
# calibration) gains nothing from qblock's sanitizers.
ASAN_MATRIX_STRIDE ?= 2
check-asan: test-deps
	./configure --enable-asan --builddir=$(ASAN_BUILD)
	ninja -C $(ASAN_BUILD)
	QBLOCK_CRASH_STRIDE=$(ASAN_CRASH_STRIDE) \
	QBLOCK_MATRIX_STRIDE=$(ASAN_MATRIX_STRIDE) \
	    bash tests/run-all.sh $(ASAN_BUILD) $(ASAN_LAYERS)

bench: test-deps all
	bash tests/perf/run-all.sh $(BUILD)

demo: all
	bash scripts/demo.sh $(BUILD)

# The storage daemon on $(BUILD)/run/disk.qcow2, over NBD on localhost
# and QMP in $(BUILD)/run; Ctrl-C stops it cleanly.
run: all
	bash scripts/run-daemon.sh $(BUILD)

install: all
	meson install -C $(BUILD) --destdir "$(DESTDIR)"

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
