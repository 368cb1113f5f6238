# Top-level convenience driver: installs missing Debian build dependencies
# (when run as root), configures a meson build directory and drives it.
# The real build description is meson.build.

BUILD ?= build
PREFIX ?= /usr/local

# Debian packages needed to build, and the ones only the tests need (the
# real QEMU tools are the compatibility oracle of tests/interop).
BUILD_DEPS := meson ninja-build pkg-config libglib2.0-dev libjson-glib-dev \
              zlib1g-dev libzstd-dev libaio-dev liburing-dev python3
TEST_DEPS  := qemu-utils qemu-system-x86 libnbd-bin python3-libnbd \
              busybox-static strace

.PHONY: all deps test-deps configure check check-unit check-iotests \
        check-interop check-daemon check-guest check-crash check-asan bench \
        demo run install clean

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

check-interop: test-deps all
	bash tests/run-all.sh $(BUILD) interop

check-daemon: test-deps all
	bash tests/run-all.sh $(BUILD) daemon

# The real Linux guest (also part of check); its kernel is fetched with
# apt-get download at test time, see tests/guest/build-guest.py.
check-guest: test-deps all
	bash tests/run-all.sh $(BUILD) guest

# Power cuts at every request of every qcow2 metadata operation (also part
# of check); the matrix is in docs/reliability.md.
check-crash: test-deps all
	bash tests/run-all.sh $(BUILD) crash

# The whole of check built with AddressSanitizer and UndefinedBehaviorSanitizer
# in a second build directory; a UBSan report stops the program, so that it
# fails its test instead of scrolling past.
ASAN_BUILD ?= build-asan
check-asan: test-deps
	./configure --enable-asan --builddir=$(ASAN_BUILD)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(MAKE) check BUILD=$(ASAN_BUILD)

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
	rm -rf $(BUILD)
