# khyve: a non-recursive GNU Makefile.  Binaries land in build/bin/.
#   make            build khyve
#   make check      install what tests need, run unit, guest and lab tests
#   make demo       boot Debian's kernel to a shell (in the nested lab when
#                   this host has no VMX/SVM)

CC       ?= cc
PKG_CONFIG ?= pkg-config
BUILD    := build
OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CPPFLAGS := -D_GNU_SOURCE -Isrc
# Hardened code generation for every binary (tests/build/hardening checks
# khyve's): _FORTIFY_SOURCE needs an optimising build, so not with -O0.
HARDEN   := -fstack-protector-strong -fstack-clash-protection -fcf-protection -fPIE \
            $(if $(filter -O0,$(OPT)),,-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2)
CFLAGS   := -std=gnu11 $(WARN) $(OPT) $(HARDEN) -pthread -MMD -MP
LDFLAGS  := -pthread -pie -Wl,-z,relro,-z,now
LIBS     := $(shell $(PKG_CONFIG) --libs liburing libmd libvncserver zlib libseccomp libmicrohttpd \
              libcjson libpng libcrypto 2>/dev/null || \
              echo -luring -lmd -lvncserver -lz -lseccomp -lmicrohttpd -lcjson -lpng -lcrypto)
SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

# A fresh machine lacks the libraries: stop with what to install rather than
# on a missing liburing.h.  check, demo and check-deps install them first.
BUILD_PKGS := liburing:liburing-dev libmd:libmd-dev libcjson:libcjson-dev libvncserver:libvncserver-dev \
              libpng:libpng-dev zlib:zlib1g-dev libseccomp:libseccomp-dev \
              libmicrohttpd:libmicrohttpd-dev
ifneq ($(filter unit,$(MAKECMDGOALS)),)
BUILD_PKGS += cmocka:libcmocka-dev
endif
# vm and khyvectl talk to khyve's API socket through libcurl.
BUILD_PKGS += libcurl:libcurl4-openssl-dev
# vm web: HTTPS and WebSockets (libwebsockets, OpenSSL), log-in through PAM.
BUILD_PKGS += libwebsockets:libwebsockets-dev openssl:libssl-dev pam:libpam0g-dev
# vm import: libvirt's domain XML.
BUILD_PKGS += libxml-2.0:libxml2-dev
pkg_module = $(word 1,$(subst :, ,$(1)))
pkg_debian = $(word 2,$(subst :, ,$(1)))
ifneq ($(filter-out check-deps check demo clean format format-check layering doc-tests print-vm-sources,$(or $(MAKECMDGOALS),all)),)
MISSING_PKGS := $(strip $(foreach p,$(BUILD_PKGS),$(if $(shell $(PKG_CONFIG) --exists \
                  $(call pkg_module,$(p)) 2>/dev/null && echo y),,$(call pkg_debian,$(p)))))
ifneq ($(MISSING_PKGS),)
$(error missing build dependencies ($(MISSING_PKGS)): run make check-deps)
endif
endif

# `make V=1` shows the full commands.
ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @echo "  $(1) $(2)";
endif

# Everything but the front ends' main() is the core, linked into khyve and tests.
CORE_SRC := $(sort $(wildcard src/lib/*.c src/vmm/*.c src/bus/*.c src/dev/*.c \
                              src/boot/*.c src/backend/*.c src/core/*.c \
                              src/run/*.c)) src/cmd/cli.c
# The API client is for the front ends (khyvectl, vm): khyve needs no libcurl.
CORE_SRC := $(filter-out src/lib/apiclient.c,$(CORE_SRC))
KHYVE_SRC := src/cmd/khyve.c

# The vm manager: src/vm/ (also linked into unit tests) and its main().
VM_SRC := $(sort $(wildcard src/vm/*.c src/web/*.c)) src/lib/parse.c src/lib/mac.c src/lib/hostkvm.c \
          src/lib/tty_escape.c src/lib/strescape.c src/lib/apiclient.c src/lib/file.c
VM_OBJ := $(VM_SRC:%.c=$(BUILD)/obj/%.o)
VM_SAN_OBJ := $(VM_SRC:%.c=$(BUILD)/san/obj/%.o)
VM_LIBS := $(shell $(PKG_CONFIG) --libs libcjson libmd libcurl libwebsockets openssl pam libxml-2.0 2>/dev/null || \
             echo -lcjson -lmd -lcurl -lwebsockets -lssl -lcrypto -lpam -lxml2)
# vm import reads libvirt's domain XML with libxml2.
VM_CFLAGS := $(shell $(PKG_CONFIG) --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2)
CPPFLAGS += $(VM_CFLAGS)
VM_ONLY_OBJ := $(filter $(BUILD)/obj/src/vm/% $(BUILD)/obj/src/web/% $(BUILD)/obj/src/lib/apiclient.o,$(VM_OBJ))
VM_ONLY_SAN_OBJ := $(filter $(BUILD)/san/obj/src/vm/% $(BUILD)/san/obj/src/web/% $(BUILD)/san/obj/src/lib/apiclient.o,$(VM_SAN_OBJ))

# vm web's pages (the rules: "vm web's pages" below).
WEB_ROOT  := $(BUILD)/share/khyve/web
WEB_STAMP := $(BUILD)/share/khyve/.web-stamp
NPM_STAMP := $(BUILD)/npm/.stamp
WEB_SRC   := $(sort $(shell find share/web -path share/web/node_modules -prune -o -type f -print 2>/dev/null))
XTERM_DIR := $(BUILD)/npm/node_modules/@xterm/xterm

# khyvectl (src/cmd/khyvectl.c): the API's command-line client.
KHYVECTL_OBJ := $(BUILD)/obj/src/cmd/khyvectl.o $(BUILD)/obj/src/lib/apiclient.o $(BUILD)/obj/src/lib/file.o \
                $(BUILD)/obj/src/lib/parse.o
KHYVECTL_LIBS := $(shell $(PKG_CONFIG) --libs libcjson libcurl 2>/dev/null || echo -lcjson -lcurl) -lm

CORE_OBJ      := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
CORE_SAN_OBJ  := $(CORE_SRC:%.c=$(BUILD)/san/obj/%.o)

UNIT_SRC   := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_SAN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/san/tests/%)

GUEST_SRC  := $(sort $(wildcard tests/guests/*.S))
GUEST_ROM  := $(GUEST_SRC:tests/guests/%.S=$(BUILD)/guests/%.rom)

.PHONY: build-tests install all clean print-vm-sources check check-deps layering format-check doc-tests unit guest-tests term-tests vm-tests soak-tests ha-tests lab-tests graphics-tests graphics-lab-tests demo format bench fuzz fuzz-smoke fuzz-long
.DEFAULT_GOAL := all

all: $(BUILD)/bin/khyve $(BUILD)/bin/vm $(BUILD)/bin/khyvectl $(WEB_STAMP)

# What vm's code needs besides src/vm, for tests that link it themselves
# (tests/lab/vm-grub's driver): its compiler flags, sources and libraries.
print-vm-sources:
	@echo $(VM_CFLAGS) $(filter-out src/vm/%,$(VM_SRC)) $(VM_LIBS)

$(BUILD)/bin/vm: $(VM_OBJ) $(BUILD)/obj/src/cmd/vm.o
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(VM_LIBS)

# pam_unix calls crypt_r() from libcrypt, which PAM loads late: linked in
# from the start, ASan's interceptor finds it (else vm web crashes at log-in).
$(BUILD)/san/bin/vm: $(VM_SAN_OBJ) $(BUILD)/san/obj/src/cmd/vm.o
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(SAN) -o $@ $^ $(VM_LIBS) -Wl,--push-state,--no-as-needed \
		-lcrypt -Wl,--pop-state

$(BUILD)/bin/khyvectl: $(KHYVECTL_OBJ)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(KHYVECTL_LIBS)

$(BUILD)/san/bin/khyvectl: $(KHYVECTL_OBJ:$(BUILD)/obj/%=$(BUILD)/san/obj/%)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(SAN) -o $@ $^ $(KHYVECTL_LIBS)

$(BUILD)/bin/khyve: $(CORE_OBJ) $(KHYVE_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/san/bin/khyve: $(CORE_SAN_OBJ) $(KHYVE_SRC:%.c=$(BUILD)/san/obj/%.o)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(SAN) -o $@ $^ $(LIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/san/obj/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC-SAN,$<)$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN) -O1 -c -o $@ $<

# ---- unit tests (cmocka) ----
CMOCKA_CFLAGS = $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS   = $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)

$(BUILD)/tests/%: tests/unit/%.c $(CORE_OBJ) $(VM_ONLY_OBJ)
	@mkdir -p $(@D)
	$(call say,TEST,$@)$(CC) $(CPPFLAGS) -Itests/unit $(CMOCKA_CFLAGS) $(CFLAGS) -o $@ $< $(CORE_OBJ) \
		$(VM_ONLY_OBJ) $(CMOCKA_LIBS) $(LIBS) $(VM_LIBS) $(LDFLAGS)

$(BUILD)/san/tests/%: tests/unit/%.c $(CORE_SAN_OBJ) $(VM_ONLY_SAN_OBJ)
	@mkdir -p $(@D)
	$(call say,TEST-SAN,$@)$(CC) $(CPPFLAGS) -Itests/unit $(CMOCKA_CFLAGS) $(CFLAGS) $(SAN) -O1 -o $@ $< \
		$(CORE_SAN_OBJ) $(VM_ONLY_SAN_OBJ) $(CMOCKA_LIBS) $(LIBS) $(VM_LIBS) $(LDFLAGS)

# virtio-net's receive test reads the guest's header at every vq_push().
$(BUILD)/tests/test_virtio_net $(BUILD)/san/tests/test_virtio_net: LDFLAGS += -Wl,--wrap=vq_push
# virtio-net's counters and saved state, and e1000: the tap is a socket pair (tests/fake_tap.h).
$(BUILD)/tests/test_net_counters $(BUILD)/san/tests/test_net_counters \
$(BUILD)/tests/test_e1000 $(BUILD)/san/tests/test_e1000 \
$(BUILD)/tests/test_virtio_net_state $(BUILD)/san/tests/test_virtio_net_state: LDFLAGS += \
	$(foreach f,open close fd name set_offload set_mtu,-Wl,--wrap=tap_$(f))

# ---- the VNC test client (tests/vnc/vncshot.c) and the VNC server's tests ----
VNCSHOT_LIBS = $(shell $(PKG_CONFIG) --libs libvncclient libpng 2>/dev/null || echo -lvncclient -lpng)

$(BUILD)/tests/vncshot: tests/vnc/vncshot.c $(BUILD)/obj/src/lib/keymap.o
	@mkdir -p $(@D) $(BUILD)/obj/tests
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/tests/$(notdir $@).d -o $@ $< \
		$(BUILD)/obj/src/lib/keymap.o $(VNCSHOT_LIBS) $(LDFLAGS)

# The fake display (tests/vnc/fakedisplay.c): the VNC server over a known
# pattern, with sinks that print the input that arrives; plain and ASan.
$(BUILD)/tests/vnc-fakedisplay: tests/vnc/fakedisplay.c $(CORE_OBJ)
	@mkdir -p $(@D) $(BUILD)/obj/tests
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/tests/$(notdir $@).d -o $@ $< \
		$(CORE_OBJ) $(LIBS) $(LDFLAGS)

$(BUILD)/san/tests/vnc-fakedisplay: tests/vnc/fakedisplay.c $(CORE_SAN_OBJ)
	@mkdir -p $(@D) $(BUILD)/san/obj/tests
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN) -O1 -MF $(BUILD)/san/obj/tests/$(notdir $@).d \
		-o $@ $< $(CORE_SAN_OBJ) $(LIBS) $(LDFLAGS)

.PHONY: vnc-tests
vnc-tests: $(BUILD)/tests/vncshot $(BUILD)/tests/vnc-fakedisplay $(BUILD)/san/tests/vnc-fakedisplay
	@tests/vnc/run $(BUILD)/tests/vncshot $(BUILD)/tests/vnc-fakedisplay
	@tests/vnc/run $(BUILD)/tests/vncshot $(BUILD)/san/tests/vnc-fakedisplay

# ---- tiny test guests: flat ROM images, no FPU/SSE ----
$(BUILD)/guests/%.rom: tests/guests/%.S tests/guests/rom.ld tests/guests/guest.inc
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -c -nostdlib -ffreestanding -Itests/guests -o $(@:.rom=.o) $<
	$(Q)ld -m elf_x86_64 -T tests/guests/rom.ld -o $(@:.rom=.elf) $(@:.rom=.o)
	$(Q)objcopy -O binary $(@:.rom=.elf) $@
$(BUILD)/guests/dirtier.rom: tests/guests/ticker.S

# A boot sector SeaBIOS loads from a disk (tests/snapshot/virtio).
$(BUILD)/guests/%.mbr: tests/snapshot/%.S
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -m32 -c -nostdlib -o $(@:.mbr=.o) $<
	$(Q)ld -m elf_i386 -Ttext=0x7c00 --oformat=binary -o $@ $(@:.mbr=.o)

# ---- benchmarks (not tests: they print ratios, see bench/) ----
$(BUILD)/bin/blk-harness: bench/blk_harness.c $(CORE_OBJ)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/$(notdir $@).d -o $@ $< $(CORE_OBJ) $(LIBS) $(LDFLAGS)

$(BUILD)/bin/nvme-harness: bench/nvme_harness.c $(CORE_OBJ)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/$(notdir $@).d -o $@ $< $(CORE_OBJ) $(LIBS) $(LDFLAGS)

$(BUILD)/bin/runstat: bench/runstat.c
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/$(notdir $@).d -o $@ $<

# bench/api's client and its floor server.
$(BUILD)/bin/apilat: bench/apilat.c
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/$(notdir $@).d -o $@ $< $(LDFLAGS)

# bench/lab-snap: its level-1 helper and its level-2 program (static: the
# guest's initramfs has no C library).
$(BUILD)/bin/snaptool: bench/snaptool.c
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(BUILD)/obj/$(notdir $@).d -o $@ $< $(LDFLAGS)

$(BUILD)/bench/snapguest: bench/l2/snapguest.c
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -static -o $@ $<

# bench/snap-host's guest: TOUCH MiB in use (the part after the dash).
SNAP_GUESTS := $(BUILD)/bench/guests/snaptouch-0.elf $(BUILD)/bench/guests/snaptouch-200.elf
$(BUILD)/bench/guests/snaptouch-%.elf: bench/guests/snaptouch.S bench/guests/pvhnote.inc bench/guests/pvh.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -c -nostdlib -DTOUCH=$* -o $(@:.elf=.o) $<
	$(Q)ld -m elf_x86_64 --no-warn-rwx-segments -T bench/guests/pvh.ld -o $@ $(@:.elf=.o)

# Tiny guests for bench/startup: a PVH ELF and a boot sector per variant.
BENCH_VARIANTS := exit pio-100000 pio-400000 mmio-100000 mmio-400000 alu-100000 \
                  alu-400000 halt
BENCH_GUESTS := $(BENCH_VARIANTS:%=$(BUILD)/bench/guests/pvh-%.elf) \
                $(BENCH_VARIANTS:%=$(BUILD)/bench/guests/boot-%.img) \
                $(BUILD)/bench/guests/pvh32-exit.elf
variant_mode = $(shell echo $(word 1,$(subst -, ,$(1))) | tr a-z A-Z)
variant_n = $(or $(word 2,$(subst -, ,$(1))),0)

$(BUILD)/bench/guests/pvh-%.elf: bench/guests/tiny.S bench/guests/pvhnote.inc bench/guests/pvh.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -c -nostdlib -DMODE_$(call variant_mode,$*) \
		-DN=$(call variant_n,$*) -o $(@:.elf=.o) $<
	$(Q)ld -m elf_x86_64 --no-warn-rwx-segments -T bench/guests/pvh.ld -o $@ $(@:.elf=.o)

# The same guest as an ELFCLASS32 (EM_386) PVH kernel, as `as --32` and
# `ld -m elf_i386` write it (tests/guests/run boots it).
$(BUILD)/bench/guests/pvh32-%.elf: bench/guests/tiny.S bench/guests/pvhnote.inc bench/guests/pvh.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -m32 -c -nostdlib -DMODE_$(call variant_mode,$*) \
		-DN=$(call variant_n,$*) -o $(@:.elf=.o) $<
	$(Q)ld -m elf_i386 --oformat elf32-i386 --no-warn-rwx-segments -T bench/guests/pvh.ld \
		-o $@ $(@:.elf=.o)

$(BUILD)/bench/guests/boot-%.img: bench/guests/tiny.S bench/guests/boot.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -c -nostdlib -DBOOTSECTOR -DMODE_$(call variant_mode,$*) \
		-DN=$(call variant_n,$*) -o $(@:.img=.o) $<
	$(Q)ld -m elf_x86_64 -T bench/guests/boot.ld -o $(@:.img=.elf) $(@:.img=.o)
	$(Q)objcopy -O binary $(@:.img=.elf) $@

# Boot sectors and the client for bench/vnc.
FB_BENCH_GUESTS := $(BUILD)/bench/guests/fb-text.img $(BUILD)/bench/guests/fb-fb1024.img \
                   $(BUILD)/bench/guests/fb-fb1920.img
fb_bench_defs = $(if $(filter text,$(1)),-DTEXT,-DFB_W=$(if $(filter fb1024,$(1)),1024 -DFB_H=768,1920 -DFB_H=1080))
$(BUILD)/bench/guests/fb-%.img: bench/guests/fbbench.S bench/guests/boot.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(CC) -c -nostdlib $(call fb_bench_defs,$*) -o $(@:.img=.o) $<
	$(Q)ld -m elf_x86_64 -T bench/guests/boot.ld -o $(@:.img=.elf) $(@:.img=.o)
	$(Q)objcopy -O binary $(@:.img=.elf) $@
	$(Q)truncate -s 1M $@ # a disk SeaBIOS reads, not one lone sector

$(BUILD)/bin/vncbench: bench/vncbench.c
	@mkdir -p $(@D)
	$(call say,CC,$@)$(CC) $(CPPFLAGS) $(CFLAGS) $(shell $(PKG_CONFIG) --cflags libvncclient) \
		-o $@ $< $(LDFLAGS) $(shell $(PKG_CONFIG) --libs libvncclient)

bench: all $(BUILD)/bin/blk-harness $(BUILD)/bin/nvme-harness $(BUILD)/bin/runstat $(BUILD)/bin/apilat $(BENCH_GUESTS) \
       $(FB_BENCH_GUESTS) $(BUILD)/bin/vncbench $(BUILD)/bin/snaptool $(BUILD)/bench/snapguest \
       $(SNAP_GUESTS)

# ---- libFuzzer targets (tests/fuzz/): clang only, the core rebuilt with
# coverage instrumentation and ASan+UBSan in its own object dir ----
FUZZ_CC    ?= clang
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SRC   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN   := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
CORE_FUZZ_OBJ := $(CORE_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
# What of vm's code the host-side parser targets need (fuzz_rcconf,
# fuzz_web: vm web's pure request handling).
VM_FUZZ_OBJ := $(BUILD)/fuzz/obj/src/vm/rcconf.o $(BUILD)/fuzz/obj/src/web/http_util.o

FUZZ_COV_IGNORE := tests/fuzz/coverage-ignore.txt

$(BUILD)/fuzz/obj/%.o: %.c $(FUZZ_COV_IGNORE)
	@mkdir -p $(@D)
	$(call say,CC-FUZZ,$<)$(FUZZ_CC) $(CPPFLAGS) $(CFLAGS) -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
		-fsanitize-coverage-ignorelist=$(FUZZ_COV_IGNORE) -c -o $@ $<

# FUZZ_LINK_OUT: core objects a target replaces with its own fakes.
# FUZZ_LINK_IN: objects only that target links (and depends on).
$(BUILD)/fuzz/%: tests/fuzz/%.c $(wildcard tests/fuzz/*.h) $(CORE_FUZZ_OBJ) $(VM_FUZZ_OBJ)
	@mkdir -p $(@D)
	$(call say,FUZZ,$@)$(FUZZ_CC) $(CPPFLAGS) -Itests/fuzz $(CFLAGS) -O1 $(FUZZ_SAN) -fsanitize=fuzzer \
		-MF $(BUILD)/fuzz/obj/$(notdir $@).d -o $@ $< \
		$(filter-out $(FUZZ_LINK_OUT),$(CORE_FUZZ_OBJ)) $(VM_FUZZ_OBJ) $(FUZZ_LINK_IN) $(LIBS) $(LDFLAGS)

# fuzz_virtio_net and fuzz_e1000 bring their own tap (a socket pair,
# tests/fake_tap.h): no host interfaces.
$(BUILD)/fuzz/fuzz_virtio_net $(BUILD)/fuzz/fuzz_e1000: FUZZ_LINK_OUT := $(BUILD)/fuzz/obj/src/backend/tap.o
# fuzz_web: /metrics' text (its handler's callees are the target's stand-ins).
$(BUILD)/fuzz/fuzz_web: FUZZ_LINK_IN := $(BUILD)/fuzz/obj/src/web/metrics.o
$(BUILD)/fuzz/fuzz_web: $(BUILD)/fuzz/obj/src/web/metrics.o
# fuzz_import: vm import's readers (libxml2 for the libvirt XML).
IMPORT_FUZZ_OBJ := $(BUILD)/fuzz/obj/src/vm/import_pve.o $(BUILD)/fuzz/obj/src/vm/import_libvirt.o
$(BUILD)/fuzz/fuzz_import: FUZZ_LINK_IN := $(IMPORT_FUZZ_OBJ) \
	$(shell $(PKG_CONFIG) --libs libxml-2.0 2>/dev/null || echo -lxml2)
$(BUILD)/fuzz/fuzz_import: $(IMPORT_FUZZ_OBJ)

# Named outside the pattern rule, so make keeps the objects rather than
# deleting them as intermediates (and rebuilding them on the next run).
$(FUZZ_BIN): $(CORE_FUZZ_OBJ) $(VM_FUZZ_OBJ)

fuzz: $(FUZZ_BIN)

# Each target runs FUZZ_SECONDS from its checked-in seeds; new inputs go to a
# scratch corpus so the checked-in one stays as it is.
FUZZ_SECONDS ?= 5
fuzz-smoke: $(FUZZ_BIN)
	@tests/fuzz/run-smoke $(FUZZ_SECONDS) $(BUILD)/fuzz $(FUZZ_BIN)

# Each target for FUZZ_LONG_SECONDS, FUZZ_LONG_JOBS (default 1) at a time,
# with a table of executions, exec/s, coverage and crashes
# (build/fuzz/fuzz-long.txt).  FUZZ_TARGETS=nvme,virtio picks some.  Not
# part of make check.
FUZZ_LONG_SECONDS ?= 600
FUZZ_LONG_BIN = $(if $(FUZZ_TARGETS),$(foreach t,$(subst $(comma), ,$(FUZZ_TARGETS)),$(BUILD)/fuzz/fuzz_$(t)),$(FUZZ_BIN))
comma := ,
fuzz-long: $(FUZZ_BIN)
	@tests/fuzz/run-long $(FUZZ_LONG_SECONDS) $(BUILD)/fuzz $(FUZZ_LONG_BIN)

# ---- vm web's pages: share/web plus xterm.js from npm ----
# npm ci installs the xterm.js that share/web/package-lock.json pins into
# $(BUILD)/npm, again only when package.json or the lock change (its stamp);
# the web root $(WEB_ROOT) (build/bin/vm's default: dirname(self)/../share/
# khyve/web) is the pages plus vendor/xterm/.  Without npm (or when it
# fails) the root has no vendor/xterm and serial.html says so.

$(NPM_STAMP): share/web/package.json share/web/package-lock.json
	@mkdir -p $(@D)
	@cp share/web/package.json share/web/package-lock.json $(@D)/
	$(call say,NPM,$(@D))if ! command -v npm >/dev/null 2>&1; then \
		echo "web: npm is missing: the web root gets no xterm.js (the serial console needs it)"; \
	elif (cd $(@D) && timeout 300 npm ci --no-audit --no-fund --ignore-scripts >npm.log 2>&1); then \
		touch $@; \
	else echo "web: npm ci failed (see $(@D)/npm.log): the web root gets no xterm.js"; fi

$(WEB_STAMP): $(WEB_SRC) $(NPM_STAMP)
	$(call say,WEB,$(WEB_ROOT))rm -rf $(WEB_ROOT) && mkdir -p $(WEB_ROOT) && \
		cp -r share/web/. $(WEB_ROOT)/ && \
		rm -rf $(WEB_ROOT)/package.json $(WEB_ROOT)/package-lock.json $(WEB_ROOT)/node_modules
	$(Q)if [ -f $(XTERM_DIR)/lib/xterm.js ] && [ -f $(XTERM_DIR)/css/xterm.css ]; then \
		mkdir -p $(WEB_ROOT)/vendor/xterm && \
		cp $(XTERM_DIR)/lib/xterm.js $(XTERM_DIR)/css/xterm.css $(WEB_ROOT)/vendor/xterm/; fi
	$(Q)touch $@

# ---- the test suite ----
check-deps:
	@scripts/need-packages build-essential pkg-config libcmocka-dev liburing-dev libmd-dev libcjson-dev \
		libvncserver-dev libpng-dev libseccomp-dev libmicrohttpd-dev curl python3 acpica-tools zlib1g-dev console-setup-linux \
		qemu-system-x86 linux-image-amd64 busybox-static cpio e2fsprogs iproute2 xorriso perl mtools \
		grub-pc-bin seabios ipxe-qemu clang clang-format libclang-rt-dev nftables dnsmasq-base qemu-utils tmux \
		ovmf grub-efi-amd64-bin ninja-build meson libglib2.0-dev libpixman-1-dev libcap-ng-dev \
		libattr1-dev libfdt-dev groff-base man-db mandoc \
		tesseract-ocr debian-installer-12-netboot-amd64 libcurl4-openssl-dev \
		libwebsockets-dev libssl-dev libpam0g-dev libxml2-dev chromium novnc prometheus openssl nodejs \
		swtpm swtpm-tools tpm2-tools iputils-ping
	@# vm web's xterm.js comes from npm (nodesource's nodejs ships it).
	@command -v npm >/dev/null 2>&1 || scripts/need-packages npm

# The man pages render without broken words or warnings; make on a machine
# without the libraries says what to install.
doc-tests:
	@tests/doc/check-man
	@tests/build/missing-deps

# No folder of src/ includes a higher one (tests/layering/check).
layering:
	@tests/layering/check

unit: $(UNIT_BIN) $(UNIT_SAN)
	@tests/run-unit $(UNIT_BIN) $(UNIT_SAN)

guest-tests: $(BUILD)/bin/khyve $(BUILD)/san/bin/khyve $(GUEST_ROM) $(BENCH_GUESTS)
	@tests/guests/run
	@tests/guests/jail $(BUILD) $(BUILD)/san
	@tests/guests/console $(BUILD) $(BUILD)/san
	@tests/guests/sandbox
	@tests/guests/ipxe $(BUILD)

# Bad command lines: exit 4 and one line naming the key, with no leak
# report from the sanitizer build (tests/cli/run; a few seconds).
.PHONY: cli-tests
cli-tests: $(BUILD)/bin/khyve $(BUILD)/san/bin/khyve $(BUILD)/bin/vm $(BUILD)/san/bin/vm \
           $(BUILD)/guests/hello.rom
	@tests/cli/run $(BUILD) $(BUILD)/san

# The per-VM API driven with curl over its unix socket against tiny guests
# on this host's KVM (tests/api/run; about 15 s a build).
.PHONY: api-tests
api-tests: $(BUILD)/bin/khyve $(BUILD)/san/bin/khyve $(BUILD)/bin/khyvectl $(BUILD)/guests/ticker.rom \
           $(BUILD)/guests/pwrbtn.rom
	@tests/api/run $(BUILD) $(BUILD)/san

# Checkpoint, suspend and restore of the ticker guest on this host's KVM
# (tests/snapshot/run; about 10 s a build), of SeaBIOS driving virtio-blk
# (tests/snapshot/virtio; about 5 s a build) and NVMe and AHCI disks
# (tests/snapshot/storage; about 10 s a build), and the ticker's live
# migration between two khyve processes (tests/snapshot/migrate; about 9 s
# a build).
.PHONY: snapshot-tests
snapshot-tests: $(BUILD)/bin/khyve $(BUILD)/san/bin/khyve $(BUILD)/bin/khyvectl $(BUILD)/san/bin/khyvectl \
                $(BUILD)/guests/ticker.rom $(BUILD)/guests/gfxtick.rom $(BUILD)/guests/diskloop.mbr \
                $(BUILD)/guests/dirtier.rom
	@tests/snapshot/run $(BUILD) $(BUILD)/san
	@tests/snapshot/virtio $(BUILD) $(BUILD)/san
	@tests/snapshot/storage $(BUILD) $(BUILD)/san
	@tests/snapshot/migrate $(BUILD) $(BUILD)/san

# vm web end to end as root on this host's KVM (tests/web/run: curl against
# the refusals, playwright-core driving /usr/bin/chromium through log-in,
# list, start, both consoles, stop; screenshots in $(BUILD)/web; about a
# minute).  `all` builds vm and the web root ($(BUILD)/share/khyve/web).
.PHONY: web-tests
web-tests: all $(BUILD)/bin/khyve $(BUILD)/bin/vm $(BUILD)/san/bin/vm $(BUILD)/guests/web.rom \
           $(BUILD)/guests/hello.rom $(BUILD)/tests/vncshot
	@tests/web/run $(BUILD)
	@WEB_VM=$(BUILD)/san/bin/vm WEB_UI=off tests/web/run $(BUILD)

# The binaries are built hardened (HARDEN, LDFLAGS): checked with readelf.
build-tests: $(BUILD)/bin/khyve $(BUILD)/bin/vm
	@tests/build/hardening $(BUILD)

# The user's terminal after khyve on stdio and `vm console`, in a tmux pane.
term-tests: $(BUILD)/bin/khyve $(BUILD)/san/bin/khyve $(BUILD)/bin/vm $(BUILD)/san/bin/vm \
            $(BUILD)/guests/term.rom
	@tests/term/run $(BUILD) $(BUILD)/guests/term.rom
	@tests/term/run $(BUILD)/san $(BUILD)/guests/term.rom

# t-suspend-kvm.sh runs the real khyve and khyvectl beside vm (with the ticker guest).
vm-tests: $(BUILD)/bin/vm $(BUILD)/san/bin/vm $(BUILD)/bin/khyve $(BUILD)/bin/khyvectl \
          $(BUILD)/guests/ticker.rom
	@tests/vm/run $(BUILD)
	@tests/vm/run $(BUILD)/san

# khyvectl against tests/api/fake-khyve (a python3 stand-in for khyve's
# API): every action, exit status and output; plain and ASan (a few seconds).
.PHONY: khyvectl-tests
khyvectl-tests: $(BUILD)/bin/khyvectl $(BUILD)/san/bin/khyvectl
	@tests/api/khyvectl $(BUILD)/bin/khyvectl
	@tests/api/khyvectl $(BUILD)/san/bin/khyvectl

# SOAK_CYCLES (default 1000) vm start/stop cycles of a tiny guest on this
# host's KVM: nothing may grow or stay behind (tests/vm/soak).
soak-tests: $(BUILD)/bin/khyve $(BUILD)/bin/vm $(BUILD)/guests/pwrbtn.rom $(BUILD)/guests/hello.rom
	@tests/vm/soak $(BUILD)

# The VNC test client, where its source is in (tests/vnc/vncshot.c).
VNCSHOT_BIN := $(if $(wildcard tests/vnc/vncshot.c),$(BUILD)/tests/vncshot)

# SeaBIOS + GRUB on the VNC screen, on this machine's KVM (tests/graphics/run),
# and the lab's level-2 guests on khyve's display (tests/lab/graphics).
graphics-tests: $(BUILD)/bin/khyve $(VNCSHOT_BIN)
	@tests/graphics/run

graphics-lab-tests: $(BUILD)/bin/khyve $(VNCSHOT_BIN)
	@tests/lab/graphics

# The fence agent share/fence/fence_khyve_ns with its power controller
# (tests/ha/fence, 3 s); the OCF resource agent share/ocf/vm (ocf:khyve:vm)
# with resource-agents' ocf-tester and tiny guests on this host's KVM, under
# the real vm, khyve and khyvectl (tests/ha/agent; about 25 s); a
# three-node Pacemaker/Corosync cluster in namespaces running such a guest
# through start, failover, rejoin, standby (live migration), a network cut
# and migration-threshold (tests/ha/cluster; about 60 s).
.PHONY: ha-tests
ha-tests: $(BUILD)/bin/vm $(BUILD)/bin/khyve $(BUILD)/bin/khyvectl $(BUILD)/guests/ticker.rom \
          $(BUILD)/guests/pwrbtn.rom
	@scripts/need-packages resource-agents libxml2-utils python3 pacemaker corosync pcs
	@tests/ha/fence
	@tests/ha/agent $(BUILD)
	@timeout -k 20 400 tests/ha/cluster $(BUILD)

# The lab's tests, two level-1 boots at a time (tests/lab/all; LAB_JOBS=1
# runs them one after the other).
lab-tests: $(BUILD)/bin/khyve $(BUILD)/bin/khyvectl $(BUILD)/bin/vm $(VNCSHOT_BIN)
	@tests/lab/all

# CHECK_T0: when make check began, for scripts/timed's running total.
ifeq ($(origin CHECK_T0),undefined)
CHECK_T0 := $(shell date +%s)
endif
export CHECK_T0
check: check-deps
	@scripts/timed layering $(MAKE) --no-print-directory layering
	@scripts/timed format-check $(MAKE) --no-print-directory format-check
	@scripts/timed all $(MAKE) --no-print-directory all $(BUILD)/san/bin/khyve $(BUILD)/san/bin/vm
	@scripts/timed build-tests $(MAKE) --no-print-directory build-tests
	@scripts/timed doc-tests $(MAKE) --no-print-directory doc-tests
	@scripts/timed unit $(MAKE) --no-print-directory unit
	@scripts/timed vnc-tests $(MAKE) --no-print-directory vnc-tests
	@scripts/timed fuzz-smoke $(MAKE) --no-print-directory fuzz-smoke
	@scripts/timed vm-tests $(MAKE) --no-print-directory vm-tests
	@scripts/timed khyvectl-tests $(MAKE) --no-print-directory khyvectl-tests
	@scripts/timed guest-tests $(MAKE) --no-print-directory guest-tests
	@scripts/timed cli-tests $(MAKE) --no-print-directory cli-tests
	@scripts/timed api-tests $(MAKE) --no-print-directory api-tests
	@scripts/timed snapshot-tests $(MAKE) --no-print-directory snapshot-tests
	@scripts/timed web-tests $(MAKE) --no-print-directory web-tests
	@scripts/timed soak-tests $(MAKE) --no-print-directory soak-tests
	@scripts/timed term-tests $(MAKE) --no-print-directory term-tests
	@scripts/timed graphics-tests $(MAKE) --no-print-directory graphics-tests
	@scripts/timed ha-tests $(MAKE) --no-print-directory ha-tests
	@scripts/timed lab-tests $(MAKE) --no-print-directory lab-tests
	@echo "make check: all tests passed"

# ---- install: binaries, templates, the systemd unit, man pages, bash completion ----
PREFIX  ?= /usr/local
DESTDIR ?=
SYSTEMD_DIR ?= /etc/systemd/system
# Pacemaker's OCF resource agents (the agent is ocf:khyve:vm), whatever PREFIX is.
OCF_DIR ?= /usr/lib/ocf/resource.d
# Where pacemaker-fenced looks for fence agents (fence_khyve_ns), whatever PREFIX is.
FENCE_DIR ?= /usr/sbin
# Where bash-completion loads completions on demand (as SYSTEMD_DIR, the
# system's place whatever PREFIX is); under DESTDIR when one is given.
BASH_COMPLETION_DIR ?= /usr/share/bash-completion/completions
install: $(BUILD)/bin/khyve $(BUILD)/bin/vm $(BUILD)/bin/khyvectl $(WEB_STAMP)
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/share/khyve/templates \
		$(DESTDIR)$(PREFIX)/share/khyve/web \
		$(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(SYSTEMD_DIR) \
		$(DESTDIR)$(BASH_COMPLETION_DIR) $(DESTDIR)$(OCF_DIR)/khyve
	install -m 755 share/ocf/vm $(DESTDIR)$(OCF_DIR)/khyve/vm
	install -d $(DESTDIR)$(FENCE_DIR)
	install -m 755 share/fence/fence_khyve_ns $(DESTDIR)$(FENCE_DIR)/fence_khyve_ns
	install -m 644 share/completion/vm share/completion/khyve share/completion/khyvectl \
		$(DESTDIR)$(BASH_COMPLETION_DIR)/
	install -m 755 $(BUILD)/bin/khyve $(BUILD)/bin/vm $(BUILD)/bin/khyvectl $(DESTDIR)$(PREFIX)/sbin/
	install -m 644 share/templates/*.conf $(DESTDIR)$(PREFIX)/share/khyve/templates/
	rm -rf $(DESTDIR)$(PREFIX)/share/khyve/web/* && cp -r $(WEB_ROOT)/. $(DESTDIR)$(PREFIX)/share/khyve/web/
	chmod -R u=rwX,go=rX $(DESTDIR)$(PREFIX)/share/khyve/web
	install -m 644 share/khyve.8 share/vm.8 share/khyvectl.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	sed 's|/usr/local|$(PREFIX)|g' share/khyve.service >$(DESTDIR)$(SYSTEMD_DIR)/khyve.service
	sed 's|/usr/local|$(PREFIX)|g' share/khyve-web.service >$(DESTDIR)$(SYSTEMD_DIR)/khyve-web.service
	@# vm web's PAM service; an existing one (the admin's) is kept.
	install -d $(DESTDIR)/etc/pam.d
	@[ -e $(DESTDIR)/etc/pam.d/khyve ] || install -m 644 share/pam.d/khyve $(DESTDIR)/etc/pam.d/khyve
	@getent group khyve >/dev/null || [ -n "$(DESTDIR)" ] || groupadd --system khyve || true
	@# The user khyve drops to (khyve(8) sandbox.user); a staged install
	@# (DESTDIR) leaves that to the package's postinst.
	@if [ -n "$(DESTDIR)" ]; then echo "DESTDIR set: not creating the user khyve"; \
	elif ! getent passwd khyve >/dev/null; then \
		useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
			--gid khyve khyve; fi
	@echo "installed; enable autostart with: systemctl enable khyve.service (the web interface: khyve-web.service)"

demo:
	@scripts/need-packages build-essential pkg-config liburing-dev libmd-dev libcjson-dev qemu-system-x86 \
		linux-image-amd64 busybox-static cpio libcurl4-openssl-dev
	@$(MAKE) --no-print-directory all
	@scripts/demo

# Every C file under src/, tests/ and bench/ in the style of .clang-format;
# `make check` fails on one that is not (format-check).
FORMAT_SRC = $(sort $(shell find src tests bench -name '*.[ch]' -not -path '*/corpus/*'))
format:
	clang-format -i $(FORMAT_SRC)

format-check:
	@clang-format --dry-run -Werror $(FORMAT_SRC) || \
		{ echo "format-check: run 'make format' (clang-format, .clang-format)"; exit 1; }
	@echo "format-check: $(words $(FORMAT_SRC)) C files formatted"

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -path '$(BUILD)/lab' -prune -o -name '*.d' -type f -print 2>/dev/null)
